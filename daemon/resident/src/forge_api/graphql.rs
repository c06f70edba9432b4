//! What a GraphQL request body asks for (ARCHITECTURE.md, "Forge API"): a read (queries
//! only) or a write, parsed with a real GraphQL parser, never matched as text. Any
//! document with a mutation (or subscription) operation is a write whatever its
//! `operationName` says; a batch (a JSON array) is a write when any member is; a body
//! that does not parse, or carries a key this module does not know (a persisted query's
//! `extensions`), is a write that cannot be judged. A write is one *listed* mutation call
//! only when it is the one operation of a one-request body, selects one field named in
//! [`Mutation`], directly (no fragment at the top level), and passes that field's `input`
//! as a variable holding a JSON object, so the daemon judges (and, for a merge, pins)
//! exactly the value the forge will read.

use graphql_parser::query::{Definition, OperationDefinition, Selection, Value, parse_query};
use serde_json::{Map, Value as Json};

/// A document nested deeper than this (brackets, braces, parentheses outside strings) is
/// refused before it is parsed: the parser recurses, and a hostile depth must not end
/// the daemon. GitHub's own queries nest under 20.
pub const MAX_NESTING: usize = 64;

/// The mutations a lane may be allowed, each judged against the row's repository and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// `createPullRequest(input: {repositoryId, headRefName, baseRefName, …})`.
    CreatePullRequest,
    /// `mergePullRequest(input: {pullRequestId, expectedHeadOid?, …})`.
    MergePullRequest,
    /// `closePullRequest(input: {pullRequestId})`.
    ClosePullRequest,
    /// `addComment(input: {subjectId, body})`, on a pull request only.
    AddComment,
}

impl Mutation {
    /// The field's name in GitHub's schema.
    pub fn field(self) -> &'static str {
        match self {
            Mutation::CreatePullRequest => "createPullRequest",
            Mutation::MergePullRequest => "mergePullRequest",
            Mutation::ClosePullRequest => "closePullRequest",
            Mutation::AddComment => "addComment",
        }
    }

    fn named(name: &str) -> Option<Mutation> {
        [
            Mutation::CreatePullRequest,
            Mutation::MergePullRequest,
            Mutation::ClosePullRequest,
            Mutation::AddComment,
        ]
        .into_iter()
        .find(|m| m.field() == name)
    }
}

/// A listed mutation call: which field, and the variable that carries its `input`.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The field called.
    pub mutation: Mutation,
    /// The variable named by `input: $name`.
    pub variable: String,
    /// That variable's value (a JSON object), as the forge would read it.
    pub input: Map<String, Json>,
}

/// What a GraphQL body asks.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Only query operations: a read.
    Read,
    /// A write on the list ([`Call`]).
    Listed(Call),
    /// A write the daemon passes for no lane; the sentence says why.
    Unlisted(String),
}

/// Classifies a POST body (JSON: one request object or a batch array).
pub fn classify_body(body: &[u8]) -> Kind {
    let parsed: Json = match serde_json::from_slice(body) {
        Ok(json) => json,
        Err(e) => return Kind::Unlisted(format!("the GraphQL body is not JSON: {e}")),
    };
    match parsed {
        Json::Array(batch) => classify_batch(&batch),
        Json::Object(request) => classify_request(&request),
        _ => Kind::Unlisted("the GraphQL body is neither an object nor a batch".into()),
    }
}

/// Classifies a GET's query string parameters (`query`, `variables`): a mutation there is
/// a write, and no write is listed by GET.
pub fn classify_get(query: Option<&str>) -> Kind {
    let Some(document) = query else {
        return Kind::Read;
    };
    match classify_document(document, &Map::new()) {
        Kind::Read => Kind::Read,
        Kind::Listed(_) => Kind::Unlisted("a mutation sent by GET".into()),
        unlisted => unlisted,
    }
}

fn classify_batch(batch: &[Json]) -> Kind {
    let mut writes = 0;
    for member in batch {
        let Json::Object(request) = member else {
            return Kind::Unlisted("a batch member is not a request object".into());
        };
        if classify_request(request) != Kind::Read {
            writes += 1;
        }
    }
    if writes == 0 {
        Kind::Read
    } else {
        Kind::Unlisted(format!(
            "a batch of {} requests carries {writes} write(s): a write is judged alone",
            batch.len()
        ))
    }
}

fn classify_request(request: &Map<String, Json>) -> Kind {
    if let Some(key) = request
        .keys()
        .find(|k| !matches!(k.as_str(), "query" | "variables" | "operationName"))
    {
        return Kind::Unlisted(format!(
            "the GraphQL request carries {key:?}, which is not judged"
        ));
    }
    let Some(Json::String(document)) = request.get("query") else {
        return Kind::Unlisted("the GraphQL request has no query string".into());
    };
    let variables = match request.get("variables") {
        None | Some(Json::Null) => Map::new(),
        Some(Json::Object(v)) => v.clone(),
        Some(_) => return Kind::Unlisted("the GraphQL variables are not an object".into()),
    };
    match request.get("operationName") {
        None | Some(Json::Null) | Some(Json::String(_)) => {}
        Some(_) => return Kind::Unlisted("the operationName is not a string".into()),
    }
    classify_document(document, &variables)
}

/// Classifies one document with its variables.
pub fn classify_document(document: &str, variables: &Map<String, Json>) -> Kind {
    if let Err(why) = nesting_within(document, MAX_NESTING) {
        return Kind::Unlisted(why.to_string());
    }
    let parsed = match parse_query::<String>(document) {
        Ok(parsed) => parsed,
        Err(e) => return Kind::Unlisted(format!("the GraphQL document does not parse: {e}")),
    };
    let operations: Vec<&OperationDefinition<String>> = parsed
        .definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Operation(op) => Some(op),
            Definition::Fragment(_) => None,
        })
        .collect();
    let is_read = |op: &&OperationDefinition<String>| {
        matches!(
            op,
            OperationDefinition::Query(_) | OperationDefinition::SelectionSet(_)
        )
    };
    if operations.is_empty() {
        return Kind::Unlisted("the GraphQL document has no operation".into());
    }
    if operations.iter().all(is_read) {
        return Kind::Read;
    }
    if operations.len() != 1 {
        return Kind::Unlisted(
            "a document with a mutation must hold that one operation alone".into(),
        );
    }
    let OperationDefinition::Mutation(mutation) = operations[0] else {
        return Kind::Unlisted("a subscription is not a listed write".into());
    };
    let [selection] = mutation.selection_set.items.as_slice() else {
        return Kind::Unlisted(format!(
            "a mutation selecting {} fields: a listed write selects one",
            mutation.selection_set.items.len()
        ));
    };
    let Selection::Field(field) = selection else {
        return Kind::Unlisted("a mutation whose top level is a fragment".into());
    };
    let Some(listed) = Mutation::named(&field.name) else {
        return Kind::Unlisted(format!("{} is not a listed mutation", field.name));
    };
    if !field.directives.is_empty() || !mutation.directives.is_empty() {
        return Kind::Unlisted("a mutation with directives is not judged".into());
    }
    let [(argument, Value::Variable(variable))] = field.arguments.as_slice() else {
        return Kind::Unlisted(format!(
            "{}'s only argument must be `input: $variable`",
            field.name
        ));
    };
    if argument != "input" {
        return Kind::Unlisted(format!("{}'s argument must be input", field.name));
    }
    let Some(Json::Object(input)) = variables.get(variable) else {
        return Kind::Unlisted(format!("the variable ${variable} is not an object"));
    };
    Kind::Listed(Call {
        mutation: listed,
        variable: variable.clone(),
        input: input.clone(),
    })
}

/// Refuses a document nested deeper than `max` (outside strings and comments), before the
/// recursive parser sees it.
fn nesting_within(document: &str, max: usize) -> Result<(), TooDeep> {
    let mut depth = 0usize;
    let mut chars = document.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                }
            }
            '"' => {
                // A string (block strings are three of these; their inner quotes are
                // balanced the same way for this count).
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '{' | '[' | '(' => {
                depth += 1;
                if depth > max {
                    return Err(TooDeep { max });
                }
            }
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// A document nested deeper than the reader goes.
#[derive(Debug, thiserror::Error)]
#[error("the GraphQL document nests deeper than {max}: not parsed")]
struct TooDeep {
    /// The deepest nesting read.
    max: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Json) -> Kind {
        classify_body(value.to_string().as_bytes())
    }

    fn unlisted(kind: &Kind) -> bool {
        matches!(kind, Kind::Unlisted(_))
    }

    #[test]
    fn queries_are_reads_and_a_mutation_is_a_write_whatever_its_operation_name() {
        assert_eq!(
            body(
                json!({"query": "query RepositoryInfo($o: String!) { repository(owner: $o, name: \"r\") { id } }", "variables": {"o": "o"}})
            ),
            Kind::Read
        );
        assert_eq!(body(json!({"query": "{ viewer { login } }"})), Kind::Read);
        let merge = body(json!({
            "query": "mutation PullRequestMerge($input: MergePullRequestInput!) { mergePullRequest(input: $input) { clientMutationId } }",
            "operationName": "RepositoryInfo",
            "variables": {"input": {"pullRequestId": "PR_1"}}
        }));
        let Kind::Listed(call) = merge else {
            panic!("listed: {merge:?}")
        };
        assert_eq!(call.mutation, Mutation::MergePullRequest);
        assert_eq!(call.input["pullRequestId"], "PR_1");
    }

    #[test]
    fn a_mutation_hidden_in_a_batch_an_alias_a_fragment_or_a_get_is_never_a_read() {
        let query = json!({"query": "{ viewer { login } }"});
        let merge = json!({"query": "mutation { mergePullRequest(input: $i) { clientMutationId } }", "variables": {"i": {}}});
        assert_eq!(body(json!([query.clone(), query.clone()])), Kind::Read);
        assert!(unlisted(&body(json!([query.clone(), merge]))));
        assert!(unlisted(&body(
            json!({"query": "mutation { a: createIssue(input: $i) { clientMutationId } b: mergePullRequest(input: $i) { clientMutationId } }", "variables": {"i": {}}})
        )));
        assert!(unlisted(&body(
            json!({"query": "mutation M { ...F } fragment F on Mutation { mergePullRequest(input: $i) { clientMutationId } }", "variables": {"i": {}}})
        )));
        assert!(unlisted(&body(
            json!({"query": "mutation M { ... on Mutation { mergePullRequest(input: $i) { clientMutationId } } }", "variables": {"i": {}}})
        )));
        assert!(unlisted(&body(
            json!({"query": "query Q { viewer { login } } mutation M { mergePullRequest(input: $i) { clientMutationId } }", "operationName": "Q", "variables": {"i": {}}})
        )));
        assert!(unlisted(&body(
            json!({"query": "mutation { createIssue(input: $i) { clientMutationId } }", "variables": {"i": {}}})
        )));
        assert!(unlisted(&body(json!({"query": "subscription { x }"}))));
        assert!(unlisted(&classify_get(Some(
            "mutation { mergePullRequest(input: $i) { clientMutationId } }"
        ))));
        assert_eq!(classify_get(Some("{ viewer { login } }")), Kind::Read);
        // An aliased listed mutation is judged as what it calls.
        let aliased = body(
            json!({"query": "mutation { x: closePullRequest(input: $i) { clientMutationId } }", "variables": {"i": {"pullRequestId": "PR_1"}}}),
        );
        assert!(matches!(
            aliased,
            Kind::Listed(Call {
                mutation: Mutation::ClosePullRequest,
                ..
            })
        ));
    }

    #[test]
    fn bad_input_is_a_write_never_a_read() {
        for bad in [
            &b"not json"[..],
            b"{\"query\": 3}",
            b"{\"query\": \"{ viewer { login \"}",
            b"[1]",
            b"\"query\"",
            b"{\"query\": \"{ viewer { login } }\", \"extensions\": {}}",
            b"{\"query\": \"\"}",
            b"{\"query\": \"fragment F on User { login }\"}",
        ] {
            assert!(
                unlisted(&classify_body(bad)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = format!("{}{}", "{ a ".repeat(10_000), "}".repeat(10_000));
        assert!(unlisted(&body(json!({ "query": deep }))));
        let literal = json!({"query": "mutation { mergePullRequest(input: {pullRequestId: \"PR_1\"}) { clientMutationId } }"});
        assert!(unlisted(&body(literal)));
    }
}
