//! The daemon's push case (`--only push`): a `git push` through the daemon (the lane's git
//! runs `git-remote-row-fence`, the daemon spools the pack, judges the lease and every ref
//! and pushes over ssh with the key it holds) ÷ a direct `git push` with the same key to
//! the same sshd, p50 against p50 over interleaved pushes of one small commit each (target
//! ≤ 1.15×); then one push of a 50 MB commit each way (target ≤ 1.2×) with the daemon's
//! peak RSS growth over it (target < 16 MB: the pack is spooled to disk, not held).
//!
//! Everything is private to the run and on loopback: a real `sshd` serving two bare
//! repositories (one per arm, so neither arm's refs move under the other) to this user
//! with one key; the daemon under test on the file store with the key broker's flags
//! (the key, the pinned host key) and `--push-socket`/`--push-forge`, the lane's row
//! ALLOWED (the same-uid mode: the helper names the lane by its descriptor).

use crate::children::Owned;
use crate::local::{free_port, io, keygen, log, text, wait_for, which};
use crate::options::Options;
use crate::rss;
use crate::sample::Sampler;
use crate::stats::Summary;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Small pushes through the daemon.
    pub daemon: Summary,
    /// Small pushes straight to sshd with the same key.
    pub direct: Summary,
    /// The large commit's size, in MB.
    pub large_mb: f64,
    /// The large push through the daemon, in ms.
    pub large_daemon_ms: f64,
    /// The 50 MB push straight to sshd, in ms.
    pub large_direct_ms: f64,
    /// The daemon's peak RSS over the 50 MB push minus its RSS before, in MB.
    pub large_rss_growth_mb: f64,
    /// Samples that did not exit 0, both arms together.
    pub failed: usize,
}

impl Figures {
    /// daemon p50 ÷ direct p50 (0 when the direct arm has no samples).
    pub fn ratio(&self) -> f64 {
        self.daemon.p50_over(&self.direct)
    }

    /// The 50 MB push's daemon ÷ direct.
    pub fn large_ratio(&self) -> f64 {
        if self.large_direct_ms > 0.0 {
            self.large_daemon_ms / self.large_direct_ms
        } else {
            0.0
        }
    }
}

/// Pushes per arm: full, `--quick`, `--smoke`.
fn samples(options: &Options) -> usize {
    match (options.smoke, options.quick) {
        (true, _) => 5,
        (false, true) => 40,
        (false, false) => 120,
    }
}

/// The private world one run pushes in.
struct World {
    root: PathBuf,
    bin_dir: PathBuf,
    /// The direct arm's clone and the daemon arm's.
    direct: PathBuf,
    daemon: PathBuf,
    /// The ssh command of the direct arm (the same key the daemon holds).
    ssh: String,
}

impl World {
    /// A command with the run's environment: its own HOME, no agent, the helper on PATH.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", &self.root)
            .env("TMPDIR", &self.root)
            .env("ROW_FENCE_HOME", self.root.join("home"))
            .env("ROW_FENCE_STORE", "file")
            .env("ROW_FENCE_PUSH_SOCKET", self.root.join("push.sock"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .stdin(Stdio::null());
        cmd
    }

    fn git(&self, dir: &Path, args: &[&str]) -> Result<String, String> {
        let out = self
            .command("git")
            .current_dir(dir)
            .args(args)
            .output()
            .map_err(io("git"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "git {args:?} in {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// One new commit in `clone` (untimed), with `bytes` of content when given.
    fn commit(&self, clone: &Path, i: usize, bytes: Option<&[u8]>) -> Result<(), String> {
        let file = clone.join("file.txt");
        match bytes {
            Some(bytes) => fs::write(clone.join("large.bin"), bytes).map_err(io("large.bin"))?,
            None => fs::write(&file, format!("{i}\n")).map_err(io("file.txt"))?,
        }
        self.git(clone, &["add", "-A"])?;
        self.git(clone, &["commit", "-q", "-m", &format!("commit {i}")])?;
        Ok(())
    }

    /// The push of `clone`'s main, as timed.
    fn push(&self, clone: &Path) -> Command {
        let mut cmd = self.command("git");
        cmd.current_dir(clone)
            .env("GIT_SSH_COMMAND", &self.ssh)
            .args(["push", "-q", "origin", "HEAD:refs/heads/main"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }
}

/// Runs the case; `bin_dir` holds `row-fence`, `row-fence-resident` and
/// `git-remote-row-fence`.
pub fn run(options: &Options, bin_dir: &Path) -> Result<Figures, String> {
    let sshd = which("sshd").or_else(|_| {
        let p = PathBuf::from("/usr/sbin/sshd");
        if p.exists() {
            Ok(p)
        } else {
            Err("sshd is not installed (openssh-server)".to_string())
        }
    })?;
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
    let _sshd = Owned::spawn(
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

    let world = World {
        root: root.clone(),
        bin_dir: bin_dir.to_path_buf(),
        direct: root.join("direct"),
        daemon: root.join("daemon"),
        ssh: format!(
            "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -i {} -o UserKnownHostsFile={} -o GlobalKnownHostsFile=/dev/null -o ControlMaster=no -o ControlPath=none",
            root.join("key").display(),
            known.display()
        ),
    };
    let url = |repo: &str| format!("ssh://{user}@127.0.0.1:{port}{}/{repo}", root.display());
    for (arm, clone) in [
        ("direct", world.direct.clone()),
        ("daemon", world.daemon.clone()),
    ] {
        let bare = root.join(format!("{arm}.git"));
        world.git(&root, &["init", "-q", "--bare", "-b", "main", &text(&bare)])?;
        world.git(&root, &["init", "-q", "-b", "main", &text(&clone)])?;
        let remote = if arm == "daemon" {
            format!("row-fence::{}", url("daemon.git"))
        } else {
            url("direct.git")
        };
        world.git(&clone, &["remote", "add", "origin", &remote])?;
    }

    let mut daemon = world.command(&text(&bin_dir.join("row-fence-resident")));
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
        .arg(format!("ssh://{user}@127.0.0.1:{port}/"))
        .stdout(Stdio::null())
        .stderr(log(&root.join("daemon.log"))?);
    let daemon_proc = Owned::spawn(&mut daemon, "row-fence-resident", Duration::from_secs(5))?;
    wait_for("the push socket", || root.join("push.sock").exists())?;
    let descriptor = world.daemon.join(".git").join("row-fence.json");
    let acquired = world
        .command(&text(&bin_dir.join("row-fence")))
        .args([
            "acquire",
            "b",
            "r1",
            "--lane",
            "lane-a",
            "--ttl",
            "2h",
            "--write-descriptor",
        ])
        .arg(&descriptor)
        .output()
        .map_err(io("row-fence acquire"))?;
    if !acquired.status.success() {
        return Err(format!(
            "row-fence acquire: {}",
            String::from_utf8_lossy(&acquired.stderr).trim()
        ));
    }

    // One push each way, checked, before anything is timed.
    let clones = [world.daemon.clone(), world.direct.clone()];
    for (i, clone) in clones.iter().enumerate() {
        world.commit(clone, i, None)?;
        let out = world.push(clone).output().map_err(io("a first push"))?;
        if !out.status.success() {
            return Err(format!(
                "the first push from {} failed: {}; daemon log: {}",
                clone.display(),
                String::from_utf8_lossy(&out.stderr).trim(),
                fs::read_to_string(root.join("daemon.log")).unwrap_or_default()
            ));
        }
    }
    let sampler = Sampler::new();
    let n = samples(options);
    let mut walls: [Vec<Duration>; 2] = [Vec::with_capacity(n), Vec::with_capacity(n)];
    let mut failed = 0;
    for i in 0..n {
        // Interleaved, the first arm alternating, so a neighbour's load slows both alike.
        for k in 0..2 {
            let arm = (i + k) % 2;
            world.commit(&clones[arm], 10 + i, None)?;
            let sample = sampler.time(&mut world.push(&clones[arm]))?;
            if sample.code == 0 {
                walls[arm].push(sample.wall);
            } else {
                failed += 1;
            }
        }
    }

    let large = random_bytes(large_bytes(options))?;
    world.commit(&world.direct, 1_000_000, Some(&large))?;
    world.commit(&world.daemon, 1_000_000, Some(&large))?;
    let started = Instant::now();
    let direct = world
        .push(&world.direct)
        .output()
        .map_err(io("the large push"))?;
    let large_direct_ms = started.elapsed().as_secs_f64() * 1000.0;
    let pid = daemon_proc.pid();
    let before = rss::current_kib(pid)?;
    rss::reset_peak(pid)?;
    let started = Instant::now();
    let through = world
        .push(&world.daemon)
        .output()
        .map_err(io("the large push"))?;
    let large_daemon_ms = started.elapsed().as_secs_f64() * 1000.0;
    let peak = rss::peak_kib(pid)?;
    for (arm, out) in [("direct", &direct), ("daemon", &through)] {
        if !out.status.success() {
            return Err(format!(
                "the 50 MB push ({arm}) failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(Figures {
        daemon: Summary::of(&walls[0]),
        direct: Summary::of(&walls[1]),
        large_mb: large.len() as f64 / 1e6,
        large_daemon_ms,
        large_direct_ms,
        large_rss_growth_mb: rss::kib_to_mb(peak.saturating_sub(before)),
        failed,
    })
}

/// The case's report, in Markdown.
pub fn report(figures: Option<&Figures>, error: Option<&str>, command: &str) -> String {
    let mut md = String::from("# row-fence bench: the daemon pushes for the lane\n\n");
    let _ = writeln!(md, "`{command}`\n");
    let _ = writeln!(
        md,
        "A `git push` through the daemon (`git-remote-row-fence` → judge → the pack streamed to the forge while spooled → judge → its last bytes; ssh with the daemon's key, on the daemon's own warm master) ÷ a direct `git push` with the same key to the same sshd: p50 vs p50 of one small commit per push, target ≤ {TARGET_RATIO}×; one 50 MB push each way, target ≤ {TARGET_LARGE_RATIO}×, with the daemon's RSS growth under {TARGET_RSS_MB} MB.\n"
    );
    if let Some(f) = figures {
        md.push_str(&Summary::table(
            "pushes",
            &[
                ("git push through the daemon", &f.daemon),
                ("git push straight to sshd (same key)", &f.direct),
            ],
        ));
        let met = |ok: bool| if ok { "met" } else { "MISSED" };
        let ratio = f.ratio();
        let _ = writeln!(
            md,
            "\ndaemon ÷ direct p50: **{ratio:.3}×** — {}; failed pushes: {}\n",
            met(ratio > 0.0 && ratio <= TARGET_RATIO && f.failed == 0),
            f.failed
        );
        let large = f.large_ratio();
        let _ = writeln!(
            md,
            "{:.0} MB push: {:.0} ms through the daemon, {:.0} ms direct: **{large:.3}×** — {}; the daemon's RSS grew **{:.1} MB** — {}\n",
            f.large_mb,
            f.large_daemon_ms,
            f.large_direct_ms,
            met(large > 0.0 && large <= TARGET_LARGE_RATIO),
            f.large_rss_growth_mb,
            met(f.large_rss_growth_mb < TARGET_RSS_MB)
        );
    }
    if let Some(error) = error {
        let _ = writeln!(md, "Not measured: {error}\n");
    }
    let _ = writeln!(md, "## How it was measured\n\n{HOW}");
    md
}

const HOW: &str = "Everything is private to the run, on loopback: a real sshd (a host key made for the run, this user, one authorized key) serving two bare repositories, one per arm; the daemon under test on the file store with the key broker's flags (`--broker-key` with that key, `--broker-forge-host-key` with the host key) and `--push-socket`/`--push-forge`; the lane's row ALLOWED, its descriptor in the daemon arm's clone (the same-uid mode). The daemon arm's remote is `row-fence::ssh://…` (what `install broker` wires with `pushInsteadOf`); the direct arm's ssh uses the same key file with the same options. Each sample is one `git push` of one new small commit, spawn to exit; the arms alternate sample by sample. The daemon keeps one ssh master per forge and key set (as shipped), so its samples after the first pay no handshake; the direct arm's git pays one per push, as git does. The 50 MB commit is random bytes (no compression helps either arm); the RSS growth is the daemon's `VmHWM` after the push (reset before it) minus its `VmRSS` before.";

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
