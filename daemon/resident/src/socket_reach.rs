//! Whether another uid can connect to a Unix socket (ARCHITECTURE.md, "Key broker"):
//! connecting needs search permission on every directory from `/` down to the socket's,
//! and write permission on the socket itself. The key broker's socket is for lanes that
//! run under their own uids; one in a directory they cannot traverse (a `0700` runtime
//! directory of the daemon's user) accepts nothing from them, and every lane's push
//! fails with "Permission denied" while the daemon looks healthy. The daemon, `install
//! broker` and `doctor` ask this before that happens, and name the directory.
//!
//! Permission bits only (owner, group through the uid's groups, other); root passes. An
//! access control list can let a uid through that the bits do not: the answer is then a
//! warning to check, never a refusal to serve.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why `uid` cannot connect to the socket, naming the place that stops it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "uid {uid} cannot connect to {socket}: {blocker} (mode {mode:04o}, owner uid {owner}) {why}; put the socket in a directory every lane can traverse (such as /run/row-fence, mode 0755, owned by the daemon's user), or let them through: chmod o+x {blocker}"
)]
pub struct Unreachable {
    /// The uid that cannot connect.
    pub uid: u32,
    /// The socket.
    pub socket: PathBuf,
    /// The directory (or the socket itself) whose bits stop it.
    pub blocker: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner.
    pub owner: u32,
    /// What is missing, as a sentence's end.
    pub why: &'static str,
}

/// `Ok` when `uid` may connect to `socket` by the permission bits of every directory on
/// its way and of the socket (when it exists yet). A directory that cannot be examined is
/// left to the kernel (`Ok`): this names a setup mistake, it does not guess one.
pub fn check(uid: u32, socket: &Path) -> Result<(), Unreachable> {
    if uid == 0 {
        return Ok(());
    }
    let groups = groups_of(uid);
    let blocked = |at: &Path, meta: &fs::Metadata, why: &'static str| Unreachable {
        uid,
        socket: socket.to_path_buf(),
        blocker: at.to_path_buf(),
        mode: meta.mode() & 0o7777,
        owner: meta.uid(),
        why,
    };
    let mut dirs: Vec<&Path> = socket.ancestors().skip(1).collect();
    dirs.reverse();
    for dir in dirs {
        let Ok(meta) = fs::metadata(dir) else {
            return Ok(());
        };
        if !permits(&meta, uid, &groups, 0o1) {
            return Err(blocked(
                dir,
                &meta,
                "lets it through no search (x) permission",
            ));
        }
    }
    match fs::metadata(socket) {
        Ok(meta) if !permits(&meta, uid, &groups, 0o2) => {
            Err(blocked(socket, &meta, "lets it write (connect) nothing"))
        }
        _ => Ok(()),
    }
}

/// True when the bits of `meta` grant `want` (`0o1` search, `0o2` write, `0o4` read) to
/// `uid` in `groups`: the owner's bits for the owner, the group's for a member, else
/// the others'.
fn permits(meta: &fs::Metadata, uid: u32, groups: &[u32], want: u32) -> bool {
    let mode = meta.mode();
    let bits = if meta.uid() == uid {
        mode >> 6
    } else if groups.contains(&meta.gid()) {
        mode >> 3
    } else {
        mode
    };
    bits & want == want
}

/// The uid's primary and supplementary groups from the user database (its primary group
/// alone when it has no entry there: a uid with no name is in no other group).
fn groups_of(uid: u32) -> Vec<u32> {
    let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) else {
        return Vec::new();
    };
    let Ok(name) = std::ffi::CString::new(user.name.as_str()) else {
        return vec![user.gid.as_raw()];
    };
    nix::unistd::getgrouplist(&name, user.gid)
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|_| vec![user.gid.as_raw()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_on_the_way_is_named_and_a_traversable_one_passes() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        fs::create_dir(&run).unwrap();
        let socket = run.join("agent.sock");
        // An unnamed uid: in no group, so only the others' bits count for it (unless the
        // test runs as that uid, which it does not).
        let other = 4_000_123;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o711)).unwrap();
        fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
        let e = check(other, &socket).unwrap_err();
        assert_eq!(e.blocker, run, "{e}");
        assert!(e.to_string().contains("chmod o+x"), "{e}");
        fs::set_permissions(&run, fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(check(other, &socket), Ok(()));
        fs::write(&socket, "").unwrap();
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(check(other, &socket).unwrap_err().blocker, socket);
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(check(other, &socket), Ok(()));
        assert_eq!(check(0, &socket), Ok(()));
    }
}
