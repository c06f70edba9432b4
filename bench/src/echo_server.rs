//! The floor's server: a Unix-socket echo server on a thread of the bench. Each
//! connection sends one line and gets it back, then the connection closes: the shape of
//! an ask with nothing behind it, so `row-fence-bench-echo` measures what any client
//! process doing one round trip costs.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The running echo server (its thread serves until the process ends).
pub struct EchoServer {
    /// Its socket.
    pub socket: PathBuf,
}

impl EchoServer {
    /// Binds `socket` and serves connections one at a time on a new thread.
    pub fn start(socket: &Path) -> Result<EchoServer, String> {
        let listener =
            UnixListener::bind(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = echo(stream);
            }
        });
        Ok(EchoServer {
            socket: socket.to_path_buf(),
        })
    }
}

fn echo(stream: UnixStream) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(64);
    BufReader::new(&stream).read_until(b'\n', &mut line)?;
    (&stream).write_all(&line)
}
