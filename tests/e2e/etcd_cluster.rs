//! A real 3-member etcd cluster for the tests (the system package `etcd-server`), on
//! loopback ports, its data in a temp dir (on /dev/shm when there is one: members fsync
//! every write, and the tests measure fencing, not a disk). Every member's peer port sits
//! behind a [`PeerProxy`] that can cut one member off from the others (a partition) while
//! clients still reach it: etcd's peer requests name their sender (`X-Server-From`), so the
//! proxy in front of each member drops what the cut-off member sends, and the one in front
//! of the cut-off member drops everything. Killed when dropped.

#![allow(dead_code)]

use crate::util::free_port;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Members in the cluster.
pub const MEMBERS: usize = 3;

/// Who is cut off, shared by every proxy.
#[derive(Default)]
struct Cut {
    /// Member IDs (hex, as etcd writes them) cut off from the rest.
    isolated: BTreeSet<String>,
    /// Every open proxied connection, closed when a partition starts.
    open: Vec<TcpStream>,
}

/// A TCP proxy in front of one member's peer port.
pub struct PeerProxy {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl PeerProxy {
    fn start(target: u16, member_id: Arc<Mutex<String>>, cut: Arc<Mutex<Cut>>) -> PeerProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let (member_id, cut) = (member_id.clone(), cut.clone());
                        std::thread::spawn(move || relay(client, target, &member_id, &cut));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        PeerProxy { port, stop }
    }
}

impl Drop for PeerProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Relays one peer connection unless it crosses the cut.
fn relay(mut client: TcpStream, target: u16, member_id: &Mutex<String>, cut: &Mutex<Cut>) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let _ = client.set_read_timeout(None);
    let from = String::from_utf8_lossy(&head)
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("x-server-from")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    {
        let mut cut = cut.lock().unwrap();
        let to = member_id.lock().unwrap().clone();
        if cut.isolated.contains(&from) || cut.isolated.contains(&to) {
            return;
        }
        for s in [&client, &server] {
            if let Ok(s) = s.try_clone() {
                cut.open.push(s);
            }
        }
    }
    if server.write_all(&head).is_err() {
        return;
    }
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut s2, &mut c2);
        let _ = c2.shutdown(Shutdown::Both);
    });
    let _ = std::io::copy(&mut client, &mut server);
    let _ = server.shutdown(Shutdown::Both);
    let _ = back.join();
}

/// The TLS files of a cluster serving clients over `https` with client certificates
/// (`--client-cert-auth`); the peers stay plain.
#[derive(Clone, Debug)]
pub struct ClusterTls {
    /// The CA that signed the server's and the client's certificates (PEM).
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// One member.
pub struct Member {
    pub name: String,
    pub client_port: u16,
    peer_port: u16,
    /// The proxy in front of the peer port (`None`: peers talk directly).
    proxy: Option<PeerProxy>,
    /// Its ID as etcd writes it in `X-Server-From` (hex), once the cluster is up.
    id: Arc<Mutex<String>>,
    pub data: PathBuf,
    child: Option<Child>,
    /// `https` for a cluster with [`ClusterTls`], else `http`.
    scheme: &'static str,
}

impl Member {
    /// `http://127.0.0.1:<client port>`.
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    /// The port other members reach it on: its proxy's, or its own peer port.
    fn peer_address(&self) -> u16 {
        self.proxy.as_ref().map_or(self.peer_port, |p| p.port)
    }

    /// The member's process id while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }
}

/// A running 3-member cluster.
pub struct EtcdCluster {
    pub dir: TempDir,
    pub members: Vec<Member>,
    cut: Arc<Mutex<Cut>>,
    tls: Option<ClusterTls>,
}

fn temp_dir() -> TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new().prefix("rf-etcd").tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}

impl EtcdCluster {
    /// Starts three members, each peer port behind a [`PeerProxy`] (for
    /// [`EtcdCluster::partition`]), and waits (≤ 20 s) until every one answers healthy.
    pub fn start() -> EtcdCluster {
        EtcdCluster::start_with(true, None)
    }

    /// Starts three members whose peers talk directly (no proxy: a round trip between
    /// members costs no relay threads; [`EtcdCluster::partition`] is not available).
    pub fn start_direct() -> EtcdCluster {
        EtcdCluster::start_with(false, None)
    }

    /// Starts three members (peers direct) that serve clients over TLS only and require a
    /// client certificate signed by `tls.ca`.
    pub fn start_tls(tls: ClusterTls) -> EtcdCluster {
        EtcdCluster::start_with(false, Some(tls))
    }

    /// Starts the cluster, again on fresh ports when it is not healthy within 30 s: a port
    /// found free can be taken (by another test's etcd or client socket) before a member
    /// binds it, and a member that cannot bind never becomes healthy. The third start
    /// that fails fails the test, with the members' logs.
    fn start_with(proxied: bool, tls: Option<ClusterTls>) -> EtcdCluster {
        for _ in 0..2 {
            let cluster = EtcdCluster::start_once(proxied, tls.clone());
            if cluster.healthy_within(&[0, 1, 2], Duration::from_secs(30)) {
                cluster.learn_ids();
                return cluster;
            }
        }
        let cluster = EtcdCluster::start_once(proxied, tls);
        cluster.wait_healthy(&[0, 1, 2], Duration::from_secs(45));
        cluster.learn_ids();
        cluster
    }

    fn start_once(proxied: bool, tls: Option<ClusterTls>) -> EtcdCluster {
        let dir = temp_dir();
        let cut = Arc::new(Mutex::new(Cut::default()));
        let mut members = Vec::new();
        for i in 0..MEMBERS {
            let id = Arc::new(Mutex::new(String::new()));
            let peer_port = free_port();
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port,
                proxy: proxied.then(|| PeerProxy::start(peer_port, id.clone(), cut.clone())),
                id,
                data: dir.path().join(format!("m{i}.data")),
                child: None,
                scheme: if tls.is_some() { "https" } else { "http" },
            });
        }
        let mut cluster = EtcdCluster {
            dir,
            members,
            cut,
            tls,
        };
        for i in 0..MEMBERS {
            cluster.spawn(i, "new");
        }
        cluster
    }

    /// True when each listed member answers `endpoint health` within `limit`.
    fn healthy_within(&self, members: &[usize], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let out = self.ctl(members).args(["endpoint", "health"]).output();
            if out.is_ok_and(|o| o.status.success()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_address()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial = self.initial_cluster();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("m{i}.log")))
            .unwrap();
        let m = &self.members[i];
        let client = m.endpoint();
        let mut etcd = Command::new("etcd");
        if let Some(tls) = &self.tls {
            etcd.arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        let child = etcd
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args([
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{}", m.peer_port),
            ])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{}", m.peer_address()),
            ])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "row-fence-test"])
            // Fast elections: a lost leader is replaced within about a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .env_clear()
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd (the etcd-server package) starts");
        self.members[i].child = Some(child);
    }

    /// The store URL naming every member.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!("etcd://{}", hosts.join(","))
    }

    /// The `etcds://` store URL naming every member, with the cluster's CA and the
    /// client's certificate.
    pub fn tls_url(&self) -> String {
        let tls = self.tls.as_ref().expect("a TLS cluster");
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!(
            "etcds://{}?cacert={}&cert={}&key={}",
            hosts.join(","),
            tls.ca.display(),
            tls.client_cert.display(),
            tls.client_key.display()
        )
    }

    /// The store URL naming one member only.
    pub fn url_of(&self, i: usize) -> String {
        format!("etcd://127.0.0.1:{}", self.members[i].client_port)
    }

    /// `etcdctl` (API v3) against the listed members, with the cluster's TLS files.
    pub fn ctl(&self, endpoints: &[usize]) -> Command {
        let eps: Vec<String> = endpoints
            .iter()
            .map(|i| self.members[*i].endpoint())
            .collect();
        let mut cmd = Command::new("etcdctl");
        cmd.env_clear()
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &eps.join(",")])
            .args(["--dial-timeout", "1s", "--command-timeout", "2s"]);
        if let Some(tls) = &self.tls {
            cmd.arg("--cacert")
                .arg(&tls.ca)
                .arg("--cert")
                .arg(&tls.client_cert)
                .arg("--key")
                .arg(&tls.client_key);
        }
        cmd
    }

    /// Waits until each listed member answers `endpoint health`.
    pub fn wait_healthy(&self, members: &[usize], limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let out = self.ctl(members).args(["endpoint", "health"]).output();
            if let Ok(out) = &out
                && out.status.success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd members {members:?} not healthy within {limit:?}: {:?}\n{}",
                out.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn learn_ids(&self) {
        let out = self
            .ctl(&[0, 1, 2])
            .args(["member", "list", "-w", "json"])
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("member list");
        for m in list["members"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let id = m["ID"].as_u64().unwrap();
            let member = self.members.iter().find(|x| x.name == name).unwrap();
            *member.id.lock().unwrap() = format!("{id:x}");
        }
    }

    /// The index of the leader, as the listed members see it (≤ 10 s).
    pub fn leader_among(&self, members: &[usize]) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            for &i in members {
                let out = self
                    .ctl(&[i])
                    .args(["endpoint", "status", "-w", "json"])
                    .output()
                    .unwrap();
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                    && let Some(leader) = v[0]["Status"]["leader"].as_u64()
                {
                    let hex = format!("{leader:x}");
                    if let Some(at) = self
                        .members
                        .iter()
                        .position(|m| *m.id.lock().unwrap() == hex)
                    {
                        return at;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The index of the leader.
    pub fn leader(&self) -> usize {
        self.leader_among(&[0, 1, 2])
    }

    /// Saves a snapshot of the cluster's keyspace (through member 0) to `to`.
    pub fn snapshot_save(&self, to: &Path) {
        let out = self
            .ctl(&[0])
            .args(["snapshot", "save"])
            .arg(to)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "etcdctl snapshot save: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The whole cluster restored from `snapshot`: every member killed, its data dir
    /// replaced by `etcdctl snapshot restore` (a new cluster on the same ports, as an
    /// operator restoring a backup makes it), then started and healthy again.
    pub fn restore_all(&mut self, snapshot: &Path) {
        for i in 0..MEMBERS {
            self.kill9(i);
        }
        let initial = self.initial_cluster();
        for i in 0..MEMBERS {
            let m = &self.members[i];
            std::fs::remove_dir_all(&m.data).unwrap();
            let out = Command::new("etcdctl")
                .env_clear()
                .env("ETCDCTL_API", "3")
                .args(["snapshot", "restore"])
                .arg(snapshot)
                .args(["--name", &m.name])
                .arg("--data-dir")
                .arg(&m.data)
                .args(["--initial-cluster", &initial])
                .args(["--initial-cluster-token", "row-fence-test"])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{}", m.peer_address()),
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "etcdctl snapshot restore: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for i in 0..MEMBERS {
            self.spawn(i, "new");
        }
        self.wait_healthy(&[0, 1, 2], Duration::from_secs(45));
        self.learn_ids();
    }

    /// `kill -9` of a member.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal to a running member.
    pub fn signal(&self, i: usize, signal: nix::sys::signal::Signal) {
        let pid = self.members[i].pid().expect("a running member");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
    }

    /// True once member `i`'s process has exited (etcd refusing its data, say).
    pub fn exited(&mut self, i: usize) -> bool {
        match self.members[i].child.as_mut() {
            None => true,
            Some(child) => matches!(child.try_wait(), Ok(Some(_))),
        }
    }

    /// Starts a stopped member again on its data dir.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i, "existing");
    }

    /// Cuts member `i` off from the others (clients still reach it).
    pub fn partition(&self, i: usize) {
        assert!(
            self.members[i].proxy.is_some(),
            "a partition needs the peer proxies (EtcdCluster::start)"
        );
        let id = self.members[i].id.lock().unwrap().clone();
        let mut cut = self.cut.lock().unwrap();
        cut.isolated.insert(id);
        for s in cut.open.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Ends every partition.
    pub fn heal(&self) {
        self.cut.lock().unwrap().isolated.clear();
    }

    /// Every member's log, for a failure message.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for i in 0..MEMBERS {
            let text = std::fs::read_to_string(self.dir.path().join(format!("m{i}.log")))
                .unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            all.push_str(&format!("--- m{i}\n"));
            for line in tail.into_iter().rev() {
                all.push_str(line);
                all.push('\n');
            }
        }
        all
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..MEMBERS {
            if self.members[i].child.is_some() {
                let _ = self.signal_quiet(i);
                self.kill9(i);
            }
        }
        self.heal();
    }
}

impl EtcdCluster {
    /// A stopped member must be continued before it can be killed and reaped.
    fn signal_quiet(&self, i: usize) -> Option<()> {
        let pid = self.members[i].pid()?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGCONT,
        )
        .ok()
    }
}

/// Copies a member's data dir (the member stopped meanwhile, so the copy is consistent).
pub fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// One etcd member on its own (a cluster of one) with extra flags, for what a 3-member
/// cluster does not need (authentication, request limits); its data in a temp dir, killed
/// when dropped.
pub struct SingleEtcd {
    pub dir: TempDir,
    pub client_port: u16,
    peer_port: u16,
    extra: Vec<String>,
    child: Option<Child>,
}

impl SingleEtcd {
    /// Starts it with `extra` flags and waits (≤ 20 s) until it answers.
    pub fn start(extra: &[&str]) -> SingleEtcd {
        let mut single = SingleEtcd {
            dir: temp_dir(),
            client_port: free_port(),
            peer_port: free_port(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        single.spawn("new");
        single
    }

    /// Starts one that also listens on `address` (this machine's own), on the same port.
    pub fn start_also_on(address: &str) -> SingleEtcd {
        let client_port = free_port();
        let mut single = SingleEtcd {
            dir: temp_dir(),
            client_port,
            peer_port: free_port(),
            extra: vec![
                "--listen-client-urls".into(),
                format!("http://127.0.0.1:{client_port},http://{address}:{client_port}"),
            ],
            child: None,
        };
        single.spawn("new");
        single
    }

    fn spawn(&mut self, state: &str) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .unwrap();
        let child = Command::new("etcd")
            .args(["--name", "solo"])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("solo={peer}")])
            .args(["--initial-cluster-state", state])
            .args(&self.extra)
            .env_clear()
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd (the etcd-server package) starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it and starts it again on its data with other extra flags.
    pub fn restart_with(&mut self, extra: &[&str]) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        self.spawn("existing");
    }

    /// `host:port` of its client URL.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// `etcdctl` (API v3) against it, with `args` before the command.
    pub fn ctl(&self) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env_clear()
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint()])
            .args(["--dial-timeout", "2s", "--command-timeout", "5s"]);
        cmd
    }
}

impl Drop for SingleEtcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
