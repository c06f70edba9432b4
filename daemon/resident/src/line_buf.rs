//! A request line's buffer: capped before it grows, and wiped wherever its bytes have
//! been. A request may carry a private key (`row-fence keys add` sends it on the control
//! socket, ARCHITECTURE.md, "Key broker"), so no copy of it is left behind in freed
//! memory: growing moves the bytes into a new allocation and wipes the old one (as
//! OpenSSH's `sshbuf` does with `recallocarray`), and the buffer is wiped when it is
//! dropped, on every path (a line too long, a peer gone, a deadline passed, a line used).
//! Bytes are read straight into it, never through a stack buffer.

use zeroize::Zeroizing;

/// A byte buffer of at most `cap` bytes whose every allocation is wiped before it is
/// freed.
pub struct LineBuf {
    /// The bytes read so far; `Zeroizing` wipes the whole allocation, spare capacity
    /// included, when it is dropped.
    bytes: Zeroizing<Vec<u8>>,
    /// The most bytes it ever holds (and so the largest allocation it makes).
    cap: usize,
}

impl LineBuf {
    /// An empty buffer allocating `initial` bytes (at most `cap`) and never more than
    /// `cap`.
    pub fn new(initial: usize, cap: usize) -> LineBuf {
        LineBuf {
            bytes: Zeroizing::new(Vec::with_capacity(initial.min(cap))),
            cap,
        }
    }

    /// The bytes read so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// How many bytes it holds.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Keeps the first `len` bytes (the rest stays in the allocation until it is wiped).
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// Reads at most `want` more bytes with `read` (handed a zeroed slice to fill, it
    /// says how many it filled), growing first if needed. `None`, and nothing read, when
    /// the buffer is at its cap: the caller refuses the line without reading the rest.
    pub fn read_with(
        &mut self,
        want: usize,
        read: impl FnOnce(&mut [u8]) -> std::io::Result<usize>,
    ) -> Option<std::io::Result<usize>> {
        let start = self.bytes.len();
        let room = want.min(self.cap - start);
        if room == 0 {
            return None;
        }
        self.reserve(start + room);
        self.bytes.resize(start + room, 0);
        let result = read(&mut self.bytes[start..]);
        let filled = match &result {
            Ok(n) => (*n).min(room),
            Err(_) => 0,
        };
        self.bytes.truncate(start + filled);
        Some(result.map(|n| n.min(room)))
    }

    /// The bytes, still wiped when the caller drops them.
    pub fn take(&mut self) -> Zeroizing<Vec<u8>> {
        std::mem::take(&mut self.bytes)
    }

    /// Room for `need` bytes in one allocation: a new one (doubling, within the cap),
    /// the bytes copied over and the old allocation wiped before it is freed.
    fn reserve(&mut self, need: usize) {
        if self.bytes.capacity() >= need {
            return;
        }
        let cap = need.max(self.bytes.capacity() * 2).min(self.cap);
        let mut grown = Vec::with_capacity(cap);
        grown.extend_from_slice(&self.bytes);
        // The old allocation, wiped whole as it drops.
        drop(Zeroizing::new(std::mem::replace(&mut *self.bytes, grown)));
    }

    /// The allocation's size (tests: it never passes the cap).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_grows_within_its_cap_keeps_its_bytes_and_reads_nothing_at_the_cap() {
        let mut buf = LineBuf::new(4, 100);
        let mut fed = 0u8;
        while let Some(read) = buf.read_with(7, |slice| {
            assert!(slice.iter().all(|b| *b == 0), "a zeroed slice to fill");
            for b in slice.iter_mut() {
                *b = fed;
                fed = fed.wrapping_add(1);
            }
            Ok(slice.len())
        }) {
            assert!(read.unwrap() <= 7);
            assert!(buf.capacity() <= 100, "{}", buf.capacity());
        }
        assert_eq!(buf.len(), 100);
        assert!(
            buf.as_slice()
                .iter()
                .enumerate()
                .all(|(i, b)| *b == i as u8)
        );
        // At the cap: the reader is not called at all.
        assert!(buf.read_with(7, |_| panic!("read at the cap")).is_none());
    }

    #[test]
    fn a_failed_or_short_read_keeps_only_what_was_filled() {
        let mut buf = LineBuf::new(8, 64);
        buf.read_with(10, |s| {
            s[..3].copy_from_slice(b"abc");
            Ok(3)
        });
        let err = buf.read_with(10, |s| {
            s[0] = b'x';
            Err(std::io::Error::other("gone"))
        });
        assert!(matches!(err, Some(Err(_))));
        assert_eq!(buf.as_slice(), b"abc");
        // A reader that claims more than it was given is held to what it was given.
        assert_eq!(buf.read_with(2, |_| Ok(50)).unwrap().unwrap(), 2);
        assert_eq!(buf.len(), 5);
        assert_eq!(&**buf.take(), b"abc\0\0");
        assert!(buf.is_empty());
    }
}
