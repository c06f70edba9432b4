//! One connection to the forge's `git-receive-pack` (ARCHITECTURE.md, "Push proxy"). The
//! ssh arm runs OpenSSH's `ssh` with no configuration of its own (`-F /dev/null`), the
//! forge's pinned host keys only, and as its only identities the lane's push keys, served
//! from the daemon's memory by an agent only the daemon's uid can reach
//! ([`super::agent`]). Each push is a fresh `git-receive-pack` session; the ssh transport
//! under it is the daemon's own, kept warm per forge and key set ([`control_path`]): a
//! multiplexing master in a 0700 directory of the daemon's, which OpenSSH serves to its
//! own uid only, closed after [`MASTER_IDLE_SECS`] idle. The lanes still hold nothing:
//! every write is judged by the daemon at the write, whatever carries it. What the
//! connection carries is the same for every arm: a reader and a writer.

pub mod exchange;

use super::target::Target;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::process::{Child, Command};

/// How long a dropped push's forge connection gets to end by itself (see
/// [`Connection::kill`]).
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The most of a dropped push's forge answer read before it is let go, in bytes.
const MAX_DRAINED_BYTES: u64 = 1024 * 1024;

/// The most of the forge's stderr kept for an error message, in bytes.
const MAX_STDERR_BYTES: usize = 8 * 1024;

/// How long the daemon's ssh master to one forge with one key set lives unused, in
/// seconds: pushes close together share its handshake, and an idle one goes away.
pub const MASTER_IDLE_SECS: u32 = 30;

/// The longest control socket path used, in bytes: a Unix socket's path holds 107, and
/// OpenSSH first binds the path with 17 bytes more (a random suffix) before renaming it.
const MAX_CONTROL_PATH: usize = 107 - 17;

/// The files one push's ssh reads, in the push's own 0700 directory.
#[derive(Clone, Debug)]
pub struct SshFiles {
    /// The agent socket ([`super::agent`]).
    pub agent: PathBuf,
    /// The pinned host keys, as known_hosts lines for the forge's host.
    pub known_hosts: PathBuf,
    /// The public halves of the lane's push keys (ssh's `IdentityFile` for an agent key).
    pub identities: Vec<PathBuf>,
    /// The daemon's ssh master for this forge and these keys (`None`: every connection
    /// makes its own handshake, as when the daemon's home is too deep for a socket path).
    pub control: Option<PathBuf>,
}

/// Why the forge could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// `ssh` did not start.
    #[error("cannot start ssh to the forge: {0}")]
    Spawn(std::io::Error),
    /// The connection ended or broke; what ssh or the forge said.
    #[error("the forge connection failed: {0}")]
    Broken(String),
}

/// An open connection to the forge's receive-pack.
pub struct Connection {
    /// The forge's output.
    pub reader: Box<dyn AsyncRead + Unpin + Send>,
    /// The forge's input; dropped to close it.
    pub writer: Option<Box<dyn AsyncWrite + Unpin + Send>>,
    /// The arm's own part.
    arm: Arm,
}

/// What differs per transport.
enum Arm {
    /// The `ssh` child and what it says on stderr.
    Ssh {
        child: Child,
        stderr: tokio::task::JoinHandle<Vec<u8>>,
    },
    /// The HTTPS arm: smart HTTP's two requests in a task of their own ([`super::https`]).
    Https(exchange::Exchange),
    /// Ended or handed to [`close`].
    Gone,
}

impl Connection {
    /// Opens `git-receive-pack '<repository>'` on the target's forge over ssh; through
    /// the daemon's master when `shared` (made by this connection when there is none).
    pub fn ssh(target: &Target, files: &SshFiles, shared: bool) -> Result<Connection, ForgeError> {
        let mut command = Command::new("ssh");
        command.args(ssh_args(target, files, shared));
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(home) = std::env::var_os("HOME") {
            command.env("HOME", home);
        }
        let mut child = command.spawn().map_err(ForgeError::Spawn)?;
        let (Some(stdin), Some(stdout), Some(mut err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ForgeError::Spawn(std::io::Error::other(
                "ssh started without its pipes",
            )));
        };
        let stderr = tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut buf = [0u8; 1024];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let room = MAX_STDERR_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            kept
        });
        Ok(Connection {
            reader: Box::new(stdout),
            writer: Some(Box::new(stdin)),
            arm: Arm::Ssh { child, stderr },
        })
    }

    /// A connection of the HTTPS arm: `reader` and `writer` are its pipes to the task
    /// that holds the requests ([`super::https`]).
    pub(super) fn https(
        reader: Box<dyn AsyncRead + Unpin + Send>,
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        exchange: exchange::Exchange,
    ) -> Connection {
        Connection {
            reader,
            writer: Some(writer),
            arm: Arm::Https(exchange),
        }
    }

    /// Ends the connection without the pack's end, so the forge applies nothing. Over ssh
    /// the forge's input is closed and its answer read (its `receive-pack` then fails on a
    /// pack cut short and removes what it received), for at most [`GRACE`] in a task of
    /// its own, then ssh is killed: a `receive-pack` killed while it still wrote would
    /// leave the pushed objects in its quarantine on the forge's disk. Dropping a
    /// connection does the same. The HTTPS arm aborts its request before its body ends.
    pub async fn kill(mut self) {
        if let Arm::Https(exchange) = &mut self.arm {
            // Aborted before its input closes: a closed input ends the request's body,
            // an abort never sends its end (ARCHITECTURE.md, "Push proxy").
            exchange.abort();
            self.writer = None;
            exchange.wait().await;
        }
    }

    /// Waits for the connection to end; what it said on stderr, trimmed to a line.
    pub async fn finish(mut self) -> (bool, String) {
        self.writer = None;
        match std::mem::replace(&mut self.arm, Arm::Gone) {
            Arm::Ssh { mut child, stderr } => {
                let ok = child.wait().await.is_ok_and(|s| s.success());
                let said = stderr.await.unwrap_or_default();
                (ok, one_line(&said))
            }
            Arm::Https(exchange) => exchange.finish().await,
            Arm::Gone => (false, String::new()),
        }
    }
}

/// A connection dropped before it ended (a refusal, the push's deadline, the daemon's
/// stop) is ended as [`Connection::kill`] ends it: over ssh in a task of its own, which
/// [`closed`] waits for.
impl Drop for Connection {
    fn drop(&mut self) {
        let Arm::Ssh { child, stderr } = std::mem::replace(&mut self.arm, Arm::Gone) else {
            return;
        };
        self.writer = None;
        let reader = std::mem::replace(&mut self.reader, Box::new(tokio::io::empty()));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(CLOSING.track_future(close(child, reader, stderr))));
            }
            Err(_) => {
                let mut child = child;
                let _ = child.start_kill();
            }
        }
    }
}

/// The ssh connections being ended ([`Connection`]'s drop).
static CLOSING: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

/// Waits until every dropped ssh connection has ended, at most `within` (the daemon's
/// stop, before its masters end).
pub async fn closed(within: std::time::Duration) {
    CLOSING.close();
    let _ = tokio::time::timeout(within, CLOSING.wait()).await;
    CLOSING.reopen();
}

/// Lets the forge's `receive-pack` end on its input's end: its answer read for at most
/// [`GRACE`], then ssh killed.
async fn close(
    mut child: Child,
    mut reader: Box<dyn AsyncRead + Unpin + Send>,
    stderr: tokio::task::JoinHandle<Vec<u8>>,
) {
    let ended = tokio::time::timeout(GRACE, async {
        let mut answer = (&mut reader).take(MAX_DRAINED_BYTES);
        let _ = tokio::io::copy(&mut answer, &mut tokio::io::sink()).await;
        child.wait().await
    })
    .await;
    if ended.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    stderr.abort();
}

/// ssh's stderr on one line, for an error message.
fn one_line(said: &[u8]) -> String {
    String::from_utf8_lossy(said)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The ssh command line (`ssh` excluded); through the daemon's master when `shared`.
pub fn ssh_args(target: &Target, files: &SshFiles, shared: bool) -> Vec<String> {
    let o = |text: String| ["-o".to_string(), text];
    let mut args: Vec<String> = vec!["-F".into(), "/dev/null".into(), "-T".into(), "-x".into()];
    for option in [
        "BatchMode=yes".to_string(),
        "IdentitiesOnly=yes".to_string(),
        format!("IdentityAgent={}", files.agent.display()),
        "StrictHostKeyChecking=yes".to_string(),
        format!("UserKnownHostsFile={}", files.known_hosts.display()),
        "GlobalKnownHostsFile=/dev/null".to_string(),
        "UpdateHostKeys=no".to_string(),
        "ForwardAgent=no".to_string(),
        "ClearAllForwardings=yes".to_string(),
        "PermitLocalCommand=no".to_string(),
        "ProxyCommand=none".to_string(),
        "PreferredAuthentications=publickey".to_string(),
        "ConnectTimeout=20".to_string(),
    ] {
        args.extend(o(option));
    }
    for identity in &files.identities {
        args.extend(o(format!("IdentityFile={}", identity.display())));
    }
    match files.control.as_ref().filter(|_| shared) {
        Some(control) => {
            args.extend(o("ControlMaster=auto".into()));
            args.extend(o(format!("ControlPath={}", control.display())));
            args.extend(o(format!("ControlPersist={MASTER_IDLE_SECS}")));
        }
        None => {
            args.extend(o("ControlMaster=no".into()));
            args.extend(o("ControlPath=none".into()));
        }
    }
    args.extend([
        "-p".into(),
        target.forge.port.to_string(),
        "-l".into(),
        target.forge.user.clone(),
        "--".into(),
        target.forge.host.clone(),
        format!("git-receive-pack '{}'", target.repository),
    ]);
    args
}

/// The daemon's ssh master's control socket in `masters` (a 0700 directory of the
/// daemon's) for one forge, its pinned host keys and one key set: named by their hash, so
/// a changed pin or key set never reuses a master authenticated under the old ones.
/// `None` when the path would be too long for a socket.
pub fn control_path(
    masters: &Path,
    destination: &str,
    host_keys: &[String],
    public_keys: &[String],
) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in std::iter::once(destination)
        .chain(host_keys.iter().map(String::as_str))
        .chain(std::iter::once("\0keys"))
        .chain(public_keys.iter().map(String::as_str))
    {
        hash.update(part.as_bytes());
        hash.update(b"\0");
    }
    let name: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = masters.join(name);
    (path.as_os_str().len() <= MAX_CONTROL_PATH).then_some(path)
}

/// Ends every ssh master in `masters` (at the daemon's stop), each asked with `-O exit`
/// and given a moment; a master not reached ends by itself after [`MASTER_IDLE_SECS`].
pub async fn close_masters(masters: &Path) {
    let Ok(entries) = std::fs::read_dir(masters) else {
        return;
    };
    for entry in entries.flatten() {
        let mut exit = Command::new("ssh");
        exit.args(["-F", "/dev/null", "-o"])
            .arg(format!("ControlPath={}", entry.path().display()))
            .args(["-O", "exit", "row-fence-master"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Ok(mut child) = exit.spawn() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), child.wait()).await;
        }
    }
}

/// Writes the files ssh reads into `dir` (the push's own 0700 directory): the pinned
/// host keys under the forge's host name and the lane's public keys; `control` is the
/// daemon's master for them ([`control_path`]).
pub fn write_files(
    dir: &Path,
    host_name: &str,
    host_keys: &[String],
    public_keys: &[String],
    control: Option<PathBuf>,
) -> std::io::Result<SshFiles> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let write = |path: &Path, text: &str| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(text.as_bytes())
    };
    let known_hosts = dir.join("known_hosts");
    let lines: String = host_keys
        .iter()
        .map(|k| format!("{host_name} {k}\n"))
        .collect();
    write(&known_hosts, &lines)?;
    let mut identities = Vec::new();
    for (i, key) in public_keys.iter().enumerate() {
        let path = dir.join(format!("id-{i}.pub"));
        write(&path, &format!("{key}\n"))?;
        identities.push(path);
    }
    Ok(SshFiles {
        agent: dir.join("agent"),
        known_hosts,
        identities,
        control,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::target::{Forge, resolve};

    #[test]
    fn ssh_is_pinned_unmultiplexed_and_uses_only_the_daemons_agent() {
        let forges = vec![Forge::parse("ssh://git@127.0.0.1:2222/srv/").unwrap()];
        let target = resolve(&forges, "ssh://git@127.0.0.1:2222/srv/app.git").unwrap();
        let files = SshFiles {
            agent: "/d/agent".into(),
            known_hosts: "/d/known_hosts".into(),
            identities: vec!["/d/id-0.pub".into()],
            control: Some("/d/masters/0123".into()),
        };
        let args = ssh_args(&target, &files, false).join(" ");
        for needed in [
            "-F /dev/null",
            "-o BatchMode=yes",
            "-o IdentitiesOnly=yes",
            "-o IdentityAgent=/d/agent",
            "-o StrictHostKeyChecking=yes",
            "-o UserKnownHostsFile=/d/known_hosts",
            "-o GlobalKnownHostsFile=/dev/null",
            "-o ControlMaster=no",
            "-o ControlPath=none",
            "-o IdentityFile=/d/id-0.pub",
            "-p 2222 -l git -- 127.0.0.1 git-receive-pack '/srv/app.git'",
        ] {
            assert!(args.contains(needed), "{needed} in {args}");
        }
        let shared = ssh_args(&target, &files, true).join(" ");
        for needed in [
            "-o ControlMaster=auto",
            "-o ControlPath=/d/masters/0123",
            "-o ControlPersist=30",
        ] {
            assert!(shared.contains(needed), "{needed} in {shared}");
        }
        assert!(!shared.contains("ControlPath=none"), "{shared}");
    }

    #[test]
    fn a_master_is_named_by_its_forge_pins_and_keys_and_fits_a_socket_path() {
        let keys = ["ssh-ed25519 AAAA1".to_string()];
        let pins = ["ssh-ed25519 HOST1".to_string()];
        let one = control_path(Path::new("/m"), "git@h:22", &pins, &keys).unwrap();
        assert_eq!(
            one,
            control_path(Path::new("/m"), "git@h:22", &pins, &keys).unwrap()
        );
        let other_key = control_path(Path::new("/m"), "git@h:22", &pins, &["k2".into()]);
        let other_pin = control_path(Path::new("/m"), "git@h:22", &["p2".into()], &keys);
        let other_forge = control_path(Path::new("/m"), "git@h:2222", &pins, &keys);
        for other in [other_key, other_pin, other_forge] {
            assert_ne!(other.unwrap(), one);
        }
        let deep = Path::new("/").join("d".repeat(100));
        assert_eq!(control_path(&deep, "git@h:22", &pins, &keys), None);
    }
}
