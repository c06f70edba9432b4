//! The floor's server: an echo server on a thread of the bench, on a Unix socket or on a
//! loopback TCP port. Each connection sends one line and gets it back, then the
//! connection closes: the shape of an ask with nothing behind it, so
//! `row-fence-bench-echo` measures what any client process doing one round trip costs.
//! Behind the delay proxy, the TCP one measures one round trip over the distant link.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// The running Unix-socket echo server (its thread serves until the process ends).
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
                let _ = echo(&stream, &stream);
            }
        });
        Ok(EchoServer {
            socket: socket.to_path_buf(),
        })
    }
}

/// Binds a free loopback TCP port and serves it like [`EchoServer::start`]; its port.
pub fn start_tcp() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot bind a loopback port for the echo server: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("echo server: {e}"))?
        .port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_nodelay(true);
            let _ = echo(&stream, &stream);
        }
    });
    Ok(port)
}

fn echo(reader: impl Read, mut writer: impl Write) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(64);
    BufReader::new(reader).read_until(b'\n', &mut line)?;
    writer.write_all(&line)
}
