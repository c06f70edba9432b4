//! The forge API socket's HTTP/1.1 server (ARCHITECTURE.md, "Forge API"): per request, a
//! bounded size (a larger body is 413, refused as a write; a header block over
//! [`MAX_HEADER_BYTES`] is 431; a request that is not HTTP is 400), the one upstream
//! `Host`, the lane (by the peer's uid, or by its placeholder token on the daemon's own
//! uid), then the judgement: reads pass, writes pass only as [`super::judge`] allows.
//! A refused REST write is answered 403 with `{"message": …}`, a refused GraphQL
//! mutation 200 with `{"errors": [{"message": …}]}`, as gh prints them; nothing refused
//! reaches the forge.

use super::graphql::{self, Kind};
use super::judge::{self, Asker, Lane, Write};
use super::lanes::ForgeLanes;
use super::{Shared, rest};
use crate::broker::lanes::{self as bindings, Lanes};
use crate::gate::Gated;
use crate::judge::Judge;
use crate::sync::read as read_lock;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use row_fence_contract::descriptor::{self, Descriptor};
use row_fence_contract::{Reason, Verdict};
use serde_json::{Map, Value as Json, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest request body judged (a pull request's body is at most 64 KiB on GitHub;
/// a GraphQL document of gh's under 8 KiB). Larger is 413, refused as a write.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest request head (line and headers) read; larger is 431.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// A request's head must arrive within this long of the connection's last request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// A request's body must arrive within this long of its head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many connections are served at once (gh opens one per request and
/// closes it).
pub const MAX_CONNECTIONS: usize = 256;

/// One uid holds at most this many of them, so no peer costs the others their requests.
pub const MAX_CONNECTIONS_PER_UID: usize = 32;

/// What every connection shares.
pub struct ForgeApi {
    /// The token, client, settings and counters.
    pub shared: Arc<Shared>,
    /// The daemon's judge: gate, counters, ledger (shared with the daemon and the broker).
    pub judge: Arc<Judge>,
    /// The key broker's state, when it is on: its bindings name a lane of another uid
    /// (else the bindings file is read at each request).
    pub bindings: Option<Arc<crate::broker::Shared>>,
    /// The daemon's own uid: a peer of this uid is named by its placeholder token.
    pub own_uid: u32,
}

/// Serves the socket until `shutdown` is cancelled; fails only when the socket cannot be
/// polled (a failed accept is retried, so no peer can stop it).
pub async fn run(
    listener: std::os::unix::net::UnixListener,
    api: Arc<ForgeApi>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let open: Arc<std::sync::Mutex<std::collections::HashMap<Option<u32>, usize>>> = Arc::default();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "the forge API could not accept a connection; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let cred = stream.peer_cred().ok();
        let Some(per_uid) = PerUid::take(&open, cred.map(|c| c.uid())) else {
            continue;
        };
        let peer = Peer {
            uid: cred.map(|c| c.uid()),
            pid: cred.and_then(|c| c.pid()),
        };
        let api = api.clone();
        tokio::spawn(async move {
            let _slot = (slot, per_uid);
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper::service::service_fn(move |request| {
                let api = api.clone();
                async move { Ok::<_, Infallible>(api.answer(peer, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .max_header_size(MAX_HEADER_BYTES)
                .serve_connection(io, service)
                .await;
        });
    }
}

/// One uid's share of the connections, given back when dropped.
struct PerUid {
    open: Arc<std::sync::Mutex<std::collections::HashMap<Option<u32>, usize>>>,
    uid: Option<u32>,
}

impl PerUid {
    fn take(
        open: &Arc<std::sync::Mutex<std::collections::HashMap<Option<u32>, usize>>>,
        uid: Option<u32>,
    ) -> Option<PerUid> {
        let mut counts = crate::sync::lock(open);
        let count = counts.entry(uid).or_default();
        if *count >= MAX_CONNECTIONS_PER_UID {
            return None;
        }
        *count += 1;
        Some(PerUid {
            open: open.clone(),
            uid,
        })
    }
}

impl Drop for PerUid {
    fn drop(&mut self) {
        let mut counts = crate::sync::lock(&self.open);
        if let Some(count) = counts.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

/// Who is on the other end of a connection, as the socket says.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// Its uid.
    pub uid: Option<u32>,
    /// Its pid.
    pub pid: Option<i32>,
}

impl Peer {
    fn session(&self) -> String {
        match (self.uid, self.pid) {
            (Some(uid), Some(pid)) => format!("forge-api peer uid {uid} pid {pid}"),
            (Some(uid), None) => format!("forge-api peer uid {uid}"),
            _ => "forge-api peer of unknown uid".to_string(),
        }
    }
}

/// How a refusal is shaped: gh reads a REST error's `message`, a GraphQL one's `errors`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Rest,
    Graphql,
}

/// Why the peer of a forge API request is no lane the daemon can judge for (the
/// refusal's sentence is its Display).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Unidentified {
    /// The socket gave no peer credentials.
    #[error("the socket did not tell the peer's uid")]
    NoPeerUid,
    /// A caller under the daemon's own uid sent no placeholder token.
    #[error("no placeholder token in Authorization (row-fence install gh)")]
    NoPlaceholder,
    /// The placeholder token sent is no registered lane's.
    #[error("the placeholder token names no lane (row-fence install gh)")]
    UnknownPlaceholder,
    /// The lane the placeholder names was registered without a descriptor; its name.
    #[error("lane {0} is registered without a descriptor")]
    NoDescriptor(String),
    /// The peer's uid is bound to no lane.
    #[error("uid {0} is bound to no lane")]
    UnboundUid(u32),
    /// The lane the uid is bound to is not registered for the forge API; its name.
    #[error("lane {0} is not registered for the forge API")]
    Unregistered(String),
}

/// Why a request is passed for no lane: a write the daemon cannot judge (the refusal's
/// sentence is its Display, after the lane's name).
#[derive(Debug, thiserror::Error)]
enum Unjudged {
    /// A GraphQL GET's query string is refused (the target's rules).
    #[error(transparent)]
    GraphqlGet(#[from] super::target::NotOneQuery),
    /// A GraphQL GET names a listed mutation.
    #[error("a mutation sent by GET")]
    MutationByGet,
    /// A GraphQL document is not one the daemon lists (its sentence).
    #[error("{0}")]
    Unlisted(String),
    /// A GraphQL body naming a listed mutation is not a single request object.
    #[error("the GraphQL body is not one request")]
    NotOneRequest,
    /// A method other than GET, HEAD and POST sent to the GraphQL endpoint.
    #[error("{0} to the GraphQL endpoint")]
    MethodToGraphql(Method),
    /// A REST write whose method and path name no listed route.
    #[error(transparent)]
    Route(#[from] rest::NotListed),
    /// A REST write carrying a query string.
    #[error("{method} {path}: a write carries no query")]
    Query {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
    },
    /// A REST write whose body is not a JSON object.
    #[error("{method} {path}: the body is not a JSON object")]
    BodyNotObject {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
    },
    /// A method that is neither a read nor a listed write.
    #[error("{0} is not a listed write")]
    UnlistedMethod(Method),
}

/// Where a lane's descriptor is read from, when a write needs it.
enum Source {
    /// The hard mode: the broker's binding for the peer's uid.
    Bound(bindings::Binding),
    /// The same-uid mode: the path the lane's registration names.
    Path(std::path::PathBuf),
}

impl ForgeApi {
    /// Answers one request; never fails (every failure is an answer).
    pub async fn answer(&self, peer: Peer, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().to_string();
        let path_and_query = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| path.clone());
        let graphql_path = self.shared.settings.graphql_path();
        let shape = if path == graphql_path {
            Shape::Graphql
        } else {
            Shape::Rest
        };
        let action = if shape == Shape::Graphql {
            format!("forge-api {} graphql", parts.method)
        } else {
            format!("forge-api {} {path}", parts.method)
        };
        let refuse = |status: StatusCode, gated: Gated, record: bool| {
            if record {
                self.judge.record_denial(None, &action, &gated, peer.uid);
            }
            self.refused(shape, status, &gated)
        };
        // The one host the token is for; a request naming another is refused, a read too:
        // it would reach a host the daemon does not know with nothing judged.
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or(parts.uri.host())
            .unwrap_or("");
        // An absolute-form target (`GET http://HOST/…`) names its host too: both must be
        // the one host, so no spelling of a request names two.
        let uri_host = parts.uri.host().unwrap_or(host);
        if !host.eq_ignore_ascii_case(&self.shared.settings.host)
            || !uri_host.eq_ignore_ascii_case(&self.shared.settings.host)
        {
            return refuse(
                StatusCode::FORBIDDEN,
                write_refused(format!(
                    "the forge API serves {} only; this request names host {host:?}",
                    self.shared.settings.host
                )),
                true,
            );
        }
        // One spelling per endpoint (target.rs): another would reach the endpoint the
        // daemon did not judge.
        if let Err(why) = super::target::plain(&path, graphql_path) {
            return refuse(StatusCode::FORBIDDEN, write_refused(why.to_string()), true);
        }
        let lanes = match self.forge_lanes() {
            Ok(lanes) => lanes,
            Err(e) => {
                return refuse(StatusCode::FORBIDDEN, peer_refused(e.to_string()), true);
            }
        };
        let (name, repo, source) = match self.identify(peer, &parts.headers, &lanes) {
            Ok(found) => found,
            Err(why) => {
                return refuse(StatusCode::FORBIDDEN, peer_refused(why.to_string()), true);
            }
        };
        let collected =
            tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect())
                .await
                .unwrap_or_else(|_| Err("the body did not arrive in time".into()));
        let body = match collected {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    write_refused(format!(
                        "a request body over {MAX_BODY_BYTES} bytes is refused as a write"
                    )),
                    true,
                );
            }
            Err(e) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    Gated {
                        verdict: Verdict::CouldNotRead(Reason::ProtocolError),
                        detail: format!("the request body could not be read: {e}"),
                    },
                    true,
                );
            }
        };
        // A read carries no body: a router may read one (a GraphQL GET's mutation in its
        // body) where the daemon judged only the method and the query string.
        if matches!(parts.method, Method::GET | Method::HEAD) && !body.is_empty() {
            return refuse(
                StatusCode::FORBIDDEN,
                write_refused(format!(
                    "lane {name}: a {} with a body is not judged",
                    parts.method
                )),
                true,
            );
        }
        // Only a read names a query string: a write's query would reach the forge unjudged
        // (a GraphQL POST's `?query=mutation…` beside a body of queries).
        if !matches!(parts.method, Method::GET | Method::HEAD) && parts.uri.query().is_some() {
            return refuse(
                StatusCode::FORBIDDEN,
                write_refused(format!(
                    "lane {name}: a {} carries no query string",
                    parts.method
                )),
                true,
            );
        }
        let kind = self.classify(&parts.method, &path, parts.uri.query(), &body, shape);
        let write = match kind {
            Ok(None) => None,
            Ok(Some(write)) => Some(write),
            Err(why) => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    write_refused(format!("lane {name}: {why}")),
                    true,
                );
            }
        };
        let token = match read_lock(&self.shared.token).clone() {
            Some(token) => token,
            None => {
                self.shared.stats.refused.fetch_add(1, Relaxed);
                return json_answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &json!({"message": "row-fence: the forge API holds no token (row-fence token add)"}),
                );
            }
        };
        let body = match write {
            // A GraphQL read is sent as the daemon parsed it (one value per key), never
            // as the bytes it judged.
            None if shape == Shape::Graphql && !body.is_empty() => {
                match serde_json::from_slice::<Json>(&body) {
                    Ok(parsed) => Bytes::from(parsed.to_string()),
                    Err(e) => {
                        return refuse(
                            StatusCode::FORBIDDEN,
                            write_refused(format!("lane {name}: the GraphQL body: {e}")),
                            true,
                        );
                    }
                }
            }
            None => body,
            Some(write) => {
                let descriptor = read_descriptor(source, &name).await;
                let lane = Lane {
                    name,
                    repo,
                    descriptor,
                };
                let session = peer.session();
                let asker = Asker {
                    shared: &self.shared,
                    judge: &self.judge,
                    token: &token,
                    session: &session,
                    uid: peer.uid,
                };
                // The ledger names the mutation a GraphQL write calls.
                let action = match &write {
                    Write::Graphql(call, _) => {
                        format!("forge-api graphql {}", call.mutation.field())
                    }
                    Write::Rest(..) => action.clone(),
                };
                match judge::write(&asker, &lane, write, &action).await {
                    Ok(body) => Bytes::from(body),
                    Err(refusal) => {
                        return refuse(StatusCode::FORBIDDEN, refusal.gated, false);
                    }
                }
            }
        };
        self.forward(parts.method, &path_and_query, &parts.headers, body, &token)
            .await
    }

    /// The registrations, read now.
    fn forge_lanes(&self) -> Result<ForgeLanes, super::lanes::LoadError> {
        ForgeLanes::load(&super::lanes::default_path(&self.shared.home), self.own_uid)
    }

    /// The lane asking: its name, the row's repository, and where its descriptor is.
    fn identify(
        &self,
        peer: Peer,
        headers: &HeaderMap,
        lanes: &ForgeLanes,
    ) -> Result<(String, String, Source), Unidentified> {
        let Some(uid) = peer.uid else {
            return Err(Unidentified::NoPeerUid);
        };
        if uid == self.own_uid {
            let token = headers
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| {
                    h.strip_prefix("token ")
                        .or_else(|| h.strip_prefix("Bearer "))
                        .or_else(|| h.strip_prefix("bearer "))
                })
                .map(str::trim)
                .ok_or(Unidentified::NoPlaceholder)?;
            let lane = lanes
                .by_placeholder(token)
                .ok_or(Unidentified::UnknownPlaceholder)?;
            let path = lane
                .descriptor
                .clone()
                .ok_or_else(|| Unidentified::NoDescriptor(lane.lane.clone()))?;
            return Ok((lane.lane.clone(), lane.repo.clone(), Source::Path(path)));
        }
        let binding = match &self.bindings {
            Some(broker) => read_lock(&broker.lanes).lane_of(uid).cloned(),
            None => {
                let path = bindings::default_path(&self.shared.home);
                Lanes::load(&path, self.own_uid)
                    .ok()
                    .and_then(|l| l.lane_of(uid).cloned())
            }
        }
        .ok_or(Unidentified::UnboundUid(uid))?;
        let name = binding.lane.clone().unwrap_or_default();
        let lane = lanes
            .by_lane(&name)
            .ok_or_else(|| Unidentified::Unregistered(name.clone()))?;
        Ok((name, lane.repo.clone(), Source::Bound(binding)))
    }

    /// `Ok(None)`: a read. `Ok(Some)`: a listed write to judge. `Err`: a write passed
    /// for no lane.
    fn classify(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        body: &Bytes,
        shape: Shape,
    ) -> Result<Option<Write>, Unjudged> {
        let graphql = shape == Shape::Graphql;
        match *method {
            Method::GET | Method::HEAD if graphql => {
                let document = super::target::graphql_get(query)?;
                match graphql::classify_get(document.as_deref()) {
                    Kind::Read => Ok(None),
                    Kind::Listed(_) => Err(Unjudged::MutationByGet),
                    Kind::Unlisted(why) => Err(Unjudged::Unlisted(why)),
                }
            }
            Method::GET | Method::HEAD => Ok(None),
            Method::POST if graphql => match graphql::classify_body(body) {
                Kind::Read => Ok(None),
                Kind::Listed(call) => {
                    let Ok(Json::Object(request)) = serde_json::from_slice(body) else {
                        return Err(Unjudged::NotOneRequest);
                    };
                    Ok(Some(Write::Graphql(call, request)))
                }
                Kind::Unlisted(why) => Err(Unjudged::Unlisted(why)),
            },
            _ if graphql => Err(Unjudged::MethodToGraphql(method.clone())),
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE => {
                let prefix = self.shared.settings.rest_prefix();
                let route = rest::route(method.as_str(), path, prefix)?;
                if query.is_some() {
                    return Err(Unjudged::Query {
                        method: method.clone(),
                        path: path.to_string(),
                    });
                }
                let body = if body.is_empty() {
                    Map::new()
                } else {
                    match serde_json::from_slice(body) {
                        Ok(Json::Object(body)) => body,
                        _ => {
                            return Err(Unjudged::BodyNotObject {
                                method: method.clone(),
                                path: path.to_string(),
                            });
                        }
                    }
                };
                Ok(Some(Write::Rest(route, body)))
            }
            _ => Err(Unjudged::UnlistedMethod(method.clone())),
        }
    }

    /// Sends a passed request upstream with the real token and relays the answer.
    async fn forward(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
        token: &str,
    ) -> Response<Full<Bytes>> {
        let mut sent = HeaderMap::new();
        for (name, value) in headers {
            if sent_upstream(name) {
                sent.append(name.clone(), value.clone());
            }
        }
        // Every body sent is JSON the daemon read (a listed write, a GraphQL request).
        if !body.is_empty() {
            sent.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=utf-8"),
            );
        }
        match self
            .shared
            .upstream
            .send(method, path_and_query, sent, body, token)
            .await
        {
            Ok(answer) => {
                self.shared.stats.passed.fetch_add(1, Relaxed);
                let mut response = Response::new(Full::new(answer.body));
                *response.status_mut() = answer.status;
                for (name, value) in &answer.headers {
                    if passed_on(name) {
                        response.headers_mut().append(name.clone(), value.clone());
                    }
                }
                response
            }
            Err(why) => {
                self.shared.stats.refused.fetch_add(1, Relaxed);
                json_answer(
                    StatusCode::BAD_GATEWAY,
                    &json!({"message": format!("row-fence: COULD NOT READ the forge: {why}")}),
                )
            }
        }
    }

    /// A refusal, counted, in the shape gh reads.
    fn refused(&self, shape: Shape, status: StatusCode, gated: &Gated) -> Response<Full<Bytes>> {
        self.shared.stats.refused.fetch_add(1, Relaxed);
        let message = format!("row-fence: {}: {}", gated.verdict.headline(), gated.detail);
        match shape {
            Shape::Rest => json_answer(status, &json!({ "message": message })),
            Shape::Graphql if status == StatusCode::PAYLOAD_TOO_LARGE => {
                json_answer(status, &json!({ "message": message }))
            }
            Shape::Graphql => json_answer(
                StatusCode::OK,
                &json!({"data": null, "errors": [{"type": "FORBIDDEN", "message": message}]}),
            ),
        }
    }
}

/// Reads the lane's descriptor now, off the serving thread.
async fn read_descriptor(source: Source, name: &str) -> Result<Descriptor, Gated> {
    match source {
        Source::Bound(binding) => crate::broker::bound::read_now(&binding).await,
        Source::Path(path) => {
            let name = name.to_string();
            tokio::task::spawn_blocking(move || read_path(&path, &name))
                .await
                .unwrap_or_else(|e| {
                    Err(Gated {
                        verdict: Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                        detail: format!("the read of the lane's descriptor did not finish: {e}"),
                    })
                })
        }
    }
}

/// The same-uid mode's read: no link followed, and the descriptor must name the lane.
fn read_path(path: &std::path::Path, lane: &str) -> Result<Descriptor, Gated> {
    let unreadable = |reason, detail| Gated {
        verdict: Verdict::CouldNotRead(reason),
        detail,
    };
    match descriptor::read_no_symlinks(path) {
        Ok(Some(d)) if d.lane == lane => Ok(d),
        Ok(Some(d)) => Err(unreadable(
            Reason::PeerRefused,
            format!(
                "the descriptor {} names lane {}, not {lane}",
                path.display(),
                d.lane
            ),
        )),
        Ok(None) => Err(unreadable(
            Reason::DescriptorMissing,
            format!("the lane's descriptor {} does not exist", path.display()),
        )),
        Err(e) => Err(unreadable(
            Reason::DescriptorUnreadable,
            format!("the lane's descriptor {}: {e}", path.display()),
        )),
    }
}

fn write_refused(detail: String) -> Gated {
    Gated {
        verdict: Verdict::Refused(Reason::ForgeWriteRefused),
        detail,
    }
}

fn peer_refused(detail: String) -> Gated {
    Gated {
        verdict: Verdict::CouldNotRead(Reason::PeerRefused),
        detail,
    }
}

/// A lane's header sent on to the forge: only these, which change no method, route, host
/// or framing (an `X-HTTP-Method-Override`, an `X-Forwarded-Host` are dropped).
fn sent_upstream(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "accept"
            | "accept-language"
            | "user-agent"
            | "x-github-api-version"
            | "graphql-features"
            | "time-zone"
            | "if-none-match"
            | "if-modified-since"
    )
}

/// A forge's response header handed to the lane: only these, which describe the body,
/// its caching, paging, rate limits and the request's id. Anything else (a `Set-Cookie`,
/// the token's `X-OAuth-Scopes`, hop-by-hop headers, the framing, set again for the new
/// body) stays with the daemon: an allowlist, so a header a forge adds tomorrow is not
/// relayed until it is named here.
fn passed_on(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "content-type"
            | "content-language"
            | "etag"
            | "last-modified"
            | "cache-control"
            | "vary"
            | "date"
            | "link"
            | "location"
            | "retry-after"
            | "deprecation"
            | "sunset"
            | "x-github-request-id"
            | "x-github-media-type"
            | "x-github-api-version-selected"
            | "x-poll-interval"
    ) || name.starts_with("x-ratelimit-")
}

fn json_answer(status: StatusCode, body: &Json) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn only_listed_response_headers_reach_the_lane() {
        for passed in [
            "content-type",
            "etag",
            "link",
            "x-ratelimit-remaining",
            "location",
        ] {
            assert!(passed_on(&HeaderName::from_static(passed)), "{passed}");
        }
        for kept in [
            "set-cookie",
            "x-oauth-scopes",
            "x-accepted-oauth-scopes",
            "authorization",
            "transfer-encoding",
            "content-length",
            "connection",
            "x-anything-new",
        ] {
            assert!(!passed_on(&HeaderName::from_static(kept)), "{kept}");
        }
    }
}
