//! The forge API endpoint: the daemon as the lanes' GitHub API (docs/forge-api.md,
//! "Design"), on only when `--forge-api-socket` is given. A lane's `gh` (its config's
//! `http_unix_socket`) or any client that can speak HTTP to a Unix socket sends plain
//! HTTP here; the daemon judges each request, default deny, and re-originates the ones
//! it passes over TLS to the one upstream host fixed in its own configuration, with the
//! real token it holds in memory only. Reads pass for any bound lane; a write passes only
//! when it is a listed route or mutation ([`rest`], [`graphql`]) in the row's repository
//! and scope, for a lane whose row is ALLOWED by the same gate as an ask.
//!
//! # Layout
//! - [`graphql`]: what a GraphQL body asks (read, listed write, unlisted write).
//! - [`rest`]: the listed REST writes.
//! - [`lanes`]: the lanes' repositories and same-uid placeholders (`row-fence install gh`).
//! - [`scope`]: whether a head ref is in the row's scope.
//! - [`upstream`]: the one HTTPS client to the forge, and the lookups a judgement needs.
//! - [`judge`]: one request's judgement.
//! - [`serve`]: the socket's HTTP server: limits, identity, answers.
//! - [`admin`]: the token, loaded by the daemon's own uid over the control socket.
//! - here: the flags, the shared state and the socket.

pub mod admin;
pub mod graphql;
pub mod judge;
pub mod lanes;
pub mod rest;
pub mod scope;
pub mod serve;
pub mod target;
pub mod upstream;

use crate::socket::{self, SocketError, SocketGuard};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::AtomicU64;
use zeroize::Zeroizing;

/// The forge API's flags (off unless `--forge-api-socket` is given).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ForgeApiArgs {
    /// Serve the lanes' forge API (GitHub REST and GraphQL) on this Unix socket, judging every write [env: ROW_FENCE_FORGE_API_SOCKET]
    #[arg(long, value_name = "PATH")]
    pub forge_api_socket: Option<PathBuf>,
    /// The forge API host the token is for and the only one requests may name: api.github.com, or an enterprise host (its API under /api/v3 and /api/graphql) [env: ROW_FENCE_FORGE_API_HOST] [default: api.github.com]
    #[arg(long, value_name = "HOST")]
    pub forge_api_host: Option<String>,
    /// Test and enterprise option: trust only this CA (PEM) for the forge host instead of the system's roots [env: ROW_FENCE_FORGE_API_CA]
    #[arg(long, value_name = "FILE")]
    pub forge_api_ca: Option<PathBuf>,
    /// Test and enterprise option: connect to this address (IP:PORT) for the forge host instead of resolving it; TLS still verifies the host's name [env: ROW_FENCE_FORGE_API_CONNECT]
    #[arg(long, value_name = "ADDR")]
    pub forge_api_connect: Option<String>,
}

impl ForgeApiArgs {
    /// The settings, or `None` when no socket is set (the forge API is off).
    pub fn settings(&self) -> Option<Settings> {
        let socket =
            crate::config::flag_or_env(&self.forge_api_socket, "ROW_FENCE_FORGE_API_SOCKET")?;
        Some(Settings {
            socket,
            host: crate::config::flag_or_env(&self.forge_api_host, "ROW_FENCE_FORGE_API_HOST")
                .unwrap_or_else(|| DEFAULT_HOST.to_string()),
            ca: crate::config::flag_or_env(&self.forge_api_ca, "ROW_FENCE_FORGE_API_CA"),
            connect: crate::config::flag_or_env(
                &self.forge_api_connect,
                "ROW_FENCE_FORGE_API_CONNECT",
            ),
        })
    }
}

/// github.com's API host.
pub const DEFAULT_HOST: &str = "api.github.com";

/// Where the forge API listens and where it sends what it passes.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The socket a lane's gh `http_unix_socket` names.
    pub socket: PathBuf,
    /// The upstream host (the token's), and the `Host` every request must name.
    pub host: String,
    /// A CA to trust instead of the system's roots (tests, enterprise).
    pub ca: Option<PathBuf>,
    /// An address to dial for the host instead of resolving it (tests).
    pub connect: Option<String>,
}

impl Settings {
    /// The REST API's path prefix on this host: none on api.github.com, `/api/v3` on an
    /// enterprise host.
    pub fn rest_prefix(&self) -> &'static str {
        if self.host.eq_ignore_ascii_case(DEFAULT_HOST) {
            ""
        } else {
            "/api/v3"
        }
    }

    /// The GraphQL endpoint's path on this host.
    pub fn graphql_path(&self) -> &'static str {
        if self.host.eq_ignore_ascii_case(DEFAULT_HOST) {
            "/graphql"
        } else {
            "/api/graphql"
        }
    }
}

/// Why the forge API did not start; the daemon does not start either.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeApiError {
    /// A setting that does not parse.
    #[error("the forge API's {name}: {reason}")]
    Setting {
        /// The setting.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The HTTPS client to the forge cannot be built (the setting at fault, and why).
    #[error("the forge API's {setting}: {source}", setting = .0.setting(), source = .0)]
    Client(#[from] upstream::ClientError),
    /// The process cannot be made undumpable (the token would be readable in a core file
    /// or through `/proc`).
    #[error("the forge API's process hardening: cannot make the process undumpable: {0}")]
    Harden(#[source] std::io::Error),
    /// The socket's directory or path is refused, or binding failed.
    #[error("the forge API's socket: {0}")]
    Socket(#[from] SocketError),
    /// The socket could not be opened to the lanes.
    #[error("the forge API's socket {path}: {source}")]
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Counters since start, for `status` and `health --prometheus`.
#[derive(Debug, Default)]
pub struct ForgeStats {
    /// Requests passed to the forge (reads and allowed writes).
    pub passed: AtomicU64,
    /// Requests refused (writes not allowed, unbound peers, bad requests).
    pub refused: AtomicU64,
}

/// What every connection shares.
pub struct Shared {
    /// The settings.
    pub settings: Settings,
    /// The real token: in this process's memory only, wiped when replaced or dropped.
    pub token: RwLock<Option<Zeroizing<String>>>,
    /// The HTTPS client to the upstream host (no redirect followed).
    pub upstream: upstream::Upstream,
    /// The daemon's home (the lanes file, the audit log).
    pub home: PathBuf,
    /// Counters.
    pub stats: ForgeStats,
}

impl Shared {
    /// The status object's forge API part.
    pub fn status(&self) -> row_fence_contract::status::ForgeApiStatus {
        use std::sync::atomic::Ordering::Relaxed;
        row_fence_contract::status::ForgeApiStatus {
            socket: self.settings.socket.display().to_string(),
            host: self.settings.host.clone(),
            token: crate::sync::read(&self.token).is_some(),
            passed: self.stats.passed.load(Relaxed),
            refused: self.stats.refused.load(Relaxed),
        }
    }
}

/// The forge API before the daemon serves: client built, socket bound.
pub struct Prepared {
    /// The shared state.
    pub shared: std::sync::Arc<Shared>,
    /// The bound socket.
    pub listener: std::os::unix::net::UnixListener,
    /// Unlinks the socket at exit if it is still ours.
    pub guard: SocketGuard,
}

/// Builds the client and binds the socket (0666 in a directory only the daemon writes:
/// lanes of other uids connect, and the peer decides every request).
pub fn prepare(settings: &Settings, home: &Path) -> Result<Prepared, ForgeApiError> {
    if !valid_host(&settings.host) {
        return Err(ForgeApiError::Setting {
            name: "host",
            reason: format!("{:?} is not a host name", settings.host),
        });
    }
    // The token will be in this process's memory and nowhere else: no core file, no
    // ptrace or /proc/<pid>/mem for the daemon's own uid's other processes.
    crate::broker::harden().map_err(ForgeApiError::Harden)?;
    let upstream = upstream::Upstream::new(
        &settings.host,
        settings.ca.as_deref(),
        settings.connect.as_deref(),
    )?;
    crate::broker::prepare_dir(&settings.socket)?;
    let (listener, guard) = socket::bind(&settings.socket)?;
    let opened = std::fs::set_permissions(&settings.socket, std::fs::Permissions::from_mode(0o666))
        .and_then(|_| listener.set_nonblocking(true));
    if let Err(source) = opened {
        guard.remove_if_ours();
        return Err(ForgeApiError::Listen {
            path: settings.socket.clone(),
            source,
        });
    }
    Ok(Prepared {
        shared: std::sync::Arc::new(Shared {
            settings: settings.clone(),
            token: RwLock::new(None),
            upstream,
            home: home.to_path_buf(),
            stats: ForgeStats::default(),
        }),
        listener,
        guard,
    })
}

/// A DNS name: letters, digits, `-`, `.`, at most 253 bytes, no port.
fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}
