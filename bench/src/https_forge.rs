//! The push case's HTTPS forge: `git http-backend` (git's smart-HTTP server) run as CGI
//! behind a real web server from the system's packages, lighttpd, on a loopback port with
//! TLS (`mod_openssl`, a certificate made for the run by [`crate::certs`] with an IP SAN
//! of 127.0.0.1) and basic auth (`mod_auth` with one user and the run's token as its
//! password; lighttpd hands the user to the CGI as `REMOTE_USER`, which `git http-backend`
//! needs before it takes a push).
//!
//! HTTP/1.1 only: the daemon's client speaks nothing else, so a direct git on HTTP/2 would
//! be another protocol (and git's large push over HTTP/2 to lighttpd 1.4.69 fails with
//! curl's error 92, a stream error in the framing layer).
//!
//! Everything lives in the run's temp dir: the configuration, the users file, the
//! repositories (`GIT_PROJECT_ROOT`), lighttpd's request-body spool and its error log.
//! The server is an [`Owned`] child: stopped when this value is dropped.

use crate::children::Owned;
use crate::local::{free_port, io, log, text, wait_for, which};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The basic-auth user the server takes (the token is its password).
pub const USER: &str = "pusher";

/// The URL path the repositories are served under.
const PREFIX: &str = "/git/";

/// A running lighttpd in front of `git http-backend`.
pub struct HttpsForge {
    /// Its loopback port.
    pub port: u16,
    /// The CA its certificate is signed by (PEM): the only one either arm trusts.
    pub ca: PathBuf,
    /// The password of [`USER`]: the forge's token for the run.
    pub token: String,
    /// `lighttpd -v`'s first line, for the report.
    pub version: String,
    _server: Owned,
}

impl HttpsForge {
    /// Starts lighttpd in `dir` (made here) serving the bare repositories under `repos`.
    /// `Err` says why the HTTPS forge cannot be had (no lighttpd, no `mod_openssl`, no
    /// `git http-backend`): the case's HTTPS row is then absent, with that reason.
    pub fn start(dir: &Path, repos: &Path) -> Result<HttpsForge, String> {
        let lighttpd = lighttpd()?;
        let backend = http_backend()?;
        fs::create_dir_all(dir).map_err(io("the HTTPS forge's dir"))?;
        let certs = crate::certs::make(dir)?;
        let token = token()?;
        let users = dir.join("users");
        fs::write(&users, format!("{USER}:{token}\n")).map_err(io("the users file"))?;
        let spool = dir.join("spool");
        let docroot = dir.join("www");
        for d in [&spool, &docroot] {
            fs::create_dir_all(d).map_err(io("the HTTPS forge's dirs"))?;
        }
        let port = free_port()?;
        let config = dir.join("lighttpd.conf");
        fs::write(
            &config,
            format!(
                r#"server.modules = ("mod_openssl", "mod_auth", "mod_authn_file", "mod_alias", "mod_setenv", "mod_cgi")
server.bind = "127.0.0.1"
server.port = {port}
server.document-root = "{docroot}"
server.upload-dirs = ("{spool}")
server.errorlog = "{errorlog}"
server.feature-flags = ("server.h2proto" => "disable")
ssl.engine = "enable"
ssl.pemfile = "{cert}"
ssl.privkey = "{key}"
auth.backend = "plain"
auth.backend.plain.userfile = "{users}"
auth.require = ("{PREFIX}" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
alias.url = ("{PREFIX}" => "{backend}/")
cgi.assign = ("" => "")
setenv.set-environment = ("GIT_PROJECT_ROOT" => "{repos}", "GIT_HTTP_EXPORT_ALL" => "")
"#,
                docroot = text(&docroot),
                spool = text(&spool),
                errorlog = text(&dir.join("error.log")),
                cert = text(&certs.server_cert),
                key = text(&certs.server_key),
                users = text(&users),
                backend = text(&backend),
                repos = text(repos),
            ),
        )
        .map_err(io("lighttpd.conf"))?;
        let version = version(&lighttpd);
        let mut server = Owned::spawn(
            Command::new(&lighttpd)
                .arg("-D")
                .arg("-f")
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(log(&dir.join("lighttpd.log"))?),
            "lighttpd",
            Duration::from_secs(2),
        )?;
        let up = wait_for("lighttpd", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if let Err(e) = up.and_then(|()| server.check_alive()) {
            let said = [dir.join("lighttpd.log"), dir.join("error.log")]
                .iter()
                .filter_map(|f| fs::read_to_string(f).ok())
                .collect::<Vec<_>>()
                .join(" ");
            return Err(format!(
                "{e}: {} (lighttpd needs mod_openssl, mod_auth, mod_cgi and mod_setenv)",
                said.trim()
            ));
        }
        Ok(HttpsForge {
            port,
            ca: certs.ca,
            token,
            version,
            _server: server,
        })
    }

    /// `https://127.0.0.1:PORT/git/`: the forge's base URL, no user.
    pub fn base(&self) -> String {
        format!("https://127.0.0.1:{}{PREFIX}", self.port)
    }

    /// The repository `name` (`daemon.git`) on this forge, no user.
    pub fn url(&self, name: &str) -> String {
        format!("{}{name}", self.base())
    }

    /// The daemon's `--push-forge`: the base URL with [`USER`] in it.
    pub fn forge_flag(&self) -> String {
        format!("https://{USER}@127.0.0.1:{}{PREFIX}", self.port)
    }

    /// `Authorization: Basic …` of [`USER`] and the token: what a direct git sends with
    /// every request (`http.extraHeader`), so it pays no 401 round and runs no helper.
    pub fn authorization(&self) -> String {
        format!(
            "Authorization: Basic {}",
            base64(format!("{USER}:{}", self.token).as_bytes())
        )
    }
}

/// lighttpd's path: on PATH, else where Debian puts it (not on a user's PATH).
fn lighttpd() -> Result<PathBuf, String> {
    which("lighttpd").or_else(|_| {
        let p = PathBuf::from("/usr/sbin/lighttpd");
        if p.is_file() {
            Ok(p)
        } else {
            Err("lighttpd is not installed (scripts/bench installs it: apt-get install lighttpd lighttpd-mod-openssl, or brew install lighttpd)".to_string())
        }
    })
}

/// `git http-backend`'s path, in git's exec path.
fn http_backend() -> Result<PathBuf, String> {
    let out = Command::new("git")
        .arg("--exec-path")
        .stdin(Stdio::null())
        .output()
        .map_err(io("git --exec-path"))?;
    let backend =
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("git-http-backend");
    if out.status.success() && backend.is_file() {
        Ok(backend)
    } else {
        Err(format!("git http-backend is not at {}", backend.display()))
    }
}

/// `lighttpd -v`'s first line (empty when it says nothing).
fn version(lighttpd: &Path) -> String {
    Command::new(lighttpd)
        .arg("-v")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// A fresh token for the run: 20 random bytes, hex.
fn token() -> Result<String, String> {
    use std::io::Read;
    let mut bytes = [0u8; 20];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io("/dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Standard base64 with padding (RFC 4648), for the basic-auth header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("pusher:tok", "cHVzaGVyOnRvaw=="),
            ("\u{ff}\u{fe}", "w7/Dvg=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
    }
}
