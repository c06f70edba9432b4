//! The one HTTPS client to the forge (ARCHITECTURE.md, "Forge API"): the host fixed in the
//! daemon's configuration, the system's roots or the one CA configured, no redirect
//! followed (a `Location` is handed back to the lane, which can follow it only through
//! this socket, where another host is refused), and the lookups a judgement needs (a
//! pull request's head, a repository's node id), made with the real token.

use bytes::Bytes;
use hyper::{HeaderMap, Method, StatusCode};
use serde_json::{Value as Json, json};
use std::path::PathBuf;
use std::time::Duration;

/// How long one upstream exchange may take (connect, send, the whole answer).
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest answer relayed back to a lane (a repository's archive is not an API answer).
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// The client.
pub struct Upstream {
    client: reqwest::Client,
    base: String,
}

/// An answer from the forge, whole.
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers (hop-by-hop ones are dropped by the caller).
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

/// Why the client cannot be built; [`ClientError::setting`] names the setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CA bundle cannot be read.
    #[error("{}: {source}", path.display())]
    CaUnreadable {
        /// The bundle.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CA bundle holds no PEM certificate the TLS client takes.
    #[error("{}: {source}", path.display())]
    CaRefused {
        /// The bundle.
        path: PathBuf,
        /// Why.
        source: reqwest::Error,
    },
    /// The address to dial for the host is not `IP:PORT`.
    #[error("{addr:?}: {source}")]
    ConnectAddress {
        /// The address as configured.
        addr: String,
        /// Why it does not parse.
        source: std::net::AddrParseError,
    },
    /// The HTTPS client cannot be built.
    #[error("{0}")]
    Client(#[source] reqwest::Error),
}

impl ClientError {
    /// The setting at fault, as the daemon's error names it.
    pub fn setting(&self) -> &'static str {
        match self {
            ClientError::CaUnreadable { .. } | ClientError::CaRefused { .. } => "CA",
            ClientError::ConnectAddress { .. } => "connect address",
            ClientError::Client(_) => "HTTPS client",
        }
    }
}

/// Why an exchange with the forge gave nothing to use: the lane is told COULD NOT READ
/// (a read passed through) or the write is refused (a lookup a judgement needed).
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The request could not be sent, or no answer came (connect, TLS, timeout).
    #[error("the forge could not be asked: {}", without_url(.0))]
    Unasked(#[source] reqwest::Error),
    /// The answer broke off while it was read.
    #[error("the forge's answer could not be read: {}", without_url(.0))]
    Unread(#[source] reqwest::Error),
    /// The answer is over [`MAX_ANSWER_BYTES`].
    #[error("the forge's answer is over {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    /// A lookup answered with a status other than success.
    #[error("the forge answered {status} to the lookup {path}")]
    Status {
        /// The status.
        status: StatusCode,
        /// The lookup's path.
        path: String,
    },
    /// A lookup's answer is not JSON.
    #[error("the forge's answer to {path} is not JSON: {source}")]
    NotJson {
        /// The lookup's path.
        path: String,
        /// Why.
        source: serde_json::Error,
    },
    /// A pull request's answer lacks a member the judgement needs (`base repository`,
    /// `head ref`, `head commit`).
    #[error("the pull request names no {0}")]
    PullLacks(&'static str),
    /// A node id that names no pull request.
    #[error("{0} is not a pull request")]
    NotAPull(String),
    /// A repository name that is not `owner/name`.
    #[error("the repository {0:?} is not owner/name")]
    NotOwnerName(String),
    /// The forge names no repository by that name.
    #[error("the forge names no repository {0}")]
    NoRepository(String),
}

/// A pull request's head and base, as the forge says now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullHead {
    /// The base repository, `owner/name`.
    pub base_repo: String,
    /// The head repository, `owner/name` (`None`: deleted, a fork gone).
    pub head_repo: Option<String>,
    /// The head branch.
    pub head_ref: String,
    /// The head commit.
    pub head_sha: String,
    /// Its number.
    pub number: u64,
}

impl Upstream {
    /// Builds the client for `host` (`https://host`), trusting only the PEM CA bundle
    /// `ca` when given, dialing `connect` (`IP:PORT`) for the host when given. Fails,
    /// naming the setting, on a CA that cannot be read or an address that does not parse.
    pub fn new(
        host: &str,
        ca: Option<&std::path::Path>,
        connect: Option<&str>,
    ) -> Result<Upstream, ClientError> {
        row_fence_store::tls::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(UPSTREAM_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .https_only(true);
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).map_err(|source| ClientError::CaUnreadable {
                path: ca.to_path_buf(),
                source,
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                ClientError::CaRefused {
                    path: ca.to_path_buf(),
                    source,
                }
            })?;
            builder = builder.tls_certs_only(certs);
        }
        if let Some(addr) = connect {
            let parsed: std::net::SocketAddr =
                addr.parse().map_err(|source| ClientError::ConnectAddress {
                    addr: addr.to_string(),
                    source,
                })?;
            builder = builder.resolve(host, parsed);
        }
        let client = builder.build().map_err(ClientError::Client)?;
        Ok(Upstream {
            client,
            base: format!("https://{host}"),
        })
    }

    /// Sends one request with the real `token` and reads the whole answer.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: HeaderMap,
        body: Bytes,
        token: &str,
    ) -> Result<Answer, ForgeError> {
        let url = format!("{}{}", self.base, path_and_query);
        let mut response = self
            .client
            .request(method, url)
            .headers(headers)
            .header(hyper::header::AUTHORIZATION, format!("token {token}"))
            .body(body)
            .send()
            .await
            .map_err(ForgeError::Unasked)?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(ForgeError::Unread)? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(ForgeError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body: body.into(),
        })
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<Json>,
        token: &str,
    ) -> Result<Json, ForgeError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            hyper::header::ACCEPT,
            hyper::header::HeaderValue::from_static("application/vnd.github+json"),
        );
        let bytes = match body {
            Some(body) => {
                headers.insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/json"),
                );
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let answer = self.send(method, path, headers, bytes, token).await?;
        if !answer.status.is_success() {
            return Err(ForgeError::Status {
                status: answer.status,
                path: path.to_string(),
            });
        }
        serde_json::from_slice(&answer.body).map_err(|source| ForgeError::NotJson {
            path: path.to_string(),
            source,
        })
    }

    /// A pull request by number (REST), under the REST `prefix`.
    pub async fn pull(
        &self,
        prefix: &str,
        repo: &str,
        number: u64,
        token: &str,
    ) -> Result<PullHead, ForgeError> {
        let path = format!("{prefix}/repos/{repo}/pulls/{number}");
        let pull = self.json(Method::GET, &path, None, token).await?;
        let text = |pointer: &str| {
            pull.pointer(pointer)
                .and_then(Json::as_str)
                .map(str::to_string)
        };
        Ok(PullHead {
            base_repo: text("/base/repo/full_name")
                .ok_or(ForgeError::PullLacks("base repository"))?,
            head_repo: text("/head/repo/full_name"),
            head_ref: text("/head/ref").ok_or(ForgeError::PullLacks("head ref"))?,
            head_sha: text("/head/sha").ok_or(ForgeError::PullLacks("head commit"))?,
            number: pull.get("number").and_then(Json::as_u64).unwrap_or(number),
        })
    }

    /// A pull request by node id (GraphQL); an id that names no pull request is an error.
    pub async fn pull_node(
        &self,
        graphql: &str,
        id: &str,
        token: &str,
    ) -> Result<PullHead, ForgeError> {
        let query = "query RowFencePull($id: ID!) { node(id: $id) { __typename ... on PullRequest { number headRefName headRefOid baseRepository { nameWithOwner } headRepository { nameWithOwner } } } }";
        let answer = self
            .json(
                Method::POST,
                graphql,
                Some(json!({"query": query, "variables": {"id": id}})),
                token,
            )
            .await?;
        let node = answer
            .pointer("/data/node")
            .filter(|n| n.get("__typename").and_then(Json::as_str) == Some("PullRequest"))
            .ok_or_else(|| ForgeError::NotAPull(id.to_string()))?;
        let text = |pointer: &str| {
            node.pointer(pointer)
                .and_then(Json::as_str)
                .map(str::to_string)
        };
        Ok(PullHead {
            base_repo: text("/baseRepository/nameWithOwner")
                .ok_or(ForgeError::PullLacks("base repository"))?,
            head_repo: text("/headRepository/nameWithOwner"),
            head_ref: text("/headRefName").ok_or(ForgeError::PullLacks("head ref"))?,
            head_sha: text("/headRefOid").ok_or(ForgeError::PullLacks("head commit"))?,
            number: node.get("number").and_then(Json::as_u64).unwrap_or(0),
        })
    }

    /// A repository's node id (GraphQL).
    pub async fn repo_id(
        &self,
        graphql: &str,
        repo: &str,
        token: &str,
    ) -> Result<String, ForgeError> {
        let (owner, name) = repo
            .split_once('/')
            .ok_or_else(|| ForgeError::NotOwnerName(repo.to_string()))?;
        let query = "query RowFenceRepo($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id } }";
        let answer = self
            .json(
                Method::POST,
                graphql,
                Some(json!({"query": query, "variables": {"owner": owner, "name": name}})),
                token,
            )
            .await?;
        answer
            .pointer("/data/repository/id")
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| ForgeError::NoRepository(repo.to_string()))
    }
}

/// reqwest's error without the URL (which carries nothing secret, but is long).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
