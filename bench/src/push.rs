//! The daemon's push case (`--only push`): a `git push` through the daemon (the lane's git
//! runs `git-remote-row-fence`, the daemon judges the lease and every ref and streams the
//! pack to the forge with the credential it holds) ÷ a direct `git push` to the same
//! server with the same credential, p50 against p50 over interleaved pushes of one small
//! commit each (target ≤ 1.15×); then one push of a 50 MB commit each way (target ≤ 1.2×)
//! with the daemon's peak RSS growth over it (target < 16 MB: the pack is spooled to
//! disk, not held). Two transports, each a pair of arms:
//!
//! - ssh: a real `sshd` and one key (the daemon's `--broker-key`, the direct git's `-i`);
//! - HTTPS: a real lighttpd in front of `git http-backend` ([`crate::https_forge`]) and
//!   one token (loaded into the daemon with `row-fence token add`, the direct git's basic
//!   auth). When lighttpd cannot be had the HTTPS pair is absent and the report says why.
//!
//! Everything is private to the run and on loopback: two bare repositories per transport
//! (one per arm, so neither arm's refs move under the other); one daemon under test on
//! the file store with the key broker's flags (the key, the pinned host key),
//! `--push-socket` and a `--push-forge` per transport (`--push-ca` for the HTTPS one);
//! the lane's row ALLOWED (the same-uid mode: the helper names the lane by its descriptor).

mod report;
mod world;

pub use report::report;

use crate::children::Owned;
use crate::https_forge::HttpsForge;
use crate::local::{free_port, io, keygen, log, text, wait_for, which};
use crate::options::Options;
use crate::rss;
use crate::sample::Sampler;
use crate::stats::Summary;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use world::World;

/// A small push through the daemon may take at most this many times a direct one (p50).
pub const TARGET_RATIO: f64 = 1.15;

/// A 50 MB push through the daemon may take at most this many times a direct one.
pub const TARGET_LARGE_RATIO: f64 = 1.2;

/// The daemon's RSS may grow by less than this over a 50 MB push, in MB.
pub const TARGET_RSS_MB: f64 = 16.0;

/// The large commit's size, in bytes (random: it does not compress); `--smoke` pushes a
/// tenth of it (it shows the case works, not its figure).
fn large_bytes(options: &Options) -> usize {
    if options.smoke { 5_000_000 } else { 50_000_000 }
}

/// One transport's figures: through the daemon against direct.
#[derive(Clone, Debug)]
pub struct Pair {
    /// Small pushes through the daemon.
    pub daemon: Summary,
    /// Small pushes straight to the server with the same credential.
    pub direct: Summary,
    /// The large push through the daemon, in ms.
    pub large_daemon_ms: f64,
    /// The large push straight to the server, in ms.
    pub large_direct_ms: f64,
    /// The daemon's peak RSS over the large push minus its RSS before, in MB.
    pub large_rss_growth_mb: f64,
    /// Small pushes that did not exit 0, both arms together.
    pub failed: usize,
}

impl Pair {
    /// daemon p50 ÷ direct p50 (0 when the direct arm has no samples).
    pub fn ratio(&self) -> f64 {
        self.daemon.p50_over(&self.direct)
    }

    /// The large push's daemon ÷ direct.
    pub fn large_ratio(&self) -> f64 {
        if self.large_direct_ms > 0.0 {
            self.large_daemon_ms / self.large_direct_ms
        } else {
            0.0
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Over ssh, to sshd with the same key.
    pub ssh: Pair,
    /// Over HTTPS, to lighttpd + `git http-backend` with the same token; `Err`: why the
    /// pair is absent (no lighttpd to be had).
    pub https: Result<Pair, String>,
    /// The HTTPS server's version line (empty when absent).
    pub https_server: String,
    /// The large commit's size, in MB.
    pub large_mb: f64,
}

/// Pushes per arm: full, `--quick`, `--smoke`.
fn samples(options: &Options) -> usize {
    match (options.smoke, options.quick) {
        (true, _) => 5,
        (false, true) => 40,
        (false, false) => 120,
    }
}

/// A pair's two clones: the one whose remote is `row-fence::…` and the direct one.
struct Clones {
    daemon: PathBuf,
    direct: PathBuf,
}

/// Runs the case; `bin_dir` holds `row-fence`, `row-fence-resident` and
/// `git-remote-row-fence`.
pub fn run(options: &Options, bin_dir: &Path) -> Result<Figures, String> {
    for program in ["ssh", "ssh-keygen", "git"] {
        which(program)?;
    }
    let dir = tempfile::Builder::new()
        .prefix("rf-bench-push")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))?;
    let root = dir.path().to_path_buf();
    // sshd refuses to serve a user whose paths others can write; the temp dir is 0700.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).map_err(io("chmod"))?;
    let user = whoami()?;
    let (_sshd, port, known) = sshd(&root, &user)?;
    let world = World {
        root: root.clone(),
        bin_dir: bin_dir.to_path_buf(),
        ssh: format!(
            "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -i {} -o UserKnownHostsFile={} -o GlobalKnownHostsFile=/dev/null -o ControlMaster=no -o ControlPath=none",
            root.join("key").display(),
            known.display()
        ),
    };
    let ssh_url = |repo: &str| format!("ssh://{user}@127.0.0.1:{port}{}/{repo}", root.display());
    let ssh = Clones {
        daemon: root.join("daemon"),
        direct: root.join("direct"),
    };
    world.repository(
        &root.join("daemon.git"),
        &ssh.daemon,
        &format!("row-fence::{}", ssh_url("daemon.git")),
    )?;
    world.repository(
        &root.join("direct.git"),
        &ssh.direct,
        &ssh_url("direct.git"),
    )?;

    let repos = root.join("https-repos");
    fs::create_dir(&repos).map_err(io("the HTTPS forge's repositories"))?;
    // No lighttpd to be had leaves the HTTPS pair out, with why; a failure once it is up
    // fails the case.
    let https = match HttpsForge::start(&root.join("https"), &repos) {
        Ok(forge) => {
            let clones = https_clones(&world, &forge, &repos)?;
            Ok((forge, clones))
        }
        Err(why) => Err(why),
    };

    let mut daemon = world.ours("row-fence-resident");
    daemon
        .arg("--broker-socket")
        .arg(root.join("agent.sock"))
        .arg("--broker-key")
        .arg(root.join("key"))
        .arg("--broker-forge-host-key")
        .arg(root.join("host.pub"))
        .arg("--broker-forge-user")
        .arg(&user)
        .arg("--push-socket")
        .arg(root.join("push.sock"))
        .arg("--push-forge")
        .arg(format!("ssh://{user}@127.0.0.1:{port}/"));
    if let Ok((forge, _)) = &https {
        daemon
            .arg("--push-forge")
            .arg(forge.forge_flag())
            .arg("--push-ca")
            .arg(&forge.ca);
    }
    daemon
        .stdout(Stdio::null())
        .stderr(log(&root.join("daemon.log"))?);
    let daemon_proc = Owned::spawn(&mut daemon, "row-fence-resident", Duration::from_secs(5))?;
    wait_for("the push socket", || root.join("push.sock").exists())?;
    let descriptor = ssh.daemon.join(".git").join("row-fence.json");
    checked(
        world
            .ours("row-fence")
            .args(["acquire", "b", "r1", "--lane", "lane-a", "--ttl", "2h"])
            .arg("--write-descriptor")
            .arg(&descriptor),
        "row-fence acquire",
    )?;
    if let Ok((forge, clones)) = &https {
        // The same lane and lease in the HTTPS arm's clone.
        fs::copy(
            &descriptor,
            clones.daemon.join(".git").join("row-fence.json"),
        )
        .map_err(io("the HTTPS clone's descriptor"))?;
        load_token(&world, &forge.token)?;
    }

    // Every arm in one rotation, so a neighbour's load slows all alike: ssh's pair, then
    // HTTPS's when there is one.
    let mut clones = vec![ssh.daemon.clone(), ssh.direct.clone()];
    if let Ok((_, https)) = &https {
        clones.extend([https.daemon.clone(), https.direct.clone()]);
    }
    // One push each, checked, before anything is timed.
    for (i, clone) in clones.iter().enumerate() {
        world.commit(clone, i, None)?;
        world.push_checked(clone, "the first push")?;
    }
    let sampler = Sampler::new();
    let n = samples(options);
    let mut walls: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); clones.len()];
    let mut failed = vec![0; clones.len()];
    for i in 0..n {
        for k in 0..clones.len() {
            let arm = (i + k) % clones.len();
            world.commit(&clones[arm], 10 + i, None)?;
            let sample = sampler.time(&mut world.push(&clones[arm]))?;
            if sample.code == 0 {
                walls[arm].push(sample.wall);
            } else {
                failed[arm] += 1;
            }
        }
    }

    let large = random_bytes(large_bytes(options))?;
    let pid = daemon_proc.pid();
    let pair = |at: usize, clones: &Clones| -> Result<Pair, String> {
        let (large_direct_ms, large_daemon_ms, growth) = large_push(&world, clones, &large, pid)?;
        Ok(Pair {
            daemon: Summary::of(&walls[at]),
            direct: Summary::of(&walls[at + 1]),
            large_daemon_ms,
            large_direct_ms,
            large_rss_growth_mb: growth,
            failed: failed[at] + failed[at + 1],
        })
    };
    let ssh_pair = pair(0, &ssh)?;
    let (https, https_server) = match &https {
        Ok((forge, clones)) => (Ok(pair(2, clones)?), forge.version.clone()),
        Err(why) => (Err(why.clone()), String::new()),
    };
    Ok(Figures {
        ssh: ssh_pair,
        https,
        https_server,
        large_mb: large.len() as f64 / 1e6,
    })
}

/// A private sshd on a free loopback port serving `user` with the run's key (`key`, made
/// here with the host key `host`); its process, port and a known_hosts file pinning it.
fn sshd(root: &Path, user: &str) -> Result<(Owned, u16, PathBuf), String> {
    let sshd = which("sshd").or_else(|_| {
        let p = PathBuf::from("/usr/sbin/sshd");
        if p.exists() {
            Ok(p)
        } else {
            Err("sshd is not installed (openssh-server)".to_string())
        }
    })?;
    for (name, comment) in [
        ("key", "row-fence-bench-push"),
        ("host", "row-fence-bench-host"),
    ] {
        keygen(&root.join(name), comment)?;
    }
    let port = free_port()?;
    let authorized = root.join("authorized_keys");
    fs::copy(root.join("key.pub"), &authorized).map_err(io("authorized_keys"))?;
    fs::write(
        root.join("sshd_config"),
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {root}/sshd.pid\nAuthorizedKeysFile {auth}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowUsers {user}\nMaxStartups 100:30:200\nLogLevel ERROR\n",
            host = root.join("host").display(),
            root = root.display(),
            auth = authorized.display(),
        ),
    )
    .map_err(io("sshd_config"))?;
    if nix_is_root() {
        // sshd's privilege separation directory.
        fs::create_dir_all("/run/sshd").map_err(io("/run/sshd"))?;
    }
    let process = Owned::spawn(
        Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(root.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(log(&root.join("sshd.log"))?),
        "sshd",
        Duration::from_secs(2),
    )?;
    wait_for("sshd", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })?;
    let known = root.join("known_hosts");
    let host_pub = fs::read_to_string(root.join("host.pub")).map_err(io("host.pub"))?;
    fs::write(&known, format!("[127.0.0.1]:{port} {host_pub}")).map_err(io("known_hosts"))?;
    Ok((process, port, known))
}

/// The HTTPS pair's repositories on `forge` and its clones. The direct clone trusts the
/// forge's CA only (`http.sslCAInfo`, and an empty `http.sslCAPath` so curl loads no
/// system roots: the daemon's `--push-ca` trusts that CA only too) and sends the token
/// with every request (`http.extraHeader`): no 401 round, no credential helper to run.
fn https_clones(world: &World, forge: &HttpsForge, repos: &Path) -> Result<Clones, String> {
    let clones = Clones {
        daemon: world.root.join("daemon-https"),
        direct: world.root.join("direct-https"),
    };
    world.repository(
        &repos.join("daemon.git"),
        &clones.daemon,
        &format!("row-fence::{}", forge.url("daemon.git")),
    )?;
    world.repository(
        &repos.join("direct.git"),
        &clones.direct,
        &forge.url("direct.git"),
    )?;
    let no_roots = world.root.join("no-system-roots");
    fs::create_dir(&no_roots).map_err(io("an empty CA path"))?;
    for (key, value) in [
        ("http.sslCAInfo", text(&forge.ca)),
        ("http.sslCAPath", text(&no_roots)),
        ("http.extraHeader", forge.authorization()),
    ] {
        world.git(&clones.direct, &["config", key, &value])?;
    }
    Ok(clones)
}

/// `row-fence token add FILE` as the operator: the token from a 0600 file, removed after.
fn load_token(world: &World, token: &str) -> Result<(), String> {
    let file = world.root.join("token");
    fs::write(&file, format!("{token}\n")).map_err(io("the token file"))?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).map_err(io("chmod"))?;
    let added = checked(
        world.ours("row-fence").args(["token", "add"]).arg(&file),
        "row-fence token add",
    );
    fs::remove_file(&file).map_err(io("the token file"))?;
    added
}

/// Runs `cmd` to its end; `Err` with its stderr when it fails.
fn checked(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One push of a commit of `bytes` each way: direct first, then through the daemon with
/// its RSS growth. (direct ms, daemon ms, growth MB).
fn large_push(
    world: &World,
    clones: &Clones,
    bytes: &[u8],
    pid: u32,
) -> Result<(f64, f64, f64), String> {
    world.commit(&clones.direct, 1_000_000, Some(bytes))?;
    world.commit(&clones.daemon, 1_000_000, Some(bytes))?;
    let started = Instant::now();
    world.push_checked(&clones.direct, "the large push")?;
    let direct_ms = started.elapsed().as_secs_f64() * 1000.0;
    let before = rss::current_kib(pid)?;
    rss::reset_peak(pid)?;
    let started = Instant::now();
    world.push_checked(&clones.daemon, "the large push")?;
    let daemon_ms = started.elapsed().as_secs_f64() * 1000.0;
    let peak = rss::peak_kib(pid)?;
    Ok((
        direct_ms,
        daemon_ms,
        rss::kib_to_mb(peak.saturating_sub(before)),
    ))
}

fn random_bytes(n: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut bytes = vec![0; n];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io("/dev/urandom"))?;
    Ok(bytes)
}

fn whoami() -> Result<String, String> {
    let out = Command::new("id")
        .arg("-un")
        .output()
        .map_err(io("id -un"))?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !name.is_empty() {
        Ok(name)
    } else {
        Err("cannot tell this user's name (id -un)".into())
    }
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
