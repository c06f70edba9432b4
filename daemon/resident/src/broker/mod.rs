//! The key broker: the daemon as the lanes' ssh agent (ARCHITECTURE.md, "Key broker").
//! It holds the push keys in memory and signs only for a lane whose verdict is ALLOWED at
//! the moment of signing; the lane is the one bound to the peer's uid, never what the
//! peer says. A lane that is refused has no signature to push with, whatever command it
//! runs, because no route it can take holds the key.
//!
//! # Layout
//! - [`keys`]: the keys, from files private to the daemon's uid or `row-fence keys add`.
//! - [`forges`]: the forges' host keys and users a signature may log in to.
//! - [`destination`]: one connection's `session-bind@openssh.com`, and what it permits.
//! - [`userauth`]: the one thing signed, a publickey login request, parsed.
//! - [`lanes`]: the uid → lane bindings (an operator's file, `row-fence lane add`).
//! - [`bound`]: a bound lane's lease, read now and checked against its binding.
//! - [`writable`]: who can change a path (uids, groups, sticky directories).
//! - [`conn`]: the socket's accept loop and framing, bounded per peer.
//! - [`agent`]: one connection's ssh-agent session, deciding by the peer's uid.
//! - [`lease`]: a bound lane's renew and release, asked on the broker socket.
//! - [`forge_check`]: a forge's pre-receive hook asking about a lane's push, at the write.
//! - [`admin`]: the daemon's own uid's key and lane changes, asked on the control socket.
//! - here: the flags, the process hardening, the socket and the serving loop.

pub mod acl;
pub mod admin;
pub mod agent;
pub mod bound;
pub mod conn;
pub mod destination;
pub mod forge_check;
pub mod forges;
pub mod keys;
pub mod lanes;
pub mod lease;
pub mod userauth;
pub mod writable;

use crate::judge::Judge;
use crate::socket::{self, SocketError, SocketGuard};
use crate::sync::{lock, read, write};
use forges::{ForgeError, Forges};
use keys::{Held, KeyError, PushKeys};
use lanes::{Lanes, LanesError};
use row_fence_contract::paths;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// A sign request's judging budget, in ms: ssh waits for its agent, so this is as long
/// as an ask may take, not the asker's few-ms hot path.
pub const SIGN_DEADLINE_MS: u64 = 5_000;

/// The broker's flags (off unless `--broker-socket` is given).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BrokerArgs {
    /// Serve the ssh-agent protocol on this socket, signing only for ALLOWED lanes [env: ROW_FENCE_BROKER_SOCKET]
    #[arg(long, value_name = "PATH")]
    pub broker_socket: Option<PathBuf>,
    /// A push key (an unencrypted OpenSSH Ed25519 or RSA private key, mode 600, owned by the daemon's uid); repeatable [env: ROW_FENCE_BROKER_KEYS, comma-separated]
    #[arg(long = "broker-key", value_name = "FILE")]
    pub broker_keys: Vec<PathBuf>,
    /// A push key of one lane, `LANE=FILE` (same rules as --broker-key): listed and signed for that lane's uid only, so the forge can map the key to the lane (docs/forge.md); repeatable [env: ROW_FENCE_BROKER_LANE_KEYS, comma-separated]
    #[arg(long = "broker-lane-key", value_name = "LANE=FILE", value_parser = parse_lane_key)]
    pub broker_lane_keys: Vec<(String, PathBuf)>,
    /// A read key (same rules), signed for any peer so a refused lane can still fetch: the forge must let it only fetch; repeatable [env: ROW_FENCE_BROKER_READ_KEYS, comma-separated]
    #[arg(long = "broker-read-key", value_name = "FILE")]
    pub broker_read_keys: Vec<PathBuf>,
    /// The uid → lane bindings (TOML `[[lane]] lane, uid, descriptor, board, row`, each `lane` required), as `row-fence lane add` writes them [env: ROW_FENCE_BROKER_LANES] [default: $ROW_FENCE_HOME/broker/lanes.toml]
    #[arg(long, value_name = "FILE")]
    pub broker_lanes: Option<PathBuf>,
    /// A forge's ssh host key (its .pub, or known_hosts lines as `ssh-keyscan` prints them): the broker signs only a login to a server that proves it holds one; repeatable, at least one [env: ROW_FENCE_BROKER_FORGE_HOST_KEYS, comma-separated]
    #[arg(long = "broker-forge-host-key", value_name = "FILE")]
    pub broker_forge_host_keys: Vec<PathBuf>,
    /// The user a login to the forge may be for; repeatable [env: ROW_FENCE_BROKER_FORGE_USERS, comma-separated] [default: git]
    #[arg(long = "broker-forge-user", value_name = "USER")]
    pub broker_forge_users: Vec<String>,
    /// The longest lease time a lane may renew its own lease for through the daemon (`row-fence renew --via-daemon`), e.g. 8h, at most 366d [env: ROW_FENCE_BROKER_RENEW_MAX] [default: 12h]
    #[arg(long, value_name = "DURATION", value_parser = parse_renew_max)]
    pub broker_renew_max: Option<u64>,
}

/// `--broker-lane-key LANE=FILE`: a valid lane name, then the key file.
fn parse_lane_key(text: &str) -> Result<(String, PathBuf), SettingError> {
    let (lane, file) = text
        .split_once('=')
        .ok_or_else(|| SettingError::NotLaneFile {
            text: text.to_string(),
        })?;
    row_fence_contract::descriptor::validate_lane(lane)?;
    if file.is_empty() {
        return Err(SettingError::NoKeyFile {
            text: text.to_string(),
        });
    }
    Ok((lane.to_string(), PathBuf::from(file)))
}

/// `--broker-renew-max`: a duration (`humantime`), in ms, from 1 ms to 366 days.
fn parse_renew_max(text: &str) -> Result<u64, SettingError> {
    let ms = humantime::parse_duration(text)
        .map_err(|source| SettingError::NotDuration {
            text: text.to_string(),
            source,
        })?
        .as_millis();
    if ms == 0 || ms > u128::from(lease::MAX_TTL_MS) {
        return Err(SettingError::OutOfRange {
            text: text.to_string(),
        });
    }
    Ok(ms as u64)
}

/// Why a broker setting given as text does not parse.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// A lane key without `=`.
    #[error("{text:?} is not LANE=FILE")]
    NotLaneFile {
        /// The text given.
        text: String,
    },
    /// A lane key's lane is no lane name.
    #[error(transparent)]
    Lane(#[from] row_fence_contract::descriptor::InvalidName),
    /// A lane key without a file.
    #[error("{text:?} names no key file")]
    NoKeyFile {
        /// The text given.
        text: String,
    },
    /// Not a duration.
    #[error("{text:?} is not a duration such as 8h or 2d: {source}")]
    NotDuration {
        /// The text given.
        text: String,
        /// humantime's reason.
        #[source]
        source: humantime::DurationError,
    },
    /// A renew limit outside 1 ms to 366 days.
    #[error("{text} is not within 1 ms and 366 days")]
    OutOfRange {
        /// The text given.
        text: String,
    },
}

impl BrokerArgs {
    /// The broker's settings, or `None` when no broker socket is set (the broker is off).
    pub fn settings(&self) -> Option<Settings> {
        let socket = crate::config::flag_or_env(&self.broker_socket, "ROW_FENCE_BROKER_SOCKET")?;
        let list = |flag: &Vec<PathBuf>, var: &str| -> Vec<PathBuf> {
            if !flag.is_empty() {
                return flag.clone();
            }
            std::env::var(var)
                .unwrap_or_default()
                .split(',')
                .filter(|k| !k.is_empty())
                .map(PathBuf::from)
                .collect()
        };
        let users = if self.broker_forge_users.is_empty() {
            std::env::var("ROW_FENCE_BROKER_FORGE_USERS")
                .unwrap_or_default()
                .split(',')
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect()
        } else {
            self.broker_forge_users.clone()
        };
        let renew_max = match self.broker_renew_max {
            Some(ms) => Ok(ms),
            None => match std::env::var("ROW_FENCE_BROKER_RENEW_MAX") {
                Ok(text) if !text.is_empty() => parse_renew_max(&text),
                _ => Ok(lease::DEFAULT_RENEW_MAX_MS),
            },
        };
        let lane_keys = if self.broker_lane_keys.is_empty() {
            std::env::var("ROW_FENCE_BROKER_LANE_KEYS")
                .unwrap_or_default()
                .split(',')
                .filter(|k| !k.is_empty())
                .map(parse_lane_key)
                .collect()
        } else {
            Ok(self.broker_lane_keys.clone())
        };
        Some(Settings {
            socket,
            keys: list(&self.broker_keys, "ROW_FENCE_BROKER_KEYS"),
            lane_keys,
            read_keys: list(&self.broker_read_keys, "ROW_FENCE_BROKER_READ_KEYS"),
            lanes: crate::config::flag_or_env(&self.broker_lanes, "ROW_FENCE_BROKER_LANES"),
            forge_host_keys: list(
                &self.broker_forge_host_keys,
                "ROW_FENCE_BROKER_FORGE_HOST_KEYS",
            ),
            forge_users: users,
            renew_max_ms: renew_max,
        })
    }
}

/// Where the broker's socket, keys and bindings are.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The agent socket lanes point `SSH_AUTH_SOCK` / `IdentityAgent` at.
    pub socket: PathBuf,
    /// The push key files.
    pub keys: Vec<PathBuf>,
    /// Push key files of one lane each; an `ROW_FENCE_BROKER_LANE_KEYS` that does not parse
    /// is kept as its error, so the daemon refuses to start on it.
    pub lane_keys: Result<Vec<(String, PathBuf)>, SettingError>,
    /// The read key files (fetch only, enforced by the forge).
    pub read_keys: Vec<PathBuf>,
    /// The bindings file; `None`: the home's ([`lanes::default_path`]), where a missing
    /// file binds no uid (nothing is signed until `row-fence lane add`).
    pub lanes: Option<PathBuf>,
    /// The forges' host key files ([`forges`]): at least one.
    pub forge_host_keys: Vec<PathBuf>,
    /// The users a login may be for (none: `git`).
    pub forge_users: Vec<String>,
    /// The longest renew a lane may ask for, in ms; an `ROW_FENCE_BROKER_RENEW_MAX` that
    /// does not parse is kept as its error, so the daemon refuses to start on it.
    pub renew_max_ms: Result<u64, SettingError>,
}

/// Why the broker did not start; the daemon does not start either (a broker that is
/// asked for and not there would leave lanes pushing with whatever else they have).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The process could not be made undumpable or its core files turned off.
    #[error("the key broker cannot protect its memory: {0}")]
    Harden(std::io::Error),
    /// A key file was refused.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The bindings were refused.
    #[error(transparent)]
    Lanes(#[from] LanesError),
    /// The forges' allowlist was refused.
    #[error(transparent)]
    Forge(#[from] ForgeError),
    /// A setting that does not parse.
    #[error("the key broker's {name}: {reason}")]
    Setting {
        /// The setting.
        name: &'static str,
        /// What is wrong.
        #[source]
        reason: SettingError,
    },
    /// The socket's directory or path is refused, or binding failed.
    #[error("the key broker's socket: {0}")]
    Socket(#[from] SocketError),
    /// The socket could not be opened to the lanes or listened on.
    #[error("the key broker's socket {path}: {source}")]
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Counters since start, for `status` and `health --prometheus`.
#[derive(Debug, Default)]
pub struct BrokerStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Signatures made.
    pub signed: AtomicU64,
    /// Sign requests refused (not ALLOWED, no lane, or a key the broker does not hold).
    pub refused: AtomicU64,
}

/// What the broker holds and whom it binds, shared by its sessions and the daemon's
/// control socket (where the daemon's own uid changes them, [`admin`]).
pub struct Shared {
    /// The keys. Held only here; written by nothing.
    pub held: RwLock<Held>,
    /// The uid → lane bindings, read again on `row-fence lane add|remove`.
    pub lanes: RwLock<Lanes>,
    /// Where the bindings are read from.
    pub lanes_path: PathBuf,
    /// True when the file was named (`--broker-lanes`): then a missing file is an error,
    /// not "no lanes yet".
    pub lanes_named: bool,
    /// The agent socket.
    pub socket: PathBuf,
    /// The daemon's home, where the audit log is.
    pub home: PathBuf,
    /// Counters.
    pub stats: BrokerStats,
    /// Serializes key and lane changes, so each audit record is in the order of its change.
    pub changing: Mutex<()>,
    /// Bounds the refused attempts the audit log records per uid.
    pub refused_audit: crate::audit::RefusedThrottle,
    /// The forges a signature may log in to.
    pub forges: Forges,
    /// The longest lease time a lane may renew for through the broker, in ms.
    pub renew_max_ms: u64,
    /// Set when the push socket serves (the daemon pushes for the lanes): then no lane is
    /// signed a login with a push key, so a lane holds no authenticated connection it could
    /// keep (ARCHITECTURE.md, "Push proxy"); read keys are still signed, so lanes fetch.
    pub daemon_pushes: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// The status object's broker part.
    pub fn status(&self) -> row_fence_contract::status::BrokerStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let held = read(&self.held);
        row_fence_contract::status::BrokerStatus {
            socket: self.socket.display().to_string(),
            keys: held.push.len() as u64,
            read_keys: held.read.len() as u64,
            lanes: read(&self.lanes).len() as u64,
            connections: self.stats.connections.load(Relaxed),
            signed: self.stats.signed.load(Relaxed),
            sign_refused: self.stats.refused.load(Relaxed),
        }
    }

    /// Reads the bindings again. A file that cannot be read or is refused binds no uid
    /// (a binding the operator removed must not outlive a bad edit: fail closed).
    pub fn reload_lanes(&self) -> Result<u64, LanesError> {
        let _changing = lock(&self.changing);
        let loaded = load_lanes(&self.lanes_path, self.lanes_named, paths::euid());
        let mut lanes = write(&self.lanes);
        match loaded {
            Ok(new) => {
                warn_unreachable(&new, &self.socket);
                *lanes = new;
                Ok(lanes.len() as u64)
            }
            Err(e) => {
                *lanes = Lanes::default();
                Err(e)
            }
        }
    }
}

/// Logs, for each bound lane whose uid cannot connect to the agent socket, which
/// directory stops it and the fix ([`crate::socket_reach`]).
fn warn_unreachable(lanes: &Lanes, socket: &Path) {
    for binding in lanes.bindings() {
        if let Err(e) = crate::socket_reach::check(binding.uid, socket) {
            tracing::warn!("the key broker: {e}");
        }
    }
}

/// Loads the bindings at `path`; a missing file that was not named binds no uid.
fn load_lanes(path: &Path, named: bool, uid: u32) -> Result<Lanes, LanesError> {
    if !named && !path.exists() {
        return Ok(Lanes::default());
    }
    Lanes::load(path, uid)
}

/// What every broker session shares.
pub struct Broker {
    /// The keys and bindings.
    pub shared: Arc<Shared>,
    /// The daemon's judge, counters and ledger: a sign request is judged as an ask is.
    pub judge: Arc<Judge>,
    /// The daemon's own uid (the operator's; no lane).
    pub own_uid: u32,
}

/// The broker before the daemon serves: keys and bindings loaded, socket bound.
pub struct Prepared {
    /// The keys and bindings.
    pub shared: Arc<Shared>,
    /// The bound socket.
    pub listener: std::os::unix::net::UnixListener,
    /// Unlinks the socket at exit if it is still ours.
    pub guard: SocketGuard,
}

/// Hardens the process, loads keys and bindings, binds the socket. Called before the
/// daemon serves anything, so a refusal here starts nothing.
pub fn prepare(settings: &Settings, home: &Path) -> Result<Prepared, BrokerError> {
    harden().map_err(BrokerError::Harden)?;
    let uid = paths::euid();
    let lane_keys = settings
        .lane_keys
        .clone()
        .map_err(|reason| BrokerError::Setting {
            name: "ROW_FENCE_BROKER_LANE_KEYS",
            reason,
        })?;
    let mut push = PushKeys::load(&settings.keys, uid)?;
    push.extend(PushKeys::load_for_lanes(&lane_keys, uid)?)?;
    let held = Held::loaded(push, PushKeys::load(&settings.read_keys, uid)?)?;
    if held.push.is_empty() {
        tracing::warn!(
            "the key broker holds no push key: it signs nothing until `row-fence keys add`"
        );
    }
    let lanes_named = settings.lanes.is_some();
    let lanes_path = settings
        .lanes
        .clone()
        .unwrap_or_else(|| lanes::default_path(home));
    let lanes = load_lanes(&lanes_path, lanes_named, uid)?;
    let forges = Forges::load(&settings.forge_host_keys, &settings.forge_users)?;
    let renew_max_ms = settings
        .renew_max_ms
        .clone()
        .map_err(|reason| BrokerError::Setting {
            name: "ROW_FENCE_BROKER_RENEW_MAX",
            reason,
        })?;
    prepare_dir(&settings.socket)?;
    let (listener, guard) = socket::bind(&settings.socket)?;
    // Lanes run under other uids: the socket is open to all, and the peer's uid decides
    // every request (agent.rs). Its directory is the daemon's and no one else can write it.
    let opened = fs::set_permissions(&settings.socket, fs::Permissions::from_mode(0o666))
        .and_then(|_| listener.set_nonblocking(true));
    if let Err(source) = opened {
        guard.remove_if_ours();
        return Err(BrokerError::Listen {
            path: settings.socket.clone(),
            source,
        });
    }
    warn_unreachable(&lanes, &settings.socket);
    let shared = Arc::new(Shared {
        held: RwLock::new(held),
        lanes: RwLock::new(lanes),
        lanes_path,
        lanes_named,
        socket: settings.socket.clone(),
        home: home.to_path_buf(),
        stats: BrokerStats::default(),
        changing: Mutex::new(()),
        refused_audit: Default::default(),
        forges,
        renew_max_ms,
        daemon_pushes: std::sync::atomic::AtomicBool::new(false),
    });
    Ok(Prepared {
        shared,
        listener,
        guard,
    })
}

/// Creates the socket's directory 0711 if missing (lanes must reach the socket, not list
/// the directory), then checks it is the daemon's and writable by no one else.
pub(crate) fn prepare_dir(socket: &Path) -> Result<(), SocketError> {
    paths::check_socket_length(socket).map_err(SocketError::TooLong)?;
    let dir = socket.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|_| fs::set_permissions(dir, fs::Permissions::from_mode(0o711)))
            .map_err(|source| SocketError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    paths::check_socket_dir(socket, paths::euid(), false).map_err(SocketError::Untrusted)
}

/// Makes the process undumpable (no ptrace, no `/proc/<pid>/mem` for its own uid's other
/// processes) and turns core files off, as OpenSSH's ssh-agent does: the keys are in
/// this process's memory and nowhere else.
pub fn harden() -> std::io::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(std::io::Error::from)?;
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)?;
    Ok(())
}

/// Serves the broker socket until `shutdown` is cancelled; an error when the socket
/// cannot be polled (the daemon then stops: a broker that cannot serve fails closed).
pub async fn run(
    listener: std::os::unix::net::UnixListener,
    broker: Arc<Broker>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(listener)?;
    tokio::select! {
        _ = shutdown.cancelled() => {}
        // Never ends: a failed accept is retried (conn.rs), so no peer can stop the broker.
        _ = conn::listen(listener, agent::Sessions(broker)) => {}
    }
    Ok(())
}
