//! Who can change a path, from the real uids, gids and group memberships
//! (ARCHITECTURE.md, "Key broker"): the daemon's check that a bound lane cannot swap a
//! descriptor the binding does not pin, and `row-fence doctor`'s check that no lane can
//! write another's HOME, worktree or git dir. Permission bits are read (not ACLs); an
//! owner can always change its own file's bits, so what a uid owns counts as writable by
//! it; in a sticky directory (`/tmp`) only what the uid owns there can be replaced.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A uid and the groups it is in: what a permission check needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The uid.
    pub uid: u32,
    /// Its primary group and every group that lists it.
    pub groups: Vec<u32>,
}

impl Principal {
    /// `uid` with the groups the system gives it (its passwd entry's group and every
    /// group listing it: `getgrouplist`); just the uid when it has no passwd entry.
    pub fn of(uid: u32) -> Principal {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten();
        let groups = user
            .and_then(|user| {
                let name = std::ffi::CString::new(user.name.as_str()).ok()?;
                nix::unistd::getgrouplist(&name, user.gid).ok()
            })
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default();
        Principal { uid, groups }
    }

    /// The user's name, for a sentence (the uid when it has none).
    pub fn name(&self) -> String {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(self.uid))
            .ok()
            .flatten()
            .map_or(format!("uid {}", self.uid), |u| {
                format!("uid {} ({})", self.uid, u.name)
            })
    }

    /// True when the permission bits of `meta` let this principal write it (root writes
    /// everything; an owner can give itself the right).
    pub fn may_write(&self, meta: &fs::Metadata) -> bool {
        let mode = meta.mode();
        self.uid == 0
            || meta.uid() == self.uid
            || (self.groups.contains(&meta.gid()) && mode & 0o020 != 0)
            || mode & 0o002 != 0
    }

    /// The first path, from `/` down to `path` itself, through which this principal can
    /// change what `path` names: a directory on the way it can write (unless sticky and
    /// the next entry is not its own), or `path` itself. `None` when there is none; a path
    /// that cannot be looked at is said, never taken for safe.
    pub fn can_change(&self, path: &Path) -> Result<Option<PathBuf>, std::io::Error> {
        let mut ancestors: Vec<&Path> = path.ancestors().collect();
        ancestors.reverse();
        for (i, dir) in ancestors.iter().enumerate() {
            let meta = fs::symlink_metadata(dir)?;
            let Some(next) = ancestors.get(i + 1) else {
                // `path` itself: its contents (or, for a directory, its entries).
                return Ok(self.may_write(&meta).then(|| dir.to_path_buf()));
            };
            if !self.may_write(&meta) {
                continue;
            }
            let sticky = meta.mode() & 0o1000 != 0;
            if sticky && meta.uid() != self.uid && self.uid != 0 {
                // Only its own entries can be renamed or removed here.
                let next_owner = fs::symlink_metadata(next)?.uid();
                if next_owner != self.uid {
                    continue;
                }
            }
            return Ok(Some(dir.to_path_buf()));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn owner_group_and_other_bits_and_sticky_dirs_decide() {
        let dir = tempfile::tempdir().unwrap();
        let me = fs::metadata(dir.path()).unwrap();
        let (owner, group) = (me.uid(), me.gid());
        let stranger = Principal {
            uid: owner.wrapping_add(4242).max(1),
            groups: vec![],
        };
        let member = Principal {
            uid: owner.wrapping_add(4243).max(1),
            groups: vec![group],
        };
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let file = sub.join("d.json");
        fs::write(&file, "{}").unwrap();
        let chmod =
            |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        chmod(dir.path(), 0o755);
        chmod(&sub, 0o755);
        chmod(&file, 0o644);
        // The temp dir's own ancestors (/tmp, sticky) are nobody's to change here.
        assert_eq!(stranger.can_change(&file).unwrap(), None);
        assert_eq!(member.can_change(&file).unwrap(), None);
        chmod(&sub, 0o775);
        assert_eq!(stranger.can_change(&file).unwrap(), None);
        assert_eq!(member.can_change(&file).unwrap(), Some(sub.clone()));
        chmod(&sub, 0o757);
        assert_eq!(stranger.can_change(&file).unwrap(), Some(sub.clone()));
        // Sticky and world-writable: the file is not the stranger's, so it stays.
        chmod(&sub, 0o1777);
        assert_eq!(stranger.can_change(&file).unwrap(), None);
        chmod(&sub, 0o755);
        chmod(&file, 0o664);
        assert_eq!(member.can_change(&file).unwrap(), Some(file.clone()));
        let owner_p = Principal {
            uid: owner,
            groups: vec![],
        };
        chmod(&file, 0o444);
        assert!(
            owner_p.can_change(&file).unwrap().is_some(),
            "an owner can chmod"
        );
        assert!(stranger.can_change(&dir.path().join("missing")).is_err());
    }
}
