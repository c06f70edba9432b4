//! git's pkt-line framing (gitprotocol-common(5)), read with a bound: four hex digits of
//! length (the digits included), `0000` a flush; a line is at most [`MAX_PKT_BYTES`].
//! ARCHITECTURE.md, "Push proxy".

use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest pkt-line, its four length digits included (git's `LARGE_PACKET_MAX`).
pub const MAX_PKT_BYTES: usize = 65520;

/// A flush packet.
pub const FLUSH: &[u8] = b"0000";

/// One packet read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pkt {
    /// `0000`: the end of a section.
    Flush,
    /// A line's payload (its trailing `\n`, if any, kept).
    Data(Vec<u8>),
}

/// Why a packet could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PktError {
    /// The stream ended before a whole packet.
    #[error("the stream ended in the middle of a pkt-line")]
    Eof,
    /// The length is not four hex digits, or is out of range.
    #[error("a malformed pkt-line length {0:?} (four hex digits, 0000 or 0004 to fff0)")]
    Length(String),
    /// Reading failed.
    #[error("reading a pkt-line: {0}")]
    Io(std::io::Error),
}

/// The payload length a pkt-line's four length bytes announce: `None` for a flush.
pub fn payload_len(prefix: &[u8; 4]) -> Result<Option<usize>, PktError> {
    let bad = || PktError::Length(String::from_utf8_lossy(prefix).into_owned());
    let text = std::str::from_utf8(prefix).map_err(|_| bad())?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let len = usize::from_str_radix(text, 16).map_err(|_| bad())?;
    match len {
        0 => Ok(None),
        4..=MAX_PKT_BYTES => Ok(Some(len - 4)),
        // 0001 (delim) and 0002 (response end) are protocol v2's: none in a v0 push.
        _ => Err(bad()),
    }
}

/// Reads one packet.
pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<Pkt, PktError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix).await.map_err(eof)?;
    let Some(len) = payload_len(&prefix)? else {
        return Ok(Pkt::Flush);
    };
    let mut data = vec![0u8; len];
    r.read_exact(&mut data).await.map_err(eof)?;
    Ok(Pkt::Data(data))
}

/// Reads packets up to and including a flush, at most `max` of them and `max_bytes` of
/// payload in all (more is an error): what a peer can make the daemon hold before it has
/// judged anything is bounded in bytes, not only in lines.
pub async fn read_section<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    max_bytes: usize,
) -> Result<Vec<Vec<u8>>, PktError> {
    let mut lines = Vec::new();
    let mut bytes = 0usize;
    loop {
        match read(r).await? {
            Pkt::Flush => return Ok(lines),
            Pkt::Data(data) => {
                if lines.len() >= max {
                    return Err(PktError::Length(format!(
                        "more than {max} lines in one section"
                    )));
                }
                bytes += data.len();
                if bytes > max_bytes {
                    return Err(PktError::Length(format!(
                        "more than {max_bytes} bytes in one section"
                    )));
                }
                lines.push(data);
            }
        }
    }
}

fn eof(e: std::io::Error) -> PktError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        PktError::Eof
    } else {
        PktError::Io(e)
    }
}

/// `data` as one pkt-line; a payload too long for one is cut (callers pass lines they
/// built, far below the bound).
pub fn encode(data: &[u8]) -> Vec<u8> {
    let data = &data[..data.len().min(MAX_PKT_BYTES - 4)];
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// `data` on side-band `band` (1 data, 2 progress, 3 error), cut into packets of at most
/// `MAX_PKT_BYTES`.
pub fn band(band: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(MAX_PKT_BYTES - 5) {
        let mut payload = Vec::with_capacity(chunk.len() + 1);
        payload.push(band);
        payload.extend_from_slice(chunk);
        out.extend(encode(&payload));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_four_hex_digits_within_the_bound() {
        assert_eq!(payload_len(b"0000").unwrap(), None);
        assert_eq!(payload_len(b"0004").unwrap(), Some(0));
        assert_eq!(payload_len(b"000a").unwrap(), Some(6));
        assert_eq!(payload_len(b"fff0").unwrap(), Some(65516));
        for bad in [
            b"0001", b"0002", b"0003", b"fff1", b"ffff", b"00g0", b"-001", b" 004",
        ] {
            assert!(payload_len(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_section_ends_at_a_flush_and_a_short_stream_is_an_error() {
        let mut bytes: &[u8] = b"0009hello000aworld\n0000";
        let lines = read_section(&mut bytes, 10, 100).await.unwrap();
        assert_eq!(lines, vec![b"hello".to_vec(), b"world\n".to_vec()]);
        let mut short: &[u8] = b"0009hel";
        assert!(matches!(
            read_section(&mut short, 10, 100).await,
            Err(PktError::Eof)
        ));
        let mut many: &[u8] = b"0005a0005b0000";
        assert!(read_section(&mut many, 1, 100).await.is_err());
        // Bounded in bytes too: two lines of 5 payload bytes pass 10, not 9.
        let two: &[u8] = b"0009hello0009world0000";
        assert!(read_section(&mut &two[..], 10, 10).await.is_ok());
        assert!(matches!(
            read_section(&mut &two[..], 10, 9).await,
            Err(PktError::Length(_))
        ));
    }

    #[test]
    fn encode_and_band_frame_what_they_are_given() {
        assert_eq!(encode(b"ok\n"), b"0007ok\n".to_vec());
        assert_eq!(band(2, b"hi\n"), b"0008\x02hi\n".to_vec());
    }
}
