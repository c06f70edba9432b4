//! What a lane's uid can push with past the key broker (ARCHITECTURE.md, "Key broker"),
//! for `row-fence doctor`. The broker holds the push key and signs only a login to the
//! forge, so a refused lane has no signature, unless its uid reaches a key some other way,
//! keeps a connection, or another lane can change what it runs:
//!
//! - a private key file it can read under its HOME's `.ssh` (the forge may accept it);
//! - what its processes hold ([`crate::lane_procs`]): another ssh agent, an ssh master, a
//!   connection to the forge, a forge token in its environment;
//! - a gh token it can read (`~/.config/gh/hosts.yml` holding an `oauth_token` other than
//!   `row-fence install gh`'s placeholder): a route around the forge API;
//! - ssh multiplexing (`ControlMaster`, `ControlPersist`) in its `~/.ssh/config` or the
//!   system's `ssh_config`, and every file they `Include` ([`crate::ssh_config`]): a
//!   connection opened while ALLOWED and kept pushes later with no new signature;
//! - its HOME, worktree or git dir (its hooks, its config) writable by another bound lane's
//!   uid, through permission bits, an ACL entry or a group they share: that lane's code runs as this one
//!   (a `pre-commit` hook planted while this lane is ALLOWED pushes for the other).
//!
//! Who can read or write is [`Principal`]'s rule: permission bits, or the access ACL where
//! a file has one, and the groups a uid's live processes hold as well as `/etc/group`'s.

use crate::lane_procs;
use row_fence_resident::broker::writable::Principal;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The system's ssh client config (on Debian and Fedora it includes `ssh_config.d/*.conf`).
pub const SYSTEM_SSH_CONFIG: &str = "/etc/ssh/ssh_config";

/// Where the system config's relative `Include`s start.
const SYSTEM_SSH_DIR: &str = "/etc/ssh";

/// A bound lane as doctor checks it.
#[derive(Clone, Debug)]
pub struct Lane {
    /// Its uid.
    pub uid: u32,
    /// Its worktree, as bound (checked with its git dir for other lanes' write access).
    pub worktree: Option<PathBuf>,
}

/// Every warning for `lane`: one sentence each, naming its uid. `others`: the other bound
/// lanes' uids; `broker_socket`: the broker's agent socket, which `SSH_AUTH_SOCK` may name;
/// `forges`: the remotes' ssh addresses.
pub fn warnings(
    lane: &Lane,
    others: &[u32],
    broker_socket: Option<&Path>,
    forges: &[SocketAddr],
) -> Vec<String> {
    let uid = lane.uid;
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
    let lane_principal = Principal::of(uid);
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
        let Ok(meta) = fs::metadata(&key) else {
            continue;
        };
        match lane_principal.may_read(&key, &meta) {
            Ok(Some(how)) => found.push(format!(
                "{who} can read the private key {} ({how}): a forge that accepts it takes pushes the broker never signed; remove it or make it unreadable to that uid",
                key.display()
            )),
            Ok(None) => {}
            Err(e) => found.push(format!(
                "{who}: cannot tell whether it can read the private key {}: {e} (run doctor as root)",
                key.display()
            )),
        }
    }
    found.extend(held(&who, uid, broker_socket, forges));
    let hosts = user.dir.join(".config").join("gh").join("hosts.yml");
    if let Ok(meta) = fs::metadata(&hosts)
        && let Ok(Some(how)) = lane_principal.may_read(&hosts, &meta)
        && fs::read_to_string(&hosts).is_ok_and(|text| holds_real_gh_token(&text))
    {
        found.push(format!(
            "{who} can read {} ({how}), which holds a gh token: its writes reach the forge API past the daemon's judgement; wire it with row-fence install gh (which replaces it with a placeholder) or remove the token",
            hosts.display()
        ));
    }
    let mut configs = vec![(ssh_dir.join("config"), ssh_dir.clone())];
    configs.push((
        PathBuf::from(SYSTEM_SSH_CONFIG),
        PathBuf::from(SYSTEM_SSH_DIR),
    ));
    for (config, base) in configs {
        for (file, line) in crate::ssh_config::multiplexing(&config, &base, &user.dir) {
            found.push(format!(
                "{who}: {} sets {line}: a connection opened while ALLOWED and kept pushes later with no new signature, which the broker cannot see; remove it (sshd's MaxSessions does not stop it: a master's pushes are each its only session)",
                file.display()
            ));
        }
    }
    found.extend(writable_by_others(&who, &user, lane, others));
    found
}

/// True when a gh `hosts.yml` text has an `oauth_token` that is not `install gh`'s
/// placeholder.
pub fn holds_real_gh_token(text: &str) -> bool {
    text.lines().any(|line| {
        line.trim()
            .strip_prefix("oauth_token:")
            .map(|v| v.trim().trim_matches(['"', '\'']))
            .is_some_and(|v| !v.is_empty() && !v.starts_with(crate::gh_install::PLACEHOLDER_PREFIX))
    })
}

/// What the lane's processes hold ([`lane_procs`]), one sentence each.
fn held(who: &str, uid: u32, broker_socket: Option<&Path>, forges: &[SocketAddr]) -> Vec<String> {
    let held = lane_procs::scan(uid, broker_socket, forges);
    let mut found = Vec::new();
    if let Some(pid) = held.hidden {
        found.push(format!(
            "{who}: cannot read the environment or descriptors of its process {pid} to look for another agent, an ssh master or a kept connection (run doctor as root)"
        ));
    }
    for (pid, socket) in held.agents {
        found.push(format!(
            "{who} runs process {pid} with SSH_AUTH_SOCK={}, another agent than the broker's: any key it holds pushes without the fence; stop it or unset SSH_AUTH_SOCK",
            socket.display()
        ));
    }
    for (pid, var) in held.tokens {
        found.push(format!(
            "{who} runs process {pid} with {var} set: a token the lane holds reaches the forge API past the daemon's judgement; unset it and use row-fence install gh"
        ));
    }
    for (pid, why) in held.masters {
        found.push(format!(
            "{who} runs an ssh master, process {pid} ({why}): pushes through it need no new signature after the lane is refused; stop it (ssh -O exit, or kill {pid})"
        ));
    }
    for (pid, program, peer) in held.connections {
        let what = if forges.contains(&peer) {
            "a connection to the forge"
        } else {
            "an ssh connection"
        };
        found.push(format!(
            "{who}'s process {pid} ({program}) holds {what} at {peer}: a session opened while ALLOWED can still push; stop it (kill {pid})"
        ));
    }
    found
}

/// The lane's HOME, its ssh configs, worktree, git dir, the hooks its git runs and the
/// config files its git reads ([`crate::lane_git`]) that another bound lane can change,
/// naming how (owner, a group it is in, the other bits, an ACL entry).
fn writable_by_others(
    who: &str,
    user: &nix::unistd::User,
    lane: &Lane,
    others: &[u32],
) -> Vec<String> {
    let home = &user.dir;
    let ssh_dir = home.join(".ssh");
    let mut paths = vec![home.to_path_buf(), ssh_dir.clone()];
    paths.extend(crate::ssh_config::files(
        &ssh_dir.join("config"),
        &ssh_dir,
        home,
    ));
    let mut found = Vec::new();
    if let Some(worktree) = &lane.worktree {
        paths.push(worktree.clone());
        if let Ok(Some(git_dir)) = row_fence_contract::descriptor::find_git_dir(worktree) {
            let common = row_fence_contract::git_layout::common_dir(&git_dir)
                .unwrap_or_else(|| git_dir.clone());
            for dir in [&git_dir, &common] {
                for path in [dir.clone(), dir.join("hooks"), dir.join("config")] {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                paths.extend(hook_files(&dir.join("hooks")));
            }
        }
        match crate::lane_git::reads(lane.uid, user.gid.as_raw(), home, worktree) {
            Ok(reads) => {
                if let Some(hooks) = reads.hooks {
                    paths.extend(hook_files(&hooks));
                    paths.push(hooks);
                }
                paths.extend(reads.configs);
            }
            Err(e) => found.push(format!(
                "{who}: cannot tell which hooks and config files its git uses: {e}"
            )),
        }
    }
    let mut seen = Vec::new();
    paths.retain(|p| {
        let new = !seen.contains(p);
        seen.push(p.clone());
        new
    });
    for uid in others.iter().filter(|u| **u != lane.uid) {
        let other = Principal::of(*uid);
        for path in &paths {
            match other.can_change(path) {
                Ok(Some(reach)) => found.push(format!(
                    "{who}: {} can be changed by lane {} through {reach}: that lane can plant what this one runs (a hook, a config); give each lane a group of its own (useradd -U), no group or other write bits and no ACL entry for another lane",
                    path.display(),
                    other.name(),
                )),
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => found.push(format!(
                    "{who}: cannot tell whether lane {} can change {}: {e} (run doctor as root)",
                    other.name(),
                    path.display()
                )),
            }
        }
    }
    found
}

/// The files in a hooks directory (each one git may run).
fn hook_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
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
        match crate::ssh_config::head(&path) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_gh_hosts_file_holds_a_real_token_unless_it_is_the_placeholder() {
        assert!(holds_real_gh_token("github.com:\n    oauth_token: gho_x\n"));
        assert!(!holds_real_gh_token(
            "github.com:\n    oauth_token: rowfence_placeholder_ab\n"
        ));
        assert!(!holds_real_gh_token("github.com:\n    user: me\n"));
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
    fn readability_follows_ownership_group_and_other_bits() {
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
        let who = |uid, groups: &[u32]| Principal {
            uid,
            groups: groups.to_vec(),
        };
        let reads = |p: Principal, mode| p.may_read(&file, &meta(mode)).unwrap().is_some();
        assert!(reads(who(owner, &[group]), 0o600));
        // An owner can give itself the right: a key it owns at 0000 is still its to read.
        assert!(reads(who(owner, &[]), 0o000));
        assert!(!reads(who(other, &[group]), 0o600));
        assert!(reads(who(other, &[group]), 0o640));
        assert!(!reads(who(other, &[]), 0o640));
        assert!(reads(who(other, &[]), 0o604));
        assert!(!reads(who(other, &[group]), 0o000));
    }
}
