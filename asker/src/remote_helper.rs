//! `git-remote-row-fence`: git's remote helper for a remote `row-fence::<url>`
//! (gitremote-helpers(7)); ARCHITECTURE.md, "Push proxy". git starts it once per push
//! (`url.<row-fence::url>.pushInsteadOf` sends only pushes here; fetches keep the
//! original URL). It advertises `connect`, takes only `connect git-receive-pack`, then
//! connects to the daemon's push socket, sends one header (the URL, and, when the socket
//! is the helper's own uid's, the lane's descriptor with its lease token) and relays git's
//! receive-pack stream both ways, unchanged: the daemon judges and pushes with keys only
//! it holds. When git closes its side after the pack, the helper half-closes the socket
//! so the daemon sees where the pack ends. Errors are one `row-fence: …` line on stderr
//! and exit 128, as git's own transports fail.

use row_fence_contract::descriptor::{self, Resolution};
use row_fence_contract::push::{PushHeader, SOCKET_ENV, SOCKET_NAME};
use row_fence_contract::{paths, report, stdio};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// The exit code of a failed helper (git's own `die`).
const FAILED: i32 = 128;

/// The longest command line read from git, in bytes.
const MAX_LINE_BYTES: u64 = 4096;

/// The git config key naming the push socket.
const SOCKET_CONFIG: &str = "rowfence.pushSocket";

/// The one service pushed through the daemon.
const RECEIVE_PACK: &str = "git-receive-pack";

/// Why the helper stopped.
#[derive(Debug)]
enum HelperError {
    /// Not `git-remote-row-fence <remote> [<url>]`.
    Usage,
    /// git asked for a service other than a push.
    Service(String),
    /// git sent a command the helper does not speak.
    Command(String),
    /// Reading from or writing to git failed.
    Git(std::io::Error),
    /// The socket could not be found.
    Home(paths::HomeError),
    /// The socket could not be reached.
    Connect(PathBuf, std::io::Error),
    /// The relay broke off.
    Relay(std::io::Error),
}

impl std::fmt::Display for HelperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelperError::Usage => f.write_str(
                "git-remote-row-fence is run by git for a remote row-fence::<url> (git push); usage: git-remote-row-fence <remote> [<url>]",
            ),
            HelperError::Service(service) => write!(
                f,
                "git-remote-row-fence pushes only (connect git-receive-pack), and git asked for {service}: fetch from the original URL (row-fence install broker --repo wires pushInsteadOf, so fetches never come here)"
            ),
            HelperError::Command(command) => write!(
                f,
                "git-remote-row-fence does not speak git's command {command:?} (it speaks capabilities and connect)"
            ),
            HelperError::Git(e) => write!(f, "talking to git: {e}"),
            HelperError::Home(e) => write!(
                f,
                "cannot find the daemon's push socket: {e} (set {SOCKET_ENV})"
            ),
            HelperError::Connect(socket, e) => write!(
                f,
                "cannot reach the daemon's push socket {}: {e} (is row-fence-resident running with --push-socket? set {SOCKET_ENV} to its path)",
                socket.display()
            ),
            HelperError::Relay(e) => write!(f, "the push through the daemon broke off: {e}"),
        }
    }
}

/// `--help`'s text: what git runs it for, and how a repository is wired to it.
const HELP: &str = "\
git-remote-row-fence: git's remote helper for row-fence::<url> remotes; git runs it, once per push.

Usage: git-remote-row-fence <remote> [<url>]
       git-remote-row-fence --version | --help

It relays one push (connect git-receive-pack) to the row-fence daemon's push socket, which
judges the lane's lease and the row's scope and pushes to the forge with keys only it holds.
Fetches never come here. The socket: $ROW_FENCE_PUSH_SOCKET, else the repository's
rowfence.pushSocket, else <home>/push.sock.

Example (wires pushInsteadOf and rowfence.pushSocket in a repository):
  row-fence install broker --repo . --push-socket /run/row-fence/push.sock --push-forge ssh://git@forge.example/";

fn main() {
    stdio::keep_standard_fds_open();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version" | "-V") => {
            // With the build digest, so an install can tell this helper's build from the daemon's.
            say_out(&format!(
                "git-remote-row-fence {}",
                row_fence_stamp::VERSION
            ));
            std::process::exit(0);
        }
        Some("--help" | "-h") => {
            say_out(HELP);
            std::process::exit(0);
        }
        _ => {}
    }
    let code = match run(&args) {
        Ok(()) => 0,
        Err(e) => {
            report::say(&format!("row-fence: {e}"));
            FAILED
        }
    };
    std::process::exit(code);
}

/// git's commands until `connect`, then the relay.
fn run(args: &[String]) -> Result<(), HelperError> {
    let url = match args {
        [remote] => remote.clone(),
        [_, url] => url.clone(),
        _ => return Err(HelperError::Usage),
    };
    // git's stdin as a file of its own (no std buffer between it and the relay thread).
    let stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(HelperError::Git)?;
    let mut input = BufReader::new(std::fs::File::from(stdin));
    let mut output = std::io::stdout().lock();
    loop {
        let mut line = String::new();
        let read = (&mut input)
            .take(MAX_LINE_BYTES)
            .read_line(&mut line)
            .map_err(HelperError::Git)?;
        let command = line.trim_end_matches('\n');
        if read == 0 || command.is_empty() {
            return Ok(());
        }
        if command == "capabilities" {
            output
                .write_all(b"connect\n\n")
                .and_then(|()| output.flush())
                .map_err(HelperError::Git)?;
        } else if let Some(service) = command.strip_prefix("connect ") {
            if service != RECEIVE_PACK {
                return Err(HelperError::Service(service.to_string()));
            }
            let socket = connect(&url)?;
            output
                .write_all(b"\n")
                .and_then(|()| output.flush())
                .map_err(HelperError::Git)?;
            return relay(input, output, socket);
        } else {
            return Err(HelperError::Command(command.to_string()));
        }
    }
}

/// Connects to the daemon's push socket and sends the header.
fn connect(url: &str) -> Result<UnixStream, HelperError> {
    let socket = socket_path()?;
    let mut stream =
        UnixStream::connect(&socket).map_err(|e| HelperError::Connect(socket.clone(), e))?;
    // The lease token goes only to a socket of this uid (the same-uid mode); a lane
    // under its own uid is the lane bound to that uid, and sends no token anywhere.
    let own = std::fs::metadata(&socket).is_ok_and(|m| m.uid() == paths::euid());
    let descriptor = match (own, descriptor::resolve_here(None)) {
        (true, Resolution::Found(_, d)) => Some(d),
        _ => None,
    };
    let header = PushHeader {
        url: url.to_string(),
        descriptor,
    };
    let line = header
        .line()
        .map_err(|e| HelperError::Relay(std::io::Error::other(e)))?;
    stream
        .write_all(&line)
        .map_err(|e| HelperError::Connect(socket, e))?;
    Ok(stream)
}

/// `ROW_FENCE_PUSH_SOCKET`, else the repository's `rowfence.pushSocket` (what `row-fence
/// install broker --push-forge` wires), else `<home>/push.sock`.
fn socket_path() -> Result<PathBuf, HelperError> {
    let configured = std::env::var_os(SOCKET_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(configured_socket);
    if let Some(path) = configured {
        return paths::absolute_path(&path, paths::HomeError::RelativeSocket)
            .map_err(HelperError::Home);
    }
    Ok(paths::home(None)
        .map_err(HelperError::Home)?
        .join(SOCKET_NAME))
}

/// `git config --get rowfence.pushSocket` in the repository git runs the helper for.
fn configured_socket() -> Option<PathBuf> {
    let out = std::process::Command::new("git")
        .args(["config", "--get", SOCKET_CONFIG])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim_end_matches('\n');
    (out.status.success() && !text.is_empty()).then(|| PathBuf::from(text))
}

/// git → daemon on a thread (then a half-close), daemon → git here, until the daemon
/// closes.
fn relay(
    mut input: BufReader<std::fs::File>,
    mut output: std::io::StdoutLock<'static>,
    socket: UnixStream,
) -> Result<(), HelperError> {
    let mut upstream = socket.try_clone().map_err(HelperError::Relay)?;
    let up = std::thread::spawn(move || {
        let copied = std::io::copy(&mut input, &mut upstream);
        // The pack has ended (or git is gone): the daemon reads to this end.
        let _ = upstream.shutdown(Shutdown::Write);
        copied
    });
    let mut downstream = socket;
    let down = copy_to_git(&mut downstream, &mut output);
    // git may still be writing when the daemon has answered (a refusal mid-pack): the
    // answer is what git needs; the thread ends with the process.
    drop(up);
    down.map_err(HelperError::Relay)
}

/// Copies the daemon's answer to git until the daemon closes. git closing its side
/// once it has read the report it waits for is the end, not an error.
fn copy_to_git(from: &mut UnixStream, to: &mut impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        match to.write_all(&buf[..n]).and_then(|()| to.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// One text on stdout; a closed stdout is no panic.
fn say_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
