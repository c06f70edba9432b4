//! `git http-backend` (git's own smart-http server, a CGI program) behind a real HTTP/1.1
//! server (hyper) on a loopback port, with basic auth: git speaks its real protocol to it,
//! gets a 401 until it sends `lane:secret`, asks its credential helpers for them, and
//! pushes through it. Stopped when dropped.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The user the server takes.
pub const USER: &str = "lane";
/// Its password.
pub const PASSWORD: &str = "secret";
/// `Basic base64("lane:secret")`.
const AUTHORIZATION: &str = "Basic bGFuZTpzZWNyZXQ=";

/// A running server; its repositories are the bare repositories under `root`.
pub struct HttpGit {
    pub port: u16,
    runtime: Option<tokio::runtime::Runtime>,
}

impl HttpGit {
    /// Serves the repositories under `root` on a free loopback port.
    pub fn start(root: &Path) -> HttpGit {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind a loopback port");
        let port = listener.local_addr().expect("local addr").port();
        let root = root.to_path_buf();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let root = root.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| cgi(request, root.clone()));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        HttpGit {
            port,
            runtime: Some(runtime),
        }
    }

    /// The URL of repository `name` (e.g. `r.git`).
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for HttpGit {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One request: 401 without the right basic auth, else `git http-backend` as CGI.
async fn cgi(
    request: Request<Incoming>,
    root: PathBuf,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if header("authorization").as_deref() != Some(AUTHORIZATION) {
        return Ok(Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Basic realm=\"git\"")
            .body(Full::new(Bytes::new()))
            .expect("a response"));
    }
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let content_type = header("content-type").unwrap_or_default();
    let encoding = header("content-encoding");
    let protocol = header("git-protocol");
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(status(StatusCode::BAD_REQUEST)),
    };
    let mut extra = Vec::new();
    if let Some(encoding) = encoding {
        extra.push(("HTTP_CONTENT_ENCODING", encoding));
    }
    if let Some(protocol) = protocol {
        extra.push(("GIT_PROTOCOL", protocol));
    }
    let cgi = Cgi {
        method: &method,
        path: &path,
        query: &query,
        content_type: &content_type,
        user: USER,
        extra: &extra,
    };
    Ok(http_backend(&root, cgi, body).await)
}

/// One request as `git http-backend` takes it (CGI variables).
pub(crate) struct Cgi<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub content_type: &'a str,
    /// The authenticated user (`REMOTE_USER`).
    pub user: &'a str,
    /// More variables (`HTTP_CONTENT_ENCODING`, `GIT_PROTOCOL`).
    pub extra: &'a [(&'a str, String)],
}

/// Runs the real `git http-backend` over `root` as CGI for one request, its body fed while its output is read, and answers what it printed.
pub(crate) async fn http_backend(root: &Path, cgi: Cgi<'_>, body: Bytes) -> Response<Full<Bytes>> {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", cgi.method)
        .env("PATH_INFO", cgi.path)
        .env("QUERY_STRING", cgi.query)
        .env("CONTENT_TYPE", cgi.content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", cgi.user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .envs(cgi.extra.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let Ok(mut child) = command.spawn() else {
        return status(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let mut stdin = child.stdin.take().expect("stdin");
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let mut output = Vec::new();
    let mut stdout = child.stdout.take().expect("stdout");
    let _ = stdout.read_to_end(&mut output).await;
    let _ = feed.await;
    let _ = child.wait().await;
    cgi_response(&output)
}

/// Turns a CGI program's output (headers, a blank line, the body) into a response.
pub(crate) fn cgi_response(output: &[u8]) -> Response<Full<Bytes>> {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        });
    let Some((at, gap)) = split else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut response = Response::builder().status(StatusCode::OK);
    for line in String::from_utf8_lossy(&output[..at]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split(' ').next().and_then(|c| c.parse().ok());
            response = response.status(code.unwrap_or(500));
        } else {
            response = response.header(name.trim(), value);
        }
    }
    response
        .body(Full::new(Bytes::copy_from_slice(&output[at + gap..])))
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

/// An empty response with `code`.
pub(crate) fn status(code: StatusCode) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .body(Full::new(Bytes::new()))
        .expect("a response")
}
