//! The forges the broker signs logins to (ARCHITECTURE.md, "Key broker"): pinned host
//! keys and the users a lane may log in as there, from the daemon's own configuration
//! (`--broker-forge-host-key`, `--broker-forge-user`), never from anything a lane sends.
//! A signature is only ever made for a publickey login, in an ssh connection whose server
//! proved (a verified `session-bind@openssh.com`) that it holds one of these host keys:
//! the rule of OpenSSH's destination constraints (`ssh-add -h`).

use super::keys::fingerprint;
use ssh_key::public::KeyData;
use ssh_key::{PublicKey, known_hosts::KnownHosts};
use std::path::{Path, PathBuf};

/// The user a lane logs in as when the operator names none: every hosted forge (GitHub,
/// GitLab, Bitbucket, Gitea's default) takes pushes as `git`.
pub const DEFAULT_USER: &str = "git";

/// A host key file is refused above this size (a known_hosts of thousands of hosts is
/// under 1 MiB).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Why the allowlist was not loaded; the daemon does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// The broker is on and no forge host key was given.
    #[error(
        "the key broker signs only logins to a forge whose host key it knows: give one with --broker-forge-host-key FILE (the forge's public host key, or its known_hosts lines; ssh-keyscan HOST prints them) or ROW_FENCE_BROKER_FORGE_HOST_KEYS"
    )]
    None,
    /// A file could not be read.
    #[error("forge host keys {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is neither a public key nor a plain known_hosts line.
    #[error("forge host keys {path}, line {line}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A user name that is not one.
    #[error(
        "forge user {0:?}: a user name is 1-64 of ASCII letters, digits, '-', '_', '.' (not starting with '-')"
    )]
    User(String),
}

/// The allowlist: host keys (by their key data) and users.
#[derive(Clone, Debug, Default)]
pub struct Forges {
    /// Every allowed host key with its `SHA256:` fingerprint.
    hosts: Vec<(KeyData, String)>,
    /// The users a login may be for.
    users: Vec<String>,
}

impl Forges {
    /// Loads the host keys in `files` (OpenSSH public keys, or known_hosts lines whose
    /// host patterns are ignored: the key is what is pinned) and the `users` (none: `git`).
    pub fn load(files: &[PathBuf], users: &[String]) -> Result<Forges, ForgeError> {
        let mut hosts: Vec<(KeyData, String)> = Vec::new();
        for path in files {
            for key in read_keys(path)? {
                if !hosts.iter().any(|(k, _)| *k == key) {
                    let print = fingerprint(&key);
                    hosts.push((key, print));
                }
            }
        }
        if hosts.is_empty() {
            return Err(ForgeError::None);
        }
        let users = if users.is_empty() {
            vec![DEFAULT_USER.to_string()]
        } else {
            users.to_vec()
        };
        for user in &users {
            check_user(user)?;
        }
        Ok(Forges { hosts, users })
    }

    /// The fingerprint of `key` when it is an allowed host key.
    pub fn host(&self, key: &KeyData) -> Option<&str> {
        self.hosts
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, print)| print.as_str())
    }

    /// True when a login may be for `user`.
    pub fn allows_user(&self, user: &str) -> bool {
        self.users.iter().any(|u| u == user)
    }

    /// The allowed users, for a refusal's detail.
    pub fn users(&self) -> &[String] {
        &self.users
    }

    /// The allowed host keys as OpenSSH public key lines (`ssh-ed25519 AAAA…`), for the
    /// known_hosts file of the daemon's own pushes (ARCHITECTURE.md, "Push proxy").
    pub fn openssh_lines(&self) -> Vec<String> {
        self.hosts
            .iter()
            .filter_map(|(key, _)| PublicKey::new(key.clone(), "").to_openssh().ok())
            .collect()
    }

    /// How many host keys are allowed (for `status`).
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// True when no host key is allowed (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// A user name as sshd and forges take them: 1–64 of ASCII letters, digits, `-`, `_`,
/// `.`, not starting with `-`.
fn check_user(user: &str) -> Result<(), ForgeError> {
    let fine = !user.is_empty()
        && user.len() <= 64
        && !user.starts_with('-')
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if fine {
        Ok(())
    } else {
        Err(ForgeError::User(user.to_string()))
    }
}

/// The hosts the known_hosts lines of `files` name, as `(host, port)` (`host` is port
/// 22, `[host]:port` that port), for `row-fence doctor`: where a connection a lane keeps
/// is one to the forge, from the operator's file rather than a remote the lane can edit.
/// Hashed names, negations and wildcard patterns name no host; a `.pub` line names none.
pub fn named_hosts(files: &[PathBuf]) -> Result<Vec<(String, u16)>, ForgeError> {
    use ssh_key::known_hosts::HostPatterns;
    let mut hosts = Vec::new();
    for path in files {
        let text = read_text(path)?;
        for line in text.lines().map(str::trim) {
            let Some(Ok(entry)) = KnownHosts::new(line).next() else {
                continue;
            };
            let HostPatterns::Patterns(patterns) = entry.host_patterns() else {
                continue;
            };
            for pattern in patterns {
                if pattern.starts_with('!') || pattern.contains(['*', '?']) {
                    continue;
                }
                let named = match pattern.strip_prefix('[').and_then(|p| p.split_once("]:")) {
                    Some((host, port)) => port.parse().ok().map(|port| (host.to_string(), port)),
                    None => Some((pattern.clone(), 22)),
                };
                if let Some(named) = named
                    && !hosts.contains(&named)
                {
                    hosts.push(named);
                }
            }
        }
    }
    Ok(hosts)
}

fn read_text(path: &Path) -> Result<String, ForgeError> {
    use std::io::Read;
    let read_error = |source| ForgeError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(read_error)?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    Ok(text)
}

fn read_keys(path: &Path) -> Result<Vec<KeyData>, ForgeError> {
    let text = read_text(path)?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let invalid = |reason: String| ForgeError::Invalid {
            path: path.to_path_buf(),
            line: n + 1,
            reason,
        };
        if let Ok(key) = PublicKey::from_openssh(line) {
            keys.push(key.key_data().clone());
            continue;
        }
        match KnownHosts::new(line).next() {
            Some(Ok(entry)) if entry.marker().is_none() => {
                keys.push(entry.public_key().key_data().clone())
            }
            Some(Ok(_)) => {
                return Err(invalid(
                    "a @cert-authority or @revoked line: give the forge's own host key".into(),
                ));
            }
            Some(Err(e)) => {
                return Err(invalid(format!(
                    "neither a public key nor a known_hosts line ({e})"
                )));
            }
            None => {}
        }
    }
    if keys.is_empty() {
        return Err(ForgeError::Invalid {
            path: path.to_path_buf(),
            line: 0,
            reason: "no host key in it".into(),
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    #[test]
    fn a_public_key_or_a_known_hosts_line_pins_the_key_and_users_default_to_git() {
        let dir = tempfile::tempdir().unwrap();
        let public = dir.path().join("host.pub");
        std::fs::write(&public, format!("{HOST} host\n")).unwrap();
        let known = dir.path().join("known_hosts");
        std::fs::write(
            &known,
            format!("# forge\n[127.0.0.1]:2222,forge.example {HOST}\n"),
        )
        .unwrap();
        let forges = Forges::load(&[public.clone(), known], &[]).unwrap();
        assert_eq!(forges.len(), 1, "the same key twice is one");
        let key = PublicKey::from_openssh(HOST).unwrap();
        assert!(forges.host(key.key_data()).unwrap().starts_with("SHA256:"));
        assert!(forges.allows_user("git") && !forges.allows_user("root"));
        let users = Forges::load(std::slice::from_ref(&public), &["forge".into()]).unwrap();
        assert!(users.allows_user("forge") && !users.allows_user("git"));
    }

    #[test]
    fn no_key_a_bad_line_a_marker_or_a_bad_user_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(Forges::load(&[], &[]), Err(ForgeError::None)));
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "not a key at all\n").unwrap();
        assert!(matches!(
            Forges::load(&[bad], &[]),
            Err(ForgeError::Invalid { line: 1, .. })
        ));
        let marker = dir.path().join("marker");
        std::fs::write(&marker, format!("@cert-authority *.example {HOST}\n")).unwrap();
        assert!(matches!(
            Forges::load(&[marker], &[]),
            Err(ForgeError::Invalid { .. })
        ));
        let public = dir.path().join("host.pub");
        std::fs::write(&public, HOST).unwrap();
        for user in ["", "-oProxyCommand", "a b", "root\n"] {
            assert!(
                matches!(
                    Forges::load(std::slice::from_ref(&public), &[user.to_string()]),
                    Err(ForgeError::User(_))
                ),
                "{user:?}"
            );
        }
        assert!(matches!(
            Forges::load(&[dir.path().join("missing")], &[]),
            Err(ForgeError::Read { .. })
        ));
    }

    #[test]
    fn known_hosts_lines_name_the_forges_hosts_and_ports() {
        let dir = tempfile::tempdir().unwrap();
        let known = dir.path().join("known_hosts");
        std::fs::write(
            &known,
            format!(
                "# forge\n[127.0.0.1]:2222,forge.example {HOST}\n*.example,!x.example {HOST}\n|1|c2FsdA==|aGFzaGhhc2hoYXNoaGFzaGhhc2g= {HOST}\n{HOST} a .pub line\n"
            ),
        )
        .unwrap();
        assert_eq!(
            named_hosts(&[known]).unwrap(),
            [
                ("127.0.0.1".to_string(), 2222),
                ("forge.example".to_string(), 22)
            ]
        );
        assert!(matches!(
            named_hosts(&[dir.path().join("missing")]),
            Err(ForgeError::Read { .. })
        ));
    }
}
