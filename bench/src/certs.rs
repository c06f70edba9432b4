//! The TLS material of the `rediss://` cases, made fresh each run with the `openssl` CLI:
//! a self-signed CA, a server certificate it signs for `127.0.0.1` and `localhost`
//! (P-256, valid 2 days), and a trust bundle for the clients.
//!
//! Every TLS client verifies the server against the bundle, none skips verification:
//! the bundle is the system's CA file with the bench's CA appended, so each cold client
//! also pays for loading a full trust store on every connect, as it would against a
//! server with a public certificate. Rust clients get it as `SSL_CERT_FILE`, redis-cli as
//! `--cacert`, Python as `ssl_ca_certs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the system's CA file is looked for, first found wins (Debian/Ubuntu, Fedora,
/// Alpine, macOS with Homebrew's OpenSSL).
const SYSTEM_CA_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// Paths of the files made.
#[derive(Clone, Debug)]
pub struct Certs {
    /// The bench's CA certificate (PEM).
    pub ca: PathBuf,
    /// The server's certificate (PEM), for `--tls-cert-file`.
    pub server_cert: PathBuf,
    /// The server's private key (PEM), for `--tls-key-file`.
    pub server_key: PathBuf,
    /// The clients' trust: the system CA file (when found) plus the bench's CA (PEM).
    pub bundle: PathBuf,
    /// Whether the bundle holds the system's CAs too (for the report).
    pub with_system_cas: bool,
}

/// Makes the CA, the server certificate and the bundle in `dir`. `Err` (the TLS cases
/// are then skipped with the reason) when `openssl` is missing or fails.
pub fn make(dir: &Path) -> Result<Certs, String> {
    let p = |name: &str| dir.join(name);
    let ext = p("server.ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n\
         basicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\n\
         extendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("{}: {e}", ext.display()))?;
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    openssl(
        &[
            &["req", "-x509", "-nodes", "-days", "2"],
            &ec[..],
            &["-subj", "/CN=row-fence bench CA"],
        ],
        &[("-keyout", &p("ca.key")), ("-out", &p("ca.pem"))],
    )?;
    openssl(
        &[&["req", "-nodes"], &ec[..], &["-subj", "/CN=127.0.0.1"]],
        &[("-keyout", &p("server.key")), ("-out", &p("server.csr"))],
    )?;
    openssl(
        &[&["x509", "-req", "-days", "2", "-set_serial", "1"]],
        &[
            ("-in", &p("server.csr")),
            ("-CA", &p("ca.pem")),
            ("-CAkey", &p("ca.key")),
            ("-extfile", &ext),
            ("-out", &p("server.pem")),
        ],
    )?;
    let ca_pem = std::fs::read(p("ca.pem")).map_err(|e| format!("ca.pem: {e}"))?;
    let system = SYSTEM_CA_FILES
        .iter()
        .find_map(|f| std::fs::read(f).ok())
        .unwrap_or_default();
    let mut bundle = system.clone();
    if !bundle.is_empty() && !bundle.ends_with(b"\n") {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(&ca_pem);
    std::fs::write(p("bundle.pem"), bundle).map_err(|e| format!("bundle.pem: {e}"))?;
    Ok(Certs {
        ca: p("ca.pem"),
        server_cert: p("server.pem"),
        server_key: p("server.key"),
        bundle: p("bundle.pem"),
        with_system_cas: !system.is_empty(),
    })
}

fn openssl(args: &[&[&str]], files: &[(&str, &Path)]) -> Result<(), String> {
    let mut cmd = Command::new("openssl");
    for group in args {
        cmd.args(*group);
    }
    for (flag, path) in files {
        cmd.arg(flag).arg(path);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("openssl is needed for the TLS cases: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {:?} failed: {}",
            args.first().and_then(|a| a.first()),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
