//! The key broker's wiring file (`row-fence-broker.json` in the common git dir, not read
//! by git): where ssh reaches the broker and which of its keys it offers. `install broker`
//! writes it ([`crate::broker`]); the transport gate reads it to write the broker's part of
//! the one included file, which the gate owns ([`crate::git_gate`]); the doctor reads it.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The broker's wiring file, in the common git dir.
pub const WIRING_FILE: &str = "row-fence-broker.json";

/// A wiring file or public key file is refused above this size.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Where ssh reaches the broker and which of its keys it offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wiring {
    /// The daemon's agent socket (absolute): ssh's `IdentityAgent`.
    pub agent: PathBuf,
    /// The push key's public half (absolute): ssh's `IdentityFile`, which with
    /// `IdentitiesOnly` selects that key among the agent's.
    pub identity_file: PathBuf,
    /// The daemon pushes for the lane (ARCHITECTURE.md, "Push proxy"): its push socket
    /// and the forges whose pushes go through `git-remote-row-fence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushWiring>,
}

/// The push proxy's part of the wiring.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushWiring {
    /// The daemon's push socket (absolute), for `git-remote-row-fence`.
    pub socket: PathBuf,
    /// The forges, `ssh://USER@HOST[:PORT]/[PATH/]`, as the daemon's `--push-forge`.
    pub forges: Vec<String>,
}

impl PushWiring {
    /// Checks the socket (absolute, plain characters) and each forge (an ssh URL of
    /// plain characters ending in `/`).
    pub fn new(socket: PathBuf, forges: Vec<String>) -> Result<PushWiring, WiringError> {
        literal_path("--push-socket", &socket)?;
        if forges.is_empty() {
            return Err(WiringError::Forge(String::new()));
        }
        for forge in &forges {
            // An HTTPS forge is the push proxy's HTTPS arm's (ARCHITECTURE.md, "Push proxy").
            let plain = https_lane_url(forge).is_some()
                || forge.starts_with("ssh://")
                    && forge.ends_with('/')
                    && forge[6..].contains('@')
                    && forge.bytes().all(|b| {
                        b.is_ascii_alphanumeric()
                            || matches!(b, b'/' | b'.' | b'_' | b'-' | b'@' | b':' | b'~')
                    });
            if !plain {
                return Err(WiringError::Forge(forge.clone()));
            }
        }
        Ok(PushWiring { socket, forges })
    }

    /// The included file's part: each forge's pushes (its `ssh://` URLs and, on port
    /// 22, the scp form `USER@HOST:`, taken as relative to the forge user's home) go to
    /// `row-fence::<url>`; the helper finds the socket in `rowfence.pushSocket`.
    pub fn include(&self) -> String {
        let mut text = String::from(
            "# The daemon pushes for this lane (`row-fence install broker --push-forge`): git's pushes\n\
             # to these forges go through git-remote-row-fence to the daemon's push socket.\n",
        );
        for forge in &self.forges {
            // An HTTPS forge: the lanes' URL, without the daemon's basic-auth user.
            if let Some(lane_url) = https_lane_url(forge) {
                text.push_str(&format!(
                    "[url \"row-fence::{lane_url}\"]\n\tpushInsteadOf = {lane_url}\n"
                ));
                continue;
            }
            let rest = &forge["ssh://".len()..];
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            text.push_str(&format!(
                "[url \"row-fence::{forge}\"]\n\tpushInsteadOf = {forge}\n"
            ));
            let (user_host, port) = match authority.rsplit_once(':') {
                Some((uh, port)) => (uh, Some(port)),
                None => (authority, None),
            };
            if port.is_none() || port == Some("22") {
                if port.is_some() {
                    text.push_str(&format!("\tpushInsteadOf = ssh://{user_host}/{path}\n"));
                }
                if path.is_empty() {
                    text.push_str(&format!(
                        "[url \"row-fence::ssh://{user_host}/~/\"]\n\tpushInsteadOf = {user_host}:\n"
                    ));
                }
            }
        }
        text.push_str(&format!(
            "[rowfence]\n\tpushSocket = {}\n",
            self.socket.display()
        ));
        text
    }
}

/// For an HTTPS push forge, `https://[USER@]HOST[:PORT]/[PATH/]` of plain characters (the
/// push proxy's HTTPS arm, ARCHITECTURE.md "Push proxy"), the URL the lanes push to: the
/// same without the user, which is the daemon's basic-auth user, not the lanes'.
fn https_lane_url(forge: &str) -> Option<String> {
    let rest = forge.strip_prefix("https://")?;
    let plain = forge.ends_with('/')
        && rest.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'@' | b':' | b'~')
        });
    let (authority, path) = rest.split_once('/')?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let password = authority
        .rsplit_once('@')
        .is_some_and(|(user, _)| user.contains(':'));
    if !plain
        || password
        || host.is_empty()
        || host.starts_with(':')
        || authority.matches('@').count() > 1
    {
        return None;
    }
    Some(format!("https://{host}/{path}"))
}

/// Why the broker's wiring cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WiringError {
    /// A file cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The wiring file is not what install writes.
    #[error("{}: not the key broker's wiring ({reason}); fix or remove it by hand", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A path holds a character ssh's option parser or its `%`/`~`/`${}` expansion reads
    /// specially, or is not absolute: ssh would look elsewhere.
    #[error(
        "{what} {path:?} must be an absolute path of letters, digits and / . _ + @ , : - only (ssh expands or splits others)"
    )]
    Path {
        /// Which path.
        what: &'static str,
        /// The path given.
        path: PathBuf,
    },
    /// A push forge that is not `ssh://USER@HOST[:PORT]/[PATH/]` of plain characters.
    #[error(
        "--push-forge {0:?} must be ssh://USER@HOST[:PORT]/[PATH/] or https://[USER@]HOST[:PORT]/[PATH/] of letters, digits and / . _ - @ : ~ only, as the daemon's --push-forge"
    )]
    Forge(String),
    /// The key file is not one OpenSSH public key line.
    #[error("{}: not an OpenSSH public key ({reason})", path.display())]
    NotPublicKey {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

impl Wiring {
    /// Checks both paths (absolute, characters ssh reads literally) and that
    /// `identity_file` holds one public key line.
    pub fn new(agent: PathBuf, identity_file: PathBuf) -> Result<Wiring, WiringError> {
        literal_path("--broker-socket", &agent)?;
        literal_path("--key-pub", &identity_file)?;
        public_key(&identity_file)?;
        Ok(Wiring {
            agent,
            identity_file,
            push: None,
        })
    }

    /// The wiring in `common_dir`; `None` when the broker is not wired in there.
    pub fn read(common_dir: &Path) -> Result<Option<Wiring>, WiringError> {
        let path = common_dir.join(WIRING_FILE);
        let text = match read_small(&path) {
            Ok(text) => text,
            Err(WiringError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let wiring: Wiring = serde_json::from_str(&text).map_err(|e| WiringError::Invalid {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        for (what, p) in [
            ("agent", &wiring.agent),
            ("identity_file", &wiring.identity_file),
        ] {
            literal_path(what, p).map_err(|e| WiringError::Invalid {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(Some(wiring))
    }

    /// The ssh options, in the order ssh reads them (the first value of an option wins).
    pub fn ssh_options(&self) -> Vec<String> {
        [
            format!("IdentityAgent={}", self.agent.display()),
            "IdentitiesOnly=yes".into(),
            format!("IdentityFile={}", self.identity_file.display()),
            "ControlMaster=no".into(),
            "ControlPath=none".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    /// The ssh command the gate's wrapper runs once the fence says yes. Every word is
    /// one a shell reads as is (the paths are allowlisted), so the options read plainly.
    pub fn ssh_line(&self) -> String {
        std::iter::once("ssh".to_string())
            .chain(self.ssh_options())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The wiring file's text, as `install broker` writes it.
    pub(crate) fn text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Allowlist: what ssh's option parser and its `%`, `~` and `${}` expansions read as is.
fn literal_path(what: &'static str, path: &Path) -> Result<(), WiringError> {
    let text = path.to_str().unwrap_or("");
    let literal = path.is_absolute()
        && !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+@,:-".contains(c));
    if literal {
        Ok(())
    } else {
        Err(WiringError::Path {
            what,
            path: path.to_path_buf(),
        })
    }
}

fn read_small(path: &Path) -> Result<String, WiringError> {
    let io_error = |source| WiringError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    fs::File::open(path)
        .map_err(io_error)?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(io_error)?;
    Ok(text)
}

/// Checks that `path` holds one OpenSSH public key line: `TYPE BASE64 [comment]`.
fn public_key(path: &Path) -> Result<(), WiringError> {
    let text = read_small(path)?;
    let refuse = |reason| {
        Err(WiringError::NotPublicKey {
            path: path.to_path_buf(),
            reason,
        })
    };
    if text.contains("PRIVATE KEY") {
        return refuse("it is a private key: give its .pub");
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [line] = lines.as_slice() else {
        return refuse("it must hold exactly one key line");
    };
    let mut words = line.split_whitespace();
    let kind = words.next().unwrap_or("");
    let blob = words.next().unwrap_or("");
    let known = kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
    let base64 = !blob.is_empty()
        && blob
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c));
    if !known || !base64 {
        return refuse("no key type and base64 key");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_ssh_would_expand_or_split_are_refused() {
        for bad in [
            "relative/agent.sock",
            "/a b/agent.sock",
            "/a%d/agent.sock",
            "/a/${HOME}/agent.sock",
            "/a\"b",
            "/a=b",
            "",
        ] {
            assert!(literal_path("x", Path::new(bad)).is_err(), "{bad:?}");
        }
        literal_path("x", Path::new("/run/row-fence/agent.sock")).unwrap();
    }

    #[test]
    fn the_ssh_line_is_openssh_with_the_brokers_options_in_order() {
        let wiring = Wiring {
            agent: "/run/rf/agent.sock".into(),
            identity_file: "/etc/rf/push.pub".into(),
            push: None,
        };
        assert_eq!(
            wiring.ssh_line(),
            "ssh -o IdentityAgent=/run/rf/agent.sock -o IdentitiesOnly=yes -o IdentityFile=/etc/rf/push.pub -o ControlMaster=no -o ControlPath=none"
        );
    }

    #[test]
    fn only_one_public_key_line_is_a_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        for (text, ok) in [
            ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB push\n", true),
            ("ecdsa-sha2-nistp256 AAAA=\n", true),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", false),
            ("ssh-ed25519\n", false),
            ("ssh-ed25519 AAAA\nssh-ed25519 BBBB\n", false),
            ("hello world\n", false),
            ("", false),
        ] {
            fs::write(&file, text).unwrap();
            assert_eq!(public_key(&file).is_ok(), ok, "{text:?}");
        }
    }

    #[test]
    fn push_forges_are_sent_to_the_helper_by_push_instead_of() {
        let push = PushWiring::new(
            PathBuf::from("/srv/rf/push.sock"),
            vec![
                "ssh://git@forge/".into(),
                "ssh://git@10.0.0.1:2222/srv/git/".into(),
            ],
        )
        .unwrap();
        let text = push.include();
        for line in [
            "[url \"row-fence::ssh://git@forge/\"]\n\tpushInsteadOf = ssh://git@forge/\n",
            "[url \"row-fence::ssh://git@forge/~/\"]\n\tpushInsteadOf = git@forge:\n",
            "[url \"row-fence::ssh://git@10.0.0.1:2222/srv/git/\"]\n\tpushInsteadOf = ssh://git@10.0.0.1:2222/srv/git/\n",
            "[rowfence]\n\tpushSocket = /srv/rf/push.sock\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // (https://forge/ is the HTTPS arm's: the next test.)
        for bad in ["ssh://forge/", "ssh://git@forge", "ssh://git@forge/a b/"] {
            assert!(
                PushWiring::new(PathBuf::from("/s"), vec![bad.into()]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn https_forges_send_the_lanes_url_without_the_daemons_user_to_the_helper() {
        let push = PushWiring::new(
            PathBuf::from("/srv/rf/push.sock"),
            vec![
                "https://pusher@forge.example/".into(),
                "https://127.0.0.1:8443/git/".into(),
            ],
        )
        .unwrap();
        let text = push.include();
        for line in [
            "[url \"row-fence::https://forge.example/\"]\n\tpushInsteadOf = https://forge.example/\n",
            "[url \"row-fence::https://127.0.0.1:8443/git/\"]\n\tpushInsteadOf = https://127.0.0.1:8443/git/\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("pusher"), "{text}");
        for bad in [
            "https://forge",
            "https://forge/a b/",
            "https:///",
            "https://a@b@forge/",
            "https://user:pw@forge/",
            "https://forge/x\"/",
        ] {
            assert!(
                PushWiring::new(PathBuf::from("/s"), vec![bad.into()]).is_err(),
                "{bad}"
            );
        }
    }
}
