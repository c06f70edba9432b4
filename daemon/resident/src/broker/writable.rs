//! Who can change a path, from the real uids, gids and group memberships
//! (ARCHITECTURE.md, "Key broker"): the daemon's check that a bound lane cannot swap a
//! descriptor the binding does not pin, and `row-fence doctor`'s check that no lane can
//! write another's HOME, worktree or git dir. The permission bits are read, and where a
//! file has an access ACL ([`super::acl`]) the ACL is judged instead, as the kernel does;
//! an owner can always change its own file's bits and ACL, so what a uid owns counts as
//! writable by it; in a sticky directory (`/tmp`) only what the uid owns there can be
//! replaced. A uid's groups are the ones the system gives it (`getgrouplist`) and every
//! group a live process of that uid holds: removing a lane from a group in `/etc/group`
//! does not take the group from the processes it runs already.

use super::acl::{self, Acl, Grant};
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A uid and the groups it is in: what a permission check needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The uid.
    pub uid: u32,
    /// Its primary group, every group that lists it, and every group its live processes
    /// hold.
    pub groups: Vec<u32>,
}

/// The rule that lets a principal write (or read) a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Root passes every check.
    Root,
    /// It owns the path (and can give itself any right).
    Owner,
    /// The owning group's bits, and it is in that group.
    Group(u32),
    /// The bits for every uid.
    Other,
    /// An ACL entry naming the uid.
    AclUser,
    /// An ACL entry for the owning group or a named group, and it is in that group.
    AclGroup(u32),
    /// The ACL's entry for every uid.
    AclOther,
}

/// A path through which a principal can change another, and the rule that lets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reach {
    /// The path it can write: the file, or a directory above it.
    pub through: PathBuf,
    /// How.
    pub how: Access,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Root => f.write_str("root"),
            Access::Owner => f.write_str("it owns it"),
            Access::Group(gid) => write!(f, "writable by {}, which it is in", group_name(*gid)),
            Access::Other => f.write_str("writable by every uid"),
            Access::AclUser => f.write_str("an ACL entry names it; getfacl shows it"),
            Access::AclGroup(gid) => write!(
                f,
                "an ACL entry for {}, which it is in; getfacl shows it",
                group_name(*gid)
            ),
            Access::AclOther => f.write_str("its ACL lets every uid write; getfacl shows it"),
        }
    }
}

impl fmt::Display for Reach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.through.display(), self.how)
    }
}

fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or(format!("gid {gid}"), |g| {
            format!("group {} (gid {gid})", g.name)
        })
}

impl Principal {
    /// `uid` with its groups: its passwd entry's group and every group listing it
    /// (`getgrouplist`), and every group a live process of that uid holds (Linux,
    /// `/proc/<pid>/status`).
    pub fn of(uid: u32) -> Principal {
        let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten();
        let mut groups: Vec<u32> = user
            .and_then(|user| {
                let name = std::ffi::CString::new(user.name.as_str()).ok()?;
                nix::unistd::getgrouplist(&name, user.gid).ok()
            })
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default();
        groups.extend(live_groups(uid));
        groups.sort_unstable();
        groups.dedup();
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

    /// How this principal may write `path` (whose metadata, not following a link, is
    /// `meta`), or `None`: root writes everything; an owner can give itself the right;
    /// then the ACL where `path` has one, else the permission bits.
    pub fn may_write(&self, path: &Path, meta: &fs::Metadata) -> io::Result<Option<Access>> {
        self.may(path, meta, acl::WRITE)
    }

    /// How this principal may read `path`, as [`Principal::may_write`] for the `r` bit.
    pub fn may_read(&self, path: &Path, meta: &fs::Metadata) -> io::Result<Option<Access>> {
        self.may(path, meta, acl::READ)
    }

    fn may(&self, path: &Path, meta: &fs::Metadata, want: u16) -> io::Result<Option<Access>> {
        if self.uid == 0 {
            return Ok(Some(Access::Root));
        }
        if meta.uid() == self.uid {
            return Ok(Some(Access::Owner));
        }
        // A link's own ACL is never consulted (links have none); its bits are 0777 but
        // only its directory decides who replaces it.
        if !meta.file_type().is_symlink()
            && let Some(acl) = acl::read(path)?
        {
            return Ok(self.by_acl(&acl, meta, want));
        }
        let mode = meta.mode() as u16;
        if self.groups.contains(&meta.gid()) && mode & (want << 3) != 0 {
            return Ok(Some(Access::Group(meta.gid())));
        }
        Ok((mode & want != 0).then_some(Access::Other))
    }

    fn by_acl(&self, acl: &Acl, meta: &fs::Metadata, want: u16) -> Option<Access> {
        match acl.grants(self.uid, &self.groups, (meta.uid(), meta.gid()), want)? {
            Grant::Owner => Some(Access::Owner),
            Grant::User => Some(Access::AclUser),
            Grant::Group(gid) => Some(Access::AclGroup(gid)),
            Grant::Other => Some(Access::AclOther),
        }
    }

    /// The first path, from `/` down to `path` itself, through which this principal can
    /// change what `path` names, and how: a directory on the way it can write (unless
    /// sticky and the next entry is not its own), or `path` itself. `None` when there is
    /// none; a path that cannot be looked at is said, never taken for safe.
    pub fn can_change(&self, path: &Path) -> io::Result<Option<Reach>> {
        let mut ancestors: Vec<&Path> = path.ancestors().collect();
        ancestors.reverse();
        for (i, dir) in ancestors.iter().enumerate() {
            let meta = fs::symlink_metadata(dir)?;
            let reach = |how| {
                Some(Reach {
                    through: dir.to_path_buf(),
                    how,
                })
            };
            let Some(next) = ancestors.get(i + 1) else {
                // `path` itself: its contents (or, for a directory, its entries).
                return Ok(self.may_write(dir, &meta)?.and_then(reach));
            };
            let Some(how) = self.may_write(dir, &meta)? else {
                continue;
            };
            let sticky = meta.mode() & 0o1000 != 0;
            if sticky && meta.uid() != self.uid && self.uid != 0 {
                // Only its own entries can be renamed or removed here.
                let next_owner = fs::symlink_metadata(next)?.uid();
                if next_owner != self.uid {
                    continue;
                }
            }
            return Ok(reach(how));
        }
        Ok(None)
    }
}

/// Every group (real, effective, saved, fs gid and supplementary) held by a live process
/// whose real, effective, saved or fs uid is `uid`. A process that ends while it is read
/// has nothing to say.
#[cfg(target_os = "linux")]
fn live_groups(uid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        // The directory is the process's own (its files are root's when it is not
        // dumpable, the directory stays its): a cheap filter before the status is read.
        if entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        if let Ok(status) = fs::read_to_string(entry.path().join("status")) {
            groups.extend(groups_in_status(&status, uid));
        }
    }
    groups
}

#[cfg(not(target_os = "linux"))]
fn live_groups(_uid: u32) -> Vec<u32> {
    Vec::new()
}

/// From a `/proc/<pid>/status`: the process's gids and supplementary groups when one of
/// its uids is `uid`.
fn groups_in_status(status: &str, uid: u32) -> Vec<u32> {
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    if !ids("Uid:").contains(&uid) {
        return Vec::new();
    }
    let mut groups = ids("Gid:");
    groups.extend(ids("Groups:"));
    groups
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
        let through = |p: &Principal| p.can_change(&file).unwrap().map(|r| (r.through, r.how));
        assert_eq!(through(&member), Some((sub.clone(), Access::Group(group))));
        chmod(&sub, 0o757);
        assert_eq!(through(&stranger), Some((sub.clone(), Access::Other)));
        // Sticky and world-writable: the file is not the stranger's, so it stays.
        chmod(&sub, 0o1777);
        assert_eq!(stranger.can_change(&file).unwrap(), None);
        chmod(&sub, 0o755);
        chmod(&file, 0o664);
        assert_eq!(through(&member), Some((file.clone(), Access::Group(group))));
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

    #[test]
    fn a_process_keeps_the_groups_it_started_with() {
        let status = "Name:\tsleep\nUid:\t1009\t1009\t1009\t1009\nGid:\t1009\t1009\t1009\t1009\nGroups:\t1009 1011 \n";
        assert_eq!(
            groups_in_status(status, 1009),
            vec![1009, 1009, 1009, 1009, 1009, 1011]
        );
        assert!(groups_in_status(status, 1008).is_empty());
        // This process's own groups are among its uid's.
        let me = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        assert!(Principal::of(me).groups.contains(&gid));
    }
}
