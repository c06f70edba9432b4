//! The REST writes a lane may be allowed (ARCHITECTURE.md, "Forge API"), by method and
//! path: every other POST, PUT, PATCH or DELETE is a write passed for no lane. A path is
//! matched segment by segment after the host's API prefix (`/api/v3` on an enterprise
//! host); a query string, an encoded or empty segment, `.` or `..` match nothing.

use serde_json::{Map, Value as Json};

/// A listed REST write, with the repository and pull request its path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `POST /repos/{owner}/{repo}/pulls`: body `{head, base, title, …}`.
    CreatePull {
        /// `owner/repo`.
        repo: String,
    },
    /// `PUT /repos/{owner}/{repo}/pulls/{number}/merge`: the daemon pins `sha`.
    MergePull {
        /// `owner/repo`.
        repo: String,
        /// The pull request's number.
        number: u64,
    },
    /// `PATCH /repos/{owner}/{repo}/pulls/{number}` with `{"state": "closed"}` only.
    ClosePull {
        /// `owner/repo`.
        repo: String,
        /// The pull request's number.
        number: u64,
    },
    /// `POST /repos/{owner}/{repo}/issues/{number}/comments` on a pull request.
    CommentPull {
        /// `owner/repo`.
        repo: String,
        /// The pull request's number.
        number: u64,
    },
}

impl Route {
    /// The repository the path names (`owner/repo`).
    pub fn repo(&self) -> &str {
        match self {
            Route::CreatePull { repo }
            | Route::MergePull { repo, .. }
            | Route::ClosePull { repo, .. }
            | Route::CommentPull { repo, .. } => repo,
        }
    }

    /// The pull request the path names, if any.
    pub fn number(&self) -> Option<u64> {
        match self {
            Route::CreatePull { .. } => None,
            Route::MergePull { number, .. }
            | Route::ClosePull { number, .. }
            | Route::CommentPull { number, .. } => Some(*number),
        }
    }
}

/// A write's method and path that name no listed route.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotListed {
    /// The path carries a query or a percent-encoding: one spelling per route, so the
    /// path judged is the path the forge serves.
    #[error("{method} {path}: a write's path carries no query or encoding")]
    QueryOrEncoding {
        /// The request's method.
        method: String,
        /// The request's path, as sent.
        path: String,
    },
    /// No listed route has this method and path.
    #[error("{method} {path} is not a listed write")]
    Unlisted {
        /// The request's method.
        method: String,
        /// The request's path, as sent.
        path: String,
    },
}

/// The listed route a write's method and path (`prefix` stripped) name, or why none does.
pub fn route(method: &str, path: &str, prefix: &str) -> Result<Route, NotListed> {
    let unlisted = || NotListed::Unlisted {
        method: method.to_string(),
        path: path.to_string(),
    };
    if path.contains('?') || path.contains('%') {
        return Err(NotListed::QueryOrEncoding {
            method: method.to_string(),
            path: path.to_string(),
        });
    }
    let rest = path.strip_prefix(prefix).ok_or_else(unlisted)?;
    let segments: Vec<&str> = rest
        .strip_prefix('/')
        .ok_or_else(unlisted)?
        .split('/')
        .collect();
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return Err(unlisted());
    }
    let number = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
    match (method, segments.as_slice()) {
        ("POST", ["repos", owner, name, "pulls"]) => Ok(Route::CreatePull {
            repo: format!("{owner}/{name}"),
        }),
        ("PUT", ["repos", owner, name, "pulls", n, "merge"]) => Ok(Route::MergePull {
            repo: format!("{owner}/{name}"),
            number: number(n).ok_or_else(unlisted)?,
        }),
        ("PATCH", ["repos", owner, name, "pulls", n]) => Ok(Route::ClosePull {
            repo: format!("{owner}/{name}"),
            number: number(n).ok_or_else(unlisted)?,
        }),
        ("POST", ["repos", owner, name, "issues", n, "comments"]) => Ok(Route::CommentPull {
            repo: format!("{owner}/{name}"),
            number: number(n).ok_or_else(unlisted)?,
        }),
        _ => Err(unlisted()),
    }
}

/// A close's body: `{"state": "closed"}` and nothing else.
pub fn is_close(body: &Map<String, Json>) -> bool {
    body.len() == 1 && body.get("state") == Some(&Json::String("closed".into()))
}

/// The branch a create's `head` names, when it is in the base repository itself
/// (`branch` or `owner:branch` with the base's owner); `None` for a fork's head.
pub fn head_branch<'a>(head: &'a str, repo: &str) -> Option<&'a str> {
    match head.split_once(':') {
        None => Some(head),
        Some((owner, branch)) => {
            let base_owner = repo.split('/').next().unwrap_or("");
            owner.eq_ignore_ascii_case(base_owner).then_some(branch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_pull_request_writes_are_routes() {
        assert_eq!(
            route("POST", "/repos/o/r/pulls", ""),
            Ok(Route::CreatePull { repo: "o/r".into() })
        );
        assert_eq!(
            route("PUT", "/api/v3/repos/o/r/pulls/7/merge", "/api/v3"),
            Ok(Route::MergePull {
                repo: "o/r".into(),
                number: 7
            })
        );
        for (method, path) in [
            ("POST", "/repos/o/r/issues"),
            ("POST", "/repos/o/r/releases"),
            ("PATCH", "/repos/o/r"),
            ("DELETE", "/repos/o/r/pulls/1"),
            ("PUT", "/repos/o/r/pulls/0/merge"),
            ("PUT", "/repos/o/r/pulls/x/merge"),
            ("PUT", "/repos/o/r/pulls/1/merge/"),
            ("POST", "/repos/o/r/actions/workflows/1/dispatches"),
            ("POST", "/repos/o/../r/pulls"),
            ("POST", "/repos/o/r/pulls?x=1"),
            ("POST", "/repos/o/r%2Fpulls"),
            ("POST", "//repos/o/r/pulls"),
            ("POST", "/api/v3/repos/o/r/pulls"),
        ] {
            assert!(route(method, path, "").is_err(), "{method} {path}");
        }
    }

    #[test]
    fn a_head_in_a_fork_names_no_branch_of_the_base() {
        assert_eq!(head_branch("feature", "o/r"), Some("feature"));
        assert_eq!(head_branch("O:feature", "o/r"), Some("feature"));
        assert_eq!(head_branch("other:feature", "o/r"), None);
    }
}
