//! etcd beside Redis in one run: the store's own ask (what the daemon does per warm ask,
//! without the socket) on a durable standalone Redis (AOF, `appendfsync always`, Unix
//! socket) and on a private 3-member etcd cluster (loopback, data in the run's temp dir):
//! p50 of one client asking back to back, asks/s with [`CLIENTS`] concurrent clients, and
//! CPU per ask of the asking process (the daemon's share) and of the store's processes
//! (redis-server; the three etcd members together).

use crate::children::Owned;
use crate::grant::grant;
use crate::redis_server::{RedisServer, free_port};
use row_fence_store::etcd::EtcdStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{AskCheck, LeaseStore};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Concurrent clients of the throughput figure.
pub const CLIENTS: usize = 64;

/// One store's figures.
#[derive(Clone, Debug)]
pub struct StoreFigures {
    /// `redis` or `etcd (3 members)`.
    pub name: String,
    /// p50 of one client's warm asks, in ms.
    pub p50_ms: f64,
    /// p99 of the same, in ms.
    pub p99_ms: f64,
    /// Asks per second with [`CLIENTS`] clients.
    pub asks_per_s: f64,
    /// CPU of the asking process per ask, in µs.
    pub client_cpu_us: f64,
    /// CPU of the store's processes per ask, in µs.
    pub store_cpu_us: f64,
}

/// The etcd store's asks with one member of three down, first in the URL (a fresh client
/// tries it first).
#[derive(Clone, Debug)]
pub struct FaultFigures {
    /// What is wrong with the member.
    pub fault: String,
    /// The first ask of a fresh client (it meets the member first), in ms.
    pub first_ms: f64,
    /// p50 of the sequential asks after it, in ms.
    pub p50_ms: f64,
    /// p99 of the same, in ms.
    pub p99_ms: f64,
    /// The slowest of them, in ms.
    pub max_ms: f64,
    /// Asks answered.
    pub answered: usize,
    /// Asks that failed (COULD NOT READ).
    pub failed: usize,
}

/// Both stores.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Redis first, then etcd.
    pub stores: Vec<StoreFigures>,
    /// Sequential asks per store.
    pub samples: usize,
    /// etcd with a member down.
    pub faults: Vec<FaultFigures>,
    /// What the home's floors cost an ask.
    pub floors: Option<crate::floors::FloorFigures>,
}

/// CPU time of a process (utime + stime), in µs, from `/proc` (Linux only).
fn process_cpu_us(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz * 1e6)
}

fn own_cpu_us() -> f64 {
    process_cpu_us(std::process::id()).unwrap_or(0.0)
}

fn stores_cpu_us(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|p| process_cpu_us(*p).ok()).sum()
}

/// A private 3-member etcd cluster on loopback ports.
struct Cluster {
    members: Vec<Owned>,
    url: String,
    /// Each member's `host:port`.
    hosts: Vec<String>,
}

impl Cluster {
    fn start(dir: &Path) -> Result<Cluster, String> {
        let ports: Vec<u16> = (0..6).map(|_| free_port()).collect::<Result<_, _>>()?;
        let initial: Vec<String> = (0..3)
            .map(|i| format!("m{i}=http://127.0.0.1:{}", ports[i + 3]))
            .collect();
        let mut members = Vec::new();
        for i in 0..3 {
            let client = format!("http://127.0.0.1:{}", ports[i]);
            let peer = format!("http://127.0.0.1:{}", ports[i + 3]);
            let mut cmd = Command::new("etcd");
            cmd.args(["--name", &format!("m{i}")])
                .arg("--data-dir")
                .arg(dir.join(format!("m{i}")))
                .args([
                    "--listen-client-urls",
                    &client,
                    "--advertise-client-urls",
                    &client,
                ])
                .args([
                    "--listen-peer-urls",
                    &peer,
                    "--initial-advertise-peer-urls",
                    &peer,
                ])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-state", "new"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            members.push(Owned::spawn(&mut cmd, "etcd", Duration::from_secs(5))?);
        }
        let hosts: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", ports[i])).collect();
        Ok(Cluster {
            members,
            url: format!("etcd://{}", hosts.join(",")),
            hosts,
        })
    }

    /// The URL naming member `first` first.
    fn url_first(&self, first: usize) -> String {
        let order = std::iter::once(first).chain((0..self.hosts.len()).filter(|i| *i != first));
        let hosts: Vec<&str> = order.map(|i| self.hosts[i].as_str()).collect();
        format!("etcd://{}", hosts.join(","))
    }
}

/// The index of a member that is not the leader (as `store check` names them: `m<i>`).
async fn follower(store: &dyn LeaseStore) -> Result<usize, String> {
    let check = store.check().await.map_err(|e| e.to_string())?;
    let members = check
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("members: "))
        .ok_or("store check names no members")?;
    let leader = members
        .split(", ")
        .find_map(|m| m.strip_suffix(" (leader)"))
        .and_then(|m| m.strip_prefix('m')?.parse::<usize>().ok())
        .ok_or_else(|| format!("no leader among {members}"))?;
    Ok((leader + 1) % 3)
}

/// `samples` asks of a fresh client of `url` (its first ask apart).
async fn asks_with_a_member_down(
    fault: &str,
    url: &str,
    check: &AskCheck,
    samples: usize,
) -> Result<FaultFigures, String> {
    let store = EtcdStore::open(url, "rfbench").map_err(|e| e.to_string())?;
    let (mut times, mut failed) = (Vec::with_capacity(samples), 0);
    let mut first_ms = 0.0;
    for i in 0..=samples {
        let t = Instant::now();
        let answered = store.ask(check).await;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        match (i, answered) {
            (_, Err(_)) => failed += 1,
            (0, Ok(_)) => first_ms = ms,
            (_, Ok(_)) => times.push(ms),
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: usize| times.get((times.len() * q / 100).min(times.len().saturating_sub(1)));
    Ok(FaultFigures {
        fault: fault.to_string(),
        first_ms,
        p50_ms: at(50).copied().unwrap_or(f64::NAN),
        p99_ms: at(99).copied().unwrap_or(f64::NAN),
        max_ms: times.last().copied().unwrap_or(f64::NAN),
        answered: times.len() + usize::from(first_ms > 0.0),
        failed,
    })
}

async fn measure(
    name: &str,
    store: Arc<dyn LeaseStore>,
    pids: &[u32],
    samples: usize,
) -> Result<StoreFigures, String> {
    let check = grant(store.as_ref()).await?;
    for _ in 0..20 {
        store.ask(&check).await.map_err(|e| e.to_string())?;
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        let judged = store.ask(&check).await.map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if judged.refusal.is_some() {
            return Err(format!("{name}: the warm ask was refused: {judged:?}"));
        }
    }
    times.sort_by(f64::total_cmp);
    let per_client = (samples / 4).max(10);
    let (cpu0, store0) = (own_cpu_us(), stores_cpu_us(pids));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (store, check) = (store.clone(), check.clone());
            tokio::spawn(async move {
                for _ in 0..per_client {
                    store.ask(&check).await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let asks = (CLIENTS * per_client) as f64;
    Ok(StoreFigures {
        name: name.to_string(),
        p50_ms: times[times.len() / 2],
        p99_ms: times[(times.len() * 99 / 100).min(times.len() - 1)],
        asks_per_s: asks / seconds,
        client_cpu_us: (own_cpu_us() - cpu0) / asks,
        store_cpu_us: (stores_cpu_us(pids) - store0) / asks,
    })
}

/// Measures both stores with `samples` sequential asks each; their processes live in `dir`.
pub fn run(dir: &Path, samples: usize) -> Result<Figures, String> {
    for sub in ["redis", "etcd"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
    }
    let redis = RedisServer::start(&dir.join("redis"), None)?;
    let cluster = Cluster::start(&dir.join("etcd"))?;
    let etcd_pids: Vec<u32> = cluster.members.iter().map(Owned::pid).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut cluster = cluster;
    let (stores, faults) = rt.block_on(async {
        let redis_store: Arc<dyn LeaseStore> =
            Arc::new(RedisStore::open(&redis.unix_url(), "rfbench").map_err(|e| e.to_string())?);
        let etcd_store: Arc<dyn LeaseStore> =
            Arc::new(EtcdStore::open(&cluster.url, "rfbench").map_err(|e| e.to_string())?);
        let stores = vec![
            measure(
                "durable Redis (AOF, fsync always)",
                redis_store,
                &[redis.pid()],
                samples,
            )
            .await?,
            measure("etcd, 3 members", etcd_store.clone(), &etcd_pids, samples).await?,
        ];
        // One member down, the first the URL names: stopped (accepts connections,
        // answers nothing), then killed.
        let check = grant(etcd_store.as_ref()).await?;
        let down = follower(etcd_store.as_ref()).await?;
        let url = cluster.url_first(down);
        cluster.members[down].signal(libc::SIGSTOP);
        let stopped =
            asks_with_a_member_down("a follower stopped (SIGSTOP)", &url, &check, samples).await;
        cluster.members[down].signal(libc::SIGCONT);
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.members[down].signal(libc::SIGKILL);
        let killed =
            asks_with_a_member_down("a follower killed (kill -9)", &url, &check, samples).await;
        Ok::<_, String>((stores, vec![stopped?, killed?]))
    })?;
    drop(cluster);
    drop(redis);
    std::fs::create_dir_all(dir.join("floors")).map_err(|e| e.to_string())?;
    let floors = Some(crate::floors::run(&dir.join("floors"), samples)?);
    Ok(Figures {
        stores,
        samples,
        faults,
        floors,
    })
}

/// The report's section.
pub fn markdown(figures: &Figures) -> String {
    let mut out = String::from(
        "## etcd beside Redis\n\nThe store's own ask, in one process (what the daemon does per warm ask, without its socket); CPU per ask of the asking process (the daemon's share) and of the store's processes.\n\n| store | p50 | p99 | asks/s, 64 clients | daemon CPU/ask | store CPU/ask |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for s in &figures.stores {
        out.push_str(&format!(
            "| {} | {:.3} ms | {:.3} ms | {:.0} | {:.0} µs | {:.0} µs |\n",
            s.name, s.p50_ms, s.p99_ms, s.asks_per_s, s.client_cpu_us, s.store_cpu_us
        ));
    }
    if let [redis, etcd] = figures.stores.as_slice() {
        out.push_str(&format!(
            "\netcd ÷ Redis: p50 {:.1}×, asks/s {:.2}×, store CPU per ask {:.1}× ({} sequential asks each).\n",
            etcd.p50_ms / redis.p50_ms,
            etcd.asks_per_s / redis.asks_per_s,
            etcd.store_cpu_us / redis.store_cpu_us.max(1.0),
            figures.samples
        ));
    }
    if !figures.faults.is_empty() {
        out.push_str(&format!(
            "\n### etcd with a member down\n\nOne member of three down, the first the URL names, so a fresh client (a restarted daemon, a CLI command) tries it first: it costs one per-member timeout (`member_timeout_ms`, default {} ms), once; then the client starts with the member that answered. The store's own ask, one client, {} sequential asks after the first.\n\n| fault | first ask | p50 | p99 | max | COULD NOT READ |\n| --- | --- | --- | --- | --- | --- |\n",
            row_fence_store::etcd::url::DEFAULT_MEMBER_TIMEOUT_MS,
            figures.samples
        ));
        for f in &figures.faults {
            out.push_str(&format!(
                "| {} | {:.1} ms | {:.3} ms | {:.3} ms | {:.1} ms | {} of {} |\n",
                f.fault,
                f.first_ms,
                f.p50_ms,
                f.p99_ms,
                f.max_ms,
                f.failed,
                f.answered + f.failed
            ));
        }
    }
    if let Some(floors) = &figures.floors {
        out.push_str(&crate::floors::markdown(floors));
    }
    out
}
