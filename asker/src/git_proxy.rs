//! `row-fence-ask --git-proxy`: git's `core.gitProxy`, the gate for `git://` remotes. Git
//! runs the proxy as `<proxy> HOST PORT` (no shell, so the installer writes a small
//! script that adds the gate's flags) and speaks its protocol over the proxy's stdin and
//! stdout. The first thing git sends names the service: `git-upload-pack` and
//! `git-upload-archive` (reads) pass untouched; anything else (`git-receive-pack`, a push)
//! asks the fence first. Then the proxy connects to HOST:PORT, replays that first line and
//! relays both ways until either side is done.

use crate::transport::{self, GateUsage};
use row_fence_contract::exit;
use row_fence_contract::report;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};

/// The first argument that selects this mode.
pub const FLAG: &str = "--git-proxy";

/// The longest pkt-line git sends (65520 bytes, its length prefix included).
const MAX_PKT_LINE: usize = 65520;

/// Runs the mode with the arguments after [`FLAG`]; returns the exit code. `Err`: a usage
/// error.
pub fn main(args: &[OsString]) -> Result<i32, GateUsage> {
    let (gate, rest) = transport::split(args)?;
    let [host, port] = rest else {
        return Err(GateUsage::ProxyOperands);
    };
    let host = host.to_string_lossy().into_owned();
    let port: u16 = port
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| GateUsage::NotAPort(port.clone()))?;
    // What stdin buffers past the first line stays in `Stdin` for the relay.
    let first = match read_pkt_line(&mut io::stdin().lock()) {
        Ok(first) => first,
        Err(e) => {
            report::say(&format!("row-fence: git:// proxy: {e}"));
            return Ok(exit::COULD_NOT_READ);
        }
    };
    let request = request_text(&first);
    if !is_read(&request) {
        let code = gate.ask(format!("git push over git://{host}:{port}: {request}"));
        if code != exit::ALLOWED {
            return Ok(code);
        }
    }
    match relay(&host, port, &first) {
        Ok(()) => Ok(exit::ALLOWED),
        Err(e) => {
            report::say(&format!("row-fence: git:// proxy to {host}:{port}: {e}"));
            Ok(exit::COULD_NOT_READ)
        }
    }
}

/// Why git's first pkt-line was not read (the proxy exits 1 and git stops).
#[derive(Debug)]
enum PktLineError {
    /// Nothing (or under four bytes) came from git.
    NoRequest(io::Error),
    /// The four bytes are not a length in range.
    NoLength([u8; 4]),
    /// The line ended before its length.
    CutShort(io::Error),
}

impl std::fmt::Display for PktLineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PktLineError::NoRequest(e) => write!(f, "no request from git: {e}"),
            PktLineError::NoLength(head) => write!(f, "git's first line has no length: {head:?}"),
            PktLineError::CutShort(e) => write!(f, "git's first line was cut short: {e}"),
        }
    }
}

/// Reads one pkt-line (four hex digits of length, then the rest), whole.
fn read_pkt_line(input: &mut impl Read) -> Result<Vec<u8>, PktLineError> {
    let mut head = [0u8; 4];
    input
        .read_exact(&mut head)
        .map_err(PktLineError::NoRequest)?;
    let len = std::str::from_utf8(&head)
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .filter(|len| (5..=MAX_PKT_LINE).contains(len))
        .ok_or(PktLineError::NoLength(head))?;
    let mut line = head.to_vec();
    line.resize(len, 0);
    input
        .read_exact(&mut line[4..])
        .map_err(PktLineError::CutShort)?;
    Ok(line)
}

/// `service path` from the first pkt-line (`git-upload-pack /r.git\0host=…\0`).
fn request_text(line: &[u8]) -> String {
    let payload = &line[4..];
    let end = payload
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(payload.len());
    String::from_utf8_lossy(&payload[..end])
        .trim_end()
        .to_string()
}

/// True for the services that only read.
pub fn is_read(request: &str) -> bool {
    let service = request.split(' ').next().unwrap_or("");
    matches!(service, "git-upload-pack" | "git-upload-archive")
}

/// Connects, replays git's first line, and pumps git → remote on a thread and remote →
/// git here, until the remote closes (the process then ends, and the thread with it).
fn relay(host: &str, port: u16, first: &[u8]) -> io::Result<()> {
    let remote = TcpStream::connect((host, port))?;
    (&remote).write_all(first)?;
    let to_remote = remote.try_clone()?;
    std::thread::spawn(move || {
        let _ = pump(io::stdin().lock(), &to_remote);
        let _ = to_remote.shutdown(Shutdown::Write);
    });
    pump(&remote, io::stdout().lock())
}

/// Copies until end of input, each read written and flushed at once: git and the remote
/// take turns, so each must see the other's reply as it comes. (A plain loop: std's
/// `io::copy` splices socket to pipe, and git then waited for a reply already sent.)
fn pump(mut from: impl Read, mut to: impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return to.flush(),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_names_the_service_and_only_reads_pass() {
        let payload = "git-receive-pack /r.git\0host=127.0.0.1:9418\0";
        let line = format!("{:04x}{payload}", payload.len() + 4);
        let read = read_pkt_line(&mut line.as_bytes()).unwrap();
        assert_eq!(read, line.as_bytes());
        assert_eq!(request_text(&read), "git-receive-pack /r.git");
        assert!(!is_read("git-receive-pack /r.git"));
        assert!(is_read("git-upload-pack /r.git"));
        assert!(is_read("git-upload-archive /r.git"));
        assert!(!is_read("git-upload-packx /r.git"));
        assert!(read_pkt_line(&mut &b"zz"[..]).is_err());
        assert!(read_pkt_line(&mut &b"0000"[..]).is_err());
        assert!(read_pkt_line(&mut &b"0031git-"[..]).is_err());
    }
}
