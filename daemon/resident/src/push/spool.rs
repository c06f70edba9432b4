//! The lane's pack, spooled to the daemon's own disk (ARCHITECTURE.md, "Push proxy"):
//! bounded in size, written to a file in a 0700 directory of the daemon's, its trailer
//! checked so a pack cut short is an error, never a push. The daemon holds no pack in
//! memory; the file is removed with its directory when the push ends.

use sha2::Digest;
use std::path::Path;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

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
}

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
    pub fn len(&self) -> usize {
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

/// Reads the lane's pack until it closes its side, into `path` (created new, 0600), at
/// most `max` bytes; checks the header and the trailer. Returns the pack's length.
pub async fn spool<R: AsyncRead + Unpin>(
    lane: &mut R,
    path: &Path,
    max: u64,
    format: &str,
) -> Result<u64, SpoolError> {
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .map_err(SpoolError::Disk)?;
    let mut hasher = Hasher::for_format(format);
    let trailer_len = hasher.len();
    // The last `trailer_len` bytes read are held back from the hash: they are the trailer.
    let mut held: Vec<u8> = Vec::with_capacity(trailer_len * 2);
    let mut header: Vec<u8> = Vec::with_capacity(HEADER_BYTES);
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = lane.read(&mut buf).await.map_err(SpoolError::Lane)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > max {
            return Err(SpoolError::TooLarge { max });
        }
        let chunk = &buf[..n];
        if header.len() < HEADER_BYTES {
            let take = (HEADER_BYTES - header.len()).min(n);
            header.extend_from_slice(&chunk[..take]);
        }
        file.write_all(chunk).await.map_err(SpoolError::Disk)?;
        held.extend_from_slice(chunk);
        if held.len() > trailer_len {
            let release = held.len() - trailer_len;
            hasher.update(&held[..release]);
            held.drain(..release);
        }
    }
    file.flush().await.map_err(SpoolError::Disk)?;
    check_header(&header)?;
    if total < (HEADER_BYTES + trailer_len) as u64 {
        return Err(SpoolError::Corrupt(format!(
            "{total} bytes is shorter than a pack's header and trailer"
        )));
    }
    if hasher.finish() != held {
        return Err(SpoolError::Corrupt(
            "its trailing checksum does not match its contents (the lane's upload was cut short?)"
                .into(),
        ));
    }
    Ok(total)
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
