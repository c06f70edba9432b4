//! The private `redis-server` every store case talks to: its own temp dir, a Unix socket
//! there, a loopback TCP port and (when certificates were made) a TLS port, both picked
//! free at start. It never touches a shared Redis (6379). It runs with the settings the
//! store requires of a production server (AOF with `appendfsync always`, no eviction), so
//! the store's durability check passes without `?durability=volatile` and every write
//! waits for its fsync, as it would for a user.

use crate::certs::Certs;
use crate::children::Owned;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A running private `redis-server`; stopped when dropped.
pub struct RedisServer {
    /// The process.
    process: Owned,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Its plain TCP port on 127.0.0.1.
    pub port: u16,
    /// Its TLS port on 127.0.0.1, when started with certificates.
    pub tls_port: Option<u16>,
}

impl RedisServer {
    /// Starts a server in `dir` (with TLS when `certs` is given) and waits (≤ 10 s) until
    /// it answers PING.
    pub fn start(dir: &Path, certs: Option<&Certs>) -> Result<RedisServer, String> {
        RedisServer::start_with(dir, certs, &[])
    }

    /// [`RedisServer::start`] with `extra` settings after the production ones (a
    /// replica's `--replicaof`, say).
    pub fn start_with(
        dir: &Path,
        certs: Option<&Certs>,
        extra: &[&str],
    ) -> Result<RedisServer, String> {
        let socket = dir.join("redis.sock");
        let port = free_port()?;
        let tls_port = certs.map(|_| free_port()).transpose()?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .args(["--maxmemory-policy", "noeviction"])
            .args(["--unixsocketperm", "700", "--port", &port.to_string()])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"));
        if let (Some(certs), Some(tls_port)) = (certs, tls_port) {
            cmd.args([
                "--tls-port",
                &tls_port.to_string(),
                "--tls-auth-clients",
                "no",
            ])
            .arg("--tls-cert-file")
            .arg(&certs.server_cert)
            .arg("--tls-key-file")
            .arg(&certs.server_key)
            .arg("--tls-ca-cert-file")
            .arg(&certs.ca);
        }
        cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::null());
        let process = Owned::spawn(&mut cmd, "redis-server", Duration::from_secs(3))?;
        let mut server = RedisServer {
            process,
            socket,
            port,
            tls_port,
        };
        server.wait_ready(dir)?;
        Ok(server)
    }

    fn wait_ready(&mut self, dir: &Path) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.cli(&["PING"]).map(|s| s.trim() == "PONG") == Ok(true) {
                return Ok(());
            }
            if let Err(e) = self.process.check_alive() {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                return Err(format!("{e}; its log:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server did not answer on {} within 10 s",
            self.socket.display()
        ))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `redis+unix://<socket>`.
    pub fn unix_url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }

    /// Runs `redis-cli -s <socket> ARGS`; its stdout, or `Err` with its stderr.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("redis-cli")
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// A TCP port on 127.0.0.1 free right now (bound, then released: the server binds it a
/// moment later).
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}
