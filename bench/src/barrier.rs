//! What the read barrier costs an ask: the same warm ask against the run's standalone
//! durable Redis (a pure read, one round trip) and against a primary with one replica
//! (the read, then the barrier: a `PUBLISH` the replica must acknowledge, `WAIT`, on the
//! daemon's second connection). Both servers have the production settings (AOF,
//! `appendfsync always`, no eviction); the primary also has `min-replicas-to-write 1`, as
//! the store requires with replicas. The asks are in-process clients speaking the wire
//! protocol (as [`crate::throughput`] does), one client interleaved between the two
//! daemons ask by ask, then many clients at once on each (barrier rounds are shared by the
//! asks waiting when one starts).

use crate::fixture::{self, Binaries, Daemon};
use crate::redis_server::RedisServer;
use crate::stats::Summary;
use crate::throughput::{self, Throughput, ask_once};
use std::path::Path;
use std::time::{Duration, Instant};

/// Concurrent clients in the many-clients half.
pub const CLIENTS: usize = 16;

/// One store's figures.
#[derive(Clone, Debug)]
pub struct Side {
    /// One client asking back to back (connect, request, answer), ALLOWED ones only.
    pub latency: Summary,
    /// Asks not answered ALLOWED.
    pub failed: u64,
    /// [`CLIENTS`] clients at once.
    pub concurrent: Throughput,
}

/// Both stores' figures.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The standalone durable Redis: the pure-read ask.
    pub pure_read: Side,
    /// The primary with one replica: the ask with its read barrier.
    pub barrier: Side,
}

impl Figures {
    /// What the barrier adds to one ask's p50, in ms.
    pub fn added_p50_ms(&self) -> f64 {
        self.barrier.latency.p50_ms - self.pure_read.latency.p50_ms
    }
}

/// Starts a primary with one replica under `work`, a daemon on it and one on `standalone`,
/// and measures `asks` interleaved asks (after `warmup` untimed ones on each) and
/// [`CLIENTS`] clients for `duration` on each.
pub fn measure(
    bins: &Binaries,
    work: &Path,
    standalone: &RedisServer,
    asks: usize,
    warmup: usize,
    duration: Duration,
) -> Result<Figures, String> {
    let dir = |name: &str| -> Result<std::path::PathBuf, String> {
        let path = work.join(name);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    };
    let guard = [
        "--min-replicas-to-write",
        "1",
        "--repl-diskless-sync-delay",
        "0",
    ];
    let primary = RedisServer::start_with(&dir("barrier-primary")?, None, &guard)?;
    let port = primary.port.to_string();
    let replica = RedisServer::start_with(
        &dir("barrier-replica")?,
        None,
        &["--replicaof", "127.0.0.1", &port],
    )?;
    let until = Instant::now() + Duration::from_secs(30);
    while !primary
        .cli(&["INFO", "replication"])
        .is_ok_and(|info| info.contains("state=online"))
    {
        if Instant::now() > until {
            return Err("the bench's replica did not come online within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let stores = [
        ("pure", standalone, standalone.unix_url()),
        ("barrier", &primary, primary.unix_url()),
    ];
    let mut daemons = Vec::new();
    let mut requests = Vec::new();
    for (name, _, url) in &stores {
        let cold = work.join(format!("cold-home-{name}"));
        let path = work.join(format!("descriptor-{name}.json"));
        let descriptor = fixture::acquire(bins, &cold, url, &path)?;
        let home = work.join(format!("home-{name}"));
        let daemon = Daemon::start(bins, &home, url, &[])?;
        requests.push(fixture::ask_line(bins, &home, &descriptor)?);
        daemons.push(daemon);
    }
    for ((name, _, _), (daemon, request)) in stores.iter().zip(daemons.iter().zip(&requests)) {
        throughput::check_allowed(&daemon.socket, request)
            .map_err(|why| format!("the {name} store's ask is not ALLOWED: {why}"))?;
        for _ in 0..warmup {
            let _ = ask_once(&daemon.socket, request);
        }
    }
    let mut walls = [Vec::with_capacity(asks), Vec::with_capacity(asks)];
    let mut failed = [0u64; 2];
    for _ in 0..asks {
        crate::interrupt::check()?;
        for i in 0..2 {
            let started = Instant::now();
            match ask_once(&daemons[i].socket, &requests[i]) {
                Ok(true) => walls[i].push(started.elapsed()),
                _ => failed[i] += 1,
            }
        }
    }
    let mut sides = Vec::new();
    for (i, ((daemon, request), (_, server, _))) in
        daemons.iter_mut().zip(&requests).zip(&stores).enumerate()
    {
        crate::interrupt::check()?;
        let concurrent = throughput::asks_per_second(
            &daemon.socket,
            request,
            CLIENTS,
            duration,
            (daemon.pid(), server.pid()),
        );
        daemon.check_alive()?;
        sides.push(Side {
            latency: Summary::of(&walls[i]),
            failed: failed[i],
            concurrent,
        });
    }
    drop(replica);
    let barrier = sides.pop().expect("two sides");
    let pure_read = sides.pop().expect("two sides");
    Ok(Figures { pure_read, barrier })
}
