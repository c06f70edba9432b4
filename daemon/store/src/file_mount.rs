//! Where a file store's directory is on its file system, whatever mount reaches it
//! (ARCHITECTURE.md, "The lease store"): the file system's device (`major:minor`) and the
//! directory's path from that file system's root, read from `/proc/self/mountinfo`. A bind
//! mount of the directory, or of a directory above it, is another path to the same place,
//! so a home that knew the store at one path finds it under the other too (one carrying
//! no identity there, after a restore from before it had one, is then `store_regressed`,
//! not a fresh start).

use std::path::{Component, Path, PathBuf};

/// The place `canonical` (a path with symlinks, `.` and `..` resolved) is at, as
/// `file fs=MAJOR:MINOR path=PATH`; `None` when the mount table cannot be read or names no
/// mount above it.
pub fn address(canonical: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    place(&table, canonical)
        .map(|(device, path)| format!("file fs={device} path={}", path.display()))
}

/// The device and the path from its root of `canonical`, by the mount of `table` (the
/// text of a `mountinfo`) whose mount point is its longest leading part: the last one
/// mounted there, which hides the ones before it.
fn place(table: &str, canonical: &Path) -> Option<(String, PathBuf)> {
    let mut best: Option<(usize, &str, PathBuf, PathBuf)> = None;
    for line in table.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(device), Some(root), Some(point)) = (fields.get(2), fields.get(3), fields.get(4))
        else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        let Ok(rest) = canonical.strip_prefix(&point) else {
            continue;
        };
        let depth = point.components().count();
        if best.as_ref().is_none_or(|(d, ..)| depth >= *d) {
            best = Some((
                depth,
                device,
                PathBuf::from(unescape(root)),
                rest.to_path_buf(),
            ));
        }
    }
    let (_, device, root, rest) = best?;
    let path: PathBuf = root
        .join(rest)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    Some((device.to_string(), path))
}

/// A `mountinfo` field with its octal escapes (`\040` for a space, `\011`, `\012`, `\134`)
/// decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let n = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            if let Ok(b) = u8::try_from(n) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    std::ffi::OsString::from_vec(out)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 27 0:35 / /tmp rw - tmpfs tmpfs rw
41 27 8:1 /srv/row-fence/store /mnt/store rw - ext4 /dev/sda1 rw
42 27 8:1 /srv /mnt/srv\\040all rw - ext4 /dev/sda1 rw
43 40 0:35 /a /tmp/b rw - tmpfs tmpfs rw
";

    #[test]
    fn a_bind_mount_is_the_place_it_binds() {
        let at = |p: &str| place(TABLE, Path::new(p)).map(|(d, p)| format!("{d} {}", p.display()));
        let store = Some("8:1 /srv/row-fence/store".to_string());
        assert_eq!(at("/srv/row-fence/store"), store);
        assert_eq!(at("/mnt/store"), store);
        assert_eq!(at("/mnt/srv all/row-fence/store"), store);
        assert_eq!(at("/tmp/b/s"), Some("0:35 /a/s".into()));
        assert_eq!(at("/tmp/a/s"), Some("0:35 /a/s".into()));
        assert_ne!(at("/tmp/srv/row-fence/store"), store, "another file system");
        assert_eq!(place("", Path::new("/x")), None);
    }

    #[test]
    fn a_mount_over_another_hides_it() {
        let table = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:40 / /data rw - tmpfs t rw\n3 1 0:41 / /data rw - tmpfs t rw\n";
        let (device, _) = place(table, Path::new("/data/s")).unwrap();
        assert_eq!(device, "0:41");
    }
}
