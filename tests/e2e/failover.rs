//! Redis Sentinel as the store (`redis+sentinel://`), under failover (ARCHITECTURE.md,
//! "Acknowledged means durable"): a real primary and replica and three real
//! `redis-sentinel` processes; a stream of takeovers and asks runs through a forced
//! failover (`SENTINEL FAILOVER`) and then a kill -9 of the primary. The daemon and the CLI
//! follow the elected primary, and across both the history goes to the one checker
//! (`checker.rs`): linearizable per row (no two lanes ALLOWED for the row over overlapping
//! time), no acknowledged grant lost, no generation handed out twice.
//!
//! Every wait is on an event (a sentinel's answer, a server's role, a count of
//! acknowledged grants) with a generous bound: the machine may be loaded.

use crate::checker::{Call, Return};
use crate::util::{Home, Redis, SENTINEL_MASTER, Sentinel};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every data node: fsync'd, refusing writes (our scripts included) when it has no
/// replica, so a primary a failover deposed stops answering from its old history, and
/// starting a replica's full sync at once (not after Redis's 5 s wait for more replicas).
const NODE: &[&str] = &[
    "--min-replicas-to-write",
    "1",
    "--min-replicas-max-lag",
    "10",
    "--repl-diskless-sync-delay",
    "0",
];

/// The longest any one event is waited for.
const EVENT: Duration = Duration::from_secs(90);

/// One `row-fence acquire --takeover`.
#[derive(Debug, Clone)]
struct Grant {
    lane: String,
    /// Set when it exited 0 (acknowledged and handed out).
    generation: Option<u64>,
    started: Instant,
    ended: Instant,
    stderr: String,
}

/// One ask.
#[derive(Debug, Clone)]
struct Asked {
    lane: String,
    generation: u64,
    started: Instant,
    ended: Instant,
    line: String,
    code: i32,
}

/// One `row-fence store accept-regression`.
#[derive(Debug, Clone)]
struct Accepted {
    started: Instant,
    ended: Instant,
    revision: u64,
}

#[derive(Default)]
struct Record {
    grants: Vec<Grant>,
    asks: Vec<Asked>,
    accepts: Vec<Accepted>,
    /// The newest descriptor each lane was handed: (generation, path).
    descriptors: BTreeMap<String, (u64, PathBuf)>,
    /// The lane of the newest acknowledged grant.
    newest: Option<String>,
}

fn lock(record: &Mutex<Record>) -> std::sync::MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(|p| p.into_inner())
}

/// `SENTINEL MASTER rf` as a map.
fn master_info(sentinel: &Sentinel) -> BTreeMap<String, String> {
    let out = sentinel.cli(&["SENTINEL", "MASTER", SENTINEL_MASTER]);
    let lines: Vec<&str> = out.lines().collect();
    lines
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| (pair[0].to_string(), pair[1].to_string()))
        .collect()
}

#[track_caller]
fn wait(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + EVENT;
    while !ready() {
        assert!(
            Instant::now() < until,
            "{what} did not happen within {EVENT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn role(node: &Redis) -> String {
    node.cli(&["ROLE"]).lines().next().unwrap_or("").to_string()
}

fn acked_since(record: &Mutex<Record>, since: Instant) -> usize {
    lock(record)
        .grants
        .iter()
        .filter(|g| g.generation.is_some() && g.started >= since)
        .count()
}

fn granter(home: Arc<Home>, record: Arc<Mutex<Record>>, stop: Arc<AtomicBool>) {
    let lanes = ["lane-0", "lane-1", "lane-2", "lane-3"];
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        let lane = lanes[turn % lanes.len()];
        turn += 1;
        let path = home.path(&format!("{lane}-{turn}.json"));
        let started = Instant::now();
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
        let ended = Instant::now();
        let generation = (ran.code == 0).then(|| {
            let d: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
            d["generation"].as_u64().unwrap()
        });
        {
            let mut r = lock(&record);
            if let Some(generation) = generation {
                assert!(path.exists(), "an exit 0 grant wrote its descriptor");
                r.descriptors
                    .insert(lane.to_string(), (generation, path.clone()));
                r.newest = Some(lane.to_string());
            } else {
                assert!(!path.exists(), "a failed grant wrote a descriptor");
            }
            r.grants.push(Grant {
                lane: lane.to_string(),
                generation,
                started,
                ended,
                stderr: ran.stderr.clone(),
            });
        }
        if ran.stderr.contains("went back in time") {
            // The operator's part: accept the regression; lanes re-acquire.
            let started = Instant::now();
            let accepted = home.cli(&[
                "store",
                "accept-regression",
                "b",
                "--json",
                "--timeout",
                "8s",
            ]);
            if accepted.code == 0 {
                let v: serde_json::Value = serde_json::from_str(accepted.stdout.trim()).unwrap();
                lock(&record).accepts.push(Accepted {
                    started,
                    ended: Instant::now(),
                    revision: v["revision"].as_u64().unwrap(),
                });
            }
        }
        let pause = if generation.is_some() { 20 } else { 150 };
        std::thread::sleep(Duration::from_millis(pause));
    }
}

fn asker(home: Arc<Home>, record: Arc<Mutex<Record>>, stop: Arc<AtomicBool>, seed: usize) {
    let mut turn = seed;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let pick = {
            let r = lock(&record);
            let lane = if turn.is_multiple_of(2) {
                r.newest.clone()
            } else {
                r.descriptors
                    .keys()
                    .nth(turn / 2 % r.descriptors.len().max(1))
                    .cloned()
            };
            lane.and_then(|lane| r.descriptors.get(&lane).map(|d| (lane, d.clone())))
        };
        let Some((lane, (generation, path))) = pick else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let started = Instant::now();
        let ran = home.ask_with(&path, &["--timeout-ms", "3000"]);
        lock(&record).asks.push(Asked {
            lane,
            generation,
            started,
            ended: Instant::now(),
            line: ran.verdict_line().to_string(),
            code: ran.code,
        });
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_forced_failover_and_a_killed_primary_lose_no_grant_and_never_allow_two_lanes() {
    let primary = Redis::start_tcp(NODE);
    let replica = Redis::start_replica_of(&primary, NODE);
    primary.wait_for(EVENT, "an online replica", |p| {
        p.cli(&["INFO", "replication"]).contains("state=online")
    });
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(&primary)).collect();
    for sentinel in &sentinels {
        wait("the sentinels finding each other and the replica", || {
            let info = master_info(sentinel);
            info.get("num-other-sentinels").map(String::as_str) == Some("2")
                && info.get("num-slaves").map(String::as_str) == Some("1")
        });
    }
    let mut nodes = [primary, replica];
    let url = format!(
        "redis+sentinel://{}/{SENTINEL_MASTER}",
        sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let home = Arc::new(Home::with_store(url));
    let _daemon = home.daemon();
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = vec![{
        let (home, record, stop) = (home.clone(), record.clone(), stop.clone());
        std::thread::spawn(move || granter(home, record, stop))
    }];
    for seed in 0..2 {
        let (home, record, stop) = (home.clone(), record.clone(), stop.clone());
        threads.push(std::thread::spawn(move || asker(home, record, stop, seed)));
    }
    let master_port = |s: &Sentinel| s.master_port();
    let node_at = |nodes: &[Redis; 2], port: u16| {
        nodes
            .iter()
            .position(|n| n.port == Some(port))
            .expect("a node")
    };

    let begun = Instant::now();
    wait("three acknowledged grants", || {
        acked_since(&record, begun) >= 3
    });

    // A forced failover: the replica is promoted while the old primary still runs.
    let before = master_port(&sentinels[0]).expect("a master");
    wait("SENTINEL FAILOVER accepted", || {
        sentinels[0]
            .cli(&["SENTINEL", "FAILOVER", SENTINEL_MASTER])
            .trim()
            == "OK"
    });
    wait("every sentinel naming the new primary", || {
        sentinels
            .iter()
            .all(|s| master_port(s).is_some_and(|p| p != before))
    });
    let deposed = node_at(&nodes, before);
    wait("the old primary reconfigured as a replica", || {
        role(&nodes[deposed]) == "slave"
    });
    let failed_over = Instant::now();
    wait("three grants acknowledged after the failover", || {
        acked_since(&record, failed_over) >= 3
    });

    // kill -9 of the primary, then it comes back (as a replica).
    let current = master_port(&sentinels[0]).expect("a master");
    let killed = node_at(&nodes, current);
    nodes[killed].stop();
    wait("every sentinel naming the surviving node", || {
        sentinels
            .iter()
            .all(|s| master_port(s).is_some_and(|p| p != current))
    });
    nodes[killed].restart();
    wait("the killed node back as a replica", || {
        role(&nodes[killed]) == "slave"
            && nodes[killed]
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up")
    });
    let recovered = Instant::now();
    wait("three grants acknowledged after the kill", || {
        acked_since(&record, recovered) >= 3
    });
    wait("an ALLOWED ask after the kill", || {
        lock(&record)
            .asks
            .iter()
            .any(|a| a.started >= recovered && a.code == 0)
    });
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a stream thread panicked");
    }

    let record = lock(&record);
    let acked: Vec<&Grant> = record
        .grants
        .iter()
        .filter(|g| g.generation.is_some())
        .collect();
    // The one checker (`checker.rs`): linearizable per row, no generation repeated or
    // going back, no acknowledged grant lost (unless an operator accepted a regression
    // after it), no store_regressed that no accept explains.
    let mut history = crate::checker::History::default();
    for g in &record.grants {
        let ret = g.generation.map_or(Return::Unknown, Return::Granted);
        let call = Call::Grant {
            lane: g.lane.clone(),
        };
        history.push("r", call, ret, g.started, g.ended);
    }
    for a in &record.asks {
        let call = Call::Ask {
            lane: a.lane.clone(),
            generation: a.generation,
        };
        history.push(
            "r",
            call,
            Return::of_ask(a.code, &a.line),
            a.started,
            a.ended,
        );
    }
    for a in &record.accepts {
        history.push(
            "r",
            Call::Accept,
            Return::Accepted(a.revision),
            a.started,
            a.ended,
        );
    }
    let report = crate::checker::check(&history, &crate::history::afterwards(&home, "b"));
    report.assert_sound("sentinel failover");
    let failures: Vec<&str> = record
        .grants
        .iter()
        .filter(|g| g.generation.is_none())
        .map(|g| g.stderr.as_str())
        .collect();
    eprintln!(
        "{} grants acknowledged, {} not ({:?}…), {} asks, {} allowed, {} accepts",
        acked.len(),
        failures.len(),
        failures.first(),
        record.asks.len(),
        record.asks.iter().filter(|a| a.code == 0).count(),
        record.accepts.len()
    );
}

/// A sentinel with its own password (`requirepass` in sentinel.conf) beside the data
/// nodes' (`redis+sentinel://:DATA@…`): `?sentinel_password=` reaches it, a grant and an
/// ALLOWED go through it, and neither password is printed anywhere the URL is.
#[test]
fn a_sentinel_with_its_own_password_is_reached_and_neither_password_prints() {
    const DATA: &str = "data-s3cret";
    const SENTINEL: &str = "sentinel-s3cret";
    let primary = Redis::start_tcp(&[]);
    primary.cli(&["CONFIG", "SET", "requirepass", DATA]);
    let port = primary.port.unwrap();
    let sentinel = Sentinel::watching_with(
        port,
        &format!("sentinel auth-pass {SENTINEL_MASTER} {DATA}\n"),
        Some(SENTINEL),
    );
    assert_eq!(sentinel.master_port(), Some(port));
    let base = format!(
        "redis+sentinel://:{DATA}@127.0.0.1:{}/{SENTINEL_MASTER}",
        sentinel.port
    );
    // Without it (or with a wrong one) the sentinel does not answer: nothing is granted.
    for url in [base.clone(), format!("{base}?sentinel_password=wrong")] {
        let home = Home::with_store(url.clone());
        let ran = home.cli(&["acquire", "b", "r", "--lane", "lane-a"]);
        assert_eq!(ran.code, 1, "{url}: {}", ran.stderr);
        assert!(!ran.stderr.contains(DATA), "{}", ran.stderr);
    }
    let home = Home::with_store(format!("{base}?sentinel_password={SENTINEL}"));
    let daemon = home.daemon();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let asked = home.ask_with(&a, &[]);
    asked.expect(0, "row-fence: ALLOWED");
    let check = home.cli(&["store", "check"]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    let status = home.cli(&["status"]);
    let shown = home.cli(&["show", "b"]);
    for output in [
        &asked.stderr,
        &check.stdout,
        &check.stderr,
        &status.stdout,
        &shown.stdout,
        &daemon.log_text(),
    ] {
        assert!(
            !output.contains(DATA) && !output.contains(SENTINEL),
            "a password printed: {output}"
        );
    }
    assert!(
        status.stdout.contains("sentinel") || check.stdout.contains("sentinel"),
        "{}{}",
        status.stdout,
        check.stdout
    );
}
