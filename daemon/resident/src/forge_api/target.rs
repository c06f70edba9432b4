//! The request target a request may name (ARCHITECTURE.md, "Forge API"): one spelling
//! per endpoint, so the endpoint the daemon judges is the one the forge routes to. A
//! path passes only in its plain form: `/` and non-empty segments, no `.` or `..`, no
//! `;` or `\`, no percent-encoding of an unreserved character, `/`, `\` or `;`, and
//! nothing that a router could read as the GraphQL endpoint (any case, a trailing `/`,
//! a `.json` suffix, an `/api/v3` in front) unless it is that endpoint's path exactly.
//! A GraphQL GET names `query`, `variables` and `operationName` at most once each.

/// A request path that is not in its plain form, and what in it is not.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the path {path:?} {why}")]
pub struct NotPlain {
    /// The path.
    pub path: String,
    /// What in it is not plain.
    pub why: String,
}

/// Why `path` is refused, or `Ok` for a path in its plain form. `graphql` is the host's
/// GraphQL path (`/graphql`, or `/api/graphql` on an enterprise host).
pub fn plain(path: &str, graphql: &str) -> Result<(), NotPlain> {
    let refused = |why: &str| {
        Err(NotPlain {
            path: path.to_string(),
            why: why.to_string(),
        })
    };
    if path == "/" || path == graphql {
        return Ok(());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return refused("does not start with /");
    };
    let segments: Vec<&str> = rest.split('/').collect();
    for segment in &segments {
        if segment.is_empty() {
            return refused("has an empty segment (// or a trailing /)");
        }
        if *segment == "." || *segment == ".." {
            return refused("has a . or .. segment");
        }
        let bytes = segment.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b';' | b'\\' => return refused("has a ; or \\"),
                b'%' => {
                    let decoded = bytes
                        .get(i + 1..i + 3)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                    match decoded {
                        None => return refused("has a % that encodes nothing"),
                        Some(b) if b.is_ascii_alphanumeric() || b"-._~/\\;".contains(&b) => {
                            return refused("percent-encodes a character that needs none");
                        }
                        Some(_) => i += 3,
                    }
                }
                b if b.is_ascii_control() || b == b' ' => {
                    return refused("has a control character");
                }
                _ => i += 1,
            }
        }
    }
    // Past any `api` and `v3` segments, a first segment that reads as "graphql" in any case
    // or with a suffix is the GraphQL endpoint by another spelling.
    let first = segments
        .iter()
        .find(|s| !s.eq_ignore_ascii_case("api") && !s.eq_ignore_ascii_case("v3"))
        .copied()
        .unwrap_or("");
    if first.to_ascii_lowercase().starts_with("graphql") {
        return refused(&format!(
            "names the GraphQL endpoint; its one spelling is {graphql}"
        ));
    }
    Ok(())
}

/// Why a GraphQL GET's query string is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotOneQuery {
    /// A `;`: a router may split parameters there.
    #[error("a GraphQL GET's query string has a ;")]
    Semicolon,
    /// A parameter other than `query`, `variables` or `operationName` (its name).
    #[error("a GraphQL GET names the parameter {0:?}, not judged")]
    Unjudged(String),
    /// A parameter named twice (its name): a router may read the last where the daemon
    /// judged the first.
    #[error("a GraphQL GET names {0:?} twice")]
    Twice(String),
}

/// The GraphQL document a GET names in its query string (`None`: none), or why the query
/// string is refused: a parameter other than `query`, `variables` or `operationName`, one
/// of them twice (a router may read the last where the daemon judged the first), or a `;`
/// (a router may split there).
pub fn graphql_get(query: Option<&str>) -> Result<Option<String>, NotOneQuery> {
    let Some(query) = query else {
        return Ok(None);
    };
    // Some routers split parameters at `;` as well as `&`: `a=x;query=…` would be a
    // second `query` there and part of `a`'s value here.
    if query.contains(';') {
        return Err(NotOneQuery::Semicolon);
    }
    let mut seen: Vec<String> = Vec::new();
    let mut document = None;
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if !matches!(key.as_ref(), "query" | "variables" | "operationName") {
            return Err(NotOneQuery::Unjudged(key.into_owned()));
        }
        if seen.iter().any(|k| k == key.as_ref()) {
            return Err(NotOneQuery::Twice(key.into_owned()));
        }
        seen.push(key.to_string());
        if key == "query" {
            document = Some(value.into_owned());
        }
    }
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_plain_spelling_of_a_path_passes() {
        for path in [
            "/",
            "/graphql",
            "/repos/o/r",
            "/repos/graphql/graphql-js",
            "/repos/o/r/contents/a%20b",
            "/repos/o/r/pulls?state=open",
        ] {
            let path = path.split('?').next().unwrap();
            assert_eq!(plain(path, "/graphql"), Ok(()), "{path}");
        }
        assert_eq!(plain("/api/graphql", "/api/graphql"), Ok(()));
        for path in [
            "",
            "graphql",
            "//graphql",
            "/graphql/",
            "/GraphQL",
            "/graphql.json",
            "/graphql;x",
            "/api/v3/graphql",
            "/api/graphql",
            "/%67raphql",
            "/./graphql",
            "/x/../graphql",
            "/repos/o/r/",
            "//repos/o/r",
            "/repos/o/r%2Fpulls",
            "/repos/o/r%2fpulls",
            "/repos/o/r%2E%2E",
            "/repos/o/r\\pulls",
            "/repos/o/r;pulls",
            "/repos/o/r%",
            "/repos/o/r%zz",
        ] {
            assert!(plain(path, "/graphql").is_err(), "{path}");
        }
        assert!(plain("/graphql", "/api/graphql").is_err());
    }

    #[test]
    fn a_graphql_get_names_each_parameter_once() {
        assert_eq!(graphql_get(None), Ok(None));
        assert_eq!(
            graphql_get(Some("query=%7Bviewer%7Blogin%7D%7D")),
            Ok(Some("{viewer{login}}".into()))
        );
        for query in [
            "query=%7Bviewer%7D&query=mutation%7Bx%7D",
            "query=%7Bviewer%7D&Query=mutation%7Bx%7D",
            "query=%7Bviewer%7D&extensions=%7B%7D",
            "variables=1&variables=2",
            "query=%7Bviewer%7D&operationName=x;query=mutation%7Bx%7D",
        ] {
            assert!(graphql_get(Some(query)).is_err(), "{query}");
        }
        let twice = graphql_get(Some("variables=1&variables=2")).unwrap_err();
        assert_eq!(twice, NotOneQuery::Twice("variables".into()));
        assert_eq!(twice.to_string(), "a GraphQL GET names \"variables\" twice");
    }
}
