//! `row-fence-bench-echo SOCKET`: the floor of a warm ask. Connects to the bench's echo
//! server, sends one line, reads it back and exits 0 (1 on any failure). Std only, so it
//! costs what a minimal client process doing one Unix-socket round trip costs.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

const LINE: &[u8] = b"{\"v\":1,\"op\":\"ping\"}\n";

fn main() {
    let Some(socket) = std::env::args_os().nth(1) else {
        eprintln!("usage: row-fence-bench-echo SOCKET");
        std::process::exit(2);
    };
    let ok = (|| -> std::io::Result<bool> {
        let mut stream = UnixStream::connect(&socket)?;
        stream.write_all(LINE)?;
        let mut back = Vec::with_capacity(LINE.len());
        stream.read_to_end(&mut back)?;
        Ok(back == LINE)
    })();
    std::process::exit(if matches!(ok, Ok(true)) { 0 } else { 1 });
}
