//! Recorded histories, checked afterwards (as Jepsen does): concurrent clients take a row
//! over, renew it and ask for it through the daemon while faults are injected, every
//! operation's invoke and complete times are recorded, and then the history and the store
//! as it is afterwards go to the one checker (`checker.rs`): linearizable as a per-row lease
//! register, no generation repeated or going back, no acknowledged grant lost, no false
//! `store_regressed` (nothing acknowledged was lost, so none is true).
//!
//! On the file store (daemon kill -9, writers killed mid-write, renews racing asks), a
//! standalone Redis (kill -9 and restart, SIGSTOP past the asks' deadlines) and a Sentinel
//! deployment (a partition of the primary, then a pause of the next one) and a 3-member
//! etcd cluster (the leader killed, then the next leader paused). Each run is bounded: a
//! few seconds of traffic around each fault.

use crate::checker::{self, Afterwards, Call, Report, Return};
use crate::split_brain::{Deployment, wait};
use crate::util::{Home, Redis};
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one operation was and how it ended.
#[derive(Clone, Debug)]
pub enum What {
    /// `acquire --takeover`: acknowledged (exit 0) at `generation`, or not (`None`: it
    /// failed, or was killed, and may or may not have committed).
    Grant {
        lane: String,
        generation: Option<u64>,
    },
    /// `renew` of `lane`'s grant at `generation`: whether it was acknowledged.
    Renew {
        lane: String,
        generation: u64,
        ok: bool,
    },
    /// `row-fence-ask` for `lane` at `generation`: its exit code and verdict line.
    Ask {
        lane: String,
        generation: u64,
        code: i32,
        line: String,
    },
}

/// One operation with its invoke and complete times.
#[derive(Clone, Debug)]
pub struct Op {
    pub what: What,
    pub invoked: Instant,
    pub completed: Instant,
}

/// The operations so far, and the newest descriptor each lane was handed.
#[derive(Default)]
pub struct History {
    ops: Mutex<Vec<Op>>,
    descriptors: Mutex<BTreeMap<String, (u64, PathBuf)>>,
    attempts: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl History {
    /// A copy of every operation recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        lock(&self.ops).clone()
    }

    fn push(&self, what: What, invoked: Instant) {
        lock(&self.ops).push(Op {
            what,
            invoked,
            completed: Instant::now(),
        });
    }

    /// One `acquire --takeover` of row `b/r` for `lane` (a descriptor path of its own per
    /// attempt), recorded; the generation, descriptor and completion time when it was
    /// acknowledged.
    pub fn grant(&self, home: &Home, lane: &str) -> Option<(u64, PathBuf, Instant)> {
        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed);
        let path = home.path(&format!("{lane}-{attempt}.json"));
        let invoked = Instant::now();
        let ran = home.cli(&[
            "acquire",
            "b",
            "r",
            "--lane",
            lane,
            "--takeover",
            "--ttl",
            "1h",
            "--write-descriptor",
            path.to_str().unwrap(),
            "--timeout",
            "8s",
        ]);
        let generation = (ran.code == 0).then(|| {
            let d: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
            d["generation"].as_u64().unwrap()
        });
        assert_eq!(
            generation.is_some(),
            path.exists(),
            "a descriptor is written exactly for an acknowledged grant: {}",
            ran.stderr
        );
        self.push(
            What::Grant {
                lane: lane.into(),
                generation,
            },
            invoked,
        );
        let generation = generation?;
        let completed = Instant::now();
        lock(&self.descriptors).insert(lane.into(), (generation, path.clone()));
        Some((generation, path, completed))
    }

    /// An `acquire --takeover` killed (SIGKILL) after `after`: recorded as not
    /// acknowledged, whatever it committed.
    pub fn killed_grant(&self, home: &Home, lane: &str, after: Duration) {
        let attempt = self.attempts.fetch_add(1, Ordering::Relaxed);
        let path = home.path(&format!("{lane}-{attempt}.json"));
        let invoked = Instant::now();
        let mut child = home
            .command(crate::util::bin("row-fence"))
            .args([
                "acquire",
                "b",
                "r",
                "--lane",
                lane,
                "--takeover",
                "--ttl",
                "1h",
            ])
            .arg("--write-descriptor")
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("row-fence");
        std::thread::sleep(after);
        let _ = child.kill();
        let status = child.wait().expect("wait");
        let generation = if status.success() {
            std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|d| d["generation"].as_u64())
        } else {
            None
        };
        if let Some(g) = generation {
            lock(&self.descriptors).insert(lane.into(), (g, path));
        }
        self.push(
            What::Grant {
                lane: lane.into(),
                generation,
            },
            invoked,
        );
    }

    /// One `renew` of `lane` at `generation` with the descriptor its grant wrote (its
    /// lease token proves the holder), recorded.
    pub fn renew(&self, home: &Home, lane: &str, generation: u64) {
        let Some(descriptor) = lock(&self.descriptors).get(lane).map(|(_, p)| p.clone()) else {
            return;
        };
        let invoked = Instant::now();
        let ran = home.cli(&[
            "renew",
            "b",
            "r",
            "--lane",
            lane,
            "--generation",
            &generation.to_string(),
            "--descriptor",
            descriptor.to_str().unwrap(),
            "--timeout",
            "8s",
        ]);
        self.push(
            What::Renew {
                lane: lane.into(),
                generation,
                ok: ran.code == 0,
            },
            invoked,
        );
    }

    /// One ask through the daemon, recorded; its exit code.
    pub fn ask(&self, home: &Home, lane: &str, generation: u64, descriptor: &Path) -> i32 {
        let invoked = Instant::now();
        let ran = home.ask_with(descriptor, &["--timeout-ms", "3000"]);
        self.push(
            What::Ask {
                lane: lane.into(),
                generation,
                code: ran.code,
                line: ran.verdict_line().to_string(),
            },
            invoked,
        );
        ran.code
    }

    /// A descriptor to ask with: the newest grant's on even turns, another lane's on odd
    /// ones (an older generation, the one a takeover superseded).
    fn pick(&self, turn: usize) -> Option<(String, u64, PathBuf)> {
        let descriptors = lock(&self.descriptors);
        let newest = descriptors.iter().max_by_key(|(_, (g, _))| *g)?;
        let (lane, (generation, path)) = if turn.is_multiple_of(2) {
            newest
        } else {
            descriptors.iter().nth(turn / 2 % descriptors.len())?
        };
        Some((lane.clone(), *generation, path.clone()))
    }

    /// The newest acknowledged grant: its lane and generation.
    fn newest(&self) -> Option<(String, u64)> {
        lock(&self.descriptors)
            .iter()
            .max_by_key(|(_, (g, _))| *g)
            .map(|(lane, (g, _))| (lane.clone(), *g))
    }

    /// The history as the checker reads it (row `r`).
    pub fn events(&self) -> checker::History {
        let mut history = checker::History::default();
        for op in self.ops() {
            let (call, ret) = match op.what {
                What::Grant { lane, generation } => (
                    Call::Grant { lane },
                    generation.map_or(Return::Unknown, Return::Granted),
                ),
                What::Renew {
                    lane,
                    generation,
                    ok,
                } => (
                    Call::Renew { lane, generation },
                    if ok { Return::Renewed } else { Return::Unknown },
                ),
                What::Ask {
                    lane,
                    generation,
                    code,
                    line,
                } => (Call::Ask { lane, generation }, Return::of_ask(code, &line)),
            };
            history.push("r", call, ret, op.invoked, op.completed);
        }
        history
    }

    /// Checks the history against the store `home` reads now (board `b`, waiting until
    /// it answers after the faults).
    pub fn check(&self, home: &Home) -> Report {
        checker::check(&self.events(), &afterwards(home, "b"))
    }

    /// Checks the history (the checker's rules) and asserts it is sound, with at least
    /// one acknowledged grant and one ALLOWED ask. Prints the counts under `name`.
    pub fn assert_sound(&self, home: &Home, name: &str) {
        let report = self.check(home);
        report.assert_sound(name);
        assert!(report.acknowledged > 0 && report.allowed > 0, "{report:?}");
    }
}

/// What board `board`'s claims hold, read through `home`'s CLI once the store answers.
pub fn afterwards(home: &Home, board: &str) -> Afterwards {
    let mut claims = serde_json::Value::Null;
    wait("the board readable after the faults", || {
        let ran = home.cli(&["records", board, "claims", "--json"]);
        if ran.code == 0 {
            claims = serde_json::from_str(ran.stdout.trim()).unwrap();
        }
        ran.code == 0
    });
    let at = Instant::now();
    let rows = claims["sections"]["claims"]
        .as_object()
        .map(|rows| {
            rows.iter()
                .map(|(row, record)| {
                    let lease = &record["v"];
                    let held = lease["holder"]
                        .as_str()
                        .zip(lease["generation"].as_u64())
                        .map(|(h, g)| (h.to_string(), g));
                    (row.clone(), held)
                })
                .collect()
        })
        .unwrap_or_default();
    Afterwards { rows, at }
}

/// The clients, until `stop`: one granter taking the row over for three lanes in turn and
/// one renewer renewing the newest grant, both from `writers`' home, and two askers asking
/// the daemon of `home` with the newest descriptor and older ones.
pub fn clients(
    home: &Arc<Home>,
    writers: &Arc<Home>,
    history: &Arc<History>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    {
        let (home, history, stop) = (writers.clone(), history.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let lanes = ["lane-0", "lane-1", "lane-2"];
            let mut turn = 0;
            while !stop.load(Ordering::Relaxed) {
                let acked = history.grant(&home, lanes[turn % lanes.len()]).is_some();
                turn += 1;
                std::thread::sleep(Duration::from_millis(if acked { 150 } else { 300 }));
            }
        }));
    }
    {
        let (home, history, stop) = (writers.clone(), history.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match history.newest() {
                    Some((lane, generation)) => history.renew(&home, &lane, generation),
                    None => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }));
    }
    for seed in 0..2 {
        let (home, history, stop) = (home.clone(), history.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut turn = seed;
            while !stop.load(Ordering::Relaxed) {
                turn += 1;
                match history.pick(turn) {
                    Some((lane, generation, path)) => {
                        history.ask(&home, &lane, generation, &path);
                    }
                    None => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }));
    }
    threads
}

/// Runs the clients (writing from `writers`' home) while `faults` runs, then stops and
/// joins them.
fn recorded(home: &Arc<Home>, writers: &Arc<Home>, faults: impl FnOnce(&History)) -> Arc<History> {
    let history = Arc::new(History::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads = clients(home, writers, &history, &stop);
    wait("a first acknowledged grant", || history.newest().is_some());
    faults(&history);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a client panicked");
    }
    history
}

/// The file store: the daemon killed (-9) and restarted twice, writers killed at random
/// moments of their write, renews racing asks throughout.
#[test]
fn file_store_history_under_daemon_and_writer_kills_has_no_wrong_allowed() {
    let home = Arc::new(Home::file());
    let mut daemon = Some(home.daemon());
    let history = recorded(&home, &home, |history| {
        for round in 0..2 {
            std::thread::sleep(Duration::from_secs(2));
            if let Some(mut d) = daemon.take() {
                d.kill();
            }
            for (i, ms) in [0u64, 3, 7, 12, 20].iter().enumerate() {
                history.killed_grant(
                    &home,
                    &format!("lane-k{}", (round + i) % 2),
                    Duration::from_millis(*ms),
                );
            }
            daemon = Some(home.daemon());
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    history.assert_sound(&home, "file store");
}

/// A standalone Redis (fsync'd AOF): killed (-9) and restarted, then paused past the asks'
/// deadlines and resumed.
#[test]
fn standalone_redis_history_under_kill_and_pause_has_no_wrong_allowed() {
    let mut redis = Redis::start();
    let home = Arc::new(Home::on(Some(&redis)));
    let _daemon = home.daemon();
    let history = recorded(&home, &home, |_| {
        std::thread::sleep(Duration::from_secs(2));
        redis.stop();
        std::thread::sleep(Duration::from_millis(500));
        redis.restart();
        std::thread::sleep(Duration::from_secs(2));
        redis.signal(Signal::SIGSTOP);
        std::thread::sleep(Duration::from_secs(4));
        redis.signal(Signal::SIGCONT);
        std::thread::sleep(Duration::from_secs(3));
    });
    history.assert_sound(&home, "standalone redis");
}

/// Redis Sentinel (a primary, three replicas, three sentinels; `?replicas=3&min_replicas=2`;
/// the writes from another home than the daemon's): the primary is partitioned from its replicas and the sentinels (not from the daemon)
/// until a replica is promoted, then healed; then the new primary is paused until the next
/// one is promoted, then resumed.
#[test]
fn sentinel_history_under_a_partition_and_a_pause_has_no_wrong_allowed() {
    let deployment = Deployment::start();
    let home = Arc::new(Home::with_store(deployment.url()));
    // Grants and renews come from another machine's home: the daemon's home floors never
    // see them, so only the read barrier keeps a deposed primary from answering.
    let writers = Arc::new(Home::with_store(deployment.url()));
    let _daemon = home.daemon();
    let history = recorded(&home, &writers, |_| {
        std::thread::sleep(Duration::from_secs(2));
        deployment.proxy.partition();
        let first = deployment.wait_promoted_from(deployment.proxy.port);
        deployment.wait_replicas(first, 2);
        std::thread::sleep(Duration::from_secs(2));
        deployment.proxy.heal();
        deployment.wait_replicas(first, 3);
        let paused = deployment.node_at(first);
        paused.signal(Signal::SIGSTOP);
        let second = deployment.wait_promoted_from(first);
        deployment.wait_replicas(second, 2);
        paused.signal(Signal::SIGCONT);
        std::thread::sleep(Duration::from_secs(3));
    });
    history.assert_sound(&home, "sentinel");
}

/// etcd (3 members; the writes from another home than the daemon's, so only the cluster
/// keeps the daemon right): the leader killed (-9) and restarted, then the next leader
/// paused past the asks' deadlines and continued.
#[test]
fn etcd_history_under_a_leader_kill_and_a_leader_pause_has_no_wrong_allowed() {
    let mut cluster = crate::etcd_cluster::EtcdCluster::start_direct();
    let home = Arc::new(Home::with_store(cluster.url()));
    let writers = Arc::new(Home::with_store(cluster.url()));
    let _daemon = home.daemon();
    let history = recorded(&home, &writers, |_| {
        std::thread::sleep(Duration::from_secs(2));
        let killed = cluster.leader();
        cluster.kill9(killed);
        std::thread::sleep(Duration::from_millis(1_500));
        cluster.restart(killed);
        cluster.wait_healthy(&[0, 1, 2], Duration::from_secs(45));
        std::thread::sleep(Duration::from_millis(1_500));
        let paused = cluster.leader();
        cluster.signal(paused, Signal::SIGSTOP);
        std::thread::sleep(Duration::from_secs(3));
        cluster.signal(paused, Signal::SIGCONT);
        std::thread::sleep(Duration::from_secs(2));
    });
    let report = history.check(&home);
    report.assert_sound("etcd");
    assert!(report.renews > 0, "no renew was acknowledged");
}
