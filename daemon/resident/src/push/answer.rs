//! What the lane's git reads when the daemon answers a push itself (ARCHITECTURE.md,
//! "Push proxy"): before the advertisement, an `ERR` line (git prints `fatal: remote
//! error: …`); after it, a report-status that answers every ref `ng <ref> <reason>`
//! (all or nothing), muxed on side-band-64k when the lane asked for it, with the verdict
//! line on channel 2 (git prints `remote: row-fence: REFUSED …`).

use super::pkt::{FLUSH, band, encode};
use super::request::Request;

/// An `ERR` line, for a push refused before the forge's advertisement was relayed.
pub fn error_line(message: &str) -> Vec<u8> {
    encode(format!("ERR row-fence: {}\n", one_line(message)).as_bytes())
}

/// The report-status refusing every ref of `request`: `unpack` is `ok` (or the error
/// that stopped the pack), `reasons` gives each ref's reason, `say` goes on channel 2.
pub fn refusal(
    request: &Request,
    unpack: &str,
    reasons: &[(String, String)],
    say: &str,
) -> Vec<u8> {
    let mut report = encode(format!("unpack {}\n", one_line(unpack)).as_bytes());
    for c in &request.commands {
        let reason = reasons
            .iter()
            .find(|(r, _)| *r == c.refname)
            .map(|(_, why)| why.as_str())
            .unwrap_or("refused by row-fence");
        report.extend(encode(
            format!("ng {} {}\n", c.refname, one_line(reason)).as_bytes(),
        ));
    }
    report.extend_from_slice(FLUSH);
    if !request.asks("side-band-64k") {
        return if request.asks("report-status") || request.asks("report-status-v2") {
            report
        } else {
            Vec::new()
        };
    }
    let mut out = Vec::new();
    if !say.is_empty() {
        out.extend(band(2, format!("{}\n", one_line(say)).as_bytes()));
    }
    if request.asks("report-status") || request.asks("report-status-v2") {
        out.extend(band(1, &report));
    }
    out.extend_from_slice(FLUSH);
    out
}

/// A note on channel 2 when the lane asked for side-band, else nothing.
pub fn note(request: &Request, text: &str) -> Vec<u8> {
    if request.asks("side-band-64k") {
        band(2, format!("{}\n", one_line(text)).as_bytes())
    } else {
        Vec::new()
    }
}

/// Text on one line: newlines and other controls become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::request::Command;

    fn request(caps: &[&str]) -> Request {
        Request {
            commands: vec![
                Command {
                    old: "a".repeat(40),
                    new: "b".repeat(40),
                    refname: "refs/heads/main".into(),
                },
                Command {
                    old: "a".repeat(40),
                    new: "b".repeat(40),
                    refname: "refs/heads/x".into(),
                },
            ],
            caps: caps.iter().map(|c| c.to_string()).collect(),
            ..Request::default()
        }
    }

    #[test]
    fn every_ref_is_answered_ng_and_the_verdict_goes_on_channel_two() {
        let reasons = vec![(
            "refs/heads/x".to_string(),
            "outside the row's scope".to_string(),
        )];
        let plain = refusal(
            &request(&["report-status"]),
            "ok",
            &reasons,
            "row-fence: REFUSED",
        );
        let text = String::from_utf8_lossy(&plain);
        assert!(text.contains("unpack ok\n"), "{text}");
        assert!(
            text.contains("ng refs/heads/main refused by row-fence\n"),
            "{text}"
        );
        assert!(
            text.contains("ng refs/heads/x outside the row's scope\n"),
            "{text}"
        );
        assert!(!text.contains("REFUSED"), "{text}");
        let muxed = refusal(
            &request(&["report-status", "side-band-64k"]),
            "ok",
            &reasons,
            "row-fence: REFUSED (stale_generation)\nsecond",
        );
        let text = String::from_utf8_lossy(&muxed);
        assert!(
            text.starts_with("0032\x02row-fence: REFUSED (stale_generation) second\n"),
            "{text:?}"
        );
        assert!(text.contains("\x01000eunpack ok\n"), "{text:?}");
        assert!(text.ends_with("00000000"), "{text:?}");
    }

    #[test]
    fn an_error_line_is_one_line() {
        assert_eq!(error_line("a\nb"), b"0017ERR row-fence: a b\n".to_vec());
    }
}
