//! POSIX access ACLs, as Linux keeps them in the `system.posix_acl_access` attribute
//! (ARCHITECTURE.md, "Key broker"). Permission bits alone do not say who can change a
//! path: `setfacl -m u:lane-b:rwx dir` lets lane-b rename entries in a directory whose bits
//! read `drwxrwx---` and name another owner and group. The daemon's check that a lane
//! cannot swap its unpinned descriptor, and doctor's check that no lane can write
//! another's git dir, read the ACL where there is one and judge it as the kernel does
//! (`posix_acl_permission`): the owner's entry, else a named user's, else the owning
//! group's and named groups' (any that grants), else other's, each but the owner's and
//! other's limited by the mask.
//!
//! Wire shape (`include/uapi/linux/posix_acl_xattr.h`): a little-endian u32 version (2),
//! then entries of u16 tag, u16 permission bits (`r`=4, `w`=2, `x`=1), u32 id.

use std::io;
use std::path::Path;

/// The attribute holding a file's access ACL.
#[cfg(target_os = "linux")]
const ACCESS_ACL: &str = "system.posix_acl_access";

/// The only version Linux writes.
const VERSION: u32 = 2;

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

/// The `w` bit of an entry.
pub const WRITE: u16 = 0o2;

/// The `r` bit of an entry.
pub const READ: u16 = 0o4;

/// One entry: tag, permission bits, id (a uid or gid for named entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// A file's access ACL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<Entry>,
}

/// Which entry of an ACL grants a principal a right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The owner's entry (the owner is judged before the ACL is read).
    Owner,
    /// A named user's entry for that uid.
    User,
    /// The owning group's entry or a named group's, for this gid.
    Group(u32),
    /// The entry for everyone else.
    Other,
}

impl Acl {
    /// Parses the attribute's bytes; a version other than 2, a length that is not whole
    /// entries, or an unknown tag is an error (never taken for "no ACL").
    pub fn parse(bytes: &[u8]) -> io::Result<Acl> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("an ACL {what}"));
        let (head, body) = bytes
            .split_first_chunk::<4>()
            .ok_or_else(|| bad("shorter than its header"))?;
        if u32::from_le_bytes(*head) != VERSION {
            return Err(bad("of a version other than 2"));
        }
        if body.len() % 8 != 0 {
            return Err(bad("whose length is not whole entries"));
        }
        let entries = body
            .chunks_exact(8)
            .map(|e| Entry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect::<Vec<_>>();
        if let Some(e) = entries
            .iter()
            .find(|e| ![USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER].contains(&e.tag))
        {
            return Err(bad(&format!("entry with the unknown tag {:#x}", e.tag)));
        }
        Ok(Acl { entries })
    }

    /// Which entry gives `uid` (in `groups`) the bits `want` on a file owned by `owner`
    /// and `owner_group`, judged as the kernel judges: the first class that matches
    /// decides, and a matching group class that does not grant denies (other is then not
    /// asked).
    pub fn grants(
        &self,
        uid: u32,
        groups: &[u32],
        (owner, owner_group): (u32, u32),
        want: u16,
    ) -> Option<Grant> {
        let mask = self
            .entries
            .iter()
            .find(|e| e.tag == MASK)
            .map_or(0o7, |e| e.perm);
        let has = |perm: u16, masked: bool| {
            let perm = if masked { perm & mask } else { perm };
            perm & want == want
        };
        if uid == owner {
            let own = self.entries.iter().find(|e| e.tag == USER_OBJ)?;
            return has(own.perm, false).then_some(Grant::Owner);
        }
        if let Some(named) = self.entries.iter().find(|e| e.tag == USER && e.id == uid) {
            return has(named.perm, true).then_some(Grant::User);
        }
        let mut group_matched = false;
        for e in &self.entries {
            let gid = match e.tag {
                GROUP_OBJ => owner_group,
                GROUP => e.id,
                _ => continue,
            };
            if groups.contains(&gid) {
                group_matched = true;
                if has(e.perm, true) {
                    return Some(Grant::Group(gid));
                }
            }
        }
        if group_matched {
            return None;
        }
        let other = self.entries.iter().find(|e| e.tag == OTHER)?;
        has(other.perm, false).then_some(Grant::Other)
    }
}

/// The access ACL of `path` itself (a link is not followed), `None` when it has none or
/// its file system keeps none. Other errors are said: what cannot be read is never taken
/// for "no one else may write".
#[cfg(target_os = "linux")]
pub fn read(path: &Path) -> io::Result<Option<Acl>> {
    use rustix::io::Errno;
    let absent = |e: Errno| e == Errno::NODATA || e == Errno::NOTSUP;
    let len = match rustix::fs::lgetxattr_query(path, ACCESS_ACL) {
        Ok(len) => len,
        Err(e) if absent(e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut bytes = vec![0u8; len];
    match rustix::fs::lgetxattr(path, ACCESS_ACL, &mut bytes[..]) {
        Ok(read) => {
            bytes.truncate(read);
            Acl::parse(&bytes).map(Some)
        }
        Err(e) if absent(e) => Ok(None),
        // ERANGE: the ACL grew between the two calls; said, as any read that failed.
        Err(e) => Err(e.into()),
    }
}

/// Elsewhere the permission bits are all that is read (macOS keeps ACLs of another kind).
#[cfg(not(target_os = "linux"))]
pub fn read(_path: &Path) -> io::Result<Option<Acl>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = VERSION.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            out.extend(tag.to_le_bytes());
            out.extend(perm.to_le_bytes());
            out.extend(id.to_le_bytes());
        }
        out
    }

    #[test]
    fn the_kernels_order_decides_who_may_write() {
        let any = u32::MAX;
        // drwxrwx--- owner 10 group 20, user 30 rwx, group 40 r-x, mask rwx.
        let a = Acl::parse(&acl(&[
            (USER_OBJ, 7, any),
            (USER, 7, 30),
            (GROUP_OBJ, 7, any),
            (GROUP, 5, 40),
            (MASK, 7, any),
            (OTHER, 0, any),
        ]))
        .unwrap();
        let file = (10, 20);
        assert_eq!(a.grants(10, &[], file, WRITE), Some(Grant::Owner));
        assert_eq!(a.grants(30, &[], file, WRITE), Some(Grant::User));
        assert_eq!(a.grants(31, &[20], file, WRITE), Some(Grant::Group(20)));
        assert_eq!(a.grants(31, &[40], file, WRITE), None);
        assert_eq!(a.grants(31, &[40], file, READ), Some(Grant::Group(40)));
        assert_eq!(a.grants(31, &[], file, WRITE), None);
        // The mask limits named entries and the group class, not the owner or other.
        let masked = Acl::parse(&acl(&[
            (USER_OBJ, 7, any),
            (USER, 7, 30),
            (GROUP_OBJ, 7, any),
            (MASK, 5, any),
            (OTHER, 2, any),
        ]))
        .unwrap();
        assert_eq!(masked.grants(30, &[], file, WRITE), None);
        assert_eq!(masked.grants(31, &[20], file, WRITE), None);
        assert_eq!(masked.grants(31, &[], file, WRITE), Some(Grant::Other));
        // A named user's entry decides for that uid: its groups are not asked.
        let named = Acl::parse(&acl(&[
            (USER_OBJ, 7, any),
            (USER, 5, 30),
            (GROUP_OBJ, 7, any),
            (MASK, 7, any),
            (OTHER, 0, any),
        ]))
        .unwrap();
        assert_eq!(named.grants(30, &[20], file, WRITE), None);
    }

    #[test]
    fn a_malformed_acl_is_an_error_not_no_acl() {
        assert!(Acl::parse(&[]).is_err());
        assert!(Acl::parse(&3u32.to_le_bytes()).is_err());
        let mut torn = acl(&[(USER_OBJ, 7, 0)]);
        torn.pop();
        assert!(Acl::parse(&torn).is_err());
        assert!(Acl::parse(&acl(&[(0x40, 7, 0)])).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_with_no_acl_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        assert!(read(&dir.path().join("missing")).is_err());
    }
}
