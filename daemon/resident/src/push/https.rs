//! The HTTPS arm of the push proxy (ARCHITECTURE.md, "Push proxy"): a forge configured as
//! `https://[USER@]HOST[:PORT]/[PATH/]` is pushed to with git's smart HTTP, verified
//! against the system's roots or the one CA given (`--push-ca`), with basic auth made of
//! the forge's user and the token the daemon holds in memory ([`token`]).
//!
//! A [`Connection`] of this arm is a task holding at most two requests, with the same
//! reader and writer as the ssh arm:
//! 1. `GET <repo>/info/refs?service=git-receive-pack`: its `# service=git-receive-pack`
//!    line and flush are checked and dropped, the advertisement goes to the reader;
//! 2. `POST <repo>/git-receive-pack`, only when something other than a lone flush is
//!    written: the body is what is written, streamed; it ends when the writer is closed.
//!    The response (report-status, side-band) goes to the reader as the forge sends it.
//!
//! [`Exchange::abort`] drops the request in the middle of its body, so the forge never
//! gets the end of the pack (the session holds the pack's last bytes until its second
//! judgement): nothing is applied. No redirect is followed (the credential goes to the
//! configured forge only), and nothing of the credential is written or logged.

pub mod token;

use super::Pusher;
use super::forge::exchange::{Exchange, ExchangeError};
use super::forge::{Connection, ForgeError, SshFiles};
use super::target::{Forge, Scheme, Target};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream, ReadBuf};
use zeroize::Zeroizing;

pub use super::forge::exchange::SAID;

pub use super::target::https::DEFAULT_USER;

/// The largest advertisement taken from the forge, in bytes.
pub const MAX_ADVERT_BYTES: u64 = 256 * 1024 * 1024;

/// The largest `# service=` preamble (its line, metadata lines and flush), in bytes.
const MAX_PREAMBLE_BYTES: usize = 64 * 1024;

/// The pipes between a session and its exchange, in bytes each.
const PIPE_BYTES: usize = 64 * 1024;

/// How long a TCP connect and TLS handshake may take (ssh's `ConnectTimeout` too).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest silence on a read from the forge (it may check a large pack first).
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The advertisement's media type (gitprotocol-http(5)).
const ADVERT_TYPE: &str = "application/x-git-receive-pack-advertisement";
/// The request's.
const REQUEST_TYPE: &str = "application/x-git-receive-pack-request";
/// The result's.
const RESULT_TYPE: &str = "application/x-git-receive-pack-result";

/// Why the HTTPS client could not be built; the daemon does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpsError {
    /// `--push-ca` cannot be read or holds no certificate.
    #[error(
        "--push-ca {path}: {why} (give a PEM file of the CA that signed the forge's certificate)"
    )]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The client itself.
    #[error("the HTTPS client for the push forges: {0}")]
    Client(String),
}

/// What the HTTPS arm shares: one client (its CA, no redirects, HTTPS only) and a token
/// per forge origin.
pub struct Https {
    client: reqwest::Client,
    /// The configured HTTPS forges' origins ([`Forge::origin`]), sorted, each once.
    origins: Vec<String>,
    /// Each origin's token: in this process's memory only, wiped when replaced or dropped.
    tokens: RwLock<BTreeMap<String, Zeroizing<String>>>,
    /// The daemon's home (the audit log of token loads).
    pub home: PathBuf,
}

impl std::fmt::Debug for Https {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Https")
            .field("token", &self.holds_token())
            .finish_non_exhaustive()
    }
}

impl Https {
    /// The arm's client when one of `forges` is an HTTPS one (`None` otherwise); `ca` is
    /// the PEM bundle trusted instead of the system's roots.
    pub fn for_forges(
        forges: &[Forge],
        ca: Option<&Path>,
        home: &Path,
    ) -> Result<Option<Https>, HttpsError> {
        let mut origins: Vec<String> = forges
            .iter()
            .filter(|f| f.scheme == Scheme::Https)
            .map(Forge::origin)
            .collect();
        if origins.is_empty() {
            return Ok(None);
        }
        origins.sort();
        origins.dedup();
        let mut https = Https::new(ca, home)?;
        https.origins = origins;
        Ok(Some(https))
    }

    /// The client, trusting only `ca` when given (as the forge API's client does).
    pub fn new(ca: Option<&Path>, home: &Path) -> Result<Https, HttpsError> {
        row_fence_store::tls::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            // Every request on a connection of its own: none kept between pushes.
            .pool_max_idle_per_host(0)
            .user_agent(concat!("git/row-fence-", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = ca {
            let bad = |why: String| HttpsError::Ca {
                path: ca.to_path_buf(),
                why,
            };
            let pem = std::fs::read(ca).map_err(|e| bad(e.to_string()))?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("no certificate in it".into()));
            }
            builder = builder.tls_certs_only(certs);
        }
        let client = builder
            .build()
            .map_err(|e| HttpsError::Client(e.to_string()))?;
        Ok(Https {
            client,
            origins: Vec::new(),
            tokens: RwLock::new(BTreeMap::new()),
            home: home.to_path_buf(),
        })
    }

    /// True when a token is held for some forge.
    pub fn holds_token(&self) -> bool {
        !crate::sync::read(&self.tokens).is_empty()
    }

    /// The configured HTTPS forges' origins.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Holds `token` for `origin` (the one before is wiped).
    pub fn hold(&self, origin: &str, token: Zeroizing<String>) {
        crate::sync::write(&self.tokens).insert(origin.to_string(), token);
    }

    /// The token held for `origin`, if any.
    fn token_for(&self, origin: &str) -> Option<Zeroizing<String>> {
        crate::sync::read(&self.tokens).get(origin).cloned()
    }
}

/// The repository's URL (no trailing `/`).
fn repository_url(target: &Target) -> String {
    format!(
        "https://{}:{}{}",
        target.forge.host, target.forge.port, target.repository
    )
}

/// Opens a connection to the target's forge by its scheme: the ssh arm
/// ([`Connection::ssh`], through the daemon's master when `shared`) or this one (whose
/// client keeps its own connections).
pub fn open(
    pusher: &Pusher,
    target: &Target,
    files: &SshFiles,
    shared: bool,
) -> Result<Connection, ForgeError> {
    match target.forge.scheme {
        Scheme::Ssh => Connection::ssh(target, files, shared),
        Scheme::Https => {
            let https = pusher.settings.https.clone().ok_or_else(|| {
                ForgeError::Broken(format!("{SAID}the daemon has no HTTPS client"))
            })?;
            connect(&https, target)
        }
    }
}

/// Starts the exchange with the target's HTTPS forge. Fails before dialling when the
/// daemon holds no token.
pub fn connect(https: &Https, target: &Target) -> Result<Connection, ForgeError> {
    let origin = target.forge.origin();
    let token = https.token_for(&origin).ok_or_else(|| {
        ForgeError::Broken(format!(
            "{SAID}the daemon holds no token for {origin}: the operator loads one with `row-fence token add FILE --forge {origin}/` (held in memory only: again after every restart); nothing was dialled"
        ))
    })?;
    let (lane_reader, to_lane) = tokio::io::duplex(PIPE_BYTES);
    let (lane_writer, from_lane) = tokio::io::duplex(PIPE_BYTES);
    let aborted = Arc::new(AtomicBool::new(false));
    let job = Job {
        client: https.client.clone(),
        base: repository_url(target),
        user: target.forge.user.clone(),
        token,
        aborted: aborted.clone(),
    };
    let task = tokio::spawn(job.run(to_lane, from_lane));
    Ok(Connection::https(
        Box::new(lane_reader),
        Box::new(lane_writer),
        Exchange::new(task, aborted),
    ))
}

/// What one exchange needs.
struct Job {
    client: reqwest::Client,
    base: String,
    user: String,
    token: Zeroizing<String>,
    aborted: Arc<AtomicBool>,
}

impl Job {
    /// The GET, then the POST when the session writes a request.
    async fn run(
        self,
        mut to_lane: DuplexStream,
        mut from_lane: DuplexStream,
    ) -> Result<(), ExchangeError> {
        let url = format!("{}/info/refs?service=git-receive-pack", self.base);
        let response = self
            .client
            .get(&url)
            .basic_auth(&self.user, Some(self.token.as_str()))
            .header(reqwest::header::ACCEPT, ADVERT_TYPE)
            .send()
            .await
            .map_err(|e| describe(e, &url))?;
        let mut response = check(response, ADVERT_TYPE, &url)?;
        let mut head: Vec<u8> = Vec::new();
        let mut preamble_done = false;
        let mut total: u64 = 0;
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(e, &url))? {
            total += chunk.len() as u64;
            if total > MAX_ADVERT_BYTES {
                return Err(ExchangeError::TooLarge {
                    url,
                    max: MAX_ADVERT_BYTES,
                });
            }
            if preamble_done {
                to_lane.write_all(&chunk).await.map_err(gone)?;
                continue;
            }
            head.extend_from_slice(&chunk);
            let found = preamble(&head)
                .map_err(|why| ExchangeError::NotSmartHttp(format!("{url}: {why}")))?;
            if let Some(end) = found {
                preamble_done = true;
                to_lane.write_all(&head[end..]).await.map_err(gone)?;
                head = Vec::new();
            }
        }
        if !preamble_done {
            return Err(ExchangeError::NotSmartHttp(format!(
                "the forge's answer to {url} ended before `# service=git-receive-pack` and a flush (is it a git smart HTTP server?)"
            )));
        }
        to_lane.flush().await.map_err(gone)?;

        // The request: nothing, or a lone flush (nothing to push), sends no POST.
        let mut first = Vec::with_capacity(8);
        let mut byte = [0u8; 1];
        while first.len() < 5 {
            match from_lane.read(&mut byte).await.map_err(gone)? {
                0 => break,
                _ => first.push(byte[0]),
            }
        }
        if first.is_empty() || first == super::pkt::FLUSH {
            return Ok(());
        }
        let url = format!("{}/git-receive-pack", self.base);
        let body = Upload {
            first: Some(Bytes::from(first)),
            input: from_lane,
            buf: vec![0u8; PIPE_BYTES],
            aborted: self.aborted.clone(),
        };
        let response = self
            .client
            .post(&url)
            .basic_auth(&self.user, Some(self.token.as_str()))
            .header(reqwest::header::CONTENT_TYPE, REQUEST_TYPE)
            .header(reqwest::header::ACCEPT, RESULT_TYPE)
            .body(reqwest::Body::wrap(body))
            .send()
            .await
            .map_err(|e| describe(e, &url))?;
        let mut response = check(response, RESULT_TYPE, &url)?;
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(e, &url))? {
            to_lane.write_all(&chunk).await.map_err(gone)?;
        }
        to_lane.flush().await.map_err(gone)?;
        Ok(())
    }
}

/// The session went away (it stopped reading or writing).
fn gone(e: std::io::Error) -> ExchangeError {
    ExchangeError::Gone(e)
}

/// The client's error at `url` (the URL itself named once, not in the client's text).
fn describe(e: reqwest::Error, url: &str) -> ExchangeError {
    ExchangeError::Transport {
        url: url.to_string(),
        source: e.without_url(),
    }
}

/// The response when it is a success of the `want` media type.
fn check(
    response: reqwest::Response,
    want: &str,
    url: &str,
) -> Result<reqwest::Response, ExchangeError> {
    let status = response.status();
    let url = url.to_string();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        return Err(ExchangeError::Credential {
            url,
            status: status.as_u16(),
        });
    }
    if !status.is_success() {
        return Err(ExchangeError::Status {
            url,
            status: status.as_u16(),
        });
    }
    let given = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if given.split(';').next().map(str::trim) != Some(want) {
        return Err(ExchangeError::NotSmartHttp(format!(
            "the forge's answer to {url} is {given:?}, not {want}: not a git smart HTTP server"
        )));
    }
    Ok(response)
}

/// Why the `# service=` preamble is not git's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Preamble(String);

/// Where the advertisement starts in `head`, after the `# service=git-receive-pack` line,
/// any metadata lines and a flush (gitprotocol-http(5)); `None` when more is needed.
fn preamble(head: &[u8]) -> Result<Option<usize>, Preamble> {
    let mut at = 0;
    let mut first = true;
    loop {
        let Some(prefix) = head.get(at..at + 4) else {
            return more(head);
        };
        let mut four = [0u8; 4];
        four.copy_from_slice(prefix);
        let len = super::pkt::payload_len(&four).map_err(|e| Preamble(e.to_string()))?;
        let Some(len) = len else {
            if first {
                return Err(Preamble(
                    "the answer starts with a flush, not `# service=git-receive-pack`".into(),
                ));
            }
            return Ok(Some(at + 4));
        };
        let Some(line) = head.get(at + 4..at + 4 + len) else {
            return more(head);
        };
        if first {
            let text = line.strip_suffix(b"\n").unwrap_or(line);
            if text != b"# service=git-receive-pack" {
                return Err(Preamble(format!(
                    "the answer starts with {:?}, not `# service=git-receive-pack` (a server that is not git's smart HTTP?)",
                    String::from_utf8_lossy(text)
                )));
            }
            first = false;
        }
        at += 4 + len;
    }
}

/// `None` (read more) while the preamble is within its bound.
fn more(head: &[u8]) -> Result<Option<usize>, Preamble> {
    if head.len() > MAX_PREAMBLE_BYTES {
        Err(Preamble(format!(
            "no flush after `# service=git-receive-pack` within {MAX_PREAMBLE_BYTES} bytes"
        )))
    } else {
        Ok(None)
    }
}

/// The POST's body: the bytes the session writes, as they come. Its end is the writer
/// closing, unless the exchange was aborted: then it fails, and the request is dropped
/// before its end.
struct Upload {
    first: Option<Bytes>,
    input: DuplexStream,
    buf: Vec<u8>,
    aborted: Arc<AtomicBool>,
}

impl http_body::Body for Upload {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(first))));
        }
        let mut read = ReadBuf::new(&mut this.buf);
        match Pin::new(&mut this.input).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) if read.filled().is_empty() => {
                if this.aborted.load(Ordering::SeqCst) {
                    Poll::Ready(Some(Err(std::io::Error::other(
                        "the push was refused: its request is abandoned before its end",
                    ))))
                } else {
                    Poll::Ready(None)
                }
            }
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(http_body::Frame::data(
                Bytes::copy_from_slice(read.filled()),
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::target;

    #[test]
    fn an_https_forge_parses_with_its_user_or_the_default_one() {
        let f = target::Forge::parse("https://lanes@127.0.0.1:8443/git/").unwrap();
        assert_eq!(f.scheme, Scheme::Https);
        assert_eq!((f.user.as_str(), f.port), ("lanes", 8443));
        assert_eq!(f.prefix, "/git/");
        let f = target::Forge::parse("https://forge.example").unwrap();
        assert_eq!((f.user.as_str(), f.port), (DEFAULT_USER, 443));
        assert_eq!(f.prefix, "/");
        for bad in [
            "https://u:secret@forge/",
            "https://forge/?x=1",
            "https://forge/#x",
            "http://forge/",
        ] {
            assert!(target::Forge::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_configured_https_forge_is_resolved() {
        let forges = vec![
            target::Forge::parse("https://127.0.0.1:8443/git/").unwrap(),
            target::Forge::parse("ssh://git@127.0.0.1:2222/srv/").unwrap(),
        ];
        let t = target::resolve(&forges, "https://127.0.0.1:8443/git/app.git").unwrap();
        assert_eq!(t.repository, "/git/app.git");
        assert_eq!(repository_url(&t), "https://127.0.0.1:8443/git/app.git");
        let t = target::resolve(&forges, "https://someone@127.0.0.1:8443/git/app.git/").unwrap();
        assert_eq!(t.repository, "/git/app.git");
        for refused in [
            "https://127.0.0.1:8444/git/app.git",
            "https://127.0.0.2:8443/git/app.git",
            "https://127.0.0.1:8443/other/app.git",
            "https://127.0.0.1/git/app.git",
            "https://u:pw@127.0.0.1:8443/git/app.git",
            "https://127.0.0.1:8443/git/app.git?x",
            "https://127.0.0.1:8443/git/a%20b.git",
            "https://127.0.0.1:2222/srv/app.git",
            "http://127.0.0.1:8443/git/app.git",
        ] {
            assert!(target::resolve(&forges, refused).is_err(), "{refused}");
        }
        // An ssh URL never matches an HTTPS forge.
        let https_only = vec![target::Forge::parse("https://127.0.0.1:2222/srv/").unwrap()];
        assert!(target::resolve(&https_only, "ssh://git@127.0.0.1:2222/srv/app.git").is_err());
    }

    #[test]
    fn a_ca_that_cannot_be_read_or_holds_no_certificate_stops_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for ca in [&missing, &empty] {
            let err = Https::new(Some(ca), dir.path()).unwrap_err();
            assert!(matches!(err, HttpsError::Ca { .. }), "{err}");
            assert!(err.to_string().contains("--push-ca"), "{err}");
        }
        let ssh_only = vec![target::Forge::parse("ssh://git@forge/").unwrap()];
        assert!(
            Https::for_forges(&ssh_only, Some(&missing), dir.path())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_preamble_is_the_service_line_any_metadata_and_a_flush() {
        let head = b"001f# service=git-receive-pack\n0000004aabc";
        assert_eq!(preamble(head).unwrap(), Some(35));
        assert_eq!(preamble(&head[..20]).unwrap(), None);
        assert_eq!(preamble(&head[..34]).unwrap(), None);
        let meta = b"001e# service=git-receive-pack0008meta0000";
        assert_eq!(preamble(meta).unwrap(), Some(meta.len()));
        assert!(preamble(b"001e# service=git-upload-pack\n0000").is_err());
        assert!(preamble(b"0000").is_err());
        assert!(preamble(b"zzzz").is_err());
        let endless = [
            b"001e# service=git-receive-pack".as_slice(),
            &[b"0008abcd".as_slice(); 9000].concat(),
        ]
        .concat();
        assert!(preamble(&endless).is_err());
    }
}
