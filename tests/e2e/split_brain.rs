//! A primary that a failover deposed but that still answers: paused (SIGSTOP) while the
//! sentinels promote a replica and then resumed, or cut off from its replicas and the
//! sentinels by a network partition while the daemon still reaches it. Real servers: a
//! primary behind a partition proxy, three replicas, three sentinels; the store URL names
//! the replica set and what a write waits for (`?replicas=3&min_replicas=2`), every data
//! node has docs/stores.md's `min-replicas-to-write 1`, `min-replicas-max-lag 10`.
//!
//! What must hold: once lane-b's takeover on the new primary is acknowledged (from another
//! machine's home, so no floor of the daemon's home knows it), no ask of lane-a that
//! begins afterwards is ALLOWED (the deposed primary fails its read barrier, and a
//! connection whose call timed out is never read from again), no ask answers
//! `store_regressed` (nothing was lost, and lane-b's generation is never judged against
//! the deposed primary's revision), and lane-b's asks reach the new primary and are
//! ALLOWED while the old one is still cut off.

use crate::history::{History, What};
use crate::partition::PartitionProxy;
use crate::util::{Home, Redis, SENTINEL_MASTER, Sentinel};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Every data node: docs/stores.md's guard against a deposed primary writing, and a full sync
/// that starts at once (Redis otherwise waits 5 s for more replicas to join a diskless
/// transfer: 15 s to start three replicas, and as long again after each failover).
pub const NODE: &[&str] = &[
    "--min-replicas-to-write",
    "1",
    "--min-replicas-max-lag",
    "10",
    "--repl-diskless-sync-delay",
    "0",
];

/// The longest any one event is waited for (the machine may be loaded).
pub const EVENT: Duration = Duration::from_secs(60);

/// A primary behind a partition proxy, three replicas of it (through the proxy), three
/// sentinels watching the proxy's address.
pub struct Deployment {
    /// The data nodes; `nodes[0]` is the first primary.
    pub nodes: Vec<Redis>,
    /// In front of `nodes[0]`: what the replicas and sentinels reach it through.
    pub proxy: PartitionProxy,
    pub sentinels: Vec<Sentinel>,
}

#[track_caller]
pub fn wait(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + EVENT;
    while !ready() {
        assert!(
            Instant::now() < until,
            "{what} did not happen within {EVENT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn master_info(sentinel: &Sentinel) -> BTreeMap<String, String> {
    let out = sentinel.cli(&["SENTINEL", "MASTER", SENTINEL_MASTER]);
    let lines: Vec<&str> = out.lines().collect();
    lines
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| (pair[0].to_string(), pair[1].to_string()))
        .collect()
}

impl Deployment {
    /// Starts it and waits until every replica is online and the sentinels know each
    /// other and every replica.
    pub fn start() -> Deployment {
        let primary = Redis::start_tcp(NODE);
        let proxy = PartitionProxy::start(primary.port.expect("TCP"));
        let mut nodes = vec![primary];
        for _ in 0..3 {
            nodes.push(Redis::start_replica_of_port(proxy.port, NODE));
        }
        wait("three online replicas", || {
            nodes[0]
                .cli(&["INFO", "replication"])
                .matches("state=online")
                .count()
                == 3
        });
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::watching(proxy.port)).collect();
        for sentinel in &sentinels {
            wait("the sentinels finding each other and the replicas", || {
                let info = master_info(sentinel);
                info.get("num-other-sentinels").map(String::as_str) == Some("2")
                    && info.get("num-slaves").map(String::as_str) == Some("3")
            });
        }
        Deployment {
            nodes,
            proxy,
            sentinels,
        }
    }

    /// The store URL: the sentinels, the replica set and what a write waits for.
    pub fn url(&self) -> String {
        format!(
            "redis+sentinel://{}/{SENTINEL_MASTER}?replicas=3&min_replicas=2",
            self.sentinels
                .iter()
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect::<Vec<_>>()
                .join(",")
        )
    }

    /// The port every sentinel names as the primary, once they agree.
    pub fn agreed_primary(&self) -> Option<u16> {
        let named: Vec<Option<u16>> = self.sentinels.iter().map(|s| s.master_port()).collect();
        named
            .first()
            .copied()
            .flatten()
            .filter(|p| named.iter().all(|n| *n == Some(*p)))
    }

    /// Waits until every sentinel names a primary other than `port`; returns it.
    pub fn wait_promoted_from(&self, port: u16) -> u16 {
        let mut promoted = None;
        wait("the sentinels promoting a replica", || {
            promoted = self.agreed_primary().filter(|p| *p != port);
            promoted.is_some()
        });
        promoted.expect("waited for it")
    }

    /// The node serving at `port` (the proxy's port is the first primary's).
    pub fn node_at(&self, port: u16) -> &Redis {
        if port == self.proxy.port {
            return &self.nodes[0];
        }
        self.nodes
            .iter()
            .find(|n| n.port == Some(port))
            .expect("a node at that port")
    }

    /// Waits until the primary at `port` has `count` online replicas.
    pub fn wait_replicas(&self, port: u16, count: usize) {
        let node = self.node_at(port);
        wait("the primary's replicas online", || {
            node.cli(&["INFO", "replication"])
                .matches("state=online")
                .count()
                >= count
        });
    }
}

/// `row-fence acquire b r --lane LANE --takeover`, retried until acknowledged (a failover
/// in progress refuses it), every attempt recorded; returns the generation, the descriptor
/// and when the acknowledgement arrived.
pub fn takeover(home: &Home, history: &History, lane: &str) -> (u64, std::path::PathBuf, Instant) {
    let until = Instant::now() + EVENT;
    loop {
        if let Some((generation, path, acked)) = history.grant(home, lane) {
            return (generation, path, acked);
        }
        assert!(
            Instant::now() < until,
            "the takeover was never acknowledged within {EVENT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asks for `lane` back to back from `threads` threads until `stop`, recording each.
fn askers(
    home: &Arc<Home>,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
    lane: &str,
    descriptor: &std::path::Path,
    generation: u64,
    threads: usize,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|_| {
            let (home, history, stop) = (home.clone(), history.clone(), stop.clone());
            let (lane, descriptor) = (lane.to_string(), descriptor.to_path_buf());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    history.ask(&home, &lane, generation, &descriptor);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect()
}

/// The counts and assertions both shapes share: the history goes to the one checker
/// (`checker.rs`: no wrong ALLOWED, no false `store_regressed`, no acknowledged grant lost),
/// lane-a asked after `taken` (lane-b's takeover acknowledged), and lane-b was ALLOWED.
fn assert_no_split_brain(home: &Home, history: &History, taken: Instant, shape: &str) {
    let report = history.check(home);
    let ops = history.ops();
    let lane_b_allowed = ops
        .iter()
        .filter(|op| matches!(&op.what, What::Ask { lane, code: 0, .. } if lane == "lane-b"))
        .count();
    let lane_a_after: Vec<_> = ops
        .iter()
        .filter(|op| op.invoked > taken)
        .filter(|op| matches!(&op.what, What::Ask { lane, .. } if lane == "lane-a"))
        .collect();
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    for op in &lane_a_after {
        if let What::Ask { line, .. } = &op.what {
            let verdict = line.split(':').take(2).collect::<Vec<_>>().join(":");
            *answers.entry(verdict).or_default() += 1;
        }
    }
    eprintln!(
        "{shape}: {} of lane-a's asks after the takeover: {answers:?}; lane-b ALLOWED {} times",
        lane_a_after.len(),
        lane_b_allowed
    );
    report.assert_sound(shape);
    assert!(
        !lane_a_after.is_empty(),
        "{shape}: lane-a asked after the takeover"
    );
    assert!(
        lane_b_allowed > 0,
        "{shape}: lane-b's asks never reached the new primary"
    );
}

/// The reproduction: the primary is paused (SIGSTOP: a VM stall) with the daemon
/// connected to it; the sentinels promote a replica and lane-b's takeover is acknowledged
/// there; lane-a keeps asking and the old primary is resumed while its asks are queued on
/// the daemon's old connection. It never answers them: the first ask that timed out
/// dropped that connection, and each later ask went to the sentinels again. Lane-b is
/// ALLOWED by the new primary while the old one is still paused.
#[test]
fn a_paused_primary_resumed_after_a_failover_never_answers_the_old_holder_allowed() {
    let deployment = Deployment::start();
    let home = Arc::new(Home::with_store(deployment.url()));
    // The takeover is made from another machine's home: no floor of this home knows it,
    // so only the read barrier and the dropped connection stand between lane-a and the
    // old primary's answer.
    let elsewhere = Home::with_store(deployment.url());
    let _daemon = home.daemon();
    let history = Arc::new(History::default());
    let (g1, a, _) = history
        .grant(&home, "lane-a")
        .expect("lane-a's grant acknowledged");
    history.ask(&home, "lane-a", g1, &a);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = askers(&home, &history, &stop, "lane-a", &a, g1, 2);

    deployment.nodes[0].signal(Signal::SIGSTOP);
    let promoted = deployment.wait_promoted_from(deployment.proxy.port);
    deployment.wait_replicas(promoted, 2);
    let (g2, b, taken) = takeover(&elsewhere, &history, "lane-b");
    threads.extend(askers(&home, &history, &stop, "lane-b", &b, g2, 1));
    std::thread::sleep(Duration::from_secs(2));
    deployment.nodes[0].signal(Signal::SIGCONT);
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("an asker panicked");
    }
    assert_no_split_brain(&home, &history, taken, "paused primary");
}

/// The reproduction: with docs/stores.md's settings, the primary is cut off from its replicas
/// and the sentinels (the proxy freezes those links) but not from the daemon. A replica is
/// promoted and lane-b's takeover is acknowledged there; the old primary still believes it
/// has its replicas (their lag is below `min-replicas-max-lag` for 10 s) and would answer
/// lane-a from its old history. Its read barrier reaches no replica, so for the whole
/// window lane-a is never ALLOWED and lane-b is never answered `store_regressed`; lane-b is
/// ALLOWED by the new primary.
#[test]
fn a_partitioned_primary_that_still_answers_never_allows_the_old_holder() {
    let deployment = Deployment::start();
    let home = Arc::new(Home::with_store(deployment.url()));
    // The takeover is made from another machine's home: no floor of this home knows it,
    // so only the read barrier and the dropped connection stand between lane-a and the
    // old primary's answer.
    let elsewhere = Home::with_store(deployment.url());
    let _daemon = home.daemon();
    let history = Arc::new(History::default());
    let (g1, a, _) = history
        .grant(&home, "lane-a")
        .expect("lane-a's grant acknowledged");
    history.ask(&home, "lane-a", g1, &a);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = askers(&home, &history, &stop, "lane-a", &a, g1, 2);

    deployment.proxy.partition();
    let parted = Instant::now();
    let promoted = deployment.wait_promoted_from(deployment.proxy.port);
    deployment.wait_replicas(promoted, 2);
    let (g2, b, taken) = takeover(&elsewhere, &history, "lane-b");
    eprintln!(
        "partitioned primary: a replica promoted and lane-b's takeover acknowledged {:?} after the partition",
        taken - parted
    );
    threads.extend(askers(&home, &history, &stop, "lane-b", &b, g2, 1));
    // The window: until the old primary's replicas lag past min-replicas-max-lag (10 s
    // after the partition) it would still run row-fence's scripts.
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("an asker panicked");
    }
    deployment.proxy.heal();
    assert_no_split_brain(&home, &history, taken, "partitioned primary");
}
