//! A lease service's own client, cold, for comparison: what a user might pick
//! instead of a fence daemon. A private single-member `etcd` in the run's temp dir on two
//! free loopback ports (client and peer), holding one key shaped like a row lease; each
//! sample is `etcdctl get` of that key, a new process connecting per sample, as
//! `redis-cli` and the Python client do. When `etcd` or `etcdctl` is missing (the system
//! packages etcd-server and etcd-client) or will not start, the case is skipped and the
//! report says why.

use crate::children::Owned;
use crate::redis_server::free_port;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The key every sample reads.
pub const KEY: &str = "rowfence/board/bench/claims/row-1";

/// A running private etcd; stopped when dropped.
pub struct Etcd {
    /// The process.
    process: Owned,
    /// `http://127.0.0.1:<client port>`.
    pub endpoint: String,
    /// `etcd --version`'s first line.
    pub version: String,
}

impl Etcd {
    /// Starts etcd with its data in `dir`, waits (≤ 15 s) until it answers and writes
    /// [`KEY`]. `Err` says why it cannot be had.
    pub fn start(dir: &Path) -> Result<Etcd, String> {
        for program in ["etcd", "etcdctl"] {
            if !on_path(program) {
                return Err(format!(
                    "{program} is not installed (Debian packages etcd-server and etcd-client; scripts/bench installs them)"
                ));
            }
        }
        let version = crate::machine::version_of(Path::new("etcd"), &["--version"]);
        let (client, peer) = (free_port()?, free_port()?);
        let endpoint = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut cmd = Command::new("etcd");
        cmd.arg("--name")
            .arg("bench")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--listen-client-urls", &endpoint])
            .args(["--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .args(["--initial-cluster-state", "new"])
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.join("etcd.log"))
                    .map_err(|e| format!("{}: {e}", dir.display()))?,
            );
        let process = Owned::spawn(&mut cmd, "etcd", Duration::from_secs(5))?;
        let mut etcd = Etcd {
            process,
            endpoint,
            version,
        };
        etcd.wait_ready(dir)?;
        let value = r#"{"holder":"lane-a","generation":1,"expires_at_ms":0}"#;
        let out = etcd
            .ctl()
            .args(["put", KEY, value])
            .output()
            .map_err(|e| format!("etcdctl put: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "etcdctl put failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(etcd)
    }

    fn wait_ready(&mut self, dir: &Path) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            let healthy = self
                .ctl()
                .args(["endpoint", "health"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if healthy {
                return Ok(());
            }
            if let Err(e) = self.process.check_alive() {
                let log = std::fs::read_to_string(dir.join("etcd.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(format!("{e}; its log ends: {}", tail.join(" / ")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "etcd did not answer on {} within 15 s",
            self.endpoint
        ))
    }

    /// `etcdctl --endpoints <this etcd>` (the v3 API), to which a sample adds `get KEY`.
    pub fn ctl(&self) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint]);
        cmd
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
