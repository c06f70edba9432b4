//! A stand-in GitHub API on loopback HTTPS, for the forge API endpoint's tests
//! (tests/e2e/forge_api.rs): it answers the REST and GraphQL calls `gh api`, `gh pr
//! create` and `gh pr merge` (gh 2.23) make, and the daemon's own lookups, checks each
//! against the shape gh sends, and records every request. Its certificate (for
//! api.github.com, signed by a CA made in the test with the openssl CLI) is trusted by
//! the daemon through `--forge-api-ca`. Stopped when dropped.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The repository the stand-in serves.
pub const REPO: &str = "o/r";
/// Its node id.
pub const REPO_ID: &str = "R_kgDOrowfence";
/// Pull request #1's node id.
pub const PR_ID: &str = "PR_kwDOrowfence1";
/// Pull request #1's head branch.
pub const PR_HEAD: &str = "feature";
/// Pull request #1's head commit.
pub const PR_SHA: &str = "1111111111111111111111111111111111111111";

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The body, as text.
    pub body: String,
    /// The GraphQL operation it named (from the stand-in's table), if any.
    pub operation: Option<String>,
    /// Every header's name, lowercase, in the order they arrived.
    pub header_names: Vec<String>,
}

impl Recorded {
    /// True for a request that would change something at the forge.
    pub fn is_write(&self) -> bool {
        let graphql = self.path.starts_with("/graphql");
        let read_method = self.method == "GET" || self.method == "HEAD";
        if graphql {
            self.body.contains("mutation") || self.path.contains("mutation")
        } else {
            !read_method
        }
    }
}

/// The running stand-in.
pub struct StandIn {
    /// Its loopback port.
    pub port: u16,
    /// The CA its certificate is signed by (PEM).
    pub ca: PathBuf,
    /// Every request, in order.
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    /// Every request whose shape was not what gh sends.
    pub problems: Arc<Mutex<Vec<String>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl StandIn {
    /// Makes the certificates in `dir` and serves on a free loopback port.
    pub fn start(dir: &Path) -> StandIn {
        let (ca, cert, key) = certificates(dir);
        let acceptor = tls_acceptor(&cert, &key);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let problems: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, p) = (requests.clone(), problems.clone());
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let (r, p) = (r.clone(), p.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |request| answer(request, r.clone(), p.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        StandIn {
            port,
            ca,
            requests,
            problems,
            runtime: Some(runtime),
        }
    }

    /// `127.0.0.1:<port>`, for `--forge-api-connect`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A copy of the requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The writes so far.
    pub fn writes(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(Recorded::is_write)
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A TLS acceptor serving the PEM certificate chain `cert` with `key`, HTTP/1.1 only.
pub(crate) fn tls_acceptor(cert: &Path, key: &Path) -> tokio_rustls::TlsAcceptor {
    let _ = rustls::crypto::ring::default_provider().install_default();
    use rustls::pki_types::pem::PemObject;
    let chain: Vec<rustls::pki_types::CertificateDer<'static>> =
        rustls::pki_types::CertificateDer::pem_file_iter(cert)
            .expect("server cert")
            .map(|c| c.expect("a certificate"))
            .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).expect("server key");
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The CA, and a server certificate for api.github.com signed by it (P-256, 2 days).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = |file: &str| dir.join(file);
    let openssl = |args: &[&str], files: &[(&str, PathBuf)]| {
        let mut cmd = Command::new("openssl");
        cmd.args(args).stdin(Stdio::null());
        for (flag, path) in files {
            cmd.arg(flag).arg(path);
        }
        let out = cmd.output().expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend(["-subj", "/CN=row-fence forge test CA"]);
    openssl(&ca, &[("-keyout", p("ca.key")), ("-out", p("ca.pem"))]);
    std::fs::write(
        p("server.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=DNS:api.github.com\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let mut req = vec!["req", "-nodes"];
    req.extend(ec);
    req.extend(["-subj", "/CN=api.github.com"]);
    openssl(
        &req,
        &[("-keyout", p("server.key")), ("-out", p("server.csr"))],
    );
    openssl(
        &["x509", "-req", "-days", "2", "-set_serial", "1"],
        &[
            ("-in", p("server.csr")),
            ("-CA", p("ca.pem")),
            ("-CAkey", p("ca.key")),
            ("-extfile", p("server.ext")),
            ("-out", p("server.pem")),
        ],
    );
    (p("ca.pem"), p("server.pem"), p("server.key"))
}

/// The GraphQL operations the stand-in knows: gh's (2.23) and the daemon's lookups.
const OPERATIONS: &[&str] = &[
    "query RepositoryInfo",
    "query PullRequestForBranch",
    "query PullRequestByNumber",
    "mutation PullRequestCreate",
    "mutation PullRequestMerge",
    "query RowFenceRepo",
    "query RowFencePull",
    "query UserCurrent",
    "query PullRequest_fields",
    "mutation PullRequestClose",
    "mutation CommentCreate",
];

async fn answer(
    request: Request<Incoming>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    problems: Arc<Mutex<Vec<String>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).to_string();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let method = parts.method.to_string();
    let header_names: Vec<String> = parts
        .headers
        .keys()
        .map(|k| k.as_str().to_string())
        .collect();
    let authorization = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut operation = None;
    let problem = |why: String| {
        problems
            .lock()
            .unwrap()
            .push(format!("{method} {path}: {why}"))
    };
    let authorizations = parts.headers.get_all("authorization").iter().count();
    if authorizations != 1 {
        problem(format!("{authorizations} Authorization headers"));
    }
    if parts
        .headers
        .get_all("authorization")
        .iter()
        .any(|v| v.to_str().unwrap_or("").contains("rowfence_placeholder_"))
    {
        problem("the lane's placeholder reached the forge".into());
    }
    let host = parts.headers.get("host").and_then(|v| v.to_str().ok());
    if host != Some("api.github.com") {
        problem(format!("Host {host:?}"));
    }
    let json_body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let (status, reply) = match (method.as_str(), path.as_str()) {
        ("POST", "/graphql") => {
            let query = json_body["query"].as_str().unwrap_or("");
            let vars = &json_body["variables"];
            let found = OPERATIONS.iter().find(|op| query.contains(**op));
            operation = found.map(|op| op.split(' ').nth(1).unwrap_or("").to_string());
            match operation.as_deref() {
                Some("RepositoryInfo") => {
                    if vars["owner"] != "o" || vars["name"] != "r" {
                        problem(format!("RepositoryInfo variables {vars}"));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"repository": repository()}}),
                    )
                }
                Some("PullRequestForBranch") => {
                    if vars["headRefName"].as_str().is_none() {
                        problem(format!("PullRequestForBranch variables {vars}"));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"repository": {"pullRequests": {"nodes": []}, "defaultBranchRef": {"name": "main"}}}}),
                    )
                }
                Some("PullRequestByNumber") => {
                    if vars["pr_number"] != 1 {
                        problem(format!("PullRequestByNumber variables {vars}"));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"repository": {"pullRequest": pull_node()}}}),
                    )
                }
                Some("PullRequestCreate") => {
                    let input = &vars["input"];
                    for key in ["repositoryId", "baseRefName", "headRefName", "title"] {
                        if input[key].as_str().is_none() {
                            problem(format!("PullRequestCreate input has no {key}: {input}"));
                        }
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"createPullRequest": {"pullRequest": {"id": "PR_new", "url": "https://github.com/o/r/pull/2"}}}}),
                    )
                }
                Some("PullRequestMerge") => {
                    let input = &vars["input"];
                    if input["pullRequestId"].as_str().is_none()
                        || input["mergeMethod"].as_str().is_none()
                    {
                        problem(format!("PullRequestMerge input {input}"));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"mergePullRequest": {"clientMutationId": null}}}),
                    )
                }
                Some("RowFenceRepo") => (
                    StatusCode::OK,
                    json!({"data": {"repository": {"id": REPO_ID}}}),
                ),
                Some("RowFencePull") => {
                    if vars["id"] == PR_ID {
                        let mut node = pull_node();
                        node["__typename"] = json!("PullRequest");
                        (StatusCode::OK, json!({"data": {"node": node}}))
                    } else {
                        (StatusCode::OK, json!({"data": {"node": null}}))
                    }
                }
                Some("PullRequestClose") => {
                    if vars["input"]["pullRequestId"] != PR_ID {
                        problem(format!("PullRequestClose input {}", vars["input"]));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"closePullRequest": {"pullRequest": {"id": PR_ID}}}}),
                    )
                }
                Some("CommentCreate") => {
                    let input = &vars["input"];
                    if input["subjectId"] != PR_ID || input["body"].as_str().is_none() {
                        problem(format!("CommentCreate input {input}"));
                    }
                    (
                        StatusCode::OK,
                        json!({"data": {"addComment": {"commentEdge": {"node": {"url": "https://github.com/o/r/pull/1#issuecomment-1"}}}}}),
                    )
                }
                Some("PullRequest_fields") => (
                    StatusCode::OK,
                    json!({"data": {"PullRequest": {"fields": [{"name": "id"}]}}}),
                ),
                Some("UserCurrent") => (
                    StatusCode::OK,
                    json!({"data": {"viewer": {"login": "lane"}}}),
                ),
                _ if query.contains("mutation") => (StatusCode::OK, json!({"data": {"ok": true}})),
                _ if query.contains("viewer") => (
                    StatusCode::OK,
                    json!({"data": {"viewer": {"login": "lane"}}}),
                ),
                _ => {
                    problem(format!("an unknown query: {query}"));
                    (StatusCode::BAD_REQUEST, json!({"message": "unknown query"}))
                }
            }
        }
        ("GET", "/repos/o/r") => (
            StatusCode::OK,
            json!({"id": 1, "full_name": REPO, "node_id": REPO_ID}),
        ),
        ("GET", "/repos/o/r/pulls/1") => (
            StatusCode::OK,
            json!({"number": 1, "node_id": PR_ID, "state": "open",
                   "head": {"ref": PR_HEAD, "sha": PR_SHA, "repo": {"full_name": REPO}},
                   "base": {"ref": "main", "repo": {"full_name": REPO}}}),
        ),
        ("GET", "/repos/o/moved") => (
            StatusCode::MOVED_PERMANENTLY,
            json!({"message": "Moved Permanently", "url": "https://api.github.com/repos/o/r"}),
        ),
        ("GET", "/user") => (StatusCode::OK, json!({"login": "lane"})),
        ("PUT", "/repos/o/r/pulls/1/merge") => {
            if json_body["sha"].as_str().is_none() {
                problem(format!("a merge without sha: {body}"));
            }
            (StatusCode::OK, json!({"merged": true, "sha": PR_SHA}))
        }
        ("POST", "/repos/o/r/pulls") => (StatusCode::CREATED, json!({"number": 2})),
        ("GET", _) => (StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
        _ => (StatusCode::OK, json!({"ok": true})),
    };
    requests.lock().unwrap().push(Recorded {
        method,
        path,
        authorization,
        body,
        operation,
        header_names,
    });
    let mut response = Response::new(Full::new(Bytes::from(reply.to_string())));
    *response.status_mut() = status;
    if status == StatusCode::MOVED_PERMANENTLY {
        response.headers_mut().insert(
            "location",
            "https://api.github.com/repos/o/r".parse().unwrap(),
        );
    }
    response.headers_mut().insert(
        "content-type",
        "application/json; charset=utf-8".parse().unwrap(),
    );
    Ok(response)
}

fn repository() -> Value {
    json!({
        "id": REPO_ID, "name": "r", "owner": {"login": "o"}, "hasIssuesEnabled": true,
        "description": "", "hasWikiEnabled": false, "viewerPermission": "WRITE",
        "defaultBranchRef": {"name": "main"}, "parent": null,
        "mergeCommitAllowed": true, "rebaseMergeAllowed": true, "squashMergeAllowed": true
    })
}

fn pull_node() -> Value {
    json!({
        "id": PR_ID, "number": 1, "title": "t", "state": "OPEN", "isDraft": false,
        "url": "https://github.com/o/r/pull/1",
        "headRefName": PR_HEAD, "headRefOid": PR_SHA, "baseRefName": "main",
        "headRepositoryOwner": {"login": "o"}, "headRepository": {"name": "r", "nameWithOwner": REPO},
        "baseRepository": {"nameWithOwner": REPO},
        "isCrossRepository": false, "mergeStateStatus": "CLEAN", "mergeable": "MERGEABLE",
        "autoMergeRequest": null, "reviewDecision": null
    })
}
