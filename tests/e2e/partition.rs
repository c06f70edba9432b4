//! A TCP proxy in front of one Redis server that can cut it off from the Redis deployment's
//! own members (its replicas and the sentinels) while ordinary clients (the daemon, the
//! CLI) still reach it: the network partition in which a deposed primary keeps answering.
//!
//! A connection is the deployment's own once its client has sent a replication command
//! (`REPLCONF`, `PSYNC`, `SYNC`) or a sentinel's name (`sentinel-…` client names, the
//! `__sentinel__` hello channel). While partitioned, such connections are frozen: nothing
//! is forwarded either way and nothing is closed, as a partition looks from both ends
//! (TCP keeps the connection, data waits in the buffers), and new ones are held after
//! their first bytes. Healing forwards what waited.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a frozen pump looks whether the partition healed (and a pump whether the
/// proxy stopped).
const TICK: Duration = Duration::from_millis(10);

/// The proxy; stopped (every connection closed) when dropped.
pub struct PartitionProxy {
    /// The loopback port it listens on.
    pub port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    parted: AtomicBool,
    stop: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
}

/// True when bytes a client sent mark its connection as the deployment's own.
fn internal(bytes: &[u8]) -> bool {
    let upper = bytes.to_ascii_uppercase();
    [
        &b"REPLCONF"[..],
        b"PSYNC",
        b"\r\nSYNC\r\n",
        b"SENTINEL-",
        b"__SENTINEL__",
    ]
    .iter()
    .any(|marker| upper.windows(marker.len()).any(|w| w == *marker))
}

impl PartitionProxy {
    /// Starts a proxy on a free loopback port in front of loopback `target`.
    pub fn start(target: u16) -> PartitionProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            parted: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => connect(&shared, client, target),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
                        Err(_) => std::thread::sleep(TICK),
                    }
                }
            })
        };
        PartitionProxy {
            port,
            shared,
            accept: Some(accept),
        }
    }

    /// Cuts the server off from its replicas and sentinels.
    pub fn partition(&self) {
        self.shared.parted.store(true, Ordering::SeqCst);
    }

    /// Ends the partition: what waited is forwarded.
    pub fn heal(&self) {
        self.shared.parted.store(false, Ordering::SeqCst);
    }
}

fn connect(shared: &Arc<Shared>, client: TcpStream, target: u16) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    let _ = client.set_nonblocking(false);
    let copies = (client.try_clone(), server.try_clone());
    let (Ok(client_in), Ok(server_in)) = copies else {
        return;
    };
    {
        let mut streams = shared.streams.lock().unwrap_or_else(|p| p.into_inner());
        if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
            streams.push(c);
            streams.push(s);
        }
    }
    let own = Arc::new(AtomicBool::new(false));
    for (from, to, upstream) in [(client_in, server, true), (server_in, client, false)] {
        let (shared, own) = (shared.clone(), own.clone());
        std::thread::spawn(move || pump(&shared, &own, from, to, upstream));
    }
}

/// Copies `from` to `to` until either closes; `upstream` is the client's direction, which
/// tells whether the connection is the deployment's own.
fn pump(shared: &Shared, own: &AtomicBool, mut from: TcpStream, mut to: TcpStream, upstream: bool) {
    let _ = from.set_read_timeout(Some(TICK * 10));
    let frozen = || own.load(Ordering::SeqCst) && shared.parted.load(Ordering::SeqCst);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if frozen() {
            std::thread::sleep(TICK);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        if upstream && internal(&buf[..n]) {
            own.store(true, Ordering::SeqCst);
        }
        while frozen() && !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for PartitionProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for stream in self
            .shared
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

#[test]
fn replication_and_sentinel_traffic_is_the_deployments_own_and_a_clients_is_not() {
    assert!(internal(b"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port"));
    assert!(internal(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n"));
    assert!(internal(
        b"*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$25\r\nsentinel-1f2e3d4c-cmd\r\n"
    ));
    assert!(!internal(b"*1\r\n$4\r\nPING\r\n"));
    assert!(!internal(b"*2\r\n$7\r\nEVALSHA\r\n$40\r\nabc"));
    assert!(!internal(
        b"*3\r\n$7\r\nPUBLISH\r\n$16\r\nrowfence:barrier\r\n$0\r\n\r\n"
    ));
}
