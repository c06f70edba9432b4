//! What a lane's uid can push with past the key broker (ARCHITECTURE.md, "Key broker"),
//! for `row-fence doctor`. The broker holds the push key, so a refused lane has no
//! signature, unless its uid reaches a key some other way or keeps a connection:
//!
//! - a private key file it can read under its HOME's `.ssh` (the forge may accept it);
//! - another ssh agent, in `SSH_AUTH_SOCK` of a process running as that uid;
//! - ssh multiplexing (`ControlMaster`, `ControlPersist`) in its `~/.ssh/config` or the
//!   system's `ssh_config`: a connection opened while ALLOWED and kept pushes later with
//!   no new signature, the one route the broker cannot see (a self-hosted server can
//!   refuse it with `MaxSessions 1`).
//!
//! The checks read permission bits (not ACLs) and the config files' text (keywords
//! anywhere, whatever `Host`/`Match` block they are in: a block that applies to the forge
//! is enough, so every one counts).

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The system's ssh client configs, as Debian and Fedora ship them (`ssh_config` includes
/// `ssh_config.d/*.conf`).
pub const SYSTEM_SSH_CONFIG: &str = "/etc/ssh/ssh_config";
/// The directory the system config includes.
pub const SYSTEM_SSH_CONFIG_D: &str = "/etc/ssh/ssh_config.d";

/// How much of a file is read to tell whether it is a private key or to find options.
const HEAD_BYTES: u64 = 256 * 1024;

/// Every warning for the lane bound to `uid`: one sentence each, naming the uid.
/// `broker_socket`: the broker's agent socket, which `SSH_AUTH_SOCK` may name.
pub fn warnings(uid: u32, broker_socket: Option<&Path>) -> Vec<String> {
    let mut found = Vec::new();
    let user = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user,
        Ok(None) => {
            found.push(format!(
                "lane uid {uid} has no passwd entry: its HOME cannot be checked for keys or ssh settings"
            ));
            return found;
        }
        Err(e) => {
            found.push(format!("lane uid {uid}: cannot look it up: {e}"));
            return found;
        }
    };
    let who = format!("lane uid {uid} ({})", user.name);
    let groups = groups_of(&user);
    let ssh_dir = user.dir.join(".ssh");
    // What could not be read is said, never taken for "nothing there".
    let (keys, unread) = private_keys(&ssh_dir);
    for path in unread {
        found.push(format!(
            "{who}: cannot read {} to tell whether it holds a private key (run doctor as root)",
            path.display()
        ));
    }
    for key in keys {
        if let Ok(meta) = fs::metadata(&key)
            && readable_by(&meta, uid, &groups)
        {
            found.push(format!(
                "{who} can read the private key {}: a forge that accepts it takes pushes the broker never signed; remove it or make it unreadable to that uid",
                key.display()
            ));
        }
    }
    let (agents, hidden) = other_agents(uid, broker_socket);
    if let Some(pid) = hidden {
        found.push(format!(
            "{who}: cannot read the environment of its process {pid} to look for another agent (run doctor as root)"
        ));
    }
    for (pid, socket) in agents {
        found.push(format!(
            "{who} runs process {pid} with SSH_AUTH_SOCK={}, another agent than the broker's: any key it holds pushes without the fence; stop it or unset SSH_AUTH_SOCK",
            socket.display()
        ));
    }
    let mut configs = vec![ssh_dir.join("config"), PathBuf::from(SYSTEM_SSH_CONFIG)];
    configs.extend(conf_files(Path::new(SYSTEM_SSH_CONFIG_D)));
    for config in configs {
        for line in multiplexing_in(&config) {
            found.push(format!(
                "{who}: {} sets {line}: a connection opened while ALLOWED and kept pushes later with no new signature, which the broker cannot see; remove it (a self-hosted server can refuse it: MaxSessions 1)",
                config.display()
            ));
        }
    }
    found
}

fn groups_of(user: &nix::unistd::User) -> Vec<u32> {
    let Ok(name) = std::ffi::CString::new(user.name.as_str()) else {
        return vec![user.gid.as_raw()];
    };
    nix::unistd::getgrouplist(&name, user.gid)
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|_| vec![user.gid.as_raw()])
}

/// True when a file's permission bits let `uid` (in `groups`) read it; root reads all.
pub fn readable_by(meta: &fs::Metadata, uid: u32, groups: &[u32]) -> bool {
    let mode = meta.mode();
    uid == 0
        || (meta.uid() == uid && mode & 0o400 != 0)
        || (meta.uid() != uid && groups.contains(&meta.gid()) && mode & 0o040 != 0)
        || (meta.uid() != uid && !groups.contains(&meta.gid()) && mode & 0o004 != 0)
}

/// The files directly in `dir` that hold a PEM or OpenSSH private key, and the paths that
/// could not be read to tell (`dir` itself when it exists but cannot be listed).
fn private_keys(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(_) => return (Vec::new(), vec![dir.to_path_buf()]),
    };
    let mut keys = Vec::new();
    let mut unread = Vec::new();
    for path in entries.flatten().map(|e| e.path()).filter(|p| p.is_file()) {
        match head(&path) {
            Some(text) if is_private_key(&text) => keys.push(path),
            Some(_) => {}
            None => unread.push(path),
        }
    }
    keys.sort();
    unread.sort();
    (keys, unread)
}

/// True for text with a `-----BEGIN … PRIVATE KEY-----` line (OpenSSH, PEM, PKCS#8).
pub fn is_private_key(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        l.starts_with("-----BEGIN ") && l.ends_with("PRIVATE KEY-----")
    })
}

fn head(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(HEAD_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// `(pid, socket)` for each process of `uid` (the owner of its `/proc` entry) whose
/// environment names an `SSH_AUTH_SOCK` that exists and is not the broker's; and the first
/// such process whose environment could not be read.
fn other_agents(uid: u32, broker_socket: Option<&Path>) -> (Vec<(u32, PathBuf)>, Option<u32>) {
    let Ok(entries) = fs::read_dir("/proc") else {
        return (Vec::new(), None);
    };
    let mut hidden = None;
    let broker = broker_socket.and_then(|s| fs::canonicalize(s).ok());
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        if fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let environ = match fs::read(dir.join("environ")) {
            Ok(environ) => environ,
            // Not allowed to look: said. Anything else (the process ended since it was
            // listed: ENOENT, ESRCH) has nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                hidden.get_or_insert(pid);
                continue;
            }
            Err(_) => continue,
        };
        let Some(socket) = environ
            .split(|b| *b == 0)
            .find_map(|kv| kv.strip_prefix(b"SSH_AUTH_SOCK="))
            .filter(|v| !v.is_empty())
        else {
            continue;
        };
        let socket = PathBuf::from(String::from_utf8_lossy(socket).into_owned());
        let Ok(real) = fs::canonicalize(&socket) else {
            continue;
        };
        if Some(&real) != broker.as_ref() && !found.iter().any(|(_, s)| s == &socket) {
            found.push((pid, socket));
        }
    }
    (found, hidden)
}

/// The `*.conf` files in `dir`, sorted (the order ssh includes them).
fn conf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The lines of the ssh config at `path` that turn multiplexing on; none when it cannot
/// be read.
pub fn multiplexing_in(path: &Path) -> Vec<String> {
    head(path).map(|t| multiplexing(&t)).unwrap_or_default()
}

/// The lines of ssh config `text` that turn multiplexing on: `ControlMaster` or
/// `ControlPersist` with any value but `no` (ssh reads keywords in any case, separated
/// from the value by spaces or `=`).
pub fn multiplexing(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let (keyword, value) = line
                .split_once(|c: char| c.is_whitespace() || c == '=')
                .map(|(k, v)| {
                    (
                        k,
                        v.trim_start_matches(|c: char| c.is_whitespace() || c == '='),
                    )
                })?;
            let keyword = keyword.to_ascii_lowercase();
            let value = value.trim().trim_matches('"').to_ascii_lowercase();
            let on = matches!(keyword.as_str(), "controlmaster" | "controlpersist")
                && !value.is_empty()
                && value != "no";
            on.then(|| line.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplexing_is_found_in_any_case_and_spelling() {
        let text = "Host *\n  ControlMaster auto\n  controlpersist=10m\n# ControlMaster yes\n  ControlMaster no\n  ControlPath ~/.ssh/%C\nHost x\n  CONTROLPERSIST = yes\n  ControlPersist no\n";
        assert_eq!(
            multiplexing(text),
            vec![
                "ControlMaster auto".to_string(),
                "controlpersist=10m".to_string(),
                "CONTROLPERSIST = yes".to_string()
            ]
        );
        assert!(multiplexing("Host *\n  ForwardAgent no\n").is_empty());
    }

    #[test]
    fn a_system_config_file_with_multiplexing_is_found() {
        // What `warnings` reads for /etc/ssh/ssh_config and ssh_config.d, on a file.
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("10-mux.conf");
        fs::write(&conf, "Host forge\n    ControlPersist 4h\n").unwrap();
        fs::write(dir.path().join("20-other.txt"), "ControlMaster yes\n").unwrap();
        let files = conf_files(dir.path());
        assert_eq!(files, vec![conf.clone()]);
        assert_eq!(
            multiplexing_in(&conf),
            vec!["ControlPersist 4h".to_string()]
        );
        assert!(multiplexing_in(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn private_keys_are_told_from_public_ones() {
        assert!(is_private_key(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n"
        ));
        assert!(is_private_key("-----BEGIN RSA PRIVATE KEY-----\n"));
        assert!(is_private_key("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"));
        assert!(!is_private_key("ssh-ed25519 AAAA key\n"));
        assert!(!is_private_key("-----BEGIN CERTIFICATE-----\n"));
    }

    #[test]
    fn readability_follows_owner_group_and_other_bits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let meta = |mode| {
            fs::set_permissions(&file, fs::Permissions::from_mode(mode)).unwrap();
            fs::metadata(&file).unwrap()
        };
        let owner = fs::metadata(&file).unwrap().uid();
        let group = fs::metadata(&file).unwrap().gid();
        let other = owner.wrapping_add(4242).max(1);
        assert!(readable_by(&meta(0o600), owner, &[group]));
        assert!(!readable_by(&meta(0o600), other, &[group]));
        assert!(readable_by(&meta(0o640), other, &[group]));
        assert!(!readable_by(&meta(0o640), other, &[]));
        assert!(readable_by(&meta(0o604), other, &[]));
        assert!(!readable_by(&meta(0o000), other, &[group]));
    }
}
