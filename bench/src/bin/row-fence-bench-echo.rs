//! `row-fence-bench-echo SOCKET` or `row-fence-bench-echo --tcp HOST:PORT`: the floor of a
//! warm ask. Connects to the bench's echo server (on a Unix socket, or over TCP through
//! the delay proxy: one round trip over the distant link), sends one line, reads it back
//! and exits 0 (1 on any failure). Std only, so it costs what a minimal client process
//! doing one round trip costs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

const LINE: &[u8] = b"{\"v\":1,\"op\":\"ping\"}\n";

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let ok = match args.as_slice() {
        [flag, addr] if flag == "--tcp" => addr.to_str().map(|addr| {
            TcpStream::connect(addr).and_then(|s| round_trip(s, |s| s.set_nodelay(true)))
        }),
        [socket] => Some(UnixStream::connect(socket).and_then(|s| round_trip(s, |_| Ok(())))),
        _ => None,
    };
    match ok {
        None => {
            eprintln!("usage: row-fence-bench-echo SOCKET | --tcp HOST:PORT");
            std::process::exit(2);
        }
        Some(Ok(true)) => std::process::exit(0),
        Some(_) => std::process::exit(1),
    }
}

fn round_trip<S: Read + Write>(
    mut stream: S,
    setup: impl FnOnce(&S) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    setup(&stream)?;
    stream.write_all(LINE)?;
    let mut back = Vec::with_capacity(LINE.len());
    stream.read_to_end(&mut back)?;
    Ok(back == LINE)
}
