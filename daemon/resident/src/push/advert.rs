//! The forge's ref advertisement, as the lane sees it (ARCHITECTURE.md, "Push proxy"):
//! the same refs, with only the capabilities the daemon can forward. `push-cert=<nonce>`
//! goes (its nonce belongs to the forge's session, and a certificate signed for it would
//! be for a connection the lane never had), as does anything the daemon does not parse.

/// The capabilities a lane may see and use: each one the daemon parses or relays as is.
pub const FORWARDED: &[&str] = &[
    "report-status",
    "report-status-v2",
    "side-band-64k",
    "atomic",
    "push-options",
    "quiet",
    "delete-refs",
    "ofs-delta",
];

/// Capabilities with a value that are forwarded (`object-format=sha1`, `agent=git/2.x`).
pub const FORWARDED_VALUES: &[&str] = &["object-format=", "agent="];

/// True when the capability `cap` (as advertised or asked for) is forwarded.
pub fn forwarded(cap: &str) -> bool {
    FORWARDED.contains(&cap) || FORWARDED_VALUES.iter().any(|p| cap.starts_with(p))
}

/// The advertisement's lines as read (each a pkt-line payload), and its capabilities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Advertisement {
    /// The lines, the first with its capabilities removed.
    pub lines: Vec<Vec<u8>>,
    /// The capabilities the forge offered, in its order.
    pub offered: Vec<String>,
}

impl Advertisement {
    /// Splits the first line's capabilities (after a NUL) off the lines.
    pub fn parse(mut lines: Vec<Vec<u8>>) -> Advertisement {
        let mut offered = Vec::new();
        if let Some(first) = lines.first_mut()
            && let Some(nul) = first.iter().position(|&b| b == 0)
        {
            let caps = String::from_utf8_lossy(&first[nul + 1..]).into_owned();
            offered = caps.split_whitespace().map(str::to_string).collect();
            first.truncate(nul);
        }
        Advertisement { lines, offered }
    }

    /// True when the forge offered `cap`.
    pub fn offers(&self, cap: &str) -> bool {
        self.offered.iter().any(|c| c == cap)
    }

    /// The object format the forge's repository uses (`sha1` unless it says otherwise).
    pub fn object_format(&self) -> &str {
        self.offered
            .iter()
            .find_map(|c| c.strip_prefix("object-format="))
            .unwrap_or("sha1")
    }

    /// An advertisement of no refs (git's `capabilities^{}` line), made by the daemon for a
    /// lane refused before the forge is dialled: its git sends its request and reads an
    /// `ng` for each ref, and learns nothing of the forge.
    pub fn empty() -> Advertisement {
        let zeros = "0".repeat(40);
        Advertisement {
            lines: vec![format!("{zeros} capabilities^{{}}\n").into_bytes()],
            offered: [
                "report-status",
                "report-status-v2",
                "side-band-64k",
                "quiet",
                "delete-refs",
                "ofs-delta",
                "object-format=sha1",
            ]
            .map(str::to_string)
            .to_vec(),
        }
    }

    /// The advertisement for the lane, as pkt-lines ended by a flush: the forwarded
    /// capabilities only, and `push-options` only when the daemon passes some (`options`).
    pub fn for_lane(&self, options: bool) -> Vec<u8> {
        let caps: Vec<&str> = self
            .offered
            .iter()
            .map(String::as_str)
            .filter(|c| forwarded(c) && (options || *c != "push-options"))
            .collect();
        let mut out = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            if i == 0 {
                let mut first = line.clone();
                // The capabilities end the first line, before its newline.
                if first.last() == Some(&b'\n') {
                    first.pop();
                }
                first.push(0);
                first.extend_from_slice(caps.join(" ").as_bytes());
                first.push(b'\n');
                out.extend(super::pkt::encode(&first));
            } else {
                out.extend(super::pkt::encode(line));
            }
        }
        out.extend_from_slice(super::pkt::FLUSH);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_cert_and_unknown_capabilities_are_not_advertised_to_the_lane() {
        let oid = "a".repeat(40);
        let first = format!(
            "{oid} refs/heads/main\0report-status report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta push-cert=1700000000-abc push-options object-format=sha1 agent=git/2.43.0 session-id=x\n"
        );
        let ad = Advertisement::parse(vec![
            first.into_bytes(),
            format!("{oid} refs/heads/dev\n").into_bytes(),
        ]);
        assert!(ad.offers("atomic"));
        assert!(ad.offers("push-cert=1700000000-abc"));
        assert_eq!(ad.object_format(), "sha1");
        let out = String::from_utf8(ad.for_lane(true)).unwrap();
        assert!(!out.contains("push-cert"), "{out}");
        assert!(!out.contains("session-id"), "{out}");
        assert!(out.contains("\0report-status report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta push-options object-format=sha1 agent=git/2.43.0\n"), "{out}");
        assert!(out.contains("refs/heads/dev\n"), "{out}");
        assert!(out.ends_with("0000"), "{out}");
        // With no option passed, git is not offered them.
        let out = String::from_utf8(ad.for_lane(false)).unwrap();
        assert!(!out.contains("push-options"), "{out}");
    }

    #[test]
    fn the_empty_advertisement_is_gits_capabilities_line() {
        let out = String::from_utf8(Advertisement::empty().for_lane(false)).unwrap();
        assert!(
            out.starts_with(&format!("{:04x}", out.len() - 4))
                && out.contains(
                    "0000000000000000000000000000000000000000 capabilities^{}\0report-status"
                )
                && out.ends_with("\n0000"),
            "{out}"
        );
    }
}
