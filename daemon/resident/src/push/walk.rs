//! The fast-forward proof (ARCHITECTURE.md, "Push proxy"): a ref update is a fast-forward
//! only when the daemon can walk from its new commit to its old one through commits in
//! the lane's pack (parents read from inflated commit objects, deltas resolved against
//! bases in the pack). A parent outside the pack, a delta whose base is not in it, a
//! commit too large: the walk cannot go on there, and an update whose walk never reaches
//! its old commit is not a fast-forward (fail closed; the refusal says it could not be
//! proven). The spooled pack is read from disk; only commits are kept in memory.

use super::spool::{HEADER_BYTES, Hasher, check_header};
use flate2::bufread::ZlibDecoder;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// A commit object larger than this is not read (its parents are then unknown).
pub const MAX_COMMIT_BYTES: u64 = 1024 * 1024;

/// At most this many objects in a pack are indexed.
pub const MAX_OBJECTS: u32 = 10_000_000;

/// At most this many commits are walked per update.
pub const MAX_WALK: usize = 1_000_000;

/// A delta chain longer than this is not resolved.
const MAX_CHAIN: usize = 64;

/// Why the pack could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalkError {
    /// The pack's bytes are not a pack.
    #[error("the pack cannot be read: {0}")]
    Corrupt(String),
    /// Reading the spooled file.
    #[error("reading the spooled pack: {0}")]
    Io(#[from] std::io::Error),
}

/// Where a delta's base is.
#[derive(Clone, Debug)]
enum Base {
    /// At this offset in the pack.
    Offset(u64),
    /// The object with this id (raw bytes).
    Id(Vec<u8>),
}

/// One entry of the pack.
#[derive(Clone, Debug)]
struct Entry {
    /// 1 commit, 2 tree, 3 blob, 4 tag, 6 and 7 deltas.
    kind: u8,
    /// Where its zlib data starts.
    data: u64,
    /// Its inflated size.
    size: u64,
    /// A delta's base.
    base: Option<Base>,
}

/// The commits in a pack: id (hex) → parents (hex).
#[derive(Debug, Default)]
pub struct Commits {
    parents: HashMap<String, Vec<String>>,
}

impl Commits {
    /// Reads the commits of the pack at `path` for `format` (`sha1` or `sha256`).
    pub fn read(path: &Path, format: &str) -> Result<Commits, WalkError> {
        let file = std::fs::File::open(path)?;
        let mut r = BufReader::new(file);
        let mut header = [0u8; HEADER_BYTES];
        r.read_exact(&mut header)?;
        let count = check_header(&header).map_err(|e| WalkError::Corrupt(e.to_string()))?;
        if count > MAX_OBJECTS {
            return Err(WalkError::Corrupt(format!(
                "{count} objects is more than {MAX_OBJECTS}"
            )));
        }
        let id_len = Hasher::for_format(format).digest_len();
        let mut entries: HashMap<u64, Entry> = HashMap::new();
        let mut ids: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut commits = Commits::default();
        for _ in 0..count {
            let offset = r.stream_position()?;
            let (kind, size) = entry_header(&mut r)?;
            let base = match kind {
                6 => Some(Base::Offset(
                    offset
                        .checked_sub(ofs_distance(&mut r)?)
                        .ok_or_else(|| WalkError::Corrupt("a delta base before the pack".into()))?,
                )),
                7 => {
                    let mut id = vec![0u8; id_len];
                    r.read_exact(&mut id)?;
                    Some(Base::Id(id))
                }
                1..=4 => None,
                other => {
                    return Err(WalkError::Corrupt(format!(
                        "object type {other} at offset {offset}"
                    )));
                }
            };
            let data = r.stream_position()?;
            if kind == 1 && size <= MAX_COMMIT_BYTES {
                let body = inflate(&mut r, size)?;
                let id = object_id(format, "commit", &body);
                commits.note(&id, &body);
                ids.insert(id, offset);
            } else if base.is_none() {
                let id = hash_inflated(&mut r, format, kind, size)?;
                ids.insert(id, offset);
            } else {
                skip_inflated(&mut r, size)?;
            }
            entries.insert(
                offset,
                Entry {
                    kind,
                    data,
                    size,
                    base,
                },
            );
        }
        commits.resolve_deltas(&mut r, format, &entries, &mut ids)?;
        Ok(commits)
    }

    /// Records a commit's parents from its body.
    fn note(&mut self, id: &[u8], body: &[u8]) {
        // A commit whose parents cannot be read as git reads them leads nowhere.
        let parents = parents(body, id.len() * 2).unwrap_or_default();
        self.parents.insert(hex(id), parents);
    }

    /// Resolves the deltas whose chain ends at a commit, until none more resolves.
    fn resolve_deltas(
        &mut self,
        r: &mut BufReader<std::fs::File>,
        format: &str,
        entries: &HashMap<u64, Entry>,
        ids: &mut HashMap<Vec<u8>, u64>,
    ) -> Result<(), WalkError> {
        let mut pending: Vec<u64> = entries
            .iter()
            .filter(|(_, e)| e.base.is_some())
            .map(|(o, _)| *o)
            .collect();
        pending.sort_unstable();
        loop {
            let mut progressed = false;
            let mut still = Vec::new();
            for offset in pending {
                match content(r, entries, ids, offset, 0)? {
                    Some((1, body)) => {
                        let id = object_id(format, "commit", &body);
                        self.note(&id, &body);
                        ids.insert(id, offset);
                        progressed = true;
                    }
                    // Resolved, and not a commit: no parent to read.
                    Some(_) => progressed = true,
                    None => still.push(offset),
                }
            }
            pending = still;
            if !progressed || pending.is_empty() {
                return Ok(());
            }
        }
    }

    /// True when the walk from `new` through the pack's commits reaches `old`.
    pub fn descends(&self, new: &str, old: &str) -> bool {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue: VecDeque<&str> = VecDeque::from([new]);
        while let Some(at) = queue.pop_front() {
            if at == old {
                return true;
            }
            if seen.len() >= MAX_WALK || !seen.insert(at) {
                continue;
            }
            if let Some(parents) = self.parents.get(at) {
                queue.extend(parents.iter().map(String::as_str));
            }
        }
        false
    }

    /// How many commits the pack holds (resolved).
    pub fn len(&self) -> usize {
        self.parents.len()
    }

    /// True when the pack holds no commit the walk could read.
    pub fn is_empty(&self) -> bool {
        self.parents.is_empty()
    }
}

/// An entry's type and inflated size.
fn entry_header(r: &mut impl Read) -> Result<(u8, u64), WalkError> {
    let mut c = byte(r)?;
    let kind = (c >> 4) & 7;
    let mut size = u64::from(c & 15);
    let mut shift = 4;
    while c & 0x80 != 0 {
        c = byte(r)?;
        if shift > 57 {
            return Err(WalkError::Corrupt("an object size too large".into()));
        }
        size |= u64::from(c & 0x7f) << shift;
        shift += 7;
    }
    Ok((kind, size))
}

/// An `ofs-delta`'s distance back to its base.
fn ofs_distance(r: &mut impl Read) -> Result<u64, WalkError> {
    let mut c = byte(r)?;
    let mut ofs = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        c = byte(r)?;
        ofs = ofs
            .checked_add(1)
            .and_then(|o| o.checked_mul(128))
            .ok_or_else(|| WalkError::Corrupt("a delta offset too large".into()))?
            + u64::from(c & 0x7f);
    }
    Ok(ofs)
}

fn byte(r: &mut impl Read) -> Result<u8, WalkError> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

/// Inflates one zlib stream of `size` bytes into memory, reading at most one byte more
/// than its header says: a stream that inflates further is refused before it is held.
fn inflate(r: &mut impl BufRead, size: u64) -> Result<Vec<u8>, WalkError> {
    let mut out = Vec::with_capacity(size.min(MAX_COMMIT_BYTES) as usize);
    let mut z = ZlibDecoder::new(r).take(size.saturating_add(1));
    z.read_to_end(&mut out)?;
    if out.len() as u64 != size {
        return Err(WalkError::Corrupt(format!(
            "an object inflates to {} bytes, its header says {size}",
            out.len()
        )));
    }
    Ok(out)
}

/// Inflates one zlib stream, hashing it as an object of `kind`; returns its id.
fn hash_inflated(
    r: &mut impl BufRead,
    format: &str,
    kind: u8,
    size: u64,
) -> Result<Vec<u8>, WalkError> {
    let name = match kind {
        1 => "commit",
        2 => "tree",
        3 => "blob",
        _ => "tag",
    };
    let mut hasher = Hasher::for_format(format);
    hasher.update(format!("{name} {size}\0").as_bytes());
    let mut z = ZlibDecoder::new(r).take(size.saturating_add(1));
    let mut buf = [0u8; 16 * 1024];
    let mut seen: u64 = 0;
    loop {
        let n = z.read(&mut buf)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        hasher.update(&buf[..n]);
    }
    if seen != size {
        return Err(WalkError::Corrupt(format!(
            "an object inflates to {seen} bytes, its header says {size}"
        )));
    }
    Ok(hasher.finish())
}

/// Inflates one zlib stream to nowhere (a delta, read later if needed).
fn skip_inflated(r: &mut impl BufRead, size: u64) -> Result<(), WalkError> {
    let mut z = ZlibDecoder::new(r).take(size.saturating_add(1));
    let seen = std::io::copy(&mut z, &mut std::io::sink())?;
    if seen != size {
        return Err(WalkError::Corrupt(format!(
            "a delta inflates to {seen} bytes, its header says {size}"
        )));
    }
    Ok(())
}

/// The type and content of the entry at `offset`, deltas applied; `None` when its chain
/// leaves the pack, runs too long, or ends at no commit (only commits are resolved).
fn content(
    r: &mut BufReader<std::fs::File>,
    entries: &HashMap<u64, Entry>,
    ids: &HashMap<Vec<u8>, u64>,
    offset: u64,
    depth: usize,
) -> Result<Option<(u8, Vec<u8>)>, WalkError> {
    let Some(entry) = entries.get(&offset) else {
        return Ok(None);
    };
    if depth > MAX_CHAIN {
        return Ok(None);
    }
    let base_offset = match &entry.base {
        None => {
            if entry.kind != 1 || entry.size > MAX_COMMIT_BYTES {
                // Not a commit: its type is what the caller needs.
                return Ok(Some((entry.kind, Vec::new())));
            }
            r.seek(SeekFrom::Start(entry.data))?;
            return Ok(Some((1, inflate(r, entry.size)?)));
        }
        Some(Base::Offset(o)) => *o,
        Some(Base::Id(id)) => match ids.get(id) {
            Some(o) => *o,
            None => return Ok(None),
        },
    };
    let Some((kind, base)) = content(r, entries, ids, base_offset, depth + 1)? else {
        return Ok(None);
    };
    if kind != 1 {
        return Ok(Some((kind, Vec::new())));
    }
    if entry.size > MAX_COMMIT_BYTES * 2 {
        return Ok(None);
    }
    r.seek(SeekFrom::Start(entry.data))?;
    let delta = inflate(r, entry.size)?;
    Ok(apply_delta(&base, &delta).map(|body| (1, body)))
}

/// Applies a git delta to `base`; `None` when the delta is malformed or makes a result
/// larger than a commit may be.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0usize;
    let varint = |at: &mut usize| -> Option<u64> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let c = *delta.get(*at)?;
            *at += 1;
            value |= u64::from(c & 0x7f) << shift;
            if c & 0x80 == 0 {
                return Some(value);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    };
    let source = varint(&mut at)?;
    let target = varint(&mut at)?;
    if source != base.len() as u64 || target > MAX_COMMIT_BYTES {
        return None;
    }
    let mut out = Vec::with_capacity(target as usize);
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let mut offset = 0usize;
            let mut size = 0usize;
            for i in 0..4 {
                if op & (1 << i) != 0 {
                    offset |= usize::from(*delta.get(at)?) << (8 * i);
                    at += 1;
                }
            }
            for i in 0..3 {
                if op & (0x10 << i) != 0 {
                    size |= usize::from(*delta.get(at)?) << (8 * i);
                    at += 1;
                }
            }
            if size == 0 {
                size = 0x10000;
            }
            out.extend_from_slice(base.get(offset..offset.checked_add(size)?)?);
        } else if op != 0 {
            let n = usize::from(op);
            out.extend_from_slice(delta.get(at..at + n)?);
            at += n;
        } else {
            return None;
        }
        if out.len() as u64 > target {
            return None;
        }
    }
    (out.len() as u64 == target).then_some(out)
}

/// A commit's parents as git reads them (`parse_commit_buffer`): the body starts with
/// `tree <id>\n`, and its parents are the `parent <id>\n` lines right after it, each id of
/// the repository's length (`hex_len`: 40 or 64) and each line ended by its newline. A
/// parent line without its newline, or a `parent` line anywhere else in the header, is no
/// parent to git, yet would be one to a looser reader: such a commit, or one whose body
/// does not start so, proves nothing (`None`), so no fast-forward is proven through it.
fn parents(body: &[u8], hex_len: usize) -> Option<Vec<String>> {
    let id_then_newline = |line: &[u8]| -> Option<String> {
        let id = line.get(..hex_len)?;
        (id.iter().all(u8::is_ascii_hexdigit) && line.get(hex_len) == Some(&b'\n'))
            .then(|| String::from_utf8_lossy(id).to_ascii_lowercase())
    };
    // git reads a tree or parent line only when at least one byte follows it; one that
    // ends the body is "bad parents" to git.
    let after_tree = body.strip_prefix(b"tree ")?;
    id_then_newline(after_tree)?;
    let mut rest = after_tree.get(hex_len + 1..).filter(|r| !r.is_empty())?;
    let mut parents = Vec::new();
    while let Some(line) = rest.strip_prefix(b"parent ") {
        parents.push(id_then_newline(line)?);
        rest = line.get(hex_len + 1..).filter(|r| !r.is_empty())?;
    }
    let header = rest
        .split(|&b| b == b'\n')
        .take_while(|line| !line.is_empty());
    if header.clone().any(|l| l.starts_with(b"parent ")) {
        return None;
    }
    Some(parents)
}

/// An object's id: the hash of `<kind> <len>\0<body>`.
fn object_id(format: &str, kind: &str, body: &[u8]) -> Vec<u8> {
    let mut h = Hasher::for_format(format);
    h.update(format!("{kind} {}\0", body.len()).as_bytes());
    h.update(body);
    h.finish()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_delta_copies_and_inserts() {
        let base = b"hello world";
        // source 11, target 10: copy 6 bytes from 0 ("hello "), insert "tree".
        let delta = [11u8, 10, 0x80 | 0x10, 6, 4, b't', b'r', b'e', b'e'];
        assert_eq!(apply_delta(base, &delta).unwrap(), b"hello tree".to_vec());
        // A copy past the base's end, a wrong source size, a zero op: refused.
        assert!(apply_delta(base, &[11, 5, 0x80 | 0x01 | 0x10, 10, 5]).is_none());
        assert!(apply_delta(base, &[3, 1, 1, b'x']).is_none());
        assert!(apply_delta(base, &[11, 1, 0]).is_none());
    }

    #[test]
    fn parents_are_read_as_git_reads_them() {
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let body = format!("tree {c}\nparent {a}\nparent {b}\nauthor x\n\nparent {c}\n");
        assert_eq!(
            parents(body.as_bytes(), 40),
            Some(vec![a.clone(), b.clone()])
        );
        let root = format!("tree {c}\nauthor x\n\nbody\n");
        assert_eq!(parents(root.as_bytes(), 40), Some(Vec::new()));
        let upper = format!("tree {c}\nparent {}\n\nmsg\n", a.to_uppercase());
        assert_eq!(parents(upper.as_bytes(), 40), Some(vec![a.clone()]));
        // What git does not read as a parent proves nothing: a `parent` line after another
        // header line, a last line without its newline (git sees a root commit there), an
        // id of the other format's length, a body not starting with its tree.
        for bad in [
            format!("tree {c}\nauthor x\ncommitter x\nparent {a}\n\nmsg\n"),
            format!("tree {c}\nparent {a}\nauthor x\nparent {b}\n\nmsg\n"),
            format!("tree {c}\nparent {a}"),
            format!("tree {c}\nparent {a}\n"),
            format!("tree {c}\n"),
            format!("tree {c}\nparent {a}\r\n\nmsg\n"),
            format!("tree {c}"),
            format!("parent {a}\ntree {c}\n\nmsg\n"),
            format!("tree {c}\nparent {}\n\nmsg\n", &a[..39]),
            format!("tree {c}\nparent {}zz\n\nmsg\n", &a[..38]),
            format!("tree {c}\nparent {a}{a}\n\nmsg\n"),
        ] {
            assert_eq!(parents(bad.as_bytes(), 40), None, "{bad:?}");
        }
        let long = "d".repeat(64);
        let sha256 = format!("tree {long}\nparent {long}\n\nmsg\n");
        assert_eq!(parents(sha256.as_bytes(), 64), Some(vec![long.clone()]));
        assert_eq!(parents(sha256.as_bytes(), 40), None);
    }

    #[test]
    fn an_object_that_inflates_past_its_header_is_refused_before_it_is_held() {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![0u8; 8 * 1024 * 1024]).unwrap();
        let stream = z.finish().unwrap();
        let mut r = std::io::BufReader::new(&stream[..]);
        let err = inflate(&mut r, 100).unwrap_err();
        assert!(err.to_string().contains("its header says 100"), "{err}");
    }

    #[test]
    fn the_walk_reaches_old_only_through_the_pack() {
        let mut c = Commits::default();
        c.parents.insert("n".into(), vec!["m".into()]);
        c.parents.insert("m".into(), vec!["x".into(), "o".into()]);
        assert!(c.descends("n", "o"));
        assert!(!c.descends("n", "z"));
        assert!(!c.descends("q", "o"));
    }

    /// A real repository's commits and their pack, made with git.
    fn repo_with_commits(n: usize) -> (tempfile::TempDir, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(dir.path())
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        git(&["init", "-q"]);
        let mut commits = Vec::new();
        for i in 0..n {
            std::fs::write(
                dir.path().join("f.txt"),
                format!("line\n{}", "x\n".repeat(i * 50)),
            )
            .unwrap();
            git(&["add", "f.txt"]);
            git(&[
                "commit",
                "-q",
                "-m",
                &format!("commit number {i} with the same long message text"),
            ]);
            commits.push(git(&["rev-parse", "HEAD"]));
        }
        (dir, commits)
    }

    pub(crate) fn pack_of(dir: &Path, revs: &str) -> Vec<u8> {
        use std::io::Write;
        let mut child = std::process::Command::new("git")
            .current_dir(dir)
            .args([
                "pack-objects",
                "--stdout",
                "--revs",
                "-q",
                "--window=50",
                "--depth=50",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(revs.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        out.stdout
    }

    #[test]
    fn a_real_packs_commits_prove_a_fast_forward_and_nothing_else() {
        let (dir, c) = repo_with_commits(6);
        let pack = pack_of(dir.path(), &format!("{}\n^{}\n", c[5], c[1]));
        let path = dir.path().join("p.pack");
        std::fs::write(&path, &pack).unwrap();
        let commits = Commits::read(&path, "sha1").unwrap();
        assert_eq!(commits.len(), 4, "c2..c5 are in the pack");
        assert!(commits.descends(&c[5], &c[1]));
        assert!(commits.descends(&c[5], &c[3]));
        assert!(!commits.descends(&c[5], &c[0]), "c0 is beyond the pack");
        assert!(!commits.descends(&c[3], &c[5]));
        assert!(!commits.descends(&c[5], &"a".repeat(40)));
        // A pack cut short is an error, never a proof.
        std::fs::write(&path, &pack[..pack.len() / 2]).unwrap();
        assert!(Commits::read(&path, "sha1").is_err());
    }
}
