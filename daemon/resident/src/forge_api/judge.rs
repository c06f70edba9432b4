//! One write's judgement (ARCHITECTURE.md, "Forge API"): a listed route or mutation, in
//! the row's repository, on a head ref in the row's scope, for a lane whose row the gate
//! finds ALLOWED (the same store call, margin, counters and ledger as an ask). A write
//! that acts on an existing pull request first reads it from the forge with the real
//! token (one lookup), and a merge is pinned to the head commit that lookup saw: the
//! daemon sends it as the merge's `sha` (REST) or `expectedHeadOid` (GraphQL), so a head
//! pushed after the judgement makes the forge refuse the merge.

use super::Shared;
use super::graphql::{Call, Mutation};
use super::rest::{self, Route};
use super::scope::head_in_scope;
use super::upstream::{ForgeError, PullHead};
use crate::gate::Gated;
use crate::judge::{Claim, Judge};
use row_fence_contract::descriptor::Descriptor;
use row_fence_contract::{Reason, Verdict};
use serde_json::{Map, Value as Json};

/// A write's judging budget, in ms (as a key broker sign request's: gh waits for it).
pub const WRITE_DEADLINE_MS: u64 = 5_000;

/// The lane a request is judged for.
pub struct Lane {
    /// Its name.
    pub name: String,
    /// The row's repository, `owner/name`.
    pub repo: String,
    /// Its descriptor, read by the daemon now, or why it could not be.
    pub descriptor: Result<Descriptor, Gated>,
}

/// Who asks and with what, for the ledger and the lookups.
pub struct Asker<'a> {
    /// The forge API's state (client, settings).
    pub shared: &'a Shared,
    /// The daemon's judge: gate, counters, ledger.
    pub judge: &'a Judge,
    /// The real token.
    pub token: &'a str,
    /// The ledger's session field.
    pub session: &'a str,
    /// The peer's uid.
    pub uid: Option<u32>,
}

/// A write, as the request named it.
pub enum Write {
    /// A listed REST route and its JSON body (an empty body is `{}`).
    Rest(Route, Map<String, Json>),
    /// A listed GraphQL mutation, and the request object it came in.
    Graphql(Call, Map<String, Json>),
}

/// A refused write: the verdict and what the lane is told.
pub struct Refusal {
    /// The verdict (recorded in the ledger already).
    pub gated: Gated,
}

/// Judges `write` for `lane`; on ALLOWED, the body to send (a merge's pinned).
pub async fn write(
    asker: &Asker<'_>,
    lane: &Lane,
    write: Write,
    action: &str,
) -> Result<Vec<u8>, Refusal> {
    let descriptor = match &lane.descriptor {
        Ok(d) => d,
        Err(gated) => {
            let gated = Gated {
                verdict: gated.verdict,
                detail: format!("lane {}: {}", lane.name, gated.detail),
            };
            asker.judge.record_denial(None, action, &gated, asker.uid);
            return Err(Refusal { gated });
        }
    };
    let refuse = |denial: Denial| {
        let gated = Gated {
            verdict: Verdict::Refused(denial.reason),
            detail: denial.detail,
        };
        let claim = claim(descriptor, action, asker);
        asker
            .judge
            .record_denial(Some(&claim), action, &gated, asker.uid);
        Refusal { gated }
    };
    let body = match write {
        Write::Rest(route, body) => rest_write(asker, lane, descriptor, route, body)
            .await
            .map_err(refuse)?,
        Write::Graphql(call, request) => graphql_write(asker, lane, descriptor, call, request)
            .await
            .map_err(refuse)?,
    };
    let gated = asker
        .judge
        .gate_claim(&claim(descriptor, action, asker), WRITE_DEADLINE_MS)
        .await;
    if gated.verdict == Verdict::Allowed {
        Ok(body)
    } else {
        Err(Refusal { gated })
    }
}

fn claim<'a>(descriptor: &'a Descriptor, action: &'a str, asker: &'a Asker<'_>) -> Claim<'a> {
    Claim {
        descriptor,
        action,
        session: Some(asker.session),
        uid: asker.uid,
    }
}

/// Why a write is refused: `outside_scope` when the pull request's head is outside the
/// row's scope (the reason the forge hook gives), `forge_write_refused` for the rest.
struct Denial {
    reason: Reason,
    detail: String,
}

impl From<String> for Denial {
    fn from(detail: String) -> Denial {
        Denial {
            reason: Reason::ForgeWriteRefused,
            detail,
        }
    }
}

impl From<&str> for Denial {
    fn from(detail: &str) -> Denial {
        Denial::from(detail.to_string())
    }
}

fn same_repo(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// A write on a repository other than the row's.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{repo} is not lane {lane}'s repository {lane_repo}")]
struct NotLanesRepo {
    /// The repository the write names, `owner/name`.
    repo: String,
    /// The lane writing.
    lane: String,
    /// The row's repository, `owner/name`.
    lane_repo: String,
}

/// A merge pinned to a commit other than the pull request's head the daemon looked up.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the merge names head {named}, but pull request #{number}'s head is {head}")]
struct PinMismatch {
    /// The head the lane named (as its JSON).
    named: String,
    /// The pull request's number.
    number: u64,
    /// The head the lookup saw.
    head: String,
}

/// A GraphQL mutation whose input lacks a member the judgement needs.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{mutation} names no {key}")]
struct MissingInput {
    /// The mutation's field (`createPullRequest`, ...).
    mutation: &'static str,
    /// The input member missing (or not a string).
    key: String,
}

/// Each typed refusal above is a `forge_write_refused` denial with its sentence.
macro_rules! denial_from {
    ($($error:ty),*) => {$(
        impl From<$error> for Denial {
            fn from(e: $error) -> Denial {
                Denial::from(e.to_string())
            }
        }
    )*};
}
denial_from!(NotLanesRepo, PinMismatch, MissingInput, ForgeError);

/// The row's repository, or why `repo` is not it.
fn in_repo(lane: &Lane, repo: &str) -> Result<(), NotLanesRepo> {
    if same_repo(&lane.repo, repo) {
        Ok(())
    } else {
        Err(NotLanesRepo {
            repo: repo.to_string(),
            lane: lane.name.clone(),
            lane_repo: lane.repo.clone(),
        })
    }
}

/// The checks on an existing pull request: in the row's repository, its head a branch of
/// that repository in the row's scope.
fn pull_in_scope(
    judge: &Judge,
    lane: &Lane,
    d: &Descriptor,
    pull: &PullHead,
) -> Result<(), Denial> {
    in_repo(lane, &pull.base_repo)?;
    match &pull.head_repo {
        Some(head) if same_repo(head, &lane.repo) => {}
        _ => {
            return Err(format!(
                "pull request #{}'s head is not a branch of {}",
                pull.number, lane.repo
            )
            .into());
        }
    }
    scoped(judge, d, &pull.head_ref)
}

fn scoped(judge: &Judge, d: &Descriptor, head_ref: &str) -> Result<(), Denial> {
    if head_in_scope(judge.registry().scope(&d.board), d, head_ref) {
        Ok(())
    } else {
        Err(Denial {
            reason: Reason::OutsideScope,
            detail: format!(
                "the head {head_ref} is not in the scope of row {}/{}",
                d.board, d.row
            ),
        })
    }
}

/// The commit a merge is pinned to: the one the lookup saw; a lane naming another one is
/// refused (it would merge what was not judged).
fn pin(asked: Option<&Json>, pull: &PullHead) -> Result<Json, PinMismatch> {
    match asked {
        None | Some(Json::Null) => Ok(Json::String(pull.head_sha.clone())),
        Some(Json::String(sha)) if sha.eq_ignore_ascii_case(&pull.head_sha) => {
            Ok(Json::String(pull.head_sha.clone()))
        }
        Some(other) => Err(PinMismatch {
            named: other.to_string(),
            number: pull.number,
            head: pull.head_sha.clone(),
        }),
    }
}

async fn rest_write(
    asker: &Asker<'_>,
    lane: &Lane,
    d: &Descriptor,
    route: Route,
    mut body: Map<String, Json>,
) -> Result<Vec<u8>, Denial> {
    in_repo(lane, route.repo())?;
    let prefix = asker.shared.settings.rest_prefix();
    match &route {
        Route::CreatePull { repo } => {
            let head = body
                .get("head")
                .and_then(Json::as_str)
                .ok_or("the pull request names no head")?;
            let branch = rest::head_branch(head, repo)
                .ok_or_else(|| format!("the head {head} is not a branch of {repo}"))?;
            if body.get("head_repo").is_some() {
                return Err("a head in another repository (head_repo) is not judged".into());
            }
            scoped(asker.judge, d, branch)?;
        }
        Route::MergePull { repo, number }
        | Route::ClosePull { repo, number }
        | Route::CommentPull { repo, number } => {
            if matches!(route, Route::ClosePull { .. }) && !rest::is_close(&body) {
                return Err("an edit of a pull request other than closing it".into());
            }
            let pull = asker
                .shared
                .upstream
                .pull(prefix, repo, *number, asker.token)
                .await?;
            pull_in_scope(asker.judge, lane, d, &pull)?;
            if matches!(route, Route::MergePull { .. }) {
                let sha = pin(body.get("sha"), &pull)?;
                body.insert("sha".into(), sha);
            }
        }
    }
    Ok(Json::Object(body).to_string().into_bytes())
}

async fn graphql_write(
    asker: &Asker<'_>,
    lane: &Lane,
    d: &Descriptor,
    call: Call,
    mut request: Map<String, Json>,
) -> Result<Vec<u8>, Denial> {
    let graphql = asker.shared.settings.graphql_path();
    let upstream = &asker.shared.upstream;
    let mut input = call.input;
    let id = |key: &str| -> Result<String, MissingInput> {
        input
            .get(key)
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| MissingInput {
                mutation: call.mutation.field(),
                key: key.to_string(),
            })
    };
    match call.mutation {
        Mutation::CreatePullRequest => {
            let asked = id("repositoryId")?;
            let repo_id = upstream.repo_id(graphql, &lane.repo, asker.token).await?;
            if asked != repo_id {
                return Err(format!(
                    "repository {asked} is not lane {}'s repository {}",
                    lane.name, lane.repo
                )
                .into());
            }
            if input
                .get("headRepositoryId")
                .is_some_and(|h| h.as_str() != Some(repo_id.as_str()))
            {
                return Err("a head in another repository is not judged".into());
            }
            let head = id("headRefName")?;
            let branch = rest::head_branch(&head, &lane.repo)
                .ok_or_else(|| format!("the head {head} is not a branch of {}", lane.repo))?;
            scoped(asker.judge, d, branch)?;
        }
        Mutation::MergePullRequest | Mutation::ClosePullRequest | Mutation::AddComment => {
            let key = if call.mutation == Mutation::AddComment {
                "subjectId"
            } else {
                "pullRequestId"
            };
            let pull = upstream.pull_node(graphql, &id(key)?, asker.token).await?;
            pull_in_scope(asker.judge, lane, d, &pull)?;
            if call.mutation == Mutation::MergePullRequest {
                let sha = pin(input.get("expectedHeadOid"), &pull)?;
                input.insert("expectedHeadOid".into(), sha);
            }
        }
    }
    let variables = request
        .entry("variables")
        .or_insert_with(|| Json::Object(Map::new()));
    if let Json::Object(variables) = variables {
        variables.insert(call.variable, Json::Object(input));
    }
    Ok(Json::Object(request).to_string().into_bytes())
}
