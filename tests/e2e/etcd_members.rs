//! etcd survives any minority (ARCHITECTURE.md, "The etcd store"): with one member of three
//! dead (the leader, kill -9), stopped (SIGSTOP: it accepts connections and answers
//! nothing) or cut off from the others, the CLI (`store check`, `acquire --takeover`,
//! `check`, `renew`) and a daemon started fresh meanwhile are served by the members that
//! answer: no COULD NOT READ while a quorum answers. The member at fault is the first
//! the URL names, so every fresh process tries it first: it costs one per-member timeout,
//! once. Every operation goes to the one checker (`checker.rs`); the asks' latencies are
//! printed (the bench measures them: `scripts/bench`, "etcd with a member down").
//!
//! And the authentication token (`--auth-token-ttl`, jwt after `user add`) is renewed
//! without a restart.

use crate::checker::{self, Call, Return};
use crate::etcd_cluster::{EtcdCluster, SingleEtcd};
use crate::util::{Daemon, Home, Ran};
use nix::sys::signal::Signal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The cluster's URL with member `first` named first.
fn url_first(cluster: &EtcdCluster, first: usize) -> String {
    let order = std::iter::once(first).chain((0..3).filter(|i| *i != first));
    let hosts: Vec<String> = order
        .map(|i| format!("127.0.0.1:{}", cluster.members[i].client_port))
        .collect();
    format!("etcd://{}", hosts.join(","))
}

/// The operations of the whole test, for the checker.
struct Recorder {
    history: checker::History,
    /// The newest descriptor of each lane: generation and path.
    held: Vec<(String, u64, PathBuf)>,
    /// Every ask's latency, by phase.
    latencies: Vec<(String, Vec<Duration>)>,
    turn: usize,
    /// The homes of the phases so far: their descriptors are asked again later.
    homes: Vec<Home>,
}

impl Recorder {
    /// `acquire --takeover` for `lane` through `home`: acknowledged (exit 0) or not.
    fn grant(&mut self, home: &Home, lane: &str) -> Ran {
        self.turn += 1;
        let path = home.path(&format!("{lane}-{}.json", self.turn));
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
        let ret = if ran.code == 0 {
            let g = ran.json()["generation"].as_u64().unwrap();
            self.held.push((lane.into(), g, path));
            Return::Granted(g)
        } else {
            Return::Unknown
        };
        let call = Call::Grant { lane: lane.into() };
        self.history.push("r", call, ret, invoked, Instant::now());
        ran
    }

    /// An ask through `home`'s daemon for each lane's newest descriptor, `rounds` times.
    fn asks(&mut self, home: &Home, phase: &str, rounds: usize) -> Vec<Ran> {
        let mut latencies = Vec::new();
        let mut answers = Vec::new();
        let newest: Vec<(String, u64, PathBuf)> = {
            let mut lanes: Vec<(String, u64, PathBuf)> = Vec::new();
            for (lane, g, path) in self.held.iter().rev() {
                if !lanes.iter().any(|(l, _, _)| l == lane) {
                    lanes.push((lane.clone(), *g, path.clone()));
                }
            }
            lanes
        };
        for _ in 0..rounds {
            for (lane, generation, path) in &newest {
                let invoked = Instant::now();
                let ran = home.ask_with(path, &["--timeout-ms", "3000"]);
                let completed = Instant::now();
                latencies.push(completed - invoked);
                let call = Call::Ask {
                    lane: lane.clone(),
                    generation: *generation,
                };
                let ret = Return::of_ask(ran.code, ran.verdict_line());
                self.history.push("r", call, ret, invoked, completed);
                answers.push(ran);
            }
        }
        self.latencies.push((phase.into(), latencies));
        answers
    }
}

/// A fresh home's CLI and a fresh daemon while a member is down: every command answers,
/// no ask is COULD NOT READ.
/// `silent`: the member answers nothing (dead, stopped), which `store check` notes; a
/// member cut off from the others still answers for itself.
fn served_by_the_others(
    cluster: &EtcdCluster,
    down: usize,
    silent: bool,
    phase: &str,
    rec: &mut Recorder,
) {
    let home = Home::with_store(url_first(cluster, down));
    let check = home.cli(&["store", "check"]);
    assert_eq!(check.code, 0, "{phase}: store check: {}", check.stderr);
    assert!(
        !silent || check.stdout.contains("is not answering"),
        "{phase}: store check names the member down: {}",
        check.stdout
    );
    let lane = format!("lane-{}", rec.turn % 3);
    let granted = rec.grant(&home, &lane);
    assert_eq!(granted.code, 0, "{phase}: takeover: {}", granted.stderr);
    let (_, g, path) = rec.held.last().cloned().unwrap();
    let cold = home.cli(&["check", "--descriptor", path.to_str().unwrap()]);
    assert_eq!(cold.code, 0, "{phase}: cold check: {}", cold.stderr);
    let renewed = home.cli(&[
        "renew",
        "b",
        "r",
        "--lane",
        &lane,
        "--generation",
        &g.to_string(),
        "--descriptor",
        path.to_str().unwrap(),
    ]);
    assert_eq!(renewed.code, 0, "{phase}: renew: {}", renewed.stderr);
    let daemon: Daemon = home.daemon();
    let answers = rec.asks(&home, phase, 4);
    drop(daemon);
    let unread: Vec<&str> = answers
        .iter()
        .filter(|r| r.code == 1)
        .map(|r| r.verdict_line())
        .collect();
    assert!(unread.is_empty(), "{phase}: COULD NOT READ: {unread:#?}");
    assert!(
        answers.iter().any(|r| r.code == 0),
        "{phase}: the new holder is ALLOWED"
    );
    rec.homes.push(home);
}

#[test]
fn a_member_dead_stopped_or_cut_off_before_the_cli_and_a_fresh_daemon_costs_no_could_not_read() {
    let mut cluster = EtcdCluster::start();
    let mut rec = Recorder {
        history: checker::History::default(),
        held: Vec::new(),
        latencies: Vec::new(),
        turn: 0,
        homes: Vec::new(),
    };
    let all = Home::with_store(cluster.url());
    assert_eq!(rec.grant(&all, "lane-a").code, 0);

    // The leader killed (-9) and a new one elected, before anything of the home started.
    let leader = cluster.leader();
    cluster.kill9(leader);
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    cluster.leader_among(&others);
    served_by_the_others(&cluster, leader, true, "leader killed", &mut rec);
    cluster.restart(leader);
    cluster.wait_healthy(&[0, 1, 2], Duration::from_secs(45));

    // A follower stopped: it accepts connections and answers nothing.
    let leader = cluster.leader();
    let follower = (leader + 1) % 3;
    cluster.signal(follower, Signal::SIGSTOP);
    served_by_the_others(&cluster, follower, true, "follower stopped", &mut rec);
    cluster.signal(follower, Signal::SIGCONT);
    cluster.wait_healthy(&[0, 1, 2], Duration::from_secs(45));

    // A follower cut off from the others (clients still reach it).
    let leader = cluster.leader();
    let follower = (leader + 2) % 3;
    cluster.partition(follower);
    served_by_the_others(&cluster, follower, false, "follower cut off", &mut rec);
    cluster.heal();

    for (phase, latencies) in &rec.latencies {
        let mut ms: Vec<u128> = latencies.iter().map(|d| d.as_millis()).collect();
        ms.sort();
        eprintln!(
            "{phase}: {} asks through a fresh daemon, latency ms: min {} median {} max {}",
            ms.len(),
            ms[0],
            ms[ms.len() / 2],
            ms[ms.len() - 1]
        );
    }
    let report = checker::check(&rec.history, &crate::history::afterwards(&all, "b"));
    report.assert_sound("etcd, a member down");
    assert_eq!(report.could_not_read, 0, "{report:?}");
}

/// An authenticated single member (user root) with `extra` flags: its endpoint's store URL.
fn with_auth(extra: &[&str]) -> (SingleEtcd, String) {
    let etcd = SingleEtcd::start(extra);
    for args in [
        &["user", "add", "root", "--new-user-password=rootpw"][..],
        &["user", "grant-role", "root", "root"],
        &["auth", "enable"],
    ] {
        let out = etcd.ctl().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let url = format!("etcd://root:rootpw@{}", etcd.endpoint());
    (etcd, url)
}

/// The reproductions: a simple token past `--auth-token-ttl` while the daemon was idle,
/// and a jwt token issued before `etcdctl user add` ("revision of auth store is old"):
/// the daemon's next ask re-authenticates and is answered, with no restart.
#[test]
fn an_expired_or_outdated_auth_token_is_renewed_without_a_restart() {
    // Simple tokens that expire after 2 s idle.
    let (etcd, url) = with_auth(&["--auth-token", "simple", "--auth-token-ttl", "2"]);
    let home = Home::with_store(url);
    let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "1h"]);
    let _daemon = home.daemon_with(&["--heartbeat-ms", "60000"], &[]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    std::thread::sleep(Duration::from_millis(3_500));
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    drop(etcd);

    // jwt tokens, outdated by a change of the auth store.
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("jwt.key"), dir.path().join("jwt.pub"));
    for args in [
        vec!["genrsa", "-out", key.to_str().unwrap(), "2048"],
        vec![
            "rsa",
            "-in",
            key.to_str().unwrap(),
            "-pubout",
            "-out",
            public.to_str().unwrap(),
        ],
    ] {
        let out = std::process::Command::new("openssl")
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl {args:?}");
    }
    let jwt = format!(
        "jwt,pub-key={},priv-key={},sign-method=RS256,ttl=1h",
        public.display(),
        key.display()
    );
    let (etcd, url) = with_auth(&["--auth-token", &jwt]);
    let home = Home::with_store(url);
    let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "1h"]);
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let out = etcd
        .ctl()
        .args(["--user", "root:rootpw", "user", "add", "other-app"])
        .arg("--new-user-password=x")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for _ in 0..3 {
        home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    }
}
