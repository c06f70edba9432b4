//! The lane's pack, spooled to the daemon's own disk (ARCHITECTURE.md, "Push proxy"):
//! bounded in size, written to a file in a 0700 directory of the daemon's, its trailer
//! checked so a pack cut short is an error, never a push. The daemon holds no pack in
//! memory; the file is removed with its directory when the push ends.

use sha2::Digest;
use std::path::Path;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// A pack's header: `PACK`, a version, an object count.
pub const HEADER_BYTES: usize = 12;

/// Why the pack was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpoolError {
    /// Larger than the daemon takes.
    #[error(
        "the pack is larger than the daemon takes ({max} bytes; --push-max-pack-bytes raises it)"
    )]
    TooLarge {
        /// The bound, in bytes.
        max: u64,
    },
    /// Not a pack, or cut short (its checksum does not match).
    #[error("the pack is incomplete or corrupt: {0}")]
    Corrupt(String),
    /// The daemon's disk.
    #[error("cannot spool the pack: {0}")]
    Disk(std::io::Error),
    /// The lane's connection.
    #[error("reading the pack from the lane: {0}")]
    Lane(std::io::Error),
    /// The pack came slower than [`MIN_PACE_BYTES_PER_S`] on average after [`PACE_GRACE`].
    #[error(
        "the pack arrives too slowly (a push holds one of the daemon's slots: at least {MIN_PACE_BYTES_PER_S} bytes/s on average after its first {} s)",
        PACE_GRACE.as_secs()
    )]
    TooSlow,
    /// A refused push's pack did not end within `within_s` seconds.
    #[error("a refused push's pack did not end within {within_s} s")]
    NotWithin {
        /// The bound, in seconds.
        within_s: u64,
    },
}

/// Before this long, a pack may arrive at any pace (git compresses before it sends).
pub const PACE_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// After [`PACE_GRACE`], a pack must have come at this average pace at least, in bytes per
/// second: a lane trickling its pack would hold a push slot for the whole push deadline.
pub const MIN_PACE_BYTES_PER_S: u64 = 16 * 1024;

/// The pack trailer's hash, by the repository's object format.
pub enum Hasher {
    /// `object-format=sha1` (20-byte trailer).
    Sha1(Box<sha1_smol::Sha1>),
    /// `object-format=sha256` (32-byte trailer).
    Sha256(Box<sha2::Sha256>),
}

impl Hasher {
    /// The hasher for an object format's name (`sha1` unless `sha256`).
    pub fn for_format(format: &str) -> Hasher {
        if format == "sha256" {
            Hasher::Sha256(Box::default())
        } else {
            Hasher::Sha1(Box::default())
        }
    }

    /// The digest length, in bytes.
    pub fn digest_len(&self) -> usize {
        match self {
            Hasher::Sha1(_) => 20,
            Hasher::Sha256(_) => 32,
        }
    }

    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// The digest.
    pub fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha1(h) => h.digest().bytes().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        }
    }
}

/// Where a copy of the pack's bytes goes as they are spooled (to the forge's connection,
/// in chunks of about [`TEE_CHUNK_BYTES`]); a closed receiver stops the copy, never the
/// spool.
pub type Tee = tokio::sync::mpsc::Sender<Vec<u8>>;

/// The size of the chunks a [`Tee`] is given, in bytes.
pub const TEE_CHUNK_BYTES: usize = 64 * 1024;

/// [`spool_teed`] without a copy.
pub async fn spool<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    path: &Path,
    max: u64,
    format: &str,
) -> Result<u64, SpoolError> {
    spool_teed(lane, path, max, format, None).await
}

/// Reads the lane's pack into `path` (created new, 0600), at most `max` bytes. git does
/// not close its side after the pack (it waits for the report on the same connection), so
/// the pack's end is found by reading it: the header's object count, each object's header
/// and zlib stream, then the trailer, checked against the hash of everything before it.
/// Returns the pack's length. Every byte spooled is also given to `tee`, in order, as it
/// is read: the push streams to the forge while the pack arrives, the daemon holding back
/// the last bytes until it has judged (ARCHITECTURE.md, "Push proxy").
pub async fn spool_teed<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    path: &Path,
    max: u64,
    format: &str,
    tee: Option<Tee>,
) -> Result<u64, SpoolError> {
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .map_err(SpoolError::Disk)?;
    read_pack(
        lane,
        Some(file),
        max,
        max.saturating_mul(INFLATE_FACTOR),
        format,
        tee,
    )
    .await
}

/// Reads the lane's pack to its end as [`spool`] does, keeping nothing: for a push refused
/// before its pack, whose git reads the answer only once its pack is taken. Bounded as
/// the spool is, and nothing of it reaches the daemon's disk.
pub async fn drain<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    max: u64,
    format: &str,
) -> Result<u64, SpoolError> {
    // A refused lane's pack buys it no more work than its answer needs.
    let max = max.min(MAX_DRAINED_BYTES);
    read_pack(
        lane,
        None,
        max,
        max.saturating_mul(DRAIN_INFLATE_FACTOR),
        format,
        None,
    )
    .await
}

/// The most of a refused push's pack read before it is answered anyway, in bytes.
pub const MAX_DRAINED_BYTES: u64 = 64 * 1024 * 1024;

/// A drained pack's objects may inflate to at most this many times [`MAX_DRAINED_BYTES`].
pub const DRAIN_INFLATE_FACTOR: u64 = 4;

/// The pack read to its end: into `file` when given, and to `tee`; at most `max` bytes,
/// its objects inflating to at most `budget` bytes in all.
async fn read_pack<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    file: Option<tokio::fs::File>,
    max: u64,
    budget: u64,
    format: &str,
    tee: Option<Tee>,
) -> Result<u64, SpoolError> {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let reading = read_objects(lane, file, max, budget, format, tee, seen.clone());
    tokio::select! {
        read = reading => read,
        () = too_slow(&seen) => Err(SpoolError::TooSlow),
    }
}

/// Ends when the pack's pace falls below [`MIN_PACE_BYTES_PER_S`] after [`PACE_GRACE`]
/// (`seen`: the bytes read so far), stalled or trickling alike.
async fn too_slow(seen: &std::sync::atomic::AtomicU64) {
    let started = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let elapsed = started.elapsed();
        let read = seen.load(std::sync::atomic::Ordering::Relaxed);
        if elapsed > PACE_GRACE && read < MIN_PACE_BYTES_PER_S.saturating_mul(elapsed.as_secs()) {
            return;
        }
    }
}

/// [`read_pack`]'s reading, each byte counted in `seen`.
async fn read_objects<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    file: Option<tokio::fs::File>,
    max: u64,
    budget: u64,
    format: &str,
    tee: Option<Tee>,
    seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Result<u64, SpoolError> {
    let mut out = Recorder {
        seen,
        file: file.map(tokio::io::BufWriter::new),
        hasher: Hasher::for_format(format),
        total: 0,
        max,
        tee,
        pending: Vec::new(),
    };
    let mut header = [0u8; HEADER_BYTES];
    read_exact(lane, &mut header).await?;
    out.record(&header).await?;
    let count = check_header(&header)?;
    let id_len = out.hasher.digest_len();
    // What the pack's objects may inflate to, all together: a zlib stream of zeros
    // inflates a thousandfold, and this bounds the work a lane's pack can ask for.
    let mut budget = budget;
    for _ in 0..count {
        let mut c = read_u8(lane).await?;
        out.record(&[c]).await?;
        let kind = (c >> 4) & 7;
        let mut size = u64::from(c & 0x0f);
        let mut shift = 4;
        while c & 0x80 != 0 {
            if shift > 60 {
                return Err(SpoolError::Corrupt("an object's size is too large".into()));
            }
            c = read_u8(lane).await?;
            out.record(&[c]).await?;
            size |= u64::from(c & 0x7f) << shift;
            shift += 7;
        }
        match kind {
            6 => loop {
                let c = read_u8(lane).await?;
                out.record(&[c]).await?;
                if c & 0x80 == 0 {
                    break;
                }
            },
            7 => {
                let mut id = vec![0u8; id_len];
                read_exact(lane, &mut id).await?;
                out.record(&id).await?;
            }
            1..=4 => {}
            other => {
                return Err(SpoolError::Corrupt(format!("object type {other}")));
            }
        }
        inflate_through(lane, &mut out, size, &mut budget).await?;
    }
    let mut trailer = vec![0u8; id_len];
    read_exact(lane, &mut trailer).await?;
    out.copy(&trailer, true).await;
    let Recorder {
        file,
        hasher,
        total,
        ..
    } = out;
    if let Some(mut file) = file {
        file.write_all(&trailer).await.map_err(SpoolError::Disk)?;
        file.flush().await.map_err(SpoolError::Disk)?;
    }
    if hasher.finish() != trailer {
        return Err(SpoolError::Corrupt(
            "its trailing checksum does not match its contents".into(),
        ));
    }
    Ok(total + id_len as u64)
}

/// Where the pack's bytes go as they are read: the file and the trailer's hash, counted
/// against the bound, and the copy.
struct Recorder {
    /// The bytes read so far, for the pace ([`too_slow`]).
    seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// `None`: drained, not spooled.
    file: Option<tokio::io::BufWriter<tokio::fs::File>>,
    hasher: Hasher,
    total: u64,
    max: u64,
    tee: Option<Tee>,
    /// Bytes for the copy not yet given.
    pending: Vec<u8>,
}

impl Recorder {
    async fn record(&mut self, bytes: &[u8]) -> Result<(), SpoolError> {
        self.total += bytes.len() as u64;
        if self.total > self.max {
            return Err(SpoolError::TooLarge { max: self.max });
        }
        self.seen
            .store(self.total, std::sync::atomic::Ordering::Relaxed);
        self.hasher.update(bytes);
        if let Some(file) = self.file.as_mut() {
            file.write_all(bytes).await.map_err(SpoolError::Disk)?;
        }
        self.copy(bytes, false).await;
        Ok(())
    }

    /// Gives `bytes` to the copy, in chunks; `last` gives everything held.
    async fn copy(&mut self, bytes: &[u8], last: bool) {
        let Some(tee) = &self.tee else {
            return;
        };
        self.pending.extend_from_slice(bytes);
        if (last && !self.pending.is_empty()) || self.pending.len() >= TEE_CHUNK_BYTES {
            let chunk = std::mem::take(&mut self.pending);
            if tee.send(chunk).await.is_err() {
                self.tee = None;
            }
        }
    }
}

/// The pack's objects may inflate to at most this many times the pack bound, in all.
pub const INFLATE_FACTOR: u64 = 32;

/// Passes one zlib stream through, inflating it only to find where it ends: no more than
/// the `size` its header gives (nor than what is left of `budget`, in bytes), and giving
/// the runtime back its thread between chunks, so one lane's pack never stalls the
/// daemon's other lanes.
async fn inflate_through<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    out: &mut Recorder,
    size: u64,
    budget: &mut u64,
) -> Result<(), SpoolError> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut z = Decompress::new(true);
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        tokio::task::yield_now().await;
        let input = lane.fill_buf().await.map_err(SpoolError::Lane)?;
        if input.is_empty() {
            return Err(cut_short());
        }
        let before = z.total_in();
        let status = z
            .decompress(input, &mut scratch, FlushDecompress::None)
            .map_err(|e| SpoolError::Corrupt(format!("an object's zlib stream: {e}")))?;
        let used = (z.total_in() - before) as usize;
        let chunk = input[..used].to_vec();
        lane.consume(used);
        out.record(&chunk).await?;
        if z.total_out() > size {
            return Err(SpoolError::Corrupt(format!(
                "an object inflates past the {size} bytes its header says"
            )));
        }
        if z.total_out() > *budget {
            return Err(SpoolError::Corrupt(format!(
                "its objects inflate to more than {INFLATE_FACTOR} times the largest pack the daemon takes"
            )));
        }
        if status == Status::StreamEnd {
            if z.total_out() != size {
                return Err(SpoolError::Corrupt(format!(
                    "an object inflates to {} bytes, its header says {size}",
                    z.total_out()
                )));
            }
            *budget -= z.total_out();
            return Ok(());
        }
    }
}

fn cut_short() -> SpoolError {
    SpoolError::Corrupt("the lane's connection ended before the pack did".into())
}

async fn read_u8<R: AsyncBufRead + Unpin>(lane: &mut R) -> Result<u8, SpoolError> {
    let mut b = [0u8; 1];
    read_exact(lane, &mut b).await?;
    Ok(b[0])
}

async fn read_exact<R: AsyncBufRead + Unpin>(
    lane: &mut R,
    buf: &mut [u8],
) -> Result<(), SpoolError> {
    lane.read_exact(buf).await.map(|_| ()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            cut_short()
        } else {
            SpoolError::Lane(e)
        }
    })
}

/// `PACK`, version 2 or 3.
pub fn check_header(header: &[u8]) -> Result<u32, SpoolError> {
    if header.len() < HEADER_BYTES || &header[..4] != b"PACK" {
        return Err(SpoolError::Corrupt("it does not start with PACK".into()));
    }
    let version = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    if !matches!(version, 2 | 3) {
        return Err(SpoolError::Corrupt(format!(
            "version {version} is not 2 or 3"
        )));
    }
    Ok(u32::from_be_bytes([
        header[8], header[9], header[10], header[11],
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn git_pack() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(dir.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&["init", "-q"]);
        for i in 0..3 {
            std::fs::write(dir.path().join("f"), "y\n".repeat(100 * (i + 1))).unwrap();
            git(&["add", "f"]);
            git(&["commit", "-q", "-m", "c"]);
        }
        let head = git(&["rev-parse", "HEAD"]);
        crate::push::walk::tests::pack_of(dir.path(), &format!("{head}\n"))
    }

    #[tokio::test]
    async fn the_pack_ends_where_its_trailer_does_with_the_lanes_side_still_open() {
        let pack = git_pack();
        let dir = tempfile::tempdir().unwrap();
        let (mut lane, daemon) = tokio::io::duplex(1 << 20);
        lane.write_all(&pack).await.unwrap();
        // `lane` stays open, as git keeps it open for the report.
        let mut reader = tokio::io::BufReader::new(daemon);
        let path = dir.path().join("pack");
        let len = spool(&mut reader, &path, 1 << 20, "sha1").await.unwrap();
        assert_eq!(len, pack.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), pack);
        drop(lane);
    }

    /// A pack of one blob whose header says `declared` bytes and whose zlib stream
    /// inflates to `zeros` zero bytes, with a right trailer.
    fn bomb(declared: u64, zeros: usize) -> Vec<u8> {
        use std::io::Write;
        let mut head = vec![0x30 | (declared & 0x0f) as u8];
        let mut rest = declared >> 4;
        while rest > 0 {
            *head.last_mut().unwrap() |= 0x80;
            head.push((rest & 0x7f) as u8);
            rest >>= 7;
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![0u8; zeros]).unwrap();
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        pack.extend(head);
        pack.extend(z.finish().unwrap());
        let mut h = Hasher::for_format("sha1");
        h.update(&pack);
        pack.extend(h.finish());
        pack
    }

    #[tokio::test]
    async fn an_object_inflating_past_its_header_or_the_budget_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Says 100 bytes, inflates to 8 MiB: refused at its header's size.
        let lie = bomb(100, 8 << 20);
        let e = spool(&mut &lie[..], &dir.path().join("a"), 1 << 20, "sha1").await;
        assert!(
            matches!(&e, Err(SpoolError::Corrupt(why)) if why.contains("past the 100 bytes")),
            "{e:?}"
        );
        // Says the truth, 64 MiB of zeros from a pack of about 64 KiB: more than the
        // budget for a daemon taking packs of at most 1 MiB.
        let big = bomb(64 << 20, 64 << 20);
        let e = spool(&mut &big[..], &dir.path().join("b"), 1 << 20, "sha1").await;
        assert!(
            matches!(&e, Err(SpoolError::Corrupt(why)) if why.contains("times the largest pack")),
            "{e:?}"
        );
        // The same blob within the budget is spooled whole.
        let ok = spool(&mut &big[..], &dir.path().join("c"), 8 << 20, "sha1").await;
        assert_eq!(ok.unwrap(), big.len() as u64);
    }

    #[tokio::test]
    async fn a_pack_cut_short_too_large_or_corrupt_is_refused() {
        let pack = git_pack();
        let dir = tempfile::tempdir().unwrap();
        let mut short: &[u8] = &pack[..pack.len() - 5];
        let e = spool(&mut short, &dir.path().join("a"), 1 << 20, "sha1").await;
        assert!(matches!(e, Err(SpoolError::Corrupt(_))), "{e:?}");
        let mut all: &[u8] = &pack;
        let e = spool(&mut all, &dir.path().join("b"), 100, "sha1").await;
        assert!(matches!(e, Err(SpoolError::TooLarge { max: 100 })), "{e:?}");
        let mut bad = pack.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let mut bad: &[u8] = &bad;
        let e = spool(&mut bad, &dir.path().join("c"), 1 << 20, "sha1").await;
        assert!(matches!(e, Err(SpoolError::Corrupt(_))), "{e:?}");
        let mut not_a_pack: &[u8] = b"JUNKJUNKJUNKJUNK";
        let e = spool(&mut not_a_pack, &dir.path().join("d"), 1 << 20, "sha1").await;
        assert!(matches!(e, Err(SpoolError::Corrupt(_))), "{e:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pack_that_stalls_is_let_go_once_its_pace_falls_short() {
        let (mut lane, reading) = tokio::io::duplex(1024);
        lane.write_all(b"PACK\0\0\0\x02\0\0\0\x01\x30")
            .await
            .unwrap();
        let mut reading = tokio::io::BufReader::new(reading);
        let dir = tempfile::tempdir().unwrap();
        let started = tokio::time::Instant::now();
        let e = spool(&mut reading, &dir.path().join("p"), 1 << 20, "sha1").await;
        assert!(matches!(e, Err(SpoolError::TooSlow)), "{e:?}");
        assert!(started.elapsed() >= PACE_GRACE, "{:?}", started.elapsed());
        drop(lane);
    }
}
