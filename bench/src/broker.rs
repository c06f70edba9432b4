//! The key broker's case (`--only broker`): a `git push` over loopback ssh signed by the
//! daemon's agent ÷ the same push signed by a plain OpenSSH `ssh-agent` holding the same
//! key, p50 against p50 (target ≤ 1.2×).
//!
//! Everything is real and private to the run: an `sshd` on a free loopback port with its
//! own host key, serving a bare repository through `git-shell` as a forced command (root
//! logs in with `PermitRootLogin forced-commands-only`); the daemon under test running
//! as `nobody` with the broker on (its key owned by that uid, as the broker requires) and
//! this process's uid (root) bound as the one lane, whose row is ALLOWED; and a plain
//! `ssh-agent` on its own socket. Both arms run the same ssh command (the options
//! `row-fence install broker` writes) but for `IdentityAgent`, and push the same two
//! commits alternately to a ref of their own (one push forward, the next back), the arms
//! interleaved sample by sample so a neighbour's load slows both alike. Root is needed for
//! sshd and for the daemon's separate uid.

use crate::children::Owned;
use crate::local::{free_port, io, keygen, log, text, wait_for, which};
use crate::options::Options;
use crate::sample::Sampler;
use crate::stats::Summary;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The broker's p50 may be at most this many times the plain agent's.
pub const TARGET_RATIO: f64 = 1.2;

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Pushes signed by the broker.
    pub broker: Summary,
    /// Pushes signed by the plain ssh-agent.
    pub plain: Summary,
    /// Samples that did not exit 0, per arm (broker, plain).
    pub failed: (usize, usize),
}

impl Figures {
    /// broker p50 ÷ plain p50 (0 when the plain arm has no samples).
    pub fn ratio(&self) -> f64 {
        self.broker.p50_over(&self.plain)
    }
}

/// Samples per arm: full, `--quick`, `--smoke`.
fn samples(options: &Options) -> usize {
    match (options.smoke, options.quick) {
        (true, _) => 5,
        (false, true) => 30,
        (false, false) => 150,
    }
}

/// Runs the case; `bin_dir` holds `row-fence` and `row-fence-resident`.
pub fn run(options: &Options, bin_dir: &Path) -> Result<Figures, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "the broker case runs sshd and the daemon under a uid of its own: run it as root"
                .into(),
        );
    }
    let nobody = nix_user("nobody")?;
    let dir = tempfile::Builder::new()
        .prefix("rf-bench-broker")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))?;
    let root = dir.path();
    fs::set_permissions(root, fs::Permissions::from_mode(0o755)).map_err(io("chmod"))?;

    // Keys: the host key and root's copy of the push key; the daemon's copy is nobody's.
    keygen(&root.join("host"), "bench")?;
    keygen(&root.join("push"), "bench")?;
    let daemon_dir = root.join("daemon");
    fs::create_dir(&daemon_dir).map_err(io("daemon dir"))?;
    let daemon_key = daemon_dir.join("push");
    fs::copy(root.join("push"), &daemon_key).map_err(io("copy the push key"))?;
    chown(&daemon_dir, nobody)?;
    chown(&daemon_key, nobody)?;
    let public = root.join("push.pub");

    // The forge.
    let remote = root.join("remote.git");
    git(
        root,
        &["init", "-q", "--bare", "-b", "main", &text(&remote)],
    )?;
    let git_shell = which("git-shell")?;
    let key_line = fs::read_to_string(&public).map_err(io("push.pub"))?;
    fs::write(
        root.join("authorized_keys"),
        format!(
            "command=\"{} -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty {key_line}",
            git_shell.display()
        ),
    )
    .map_err(io("authorized_keys"))?;
    let port = free_port()?;
    fs::write(
        root.join("sshd_config"),
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\n\
             AuthorizedKeysFile {keys}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin forced-commands-only\nAllowUsers root\nMaxStartups 100\n",
            host = root.join("host").display(),
            pid = root.join("sshd.pid").display(),
            keys = root.join("authorized_keys").display(),
        ),
    )
    .map_err(io("sshd_config"))?;
    fs::create_dir_all("/run/sshd").map_err(io("/run/sshd"))?;
    let sshd_bin = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("sshd is not installed (openssh-server)")?;
    let _sshd = Owned::spawn(
        Command::new(sshd_bin)
            .args(["-D", "-e", "-f"])
            .arg(root.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(log(&root.join("sshd.log"))?),
        "sshd",
        Duration::from_secs(2),
    )?;
    wait_for(&format!("sshd on port {port}"), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })?;

    // The daemon as nobody, the row granted to the lane bound to root.
    let home = daemon_dir.join("home");
    let descriptor = daemon_dir.join("lane.json");
    let as_nobody = |program: PathBuf| {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &daemon_dir)
            .env("ROW_FENCE_HOME", &home)
            .env("ROW_FENCE_STORE", "file")
            .current_dir(&daemon_dir)
            .uid(nobody.0)
            .gid(nobody.1);
        cmd
    };
    let acquired = as_nobody(bin_dir.join("row-fence"))
        .args([
            "acquire",
            "bench",
            "row-1",
            "--lane",
            "bench",
            "--write-descriptor",
        ])
        .arg(&descriptor)
        .output()
        .map_err(io("row-fence acquire"))?;
    if !acquired.status.success() {
        return Err(format!(
            "row-fence acquire: {}",
            String::from_utf8_lossy(&acquired.stderr)
        ));
    }
    let lanes = root.join("lanes.toml");
    fs::write(
        &lanes,
        format!(
            "[[lane]]\nlane = \"bench\"\nuid = 0\ndescriptor = \"{}\"\nboard = \"bench\"\nrow = \"row-1\"\n",
            descriptor.display()
        ),
    )
    .map_err(io("lanes.toml"))?;
    fs::set_permissions(&lanes, fs::Permissions::from_mode(0o644)).map_err(io("chmod"))?;
    let broker_socket = daemon_dir.join("agent.sock");
    let _daemon = Owned::spawn(
        as_nobody(bin_dir.join("row-fence-resident"))
            .arg("--broker-socket")
            .arg(&broker_socket)
            .arg("--broker-key")
            .arg(&daemon_key)
            .arg("--broker-lanes")
            .arg(&lanes)
            .arg("--broker-forge-host-key")
            .arg(root.join("host.pub"))
            .arg("--broker-forge-user")
            .arg("root")
            .stdout(Stdio::null())
            .stderr(log(&root.join("daemon.log"))?),
        "row-fence-resident (broker)",
        Duration::from_secs(5),
    )?;
    wait_for("the broker's socket", || broker_socket.exists())?;

    // The plain ssh-agent with the same key.
    let plain_socket = root.join("plain.sock");
    let _agent = Owned::spawn(
        Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&plain_socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "ssh-agent",
        Duration::from_secs(2),
    )?;
    wait_for("ssh-agent's socket", || plain_socket.exists())?;
    let added = Command::new("ssh-add")
        .arg(root.join("push"))
        .env("SSH_AUTH_SOCK", &plain_socket)
        .output()
        .map_err(io("ssh-add"))?;
    if !added.status.success() {
        return Err(format!(
            "ssh-add: {}",
            String::from_utf8_lossy(&added.stderr)
        ));
    }

    // The pusher's worktree: two commits, pushed alternately.
    let tree = root.join("tree");
    fs::create_dir(&tree).map_err(io("worktree"))?;
    git(&tree, &["init", "-q", "-b", "main"])?;
    let mut commits = Vec::new();
    for n in 0..2 {
        fs::write(tree.join("file.txt"), format!("{n}\n")).map_err(io("file"))?;
        git(&tree, &["add", "file.txt"])?;
        git(&tree, &["commit", "-q", "-m", &format!("commit {n}")])?;
        commits.push(git(&tree, &["rev-parse", "HEAD"])?.trim().to_string());
    }
    let url = format!("ssh://root@127.0.0.1:{port}{}", remote.display());
    let push = |agent: &Path, target: &str, commit: &str| {
        let ssh = format!(
            "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o IdentityAgent={} -o IdentitiesOnly=yes -o IdentityFile={} -o ControlMaster=no -o ControlPath=none",
            agent.display(),
            public.display()
        );
        let mut cmd = Command::new("git");
        cmd.current_dir(&tree)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_SSH_COMMAND", ssh)
            .args(["push", "-q", "--force", &url])
            .arg(format!("{commit}:refs/heads/{target}"));
        cmd
    };
    let arms = [
        ("broker", broker_socket.as_path()),
        ("plain", plain_socket.as_path()),
    ];
    // Each arm once, checked, before anything is timed.
    for (name, agent) in arms {
        let out = push(agent, name, &commits[0])
            .output()
            .map_err(io("git push"))?;
        if !out.status.success() {
            return Err(format!(
                "the {name} arm's first push failed: {}; daemon log: {}",
                String::from_utf8_lossy(&out.stderr).trim(),
                fs::read_to_string(root.join("daemon.log")).unwrap_or_default()
            ));
        }
    }
    let sampler = Sampler::new();
    let n = samples(options);
    let mut walls = [Vec::with_capacity(n), Vec::with_capacity(n)];
    let mut failed = [0usize, 0usize];
    for i in 0..n {
        let commit = &commits[(i + 1) % 2];
        // Alternate which arm goes first, so neither always follows the other.
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for arm in order {
            let (name, agent) = arms[arm];
            let sample = sampler.time(&mut push(agent, name, commit))?;
            if sample.code == 0 {
                walls[arm].push(sample.wall);
            } else {
                failed[arm] += 1;
            }
        }
    }
    Ok(Figures {
        broker: Summary::of(&walls[0]),
        plain: Summary::of(&walls[1]),
        failed: (failed[0], failed[1]),
    })
}

/// The case's report, in Markdown.
pub fn report(figures: Option<&Figures>, error: Option<&str>, command: &str) -> String {
    let mut md = String::from("# row-fence bench: the key broker\n\n");
    let _ = writeln!(md, "`{command}`\n");
    let _ = writeln!(
        md,
        "A `git push` over loopback ssh signed by the daemon's agent (the broker judges the lane's row at the signature) ÷ the same push signed by a plain `ssh-agent` holding the same key; p50 vs p50, target ≤ {TARGET_RATIO}×.\n"
    );
    if let Some(f) = figures {
        let _ = writeln!(
            md,
            "| agent | samples | failed | p50 ms | p99 ms | max ms |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for (name, s, failed) in [
            ("broker (row-fence-resident)", &f.broker, f.failed.0),
            ("plain ssh-agent", &f.plain, f.failed.1),
        ] {
            let _ = writeln!(
                md,
                "| {name} | {} | {failed} | {:.2} | {:.2} | {:.2} |",
                s.count, s.p50_ms, s.p99_ms, s.max_ms
            );
        }
        let ratio = f.ratio();
        let _ = writeln!(
            md,
            "\nbroker ÷ plain p50: **{ratio:.3}×** — {}\n",
            if ratio > 0.0 && ratio <= TARGET_RATIO && f.failed == (0, 0) {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    if let Some(error) = error {
        let _ = writeln!(md, "Not measured: {error}\n");
    }
    let _ = writeln!(md, "## How it was measured\n\n{}", HOW);
    md
}

const HOW: &str = "Everything is private to the run: `sshd` on a free loopback port with its own host key serves a bare repository through `git-shell` as a forced command (root logs in with `PermitRootLogin forced-commands-only`); the daemon under test runs as `nobody` with the broker on, its copy of the push key owned by that uid, and the bench's uid (root) bound as the one lane, whose row is ALLOWED; a plain `ssh-agent` holds root's copy of the same key. Both arms run the ssh options `row-fence install broker` writes (`IdentitiesOnly`, the key's `.pub` as `IdentityFile`, no multiplexing) with only `IdentityAgent` differing, and force-push the same two commits alternately to a ref of their own, so each push is one ssh connection, one signature and one ref update; the arms are interleaved sample by sample, the first arm alternating. Each sample is one `git push` process, spawn to exit.";

fn nix_user(name: &str) -> Result<(u32, u32), String> {
    let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: getpwnam returns a pointer to static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
    if pw.is_null() {
        return Err(format!("no user {name}: the daemon runs as it"));
    }
    // SAFETY: non-null, from getpwnam just above.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn chown(path: &Path, (uid, gid): (u32, u32)) -> Result<(), String> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| format!("chown {}: {e}", path.display()))
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut git = Command::new("git");
    git.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .args(args);
    crate::local::stdout_of(&mut git, &format!("git {args:?}"))
}
