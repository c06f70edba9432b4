//! The push socket: the daemon pushes for the lanes (ARCHITECTURE.md, "Push proxy"). A
//! lane's `git push` reaches it through `git-remote-row-fence`; the daemon resolves the
//! URL against its own forges, relays the forge's advertisement, spools the lane's pack,
//! judges the lease and every ref against the row's scope, and pushes on a fresh forge
//! connection with keys only it holds, judging again before the pack's last bytes. The
//! lane holds no credential and no authenticated forge connection: nothing to keep open,
//! nothing to sign.
//!
//! # Layout
//! - [`pkt`]: pkt-line framing, bounded.
//! - [`advert`]: the forge's advertisement and the capabilities forwarded.
//! - [`request`]: the lane's commands, capabilities and push options.
//! - [`spool`]: the pack on the daemon's disk, its trailer checked.
//! - [`walk`]: the fast-forward proof from the pack's commits.
//! - [`target`]: the configured forges and a push URL resolved against them.
//! - [`forge`]: a connection to the forge's receive-pack (the ssh arm).
//! - [`https`]: the HTTPS arm (smart HTTP, the token held in memory).
//! - [`agent`]: the in-memory ssh agent one push's ssh uses.
//! - [`lane`]: who pushes, and the judgement of the lease and the scope.
//! - [`answer`]: the daemon's own answers (`ERR`, `ng` for every ref, side-band).
//! - [`session`]: one push, start to end.
//! - here: the flags, the socket and the accept loop.

pub mod advert;
pub mod agent;
pub mod answer;
pub mod forge;
pub mod https;
pub mod lane;
pub mod pkt;
pub mod request;
pub mod session;
pub mod spool;
pub mod target;
pub mod walk;

use crate::broker::Shared;
use crate::judge::Judge;
use crate::socket::{self, SocketError, SocketGuard};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use target::{Forge, TargetError};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The default bound on one pack, in bytes (`--push-max-pack-bytes`).
pub const DEFAULT_MAX_PACK_BYTES: u64 = 1024 * 1024 * 1024;

/// Pushes served at once; one more is answered busy (each holds two ssh processes and a
/// spool file at most).
pub const MAX_PUSHES: usize = 16;

/// Pushes served beyond [`MAX_PUSHES`], one each for a uid that holds no slot.
pub const MAX_FAIR_PUSHES: usize = 48;

/// Pushes one peer uid may have in flight at once, so one lane cannot hold every slot.
pub const MAX_PUSHES_PER_UID: usize = 4;

/// The push socket's flags (off unless `--push-socket` is given; needs the key broker,
/// whose keys, bindings and pinned host keys it uses).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct PushArgs {
    /// Serve pushes for the lanes on this socket (git-remote-row-fence connects to it) [env: ROW_FENCE_PUSH_SOCKET]
    #[arg(long, value_name = "PATH")]
    pub push_socket: Option<PathBuf>,
    /// A forge the daemon pushes to, ssh://USER@HOST[:PORT]/[PATH/] (its host keys are --broker-forge-host-key's); repeatable [env: ROW_FENCE_PUSH_FORGES, comma-separated]
    #[arg(long = "push-forge", value_name = "URL")]
    pub push_forges: Vec<String>,
    /// The CA (PEM) an https:// --push-forge is verified against, instead of the system's roots [env: ROW_FENCE_PUSH_CA]
    #[arg(long, value_name = "FILE")]
    pub push_ca: Option<PathBuf>,
    /// The largest pack a lane may push, in bytes [env: ROW_FENCE_PUSH_MAX_PACK_BYTES] [default: 1073741824]
    #[arg(long, value_name = "BYTES")]
    pub push_max_pack_bytes: Option<u64>,
    /// A push option (`git push -o NAME[=VALUE]`) the daemon passes to the forge, by its name; repeatable. None by default: an option can act on the forge beyond the refs judged (open and merge a merge request, set CI variables), so a push carrying another is refused
    #[arg(long = "push-option", value_name = "NAME")]
    pub push_options: Vec<String>,
}

impl PushArgs {
    /// The settings, or `None` when no push socket is set.
    pub fn settings(&self) -> Option<RawSettings> {
        let socket = crate::config::flag_or_env(&self.push_socket, "ROW_FENCE_PUSH_SOCKET")?;
        let forges = if self.push_forges.is_empty() {
            std::env::var("ROW_FENCE_PUSH_FORGES")
                .unwrap_or_default()
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect()
        } else {
            self.push_forges.clone()
        };
        let max_pack_bytes = self.push_max_pack_bytes.or_else(|| {
            std::env::var("ROW_FENCE_PUSH_MAX_PACK_BYTES")
                .ok()
                .and_then(|v| v.parse().ok())
        });
        Some(RawSettings {
            socket,
            forges,
            // The HTTPS arm's CA (ARCHITECTURE.md, "Push proxy").
            ca: crate::config::flag_or_env(&self.push_ca, "ROW_FENCE_PUSH_CA"),
            max_pack_bytes: max_pack_bytes.unwrap_or(DEFAULT_MAX_PACK_BYTES),
            options: self.push_options.clone(),
        })
    }
}

/// The flags as given.
#[derive(Clone, Debug)]
pub struct RawSettings {
    /// The push socket.
    pub socket: PathBuf,
    /// The `--push-forge` values.
    pub forges: Vec<String>,
    /// `--push-ca`: the CA an HTTPS forge is verified against (`None`: the system's roots).
    pub ca: Option<PathBuf>,
    /// The pack bound, in bytes.
    pub max_pack_bytes: u64,
    /// The `--push-option` names.
    pub options: Vec<String>,
}

/// The settings, parsed.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The forges pushed to.
    pub forges: Vec<Forge>,
    /// The pack bound, in bytes.
    pub max_pack_bytes: u64,
    /// The push options' names passed to the forge (`--push-option`); no other is.
    pub options: Vec<String>,
    /// Where pushes' private directories go (`<home>/push-spool`, 0700).
    pub spool: PathBuf,
    /// Where the daemon's ssh masters' control sockets go (`<home>/push-masters`, 0700;
    /// [`forge::control_path`]).
    pub masters: PathBuf,
    /// The HTTPS arm's client and token, when an https:// forge is configured.
    pub https: Option<Arc<https::Https>>,
}

/// Why the push socket did not start; the daemon does not start either.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushStartError {
    /// No key broker: no keys, bindings or host keys to push with.
    #[error(
        "--push-socket needs the key broker (--broker-socket and --broker-forge-host-key): its keys, lane bindings and pinned host keys are what the daemon pushes with"
    )]
    NoBroker,
    /// No forge configured.
    #[error(
        "--push-socket needs at least one --push-forge ssh://USER@HOST[:PORT]/[PATH/] or https://[USER@]HOST[:PORT]/[PATH/]"
    )]
    NoForge,
    /// A forge that does not parse.
    #[error(transparent)]
    Forge(#[from] TargetError),
    /// The HTTPS arm's client (its CA).
    #[error(transparent)]
    Https(#[from] https::HttpsError),
    /// The spool or masters directory.
    #[error("the push directory {path}: {source}")]
    Spool {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The socket.
    #[error("the push socket: {0}")]
    Socket(#[from] SocketError),
    /// The socket could not be opened to the lanes.
    #[error("the push socket {path}: {source}")]
    Listen {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The push socket bound, before the daemon serves.
pub struct Prepared {
    /// The settings.
    pub settings: Arc<Settings>,
    /// The bound socket.
    pub listener: std::os::unix::net::UnixListener,
    /// Unlinks the socket at exit if it is still ours.
    pub guard: SocketGuard,
}

/// Parses the settings, makes the spool directory and binds the socket (open to every
/// uid, as the broker's: the peer's uid decides).
pub fn prepare(
    raw: &RawSettings,
    home: &Path,
    broker_on: bool,
) -> Result<Prepared, PushStartError> {
    if !broker_on {
        return Err(PushStartError::NoBroker);
    }
    if raw.forges.is_empty() {
        return Err(PushStartError::NoForge);
    }
    let forges = raw
        .forges
        .iter()
        .map(|f| Forge::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    // The HTTPS arm's client, built once (ARCHITECTURE.md, "Push proxy").
    let https = https::Https::for_forges(&forges, raw.ca.as_deref(), home)?.map(Arc::new);
    let spool = home.join("push-spool");
    let masters = home.join("push-masters");
    for dir in [&spool, &masters] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|source| PushStartError::Spool {
                path: dir.clone(),
                source,
            })?;
    }
    crate::broker::prepare_dir(&raw.socket)?;
    let (listener, guard) = socket::bind(&raw.socket)?;
    // The push socket is this daemon's now: what an earlier one left in the spool (killed
    // mid-push, so its pushes' directories were never removed) is nobody's.
    if let Ok(entries) = std::fs::read_dir(&spool) {
        for entry in entries.flatten() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let opened = std::fs::set_permissions(&raw.socket, std::fs::Permissions::from_mode(0o666))
        .and_then(|_| listener.set_nonblocking(true));
    if let Err(source) = opened {
        guard.remove_if_ours();
        return Err(PushStartError::Listen {
            path: raw.socket.clone(),
            source,
        });
    }
    Ok(Prepared {
        settings: Arc::new(Settings {
            forges,
            max_pack_bytes: raw.max_pack_bytes,
            options: raw.options.clone(),
            spool,
            masters,
            https,
        }),
        listener,
        guard,
    })
}

/// What every push shares.
pub struct Pusher {
    /// The broker's keys, bindings and pinned host keys.
    pub shared: Arc<Shared>,
    /// The daemon's judge: a push is judged as an ask is.
    pub judge: Arc<Judge>,
    /// The push settings.
    pub settings: Arc<Settings>,
    /// The daemon's own uid (the same-uid mode's peer).
    pub own_uid: u32,
    /// Numbers the pushes' private directories.
    next: AtomicU64,
    /// The daemon-wide slots of judged pushes.
    pub slots: Slots,
    /// Pushes in flight per peer uid (`None`: a uid the socket could not tell).
    per_uid: std::sync::Mutex<std::collections::HashMap<Option<u32>, usize>>,
}

/// The daemon-wide slots of judged pushes: a bound on pushes under way, with room kept
/// for a uid that has none, so lanes filling the bound cannot starve another lane.
pub struct Slots {
    /// Taken once a lane is judged, until its last bytes are sent.
    slots: Semaphore,
    /// Beyond `slots`, one each for a uid holding none.
    fair: Semaphore,
    /// Slots held per peer uid.
    held: std::sync::Mutex<std::collections::HashMap<Option<u32>, usize>>,
}

impl Slots {
    /// `bound` slots, and `fair` more for uids holding none.
    pub fn new(bound: usize, fair: usize) -> Slots {
        Slots {
            slots: Semaphore::new(bound),
            fair: Semaphore::new(fair),
            held: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// A slot for a judged push of `uid`: one of the bound, or, when those are all held,
    /// one of the fair ones if `uid` holds none. `None`: busy.
    pub fn hold(&self, uid: Option<u32>) -> Option<Held<'_>> {
        let mut held = crate::sync::lock(&self.held);
        let mine = held.entry(uid).or_insert(0);
        let permit = match self.slots.try_acquire() {
            Ok(permit) => permit,
            Err(_) if *mine == 0 => match self.fair.try_acquire() {
                Ok(permit) => permit,
                Err(_) => {
                    held.remove(&uid);
                    return None;
                }
            },
            Err(_) => return None,
        };
        *mine += 1;
        Some(Held {
            slots: self,
            uid,
            _permit: permit,
        })
    }
}

/// A slot held by a judged push, given back when dropped.
pub struct Held<'a> {
    slots: &'a Slots,
    uid: Option<u32>,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut held = crate::sync::lock(&self.slots.held);
        if let Some(count) = held.get_mut(&self.uid) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.uid);
            }
        }
    }
}

/// One push's place in its uid's count, given back when the push ends.
struct UidSlot<'a> {
    pusher: &'a Pusher,
    uid: Option<u32>,
}

impl Pusher {
    /// Takes a place for `uid`, or `None` when it has [`MAX_PUSHES_PER_UID`] in flight.
    fn take_uid(&self, uid: Option<u32>) -> Option<UidSlot<'_>> {
        let mut counts = crate::sync::lock(&self.per_uid);
        let count = counts.entry(uid).or_insert(0);
        if *count >= MAX_PUSHES_PER_UID {
            return None;
        }
        *count += 1;
        Some(UidSlot { pusher: self, uid })
    }
}

impl Drop for UidSlot<'_> {
    fn drop(&mut self) {
        let mut counts = crate::sync::lock(&self.pusher.per_uid);
        if let Some(count) = counts.get_mut(&self.uid) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

impl Pusher {
    /// The pusher for these parts.
    pub fn new(
        shared: Arc<Shared>,
        judge: Arc<Judge>,
        settings: Arc<Settings>,
        own_uid: u32,
    ) -> Pusher {
        Pusher {
            shared,
            judge,
            settings,
            own_uid,
            next: AtomicU64::new(0),
            slots: Slots::new(MAX_PUSHES, MAX_FAIR_PUSHES),
            per_uid: Default::default(),
        }
    }

    /// A new private directory for one push (0700, removed when dropped).
    pub fn workdir(&self) -> std::io::Result<Workdir> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self
            .settings
            .spool
            .join(format!("{}-{n}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Workdir(path))
    }
}

/// A push's private directory, removed with everything in it when dropped.
pub struct Workdir(pub PathBuf);

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How long the daemon's stop waits for its pushes' forge sessions to end.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(7);

/// Serves the push socket until `shutdown` is cancelled. Then the pushes in flight are
/// dropped (each forge session's input closed: a pack whose last bytes were not sent is
/// not applied and its quarantine is removed), then the daemon's ssh masters end.
pub async fn run(
    listener: std::os::unix::net::UnixListener,
    pusher: Arc<Pusher>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let sessions = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "the push socket could not accept a connection; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let pusher = pusher.clone();
        let stop = shutdown.clone();
        sessions.spawn(async move {
            let uid = stream.peer_cred().ok().map(|c| c.uid());
            // The daemon-wide slots are taken once the lane is judged (the session), so
            // refused lanes hold their own uid's slots only.
            if let Some(_mine) = pusher.take_uid(uid) {
                session::serve(&pusher, stream, &stop).await;
                return;
            }
            use tokio::io::AsyncWriteExt;
            let busy = format!(
                "this uid has {MAX_PUSHES_PER_UID} pushes in flight already; push again when one ends"
            );
            let mut stream = stream;
            let _ = stream.write_all(&answer::error_line(&busy)).await;
        });
    }
    sessions.close();
    let _ = tokio::time::timeout(STOP_GRACE, sessions.wait()).await;
    forge::closed(STOP_GRACE).await;
    forge::close_masters(&pusher.settings.masters).await;
    Ok(())
}

#[cfg(test)]
mod slot_tests {
    use super::Slots;

    #[test]
    fn lanes_filling_the_slots_leave_one_for_a_uid_holding_none() {
        let slots = Slots::new(4, 2);
        let mut taken: Vec<_> = (0..4).map(|_| slots.hold(Some(1)).unwrap()).collect();
        // The bound is full: the uid holding them gets no more, another gets a fair one,
        // once.
        assert!(slots.hold(Some(1)).is_none());
        let fair = slots.hold(Some(2)).expect("a fair slot for uid 2");
        assert!(slots.hold(Some(2)).is_none());
        let third = slots.hold(Some(3)).expect("a fair slot for uid 3");
        assert!(
            slots.hold(Some(4)).is_none(),
            "the fair slots are bounded too"
        );
        drop((fair, third));
        taken.pop();
        assert!(slots.hold(Some(2)).is_some(), "a freed slot is taken again");
    }
}
