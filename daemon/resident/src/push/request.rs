//! The lane's push request (gitprotocol-pack(5), "Reference Update Request"), parsed and
//! bounded (ARCHITECTURE.md, "Push proxy"): `shallow` lines, then the commands, the first
//! carrying the capabilities after a NUL, a flush, then the push options and a flush when
//! `push-options` was asked for. A push certificate is refused (none is advertised).

use row_fence_contract::scope::{RefUpdate, UpdateKind, valid_refname};

/// At most this many commands in one push (the forge hook's bound).
pub const MAX_COMMANDS: usize = crate::broker::forge_check::MAX_UPDATES;

/// At most this many push options.
pub const MAX_OPTIONS: usize = 100;

/// At most this many `shallow` lines.
pub const MAX_SHALLOW: usize = 10_000;

/// The request section's bound in bytes (commands and shallow lines): room for every
/// command with a long ref name, far below what [`MAX_COMMANDS`] pkt-lines of the largest
/// size would hold, since it is read before the first judgement.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// The push options' bound in bytes, all together.
pub const MAX_OPTIONS_BYTES: usize = 64 * 1024;

/// One ref update as the lane asked it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The old object id (zeros: create).
    pub old: String,
    /// The new object id (zeros: delete).
    pub new: String,
    /// The ref.
    pub refname: String,
}

impl Command {
    /// True when the command deletes its ref.
    pub fn is_delete(&self) -> bool {
        is_zero(&self.new)
    }

    /// The update for the scope, with its kind (`fast_forward` only when `proven`).
    pub fn update(&self, proven: bool) -> RefUpdate {
        let kind = if self.is_delete() {
            UpdateKind::Delete
        } else if is_zero(&self.old) {
            UpdateKind::Create
        } else if proven {
            UpdateKind::FastForward
        } else {
            UpdateKind::NonFastForward
        };
        RefUpdate {
            old: self.old.clone(),
            new: self.new.clone(),
            refname: self.refname.clone(),
            kind,
        }
    }
}

/// True for an all-zero object id.
pub fn is_zero(oid: &str) -> bool {
    oid.bytes().all(|b| b == b'0')
}

/// The parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// `shallow <oid>` lines, forwarded as sent.
    pub shallow: Vec<String>,
    /// The commands, in order.
    pub commands: Vec<Command>,
    /// The capabilities the lane asked for.
    pub caps: Vec<String>,
    /// The push options (when `push-options` was asked for).
    pub options: Vec<String>,
}

/// Why the request was refused: it names the line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A line that is no shallow line or command.
    #[error("the push request's line {0:?} is not a command \"<old> <new> <ref>\"")]
    Line(String),
    /// An object id that is not one of the repository's format.
    #[error("the push request names {0:?}, which is not a {1} object id")]
    ObjectId(String, &'static str),
    /// A ref name git would not take.
    #[error("the push request names {0:?}, which is not a valid ref name")]
    Ref(String),
    /// A push certificate (the daemon advertises none).
    #[error("the push request carries a push certificate, which the daemon does not forward")]
    PushCert,
    /// Too many commands, options or shallow lines.
    #[error("the push request has more than {0} {1}")]
    TooMany(usize, &'static str),
    /// A capability asked for that was not advertised to the lane.
    #[error("the push request asks for the capability {0:?}, which was not advertised")]
    Capability(String),
    /// A push option git would not send: not UTF-8, or holding a newline or another
    /// control character (a forge's hook reading options by line would see two).
    #[error("the push option {0:?} is not one line of text (git sends none such)")]
    Option(String),
}

impl Request {
    /// Parses the command section (`lines`, flush excluded) for an object id of `hex_len`
    /// hex digits.
    pub fn parse(lines: &[Vec<u8>], hex_len: usize) -> Result<Request, RequestError> {
        let mut request = Request::default();
        let format = if hex_len == 64 { "sha256" } else { "sha1" };
        for raw in lines {
            let (line, caps) = match raw.iter().position(|&b| b == 0) {
                Some(nul) => (&raw[..nul], Some(&raw[nul + 1..])),
                None => (&raw[..], None),
            };
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\n');
            if line.starts_with("push-cert") {
                return Err(RequestError::PushCert);
            }
            if let Some(oid) = line.strip_prefix("shallow ") {
                check_oid(oid, hex_len, format)?;
                if request.shallow.len() >= MAX_SHALLOW {
                    return Err(RequestError::TooMany(MAX_SHALLOW, "shallow lines"));
                }
                request.shallow.push(oid.to_string());
                continue;
            }
            let mut parts = line.splitn(3, ' ');
            let (Some(old), Some(new), Some(refname)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(RequestError::Line(line.to_string()));
            };
            check_oid(old, hex_len, format)?;
            check_oid(new, hex_len, format)?;
            if !valid_refname(refname) {
                return Err(RequestError::Ref(refname.to_string()));
            }
            if request.commands.len() >= MAX_COMMANDS {
                return Err(RequestError::TooMany(MAX_COMMANDS, "commands"));
            }
            if let Some(caps) = caps
                && request.commands.is_empty()
            {
                let caps = String::from_utf8_lossy(caps);
                request.caps = caps.split_whitespace().map(str::to_string).collect();
            }
            request.commands.push(Command {
                old: old.to_string(),
                new: new.to_string(),
                refname: refname.to_string(),
            });
        }
        if let Some(cap) = request.caps.iter().find(|c| !super::advert::forwarded(c)) {
            return Err(RequestError::Capability(cap.clone()));
        }
        Ok(request)
    }

    /// True when the lane asked for `cap`.
    pub fn asks(&self, cap: &str) -> bool {
        self.caps.iter().any(|c| c == cap)
    }

    /// Takes the push options section (`lines`, flush excluded).
    pub fn set_options(&mut self, lines: &[Vec<u8>]) -> Result<(), RequestError> {
        if lines.len() > MAX_OPTIONS {
            return Err(RequestError::TooMany(MAX_OPTIONS, "push options"));
        }
        let mut options = Vec::with_capacity(lines.len());
        for line in lines {
            let bare = line.strip_suffix(b"\n").unwrap_or(line);
            let text = std::str::from_utf8(bare)
                .ok()
                .filter(|t| !t.chars().any(char::is_control));
            match text {
                Some(t) => options.push(t.to_string()),
                None => {
                    return Err(RequestError::Option(
                        String::from_utf8_lossy(line).into_owned(),
                    ));
                }
            }
        }
        self.options = options;
        Ok(())
    }

    /// The first push option whose name (before any `=`) is not in `passed`.
    pub fn option_not_passed(&self, passed: &[String]) -> Option<&str> {
        self.options.iter().map(String::as_str).find(|o| {
            let name = o.split_once('=').map_or(*o, |(n, _)| n);
            !passed.iter().any(|p| p == name)
        })
    }

    /// True when a pack follows the request (any command that is not a delete).
    pub fn has_pack(&self) -> bool {
        self.commands.iter().any(|c| !c.is_delete())
    }

    /// The request for the forge, with `caps` (what the lane asked for that the forge
    /// offers, and `atomic` where offered): shallow lines, commands, flush, options.
    pub fn encode(&self, caps: &[String]) -> Vec<u8> {
        use super::pkt::{FLUSH, encode};
        let mut out = Vec::new();
        for oid in &self.shallow {
            out.extend(encode(format!("shallow {oid}").as_bytes()));
        }
        for (i, c) in self.commands.iter().enumerate() {
            let mut line = format!("{} {} {}", c.old, c.new, c.refname).into_bytes();
            if i == 0 {
                line.push(0);
                line.extend_from_slice(caps.join(" ").as_bytes());
            }
            line.push(b'\n');
            out.extend(encode(&line));
        }
        out.extend_from_slice(FLUSH);
        if caps.iter().any(|c| c == "push-options") {
            for option in &self.options {
                out.extend(encode(format!("{option}\n").as_bytes()));
            }
            out.extend_from_slice(FLUSH);
        }
        out
    }
}

fn check_oid(oid: &str, hex_len: usize, format: &'static str) -> Result<(), RequestError> {
    if oid.len() == hex_len
        && oid
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(RequestError::ObjectId(oid.to_string(), format))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(c: char) -> String {
        c.to_string().repeat(40)
    }

    #[test]
    fn commands_capabilities_and_shallow_lines_are_parsed() {
        let lines = vec![
            format!("shallow {}", oid('c')).into_bytes(),
            format!(
                "{} {} refs/heads/main\0report-status side-band-64k atomic agent=git/2.43\n",
                oid('a'),
                oid('b')
            )
            .into_bytes(),
            format!("{} {} refs/heads/old\n", oid('a'), oid('0')).into_bytes(),
        ];
        let r = Request::parse(&lines, 40).unwrap();
        assert_eq!(r.shallow, vec![oid('c')]);
        assert_eq!(r.commands.len(), 2);
        assert!(r.asks("side-band-64k") && r.asks("atomic"));
        assert!(r.commands[1].is_delete());
        assert_eq!(r.commands[0].update(false).kind, UpdateKind::NonFastForward);
        assert_eq!(r.commands[0].update(true).kind, UpdateKind::FastForward);
        assert_eq!(r.commands[1].update(true).kind, UpdateKind::Delete);
        assert!(r.has_pack());
        let out = String::from_utf8(r.encode(&["report-status".into()])).unwrap();
        assert!(out.contains("refs/heads/main\0report-status\n"), "{out}");
        assert!(out.ends_with("0000"));
    }

    #[test]
    fn malformed_requests_are_refused_with_the_line() {
        let bad = [
            b"hello".to_vec(),
            format!("{} {} refs/heads/x", oid('a'), "zz").into_bytes(),
            format!("{} {} refs/heads/../x", oid('a'), oid('b')).into_bytes(),
            format!("{} {} HEAD", oid('a'), oid('b')).into_bytes(),
            b"push-cert\0report-status".to_vec(),
            format!(
                "{} {} refs/heads/x\0report-status push-cert=1",
                oid('a'),
                oid('b')
            )
            .into_bytes(),
        ];
        for line in bad {
            assert!(
                Request::parse(std::slice::from_ref(&line), 40).is_err(),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }

    #[test]
    fn a_create_and_a_delete_only_push() {
        let lines =
            vec![format!("{} {} refs/heads/x\0report-status", oid('0'), oid('b')).into_bytes()];
        let r = Request::parse(&lines, 40).unwrap();
        assert_eq!(r.commands[0].update(false).kind, UpdateKind::Create);
        let lines =
            vec![format!("{} {} refs/heads/x\0report-status", oid('a'), oid('0')).into_bytes()];
        assert!(!Request::parse(&lines, 40).unwrap().has_pack());
    }

    #[test]
    fn a_push_option_is_one_line_of_text() {
        let mut r = Request::default();
        r.set_options(&[b"ci.skip\n".to_vec(), b"ci.skip=1".to_vec()])
            .unwrap();
        assert_eq!(r.options, ["ci.skip", "ci.skip=1"]);
        for bad in [
            &b"ci.skip=x\nmerge_request.create"[..],
            b"ci.skip=x\rmerge",
            b"ci.skip\0merge_request.create",
            b"ci.skip\n\n",
            b"ci.skip=\xff",
        ] {
            assert!(
                matches!(r.set_options(&[bad.to_vec()]), Err(RequestError::Option(_))),
                "{bad:?}"
            );
        }
        r.set_options(&[b"ci.skip=1".to_vec(), b"merge_request.create".to_vec()])
            .unwrap();
        assert_eq!(
            r.option_not_passed(&["ci.skip".into()]),
            Some("merge_request.create")
        );
        assert_eq!(
            r.option_not_passed(&["ci.skip".into(), "merge_request.create".into()]),
            None
        );
        assert_eq!(
            r.option_not_passed(&["ci".into(), "merge_request.create".into()]),
            Some("ci.skip=1")
        );
    }
}
