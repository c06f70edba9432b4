//! The scripts run unchanged on a real (one-node) Redis Cluster through the cluster
//! client: every key of a board carries its hash tag.

use crate::util::{Home, run};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A one-node Redis Cluster with every slot assigned, on a free loopback port.
struct Cluster {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl Cluster {
    /// Starts the node on a free port pair (the port and its cluster bus port, +10000).
    /// A port found free can be taken before the server binds it, so a server that fails
    /// to start, or a port answered by another process, means: try the next pair.
    fn start() -> Cluster {
        for _ in 0..20 {
            let Some(port) = free_port_pair() else {
                continue;
            };
            if let Some(cluster) = Cluster::try_start(port) {
                return cluster.with_every_slot();
            }
        }
        panic!("no redis-server cluster node started on 20 free port pairs");
    }

    fn try_start(port: u16) -> Option<Cluster> {
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
        let mut cluster = Cluster {
            _dir: dir,
            child,
            port,
        };
        let ours = format!("process_id:{}", cluster.child.id());
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if cluster.cli(&["INFO", "server"]).contains(&ours) {
                return Some(cluster);
            }
            // Exited (the port was taken), or another process answers on it.
            let exited = cluster.child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn with_every_slot(self) -> Cluster {
        assert_eq!(
            self.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).trim(),
            "OK"
        );
        let until = Instant::now() + Duration::from_secs(10);
        while !self.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(Instant::now() < until, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        self
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
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

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_scripts_run_unchanged_on_a_redis_cluster() {
    let cluster = Cluster::start();
    let home = Home::with_store(format!("redis+cluster://127.0.0.1:{}", cluster.port));
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
    // Every key the board has is in one slot, by its hash tag.
    let keys = cluster.cli(&["--raw", "KEYS", "*"]);
    assert!(keys.lines().count() >= 5, "{keys}");
    assert!(keys.lines().all(|k| k.contains(":{b}:")), "{keys}");
    // A migration needs cross-slot transactions: refused with a clear message.
    let ran = run(home.command(crate::util::bin("row-fence")).args([
        "migrate",
        "b",
        "--writers-upgraded",
    ]));
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("standalone"), "{}", ran.stderr);
}
