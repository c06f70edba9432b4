//! `row-fence-resident` from start to exit: check the socket's directory, load the code
//! stamp (exit before binding if the registry changes while loading), open the store
//! lazily, take the socket, then serve, beat and record until SIGTERM/SIGINT or stale
//! code; finish in-flight asks, flush the ledger, unlink the socket if it is still ours.

use crate::config::Settings;
use crate::heartbeat;
use crate::judge::Judge;
use crate::location::{self, LocationFence, SystemClock};
use crate::own_code::OwnCode;
use crate::registry::{Registry, RegistryError};
use crate::resident::Resident;
use crate::server;
use crate::socket::{self, SocketError};
use row_fence_contract::paths;
use row_fence_store::LeaseStore;
use row_fence_store::monotonic::{Marks, Monotonic};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;
use std::time::Duration;

/// Exit code for a daemon that could not start (bad settings, socket taken, untrusted
/// directory, registry changing under it).
pub const EXIT_START_FAILED: i32 = 1;

/// The most threads blocking work (file store calls, the ledger, the marks) may take: a
/// stuck disk or a lock held elsewhere makes calls wait in line (within their ask's
/// deadline) instead of growing the daemon by a thread per ask.
pub const MAX_BLOCKING_THREADS: usize = 24;

/// Why the daemon did not start; nothing was bound.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The async runtime could not be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// The home directory could not be created.
    #[error("cannot create {path}: {source}")]
    Home {
        /// The home.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The socket's directory or path is refused, or binding failed.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// A daemon already answers on the socket; it is left alone.
    #[error("already running: a daemon answers on {0}; leaving it alone")]
    AlreadyRunning(std::path::PathBuf),
    /// Another daemon holds this home's lock: one daemon per home, since each writes the
    /// home's heartbeat and a second would keep it fresh for the first.
    #[error(
        "another row-fence-resident serves the home {home} (it holds {lock}); one daemon per home: stop that one first, or give this one its own ROW_FENCE_HOME"
    )]
    HomeTaken {
        /// The home.
        home: std::path::PathBuf,
        /// The lock file.
        lock: std::path::PathBuf,
    },
    /// The home's lock file could not be opened or locked.
    #[error("cannot lock {path}: {source}")]
    HomeLock {
        /// The lock file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bound socket could not be listened on.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The registry could not be read or parsed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The registry changed between its digest and its load.
    #[error("the registry changed while the daemon was loading it; exiting before binding")]
    RegistryChanged,
    /// The registry's digest could not be taken when the daemon's own code was recorded.
    #[error("cannot read the registry: {0}")]
    OwnCode(#[source] row_fence_contract::stamp::RegistryUnreadable),
    /// The registry's digest could not be taken again after its load.
    #[error("cannot read the registry: {0}")]
    RegistryDigest(#[source] std::io::Error),
    /// The store's settings are not a store, or it would not open.
    #[error(transparent)]
    Store(#[from] crate::config::ConfigError),
    /// The location fence could not be built.
    #[error("the location fence: {0}")]
    Fence(#[from] location::map::MapError),
    /// The forge API endpoint was asked for and could not start.
    #[error(transparent)]
    ForgeApi(#[from] crate::forge_api::ForgeApiError),
    /// The key broker was asked for and could not start.
    #[error(transparent)]
    Broker(#[from] crate::broker::BrokerError),
    /// The push socket was asked for and could not start.
    #[error(transparent)]
    Push(#[from] crate::push::PushStartError),
}

/// What the daemon needs beyond the common settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Resolved home, socket, store and key prefix.
    pub settings: Settings,
    /// Between heartbeats.
    pub heartbeat_interval: Duration,
    /// Extra uids to serve besides our own.
    pub extra_uids: Vec<u32>,
    /// The location fence's settings; `None` (the default) keeps it inert.
    pub location: Option<location::Settings>,
    /// The key broker's settings; `None` (the default) serves no agent socket.
    pub broker: Option<crate::broker::Settings>,
    /// The forge API endpoint's settings; `None` (the default) serves no forge API socket.
    pub forge_api: Option<crate::forge_api::Settings>,
    /// The push socket's settings; `None` (the default) serves no push socket.
    pub push: Option<crate::push::RawSettings>,
    /// The binary's build digest (`row_fence_stamp::BUILD_DIGEST`), the build half of
    /// the daemon's code stamp.
    pub build: &'static str,
    /// A service manager restarts this daemon (`--supervised`): on an upgrade it exits
    /// [`crate::resident::EXIT_STALE_CODE`] for it, instead of executing itself again.
    pub supervised: bool,
}

/// Runs the daemon in the foreground; returns the process exit code.
pub fn run(options: Options) -> i32 {
    // One thread serves every connection (concurrently: each waits on I/O, never on
    // another): an ask then wakes one thread, not a worker and the thread that accepted
    // it, which halved no latency but cost a context switch per ask. Blocking work (file
    // store calls, the heartbeat and marks files, the ledger) runs on blocking threads.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return failed(StartError::Runtime(e)),
    };
    let code = runtime.block_on(async move {
        match prepare(&options) {
            Ok(prepared) => serve(options, prepared).await,
            Err(e) => failed(e),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

fn failed(e: StartError) -> i32 {
    // One line on stderr, where the log goes too (a tracing line besides printed it
    // twice). A closed or full stderr must not turn a refusal to start into a panic.
    let _ = writeln!(std::io::stderr(), "row-fence-resident: {e}");
    EXIT_START_FAILED
}

struct Prepared {
    own_code: OwnCode,
    registry: Registry,
    fence: Option<Arc<LocationFence>>,
    store: Arc<Monotonic>,
    listener: tokio::net::UnixListener,
    guard: socket::SocketGuard,
    broker: Option<crate::broker::Prepared>,
    forge_api: Option<crate::forge_api::Prepared>,
    push: Option<crate::push::Prepared>,
    /// Held until the process exits: this home's one daemon.
    _home_lock: nix::fcntl::Flock<std::fs::File>,
}

/// Takes `<home>/resident.lock` (an exclusive `flock`, released by the kernel when the
/// process exits, however it exits), or says which daemon holds it.
fn lock_home(home: &std::path::Path) -> Result<nix::fcntl::Flock<std::fs::File>, StartError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = paths::resident_lock(home);
    let cannot = |source: std::io::Error| StartError::HomeLock {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(cannot)?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| match errno {
            nix::errno::Errno::EWOULDBLOCK => StartError::HomeTaken {
                home: home.to_path_buf(),
                lock: path.clone(),
            },
            other => cannot(std::io::Error::from(other)),
        },
    )
}

/// Everything that can refuse a start, in order, before anything is served.
fn prepare(options: &Options) -> Result<Prepared, StartError> {
    let settings = &options.settings;
    // Everything the daemon creates is private to its user.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&settings.home)
        .map_err(|source| StartError::Home {
            path: settings.home.clone(),
            source,
        })?;
    socket::prepare_dir(&settings.socket)?;
    let own_code = OwnCode::capture(&settings.home, options.build).map_err(StartError::OwnCode)?;
    // Whatever the daemon loads from the registry is loaded between these two digests.
    let registry = Registry::load(&settings.home)?;
    let again = row_fence_contract::stamp::registry_digest(&paths::registry(&settings.home))
        .map_err(StartError::RegistryDigest)?;
    if again != own_code.registry_digest() {
        return Err(StartError::RegistryChanged);
    }
    let store = settings.open_monotonic(false).map_err(StartError::Store)?;
    let fence = location_fence(options.location.as_ref())?;
    // The broker first: its keys must be loaded into a process that cannot be dumped,
    // and a broker that cannot start stops the daemon before the ask socket is taken.
    let broker = options
        .broker
        .as_ref()
        .map(|broker| crate::broker::prepare(broker, &settings.home))
        .transpose()?;
    let forge_api = match options
        .forge_api
        .as_ref()
        .map(|forge| crate::forge_api::prepare(forge, &settings.home))
        .transpose()
    {
        Ok(forge_api) => forge_api,
        Err(e) => {
            if let Some(broker) = &broker {
                broker.guard.remove_if_ours();
            }
            return Err(e.into());
        }
    };
    let push = match options
        .push
        .as_ref()
        .map(|push| crate::push::prepare(push, &settings.home, broker.is_some()))
        .transpose()
    {
        Ok(push) => {
            // Before anything is served: once the daemon pushes for the lanes, no lane is
            // signed a push login (ARCHITECTURE.md, "Push proxy").
            if let (Some(_), Some(broker)) = (&push, &broker) {
                broker
                    .shared
                    .daemon_pushes
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            push
        }
        Err(e) => {
            if let Some(broker) = &broker {
                broker.guard.remove_if_ours();
            }
            if let Some(forge) = &forge_api {
                forge.guard.remove_if_ours();
            }
            return Err(e.into());
        }
    };
    // A start refused after the broker (or the forge API, or the push socket) bound its
    // socket takes that socket back.
    let drop_broker = || {
        if let Some(broker) = &broker {
            broker.guard.remove_if_ours();
        }
        if let Some(forge) = &forge_api {
            forge.guard.remove_if_ours();
        }
        if let Some(push) = &push {
            push.guard.remove_if_ours();
        }
    };
    let (listener, guard) = socket::bind(&settings.socket).map_err(|e| {
        drop_broker();
        match e {
            SocketError::AlreadyRunning(path) => StartError::AlreadyRunning(path),
            other => StartError::Socket(other),
        }
    })?;
    // After the socket: a second daemon on the same socket hears "already running".
    let home_lock = lock_home(&settings.home).inspect_err(|_| {
        guard.remove_if_ours();
        drop_broker();
    })?;
    let listener = listener
        .set_nonblocking(true)
        .and_then(|_| tokio::net::UnixListener::from_std(listener))
        .map_err(|source| {
            guard.remove_if_ours();
            drop_broker();
            StartError::Listen {
                path: settings.socket.clone(),
                source,
            }
        })?;
    Ok(Prepared {
        own_code,
        registry,
        fence,
        store,
        listener,
        guard,
        broker,
        forge_api,
        push,
        _home_lock: home_lock,
    })
}

/// Builds the location fence when it is on, warning once when it has no map to fetch
/// (every ask is then `map_missing`).
fn location_fence(
    settings: Option<&location::Settings>,
) -> Result<Option<Arc<LocationFence>>, StartError> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    if settings.source.is_none() {
        tracing::warn!(
            location = %settings.location,
            "ROW_FENCE_LOCATION is set without ROW_FENCE_TENANT_MAP_URL: every ask is fenced map_missing"
        );
    }
    Ok(Some(LocationFence::new(
        settings.clone(),
        Arc::new(SystemClock),
    )?))
}

async fn serve(options: Options, prepared: Prepared) -> i32 {
    let Options {
        settings,
        heartbeat_interval,
        extra_uids,
        location: _,
        broker: _,
        forge_api: _,
        push: _,
        build: _,
        supervised,
    } = options;
    let Prepared {
        own_code,
        registry,
        fence,
        store,
        listener,
        guard,
        broker,
        forge_api,
        push,
        _home_lock,
    } = prepared;
    let mut uids = vec![paths::euid()];
    uids.extend(extra_uids);
    let marks = store.marks();
    let store: Arc<dyn LeaseStore> = store;
    // The judge first, then the broker's state: the daemon and the broker share the one,
    // and the daemon answers changes to the other, so both exist before it does.
    let judge = Arc::new(Judge::new(store.clone(), &settings).with_location(registry, fence));
    let resident = Arc::new(
        Resident::new(judge.clone(), own_code, settings.clone(), uids)
            .with_broker(broker.as_ref().map(|prepared| prepared.shared.clone()))
            .with_forge_api(forge_api.as_ref().map(|prepared| prepared.shared.clone()))
            .with_push_https(push.as_ref().and_then(|p| p.settings.https.clone()))
            .supervised(supervised),
    );
    tracing::info!(
        socket = %settings.socket.display(),
        store = %store.describe(),
        stamp = %resident.stamp,
        pid = std::process::id(),
        "row-fence-resident is serving"
    );
    tokio::spawn(heartbeat::run(
        store,
        paths::heartbeat(&settings.home),
        heartbeat::Identity {
            stamp: resident.stamp.clone(),
            key_prefix: settings.key_prefix.clone(),
        },
        heartbeat_interval,
        resident.heartbeat_ms.clone(),
        judge.proof.clone(),
        resident.shutdown.clone(),
    ));
    tokio::spawn(flush_marks(marks.clone(), resident.shutdown.clone()));
    tokio::spawn(stop_on_signal(resident.clone()));
    // The forge API names a lane of another uid by the broker's bindings, when it is on.
    let bindings = broker.as_ref().map(|prepared| prepared.shared.clone());
    // The push socket pushes with the broker's keys, for the broker's bound lanes.
    let mut push_task = None;
    let push_guard = match (push, bindings.clone()) {
        (Some(prepared), Some(shared)) => {
            let crate::push::Prepared {
                settings: push_settings,
                listener,
                guard,
            } = prepared;
            tracing::info!(
                socket = %guard.path().display(),
                forges = push_settings.forges.len(),
                "the push socket is serving"
            );
            let pusher = Arc::new(crate::push::Pusher::new(
                shared,
                judge.clone(),
                push_settings,
                paths::euid(),
            ));
            let resident = resident.clone();
            push_task = Some(tokio::spawn(async move {
                let served = crate::push::run(listener, pusher, resident.shutdown.clone()).await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "cannot poll the push socket");
                    resident.stop(EXIT_START_FAILED);
                }
            }));
            Some(guard)
        }
        _ => None,
    };
    let broker_guard = broker.map(|prepared| {
        let crate::broker::Prepared {
            shared,
            listener,
            guard,
        } = prepared;
        tracing::info!(
            socket = %guard.path().display(),
            lanes = %shared.lanes_path.display(),
            "the key broker is serving"
        );
        let broker = Arc::new(crate::broker::Broker {
            shared,
            judge: judge.clone(),
            own_uid: paths::euid(),
        });
        let resident = resident.clone();
        tokio::spawn(async move {
            let served = crate::broker::run(listener, broker, resident.shutdown.clone()).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "cannot poll the key broker's socket");
                resident.stop(EXIT_START_FAILED);
            }
        });
        guard
    });
    let forge_guard = forge_api.map(|prepared| {
        let crate::forge_api::Prepared {
            shared,
            listener,
            guard,
        } = prepared;
        tracing::info!(
            socket = %guard.path().display(),
            host = %shared.settings.host,
            "the forge API is serving"
        );
        let api = Arc::new(crate::forge_api::serve::ForgeApi {
            shared,
            judge: judge.clone(),
            bindings,
            own_uid: paths::euid(),
        });
        let resident = resident.clone();
        tokio::spawn(async move {
            let served =
                crate::forge_api::serve::run(listener, api, resident.shutdown.clone()).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "cannot poll the forge API's socket");
                resident.stop(EXIT_START_FAILED);
            }
        });
        guard
    });
    // Bound and about to accept: only now may systemd count the daemon as started.
    crate::supervisor::ready(&settings.socket);
    server::run(listener, resident.clone(), resident.shutdown.clone()).await;
    crate::supervisor::stopping();
    if let Some(task) = push_task {
        // The pushes in flight are dropped and their forge sessions closed, then the
        // daemon's ssh masters end (push::run), before the runtime goes.
        let within = crate::push::STOP_GRACE * 2 + Duration::from_secs(3);
        let _ = tokio::time::timeout(within, task).await;
    }
    judge.refusals.close();
    if let Err(e) = marks.flush() {
        tracing::warn!(error = %e, "cannot write the revisions seen");
    }
    guard.remove_if_ours();
    if let Some(guard) = broker_guard {
        guard.remove_if_ours();
    }
    if let Some(guard) = forge_guard {
        guard.remove_if_ours();
    }
    if let Some(guard) = push_guard {
        guard.remove_if_ours();
    }
    let code = resident.exit_code();
    tracing::info!(code, "row-fence-resident stopped");
    code
}

/// How often the daemon writes the highest revisions its asks saw (`revisions.json`), so a
/// restarted daemon still knows a store that went back in time.
const MARKS_FLUSH: Duration = Duration::from_secs(1);

async fn flush_marks(marks: Arc<Marks>, stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(MARKS_FLUSH) => {}
        }
        let marks = marks.clone();
        let flushed = tokio::task::spawn_blocking(move || marks.flush()).await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!(error = %e, "cannot write the revisions seen");
        }
    }
}

async fn stop_on_signal(resident: Arc<Resident>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: finishing in-flight asks"),
        _ = int.recv() => tracing::info!("SIGINT: finishing in-flight asks"),
        _ = resident.shutdown.cancelled() => return,
    }
    resident.stop(0);
}
