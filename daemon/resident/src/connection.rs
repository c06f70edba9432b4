//! One connection's I/O: one request line in, one answer line out, close.
//!
//! An asker connects and writes its whole request at once, so by the time the daemon has
//! accepted, the line is usually already in the socket buffer and the answer fits in the
//! empty send buffer. Such a connection is served without registering it with tokio's
//! reactor at all: one non-blocking `recv`, one non-blocking `send`, `close`. Registering
//! costs two `epoll_ctl` calls, one `epoll_wait` and a `shutdown` per ask, about a fifth
//! of the daemon's CPU per ask (`scripts/bench`, "CPU per ask"). A connection
//! whose request has not all arrived, or whose answer does not fit at once, is handed to
//! tokio and finished as any other async stream: the fast path decides nothing, it only
//! skips waiting where nothing would be waited for.

use crate::line_buf::LineBuf;
use row_fence_contract::protocol::MAX_MESSAGE_BYTES;
use std::io;
use std::os::unix::net::UnixStream as StdStream;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use zeroize::Zeroizing;

/// Why no request line could be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Over `MAX_MESSAGE_BYTES` without a newline.
    TooLong,
    /// Closed or failed before a whole line.
    Closed,
}

/// The peer on the other end, as the kernel reports it: its uid, and its pid where the
/// platform tells it.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// The peer's effective uid when it connected.
    pub uid: u32,
    /// The peer's pid, when known.
    pub pid: Option<i32>,
}

/// An accepted connection: unregistered until it has to wait for something.
pub struct Connection {
    io: Io,
}

enum Io {
    /// A blocking-mode std socket, only ever used with `MSG_DONTWAIT`.
    Unregistered(StdStream),
    /// Registered with the reactor, after something had to be waited for.
    Registered(UnixStream),
    /// Registration failed; nothing more is read or written.
    Gone,
}

impl Connection {
    /// Wraps a socket fresh from `accept` (blocking mode, as `accept4` leaves it).
    pub fn new(stream: StdStream) -> Connection {
        Connection {
            io: Io::Unregistered(stream),
        }
    }

    /// Who is connected: `None` when the kernel cannot say (the caller refuses such a
    /// peer: fail closed, docs/hard-mode.md, "Threat model").
    pub async fn peer(&mut self) -> Option<Peer> {
        #[cfg(target_os = "linux")]
        if let Io::Unregistered(stream) = &self.io {
            use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
            return getsockopt(stream, PeerCredentials).ok().map(|c| Peer {
                uid: c.uid(),
                pid: Some(c.pid()),
            });
        }
        let cred = self.registered()?.peer_cred().ok()?;
        Some(Peer {
            uid: cred.uid(),
            pid: cred.pid(),
        })
    }

    /// Reads one line of at most `MAX_MESSAGE_BYTES` (newline included; anything sent
    /// after the newline is ignored). Waits only when the line has not all arrived; the
    /// caller bounds that wait. The line is read into a [`LineBuf`] (it may hold a
    /// private key): never more than one byte past the limit is read, and every copy
    /// of it is wiped, the one returned when the caller drops it.
    pub async fn read_request(&mut self) -> Result<Zeroizing<Vec<u8>>, ReadError> {
        let mut line = LineBuf::new(1024, MAX_MESSAGE_BYTES + 1);
        if let Io::Unregistered(stream) = &self.io {
            match read_now(&ReadFrom::Std(stream), &mut line) {
                Now::Done(result) => return result,
                Now::WouldBlock => {}
            }
        }
        let stream = self.registered().ok_or(ReadError::Closed)?;
        // Readiness is cleared only by `WouldBlock`, never by a short read: a read stops
        // early at a segment that carries ancillary data (passed fds) with more queued
        // behind it, and a reader that took the short read for "drained" would wait for
        // a wake-up that never comes.
        loop {
            if stream.readable().await.is_err() {
                return Err(ReadError::Closed);
            }
            if let Now::Done(result) = read_now(&ReadFrom::Tokio(stream), &mut line) {
                return result;
            }
        }
    }

    /// Writes `answer` whole within `deadline`, then closes (on drop). A peer that went
    /// away, or that does not read its answer in time, gets nothing more: it must not hold
    /// a connection slot and the answer's memory for as long as it likes.
    pub async fn reply(mut self, answer: &[u8], deadline: std::time::Duration) {
        let mut sent = 0;
        if let Io::Unregistered(stream) = &self.io {
            match send_now(stream, answer) {
                Ok(n) if n == answer.len() => return,
                Ok(n) => sent = n,
                Err(_) => return,
            }
        }
        if let Some(stream) = self.registered() {
            let written = tokio::time::timeout(deadline, async {
                stream.write_all(&answer[sent..]).await?;
                stream.shutdown().await
            });
            let _ = written.await;
        }
    }

    /// The connection registered with the reactor (registering it on first use).
    fn registered(&mut self) -> Option<&mut UnixStream> {
        if let Io::Unregistered(_) = self.io {
            let Io::Unregistered(stream) = std::mem::replace(&mut self.io, Io::Gone) else {
                unreachable!("matched just above")
            };
            if let Ok(stream) = stream
                .set_nonblocking(true)
                .and_then(|()| UnixStream::from_std(stream))
            {
                self.io = Io::Registered(stream);
            }
        }
        match &mut self.io {
            Io::Registered(stream) => Some(stream),
            _ => None,
        }
    }
}

enum Now {
    /// A line, or a reason there will be none.
    Done(Result<Zeroizing<Vec<u8>>, ReadError>),
    /// The line has not all arrived: wait for the rest.
    WouldBlock,
}

/// Where [`read_now`] reads from.
enum ReadFrom<'a> {
    Std(&'a StdStream),
    Tokio(&'a UnixStream),
}

impl ReadFrom<'_> {
    fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ReadFrom::Std(stream) => recv_dontwait(stream, buf),
            // try_read clears the readiness only on WouldBlock.
            ReadFrom::Tokio(stream) => stream.try_read(buf),
        }
    }
}

/// Reads what has already arrived, without waiting, into `line`: straight into its
/// buffer, and nothing once it holds one byte past the limit.
fn read_now(from: &ReadFrom<'_>, line: &mut LineBuf) -> Now {
    loop {
        let start = line.len();
        match line.read_with(8192, |buf| from.read(buf)) {
            None => return Now::Done(Err(ReadError::TooLong)),
            Some(Ok(0)) => return Now::Done(Err(ReadError::Closed)),
            Some(Ok(_)) => {
                if let Some(i) = line.as_slice()[start..].iter().position(|&b| b == b'\n') {
                    line.truncate(start + i + 1);
                    return Now::Done(complete(line.take()));
                }
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => return Now::WouldBlock,
            Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Some(Err(_)) => return Now::Done(Err(ReadError::Closed)),
        }
    }
}

/// Judges what was read: a whole line within the limit, or why not (the bytes wiped as
/// they drop).
fn complete(line: Zeroizing<Vec<u8>>) -> Result<Zeroizing<Vec<u8>>, ReadError> {
    if line.len() > MAX_MESSAGE_BYTES {
        Err(ReadError::TooLong)
    } else if line.last() == Some(&b'\n') {
        Ok(line)
    } else {
        Err(ReadError::Closed)
    }
}

/// Sends what fits now; the count sent (0 when the buffer is full).
fn send_now(stream: &StdStream, bytes: &[u8]) -> io::Result<usize> {
    use nix::sys::socket::send;
    let mut sent = 0;
    while sent < bytes.len() {
        match send(stream_fd(stream), &bytes[sent..], dontwait()) {
            Ok(n) => sent += n,
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(sent)
}

/// `MSG_DONTWAIT`, and on Linux `MSG_NOSIGNAL`: a peer gone is an error, not SIGPIPE.
fn dontwait() -> nix::sys::socket::MsgFlags {
    use nix::sys::socket::MsgFlags;
    #[cfg(target_os = "linux")]
    return MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(target_os = "linux"))]
    return MsgFlags::MSG_DONTWAIT;
}

fn recv_dontwait(stream: &StdStream, buf: &mut [u8]) -> io::Result<usize> {
    use nix::sys::socket::{MsgFlags, recv};
    Ok(recv(stream_fd(stream), buf, MsgFlags::MSG_DONTWAIT)?)
}

fn stream_fd(stream: &StdStream) -> std::os::fd::RawFd {
    use std::os::fd::AsRawFd;
    stream.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pair() -> (Connection, StdStream) {
        let (ours, theirs) = StdStream::pair().unwrap();
        (Connection::new(ours), theirs)
    }

    #[tokio::test]
    async fn a_line_already_sent_is_read_without_waiting_and_what_follows_is_ignored() {
        let (mut conn, mut peer) = pair();
        peer.write_all(b"{\"v\":1}\nmore").unwrap();
        assert_eq!(
            conn.read_request().await.unwrap().as_slice(),
            b"{\"v\":1}\n"
        );
        assert!(matches!(conn.io, Io::Unregistered(_)));
    }

    #[tokio::test]
    async fn a_line_sent_in_two_parts_is_waited_for() {
        let (mut conn, mut peer) = pair();
        peer.write_all(b"{\"v\":").unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            peer.write_all(b"1}\n").unwrap();
            peer
        });
        assert_eq!(
            conn.read_request().await.unwrap().as_slice(),
            b"{\"v\":1}\n"
        );
        assert!(matches!(conn.io, Io::Registered(_)));
        drop(writer.join());
    }

    #[tokio::test]
    async fn a_line_at_the_limit_is_read_and_one_byte_more_is_too_long() {
        for (len, ok) in [(MAX_MESSAGE_BYTES, true), (MAX_MESSAGE_BYTES + 1, false)] {
            let (mut conn, peer) = pair();
            let mut line = vec![b'x'; len - 1];
            line.push(b'\n');
            let writer = std::thread::spawn(move || {
                let mut peer = peer;
                let _ = peer.write_all(&line);
                peer
            });
            let got = conn.read_request().await;
            assert_eq!(got.is_ok(), ok, "len {len}");
            if !ok {
                assert_eq!(got, Err(ReadError::TooLong));
            }
            drop(writer.join());
        }
    }

    #[tokio::test]
    async fn an_oversized_key_message_is_refused_without_reading_it_all() {
        // `keys add` with a "key" of 4 MiB: the daemon reads one byte past its limit,
        // refuses, and closes; the peer cannot write the rest.
        let (mut conn, peer) = pair();
        let mut message =
            b"{\"v\":1,\"op\":\"keys_add\",\"key\":\"-----BEGIN OPENSSH PRIVATE KEY-----\\n"
                .to_vec();
        message.resize(4 << 20, b'A');
        let total = message.len();
        let writer = std::thread::spawn(move || {
            let mut peer = peer;
            let mut sent = 0;
            while sent < message.len() {
                match peer.write(&message[sent..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sent += n,
                }
            }
            sent
        });
        assert_eq!(conn.read_request().await, Err(ReadError::TooLong));
        drop(conn);
        let sent = writer.join().unwrap();
        assert!(sent < total, "the peer wrote all {total} bytes");
    }

    #[tokio::test]
    async fn a_peer_that_closes_before_a_newline_has_sent_no_request() {
        let (mut conn, mut peer) = pair();
        peer.write_all(b"{\"v\":1}").unwrap();
        drop(peer);
        assert_eq!(conn.read_request().await, Err(ReadError::Closed));
    }

    #[tokio::test]
    async fn an_answer_larger_than_the_send_buffer_is_finished_by_the_reactor() {
        let (conn, peer) = pair();
        let answer = vec![b'a'; 4 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut &peer, &mut got).unwrap();
            got.len()
        });
        conn.reply(&answer, std::time::Duration::from_secs(30))
            .await;
        assert_eq!(reader.join().unwrap(), 4 << 20);
    }

    #[tokio::test]
    async fn a_peer_that_does_not_read_its_answer_is_given_up_on_at_the_deadline() {
        let (conn, peer) = pair();
        let answer = vec![b'a'; 4 << 20];
        let started = std::time::Instant::now();
        conn.reply(&answer, std::time::Duration::from_millis(200))
            .await;
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        drop(peer);
    }

    #[tokio::test]
    async fn a_request_in_segments_that_carry_fds_is_read_whole() {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        use std::os::fd::AsRawFd;
        let (mut conn, peer) = pair();
        let line = br#"{"v":1,"op":"ping"}"#.to_vec();
        let writer = std::thread::spawn(move || {
            let devnull = std::fs::File::open("/dev/null").unwrap();
            let fds = [devnull.as_raw_fd(); 16];
            let parts: [&[u8]; 3] = [&line[..5], &line[5..], b"\n"];
            for (i, part) in parts.iter().enumerate() {
                let iov = [std::io::IoSlice::new(part)];
                let cmsg = [ControlMessage::ScmRights(&fds)];
                sendmsg::<()>(peer.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None).unwrap();
                if i == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            peer
        });
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read_request())
            .await
            .expect("the whole line is read, not waited on forever");
        assert_eq!(got.unwrap().as_slice(), b"{\"v\":1,\"op\":\"ping\"}\n");
        drop(writer.join());
    }

    #[tokio::test]
    async fn the_peer_is_the_uid_that_connected() {
        let (mut conn, _peer) = pair();
        let peer = conn.peer().await.unwrap();
        assert_eq!(peer.uid, nix::unistd::geteuid().as_raw());
    }
}
