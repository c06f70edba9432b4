//! The scripts run unchanged on a real Redis Cluster through the cluster client (every
//! key of a board carries its hash tag), and a slot half-migrated between two nodes ends a
//! write "slot migrating, retry" instead of running for minutes.

use crate::util::{Home, run};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One node of a private Redis Cluster, on a free loopback port; killed when dropped.
struct Node {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Node {
    /// Starts the node on a free port pair (the port and its cluster bus port, +10000).
    /// A port found free can be taken before the server binds it, so a server that fails
    /// to start, or a port answered by another process, means: try the next pair.
    fn start() -> Node {
        for _ in 0..20 {
            let Some(port) = free_port_pair() else {
                continue;
            };
            if let Some(node) = Node::try_start(port) {
                return node;
            }
        }
        panic!("no redis-server cluster node started on 20 free port pairs");
    }

    fn try_start(port: u16) -> Option<Node> {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--cluster-config-file")
            .arg(dir.path().join("nodes.conf"))
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        let mut node = Node {
            _dir: dir,
            child,
            port,
        };
        let ours = format!("process_id:{}", node.child.id());
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if node.cli(&["INFO", "server"]).contains(&ours) {
                return Some(node);
            }
            // Exited (the port was taken), or another process answers on it.
            let exited = node.child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn id(&self) -> String {
        self.cli(&["CLUSTER", "MYID"]).trim().to_string()
    }

    #[track_caller]
    fn wait_for(&self, what: &str, ready: impl Fn(&Node) -> bool) {
        let until = Instant::now() + Duration::from_secs(30);
        while !ready(self) {
            assert!(Instant::now() < until, "the cluster did not reach {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A loopback port free now whose cluster bus port (+10000) is free too.
fn free_port_pair() -> Option<u16> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    (port < 55535 && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok()).then_some(port)
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis Cluster of `n` nodes, the 16384 slots split evenly between them.
struct Cluster {
    nodes: Vec<Node>,
}

impl Cluster {
    fn start(n: usize) -> Cluster {
        let nodes: Vec<Node> = (0..n).map(|_| Node::start()).collect();
        for other in &nodes[1..] {
            nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &other.port.to_string()]);
        }
        let per = 16384 / n;
        for (i, node) in nodes.iter().enumerate() {
            let last = if i + 1 == n { 16383 } else { (i + 1) * per - 1 };
            let added = node.cli(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &(i * per).to_string(),
                &last.to_string(),
            ]);
            assert_eq!(added.trim(), "OK");
        }
        for node in &nodes {
            node.wait_for("cluster_state:ok on every node", |node| {
                node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
                    && node.cli(&["CLUSTER", "NODES"]).lines().count() == n
            });
        }
        Cluster { nodes }
    }

    fn port(&self) -> u16 {
        self.nodes[0].port
    }

    fn cli(&self, args: &[&str]) -> String {
        self.nodes[0].cli(args)
    }
}

#[test]
fn the_scripts_run_unchanged_on_a_redis_cluster() {
    let cluster = Cluster::start(1);
    let home = Home::with_store(format!("redis+cluster://127.0.0.1:{}", cluster.port()));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let controller = home.cli(&["controller", "acquire", "b", "--owner", "c1"]);
    assert_eq!(controller.code, 0, "{}", controller.stderr);
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    home.acquire(
        "b",
        "r",
        "lane-b",
        &["--takeover", "--owner", "c1", "--epoch", "1"],
    );
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    let records = home.cli(&["records", "b", "--json"]);
    assert_eq!(records.code, 0, "{}", records.stderr);
    let log = home.cli(&["log", "b"]);
    assert!(log.stdout.contains("c1"), "{}", log.stdout);
    // Every key the board has is in one slot, by its hash tag; beside them only the
    // store's identity (one key, read on its own).
    let keys = cluster.cli(&["--raw", "KEYS", "*"]);
    let board: Vec<&str> = keys.lines().filter(|k| *k != "rowfence:store-id").collect();
    assert!(board.len() >= 5, "{keys}");
    assert!(board.iter().all(|k| k.contains(":{b}:")), "{keys}");
    assert!(keys.lines().any(|k| k == "rowfence:store-id"), "{keys}");
    // A migration needs cross-slot transactions: refused with a clear message.
    let ran = run(home.command(crate::util::bin("row-fence")).args([
        "migrate",
        "b",
        "--writers-upgraded",
    ]));
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("standalone"), "{}", ran.stderr);
}

/// The reproduction: a slot half-migrated between two nodes (some of the board's keys
/// moved) made a takeover run 12.5 minutes. MOVED and ASK are followed and TRYAGAIN retried
/// briefly, then the write exits 1 "slot migrating, retry" well within its `--timeout`,
/// writing nothing, and an ask is COULD NOT READ `store_error`.
#[test]
fn a_half_migrated_slot_ends_in_slot_migrating_retry() {
    let cluster = Cluster::start(2);
    let home = Home::with_store(format!("redis+cluster://127.0.0.1:{}", cluster.port()));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let slot = cluster
        .cli(&["CLUSTER", "KEYSLOT", "{b}"])
        .trim()
        .to_string();
    let owner_port: u16 = {
        let owner = cluster
            .nodes
            .iter()
            .find(|n| n.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot]).trim() != "0");
        owner.expect("the node holding the board").port
    };
    let owner = cluster.nodes.iter().find(|n| n.port == owner_port).unwrap();
    let other = cluster.nodes.iter().find(|n| n.port != owner_port).unwrap();
    assert_eq!(
        other
            .cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &owner.id()])
            .trim(),
        "OK"
    );
    assert_eq!(
        owner
            .cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &other.id()])
            .trim(),
        "OK"
    );
    let claims = "rowfence:board:{b}:fence:claims";
    let moved = owner.cli(&[
        "MIGRATE",
        "127.0.0.1",
        &other.port.to_string(),
        claims,
        "0",
        "5000",
    ]);
    assert_eq!(moved.trim(), "OK");
    let revision = owner.cli(&["GET", "rowfence:board:{b}:fence:revision"]);

    let started = Instant::now();
    let ran = home.cli(&[
        "acquire",
        "b",
        "r",
        "--lane",
        "lane-b",
        "--takeover",
        "--timeout",
        "20s",
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("slot migrating, retry"),
        "{}",
        ran.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        owner.cli(&["GET", "rowfence:board:{b}:fence:revision"]),
        revision,
        "nothing was written"
    );
    let _daemon = home.daemon();
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_error)");
}
