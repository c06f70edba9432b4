//! A loopback TCP proxy that adds a fixed delay to every byte in each direction, standing
//! in for a store 5 ms away (10 ms round trip). It is a delay line, not a per-chunk
//! sleep: each chunk is forwarded `delay` after it was read, whatever else is in flight,
//! so pipelined traffic is not serialised.
//!
//! What it cannot delay: the TCP handshake, which the proxy's kernel completes at once.
//! Over a real 5 ms link every new connection pays one more round trip, so the cold
//! cases here are 10 ms kinder than a real network; the warm case keeps its connection
//! and pays nothing for it either way.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running proxy; stops accepting when dropped (open connections run until either
/// side closes).
pub struct DelayProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Tells the accept loop to stop.
    stopping: Arc<AtomicBool>,
}

impl DelayProxy {
    /// Listens on a free port on 127.0.0.1 and forwards to `upstream`, adding `delay`
    /// each way.
    pub fn start(upstream: SocketAddr, delay: Duration) -> Result<DelayProxy, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("proxy: {e}"))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = stopping.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(client) = client {
                    std::thread::spawn(move || {
                        let _ = relay(client, upstream, delay);
                    });
                }
            }
        });
        Ok(DelayProxy { addr, stopping })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the loop sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn relay(client: TcpStream, upstream: SocketAddr, delay: Duration) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    pump(client.try_clone()?, server.try_clone()?, delay);
    pump(server, client, delay);
    Ok(())
}

/// Forwards `from` → `to`, each chunk `delay` after it was read: one thread reads and
/// stamps, one sleeps until each stamp and writes.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Option<Vec<u8>>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send((Instant::now() + delay, None));
                    return;
                }
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, Some(buf[..n].to_vec())))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            match chunk {
                Some(bytes) if to.write_all(&bytes).is_ok() => {}
                _ => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
            }
        }
    });
}
