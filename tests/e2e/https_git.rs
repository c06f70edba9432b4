//! `git http-backend` (git's smart-HTTP server, run as CGI) behind a real HTTPS server
//! (hyper over rustls) on a loopback port, with basic auth: the push proxy's HTTPS forge
//! (ARCHITECTURE.md, "Push proxy"). Its certificate is signed by a CA made here with the
//! openssl CLI (an IP SAN of 127.0.0.1); a second CA signs nothing it serves. Every request
//! is recorded, with whether its body arrived whole: a request dropped in the middle of
//! its body never reaches `git http-backend`. A gate can hold a POST's body unread until
//! the test releases it. Stopped when dropped.

use crate::http_git::{Cgi, http_backend, status};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The basic-auth user the server takes.
pub const USER: &str = "pusher";

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET` or `POST`.
    pub method: String,
    /// Its path and query.
    pub target: String,
    /// Its `Authorization` was the right one.
    pub authorized: bool,
    /// Its body arrived whole (`false`: the client dropped it before its end).
    pub whole: bool,
}

/// What the server's tasks share.
struct State {
    root: PathBuf,
    authorization: String,
    seen: Mutex<Vec<Seen>>,
    posts: AtomicUsize,
    /// POSTs wait for [`HttpsGit::release`] before their body is read.
    hold: AtomicBool,
    gate: tokio::sync::Semaphore,
}

/// A running server over the bare repositories under `root`.
pub struct HttpsGit {
    /// Its loopback port.
    pub port: u16,
    /// The CA its certificate is signed by (PEM).
    pub ca: PathBuf,
    /// A CA that signed nothing it serves (PEM).
    pub other_ca: PathBuf,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl HttpsGit {
    /// Makes the certificates in `dir` and serves `root` to `USER` with `token`.
    pub fn start(dir: &Path, root: &Path, token: &str) -> HttpsGit {
        let (ca, cert, key) = certificates(dir, "ca", true);
        let (other_ca, _, _) = certificates(dir, "other", false);
        let acceptor = crate::forge_standin::tls_acceptor(&cert, &key);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let state = Arc::new(State {
            root: root.to_path_buf(),
            authorization: format!("Basic {}", base64(format!("{USER}:{token}").as_bytes())),
            seen: Mutex::new(Vec::new()),
            posts: AtomicUsize::new(0),
            hold: AtomicBool::new(false),
            gate: tokio::sync::Semaphore::new(0),
        });
        let shared = state.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let state = shared.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |request| serve(request, state.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        HttpsGit {
            port,
            ca,
            other_ca,
            state,
            runtime: Some(runtime),
        }
    }

    /// `https://127.0.0.1:<port>/`.
    pub fn base(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// From now on, a POST's body is read only after [`Self::release`].
    pub fn hold_posts(&self) {
        self.state.hold.store(true, Ordering::SeqCst);
    }

    /// How many POSTs arrived (their headers; bodies perhaps not yet read).
    pub fn posts_started(&self) -> usize {
        self.state.posts.load(Ordering::SeqCst)
    }

    /// Lets one held POST be read, and stops holding.
    pub fn release(&self) {
        self.state.hold.store(false, Ordering::SeqCst);
        self.state.gate.add_permits(1);
    }
}

impl Drop for HttpsGit {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One request: 401 without the right basic auth, else `git http-backend` as CGI.
async fn serve(
    request: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let authorized = header("authorization").as_deref() == Some(state.authorization.as_str());
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let content_type = header("content-type").unwrap_or_default();
    if method == "POST" {
        state.posts.fetch_add(1, Ordering::SeqCst);
        if state.hold.load(Ordering::SeqCst) {
            let _ = state.gate.acquire().await.map(|p| p.forget());
        }
    }
    let body = request.into_body().collect().await.map(|b| b.to_bytes());
    state.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        target,
        authorized,
        whole: body.is_ok(),
    });
    let Ok(body) = body else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    if !authorized {
        return Ok(Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Basic realm=\"git\"")
            .body(Full::new(Bytes::new()))
            .expect("a response"));
    }
    let cgi = Cgi {
        method: &method,
        path: &path,
        query: &query,
        content_type: &content_type,
        user: USER,
        extra: &[],
    };
    Ok(http_backend(&state.root, cgi, body).await)
}

/// Standard base64 with padding (basic auth's).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A CA named `name` in `dir` and, when `serve`, a certificate for 127.0.0.1 it signed
/// (P-256, 2 days): the CA's PEM, the server's certificate and key.
fn certificates(dir: &Path, name: &str, serve: bool) -> (PathBuf, PathBuf, PathBuf) {
    let p = |file: &str| dir.join(format!("{name}-{file}"));
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
    let subject = format!("/CN=row-fence push test CA {name}");
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend(["-subj", &subject]);
    openssl(&ca, &[("-keyout", p("ca.key")), ("-out", p("ca.pem"))]);
    if serve {
        std::fs::write(
            p("server.ext"),
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("server.ext");
        let mut req = vec!["req", "-nodes"];
        req.extend(ec);
        req.extend(["-subj", "/CN=127.0.0.1"]);
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
    }
    (p("ca.pem"), p("server.pem"), p("server.key"))
}

#[test]
fn base64_is_the_standard_alphabet_with_padding() {
    assert_eq!(base64(b"lane:secret"), "bGFuZTpzZWNyZXQ=");
    assert_eq!(base64(b"ab"), "YWI=");
    assert_eq!(base64(b"abc"), "YWJj");
}
