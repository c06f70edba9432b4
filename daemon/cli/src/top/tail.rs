//! Following an append-only JSON-lines file (the refusal ledger, the quarantine's denial
//! log) the way `tail -f` does: each refresh reads only the bytes appended since the last,
//! so a console left open on a large ledger costs a `stat` per refresh when nothing
//! happened (ARCHITECTURE.md, "The operator's console"). A file replaced (rotated) or cut
//! shorter is read again from its start.

use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// At most this many bytes are read in one refresh (4 MiB): a ledger of 8 MiB is read in
/// two refreshes rather than stalling one.
const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;

/// One followed file: the newest `keep` lines that parse as `T`, and the count of every
/// line since the file began.
#[derive(Debug)]
pub struct Tail<T> {
    path: PathBuf,
    /// The file read (device, inode): another one at the path is a rotation.
    file: Option<(u64, u64)>,
    /// Bytes consumed so far.
    offset: u64,
    /// The last line's bytes while its newline has not been written yet.
    partial: Vec<u8>,
    /// The newest lines read, oldest first.
    recent: VecDeque<T>,
    /// How many lines are kept.
    keep: usize,
    /// Lines since the file began (those that do not parse included).
    lines: u64,
}

impl<T: DeserializeOwned> Tail<T> {
    /// Follows `path`, keeping its newest `keep` lines.
    pub fn new(path: PathBuf, keep: usize) -> Tail<T> {
        Tail {
            path,
            file: None,
            offset: 0,
            partial: Vec::new(),
            recent: VecDeque::new(),
            keep,
            lines: 0,
        }
    }

    /// The path followed.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Reads what was appended since the last call. A missing file is an empty one.
    pub fn refresh(&mut self) -> io::Result<()> {
        let meta = match fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.restart(None);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let id = (meta.dev(), meta.ino());
        if self.file != Some(id) || meta.len() < self.offset {
            self.restart(Some(id));
        }
        if meta.len() == self.offset {
            return Ok(());
        }
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        self.take_lines(bytes);
        Ok(())
    }

    fn restart(&mut self, file: Option<(u64, u64)>) {
        self.file = file;
        self.offset = 0;
        self.partial.clear();
        self.recent.clear();
        self.lines = 0;
    }

    fn take_lines(&mut self, bytes: Vec<u8>) {
        let mut text = std::mem::take(&mut self.partial);
        text.extend_from_slice(&bytes);
        let Some(last_newline) = text.iter().rposition(|b| *b == b'\n') else {
            self.partial = text;
            return;
        };
        self.partial = text[last_newline + 1..].to_vec();
        let whole = &text[..last_newline];
        let all: Vec<&[u8]> = whole.split(|b| *b == b'\n').collect();
        self.lines += all.len() as u64;
        // Only the newest `keep` are parsed: a first read of a large file parses no more
        // than later ones.
        for line in &all[all.len().saturating_sub(self.keep)..] {
            if let Ok(value) = serde_json::from_slice(line) {
                self.recent.push_back(value);
            }
        }
        while self.recent.len() > self.keep {
            self.recent.pop_front();
        }
    }

    /// The newest lines, newest first.
    pub fn newest_first(&self) -> impl Iterator<Item = &T> {
        self.recent.iter().rev()
    }

    /// Lines since the file began.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn appended_lines_are_read_once_a_partial_line_waits_and_a_rotation_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut tail: Tail<u32> = Tail::new(path.clone(), 2);
        tail.refresh().unwrap();
        assert_eq!(tail.lines(), 0);
        let mut file = fs::File::create(&path).unwrap();
        file.write_all(b"1\n2\nnot json\n3").unwrap();
        tail.refresh().unwrap();
        assert_eq!(tail.newest_first().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(tail.lines(), 3);
        file.write_all(b"\n4\n").unwrap();
        tail.refresh().unwrap();
        assert_eq!(tail.newest_first().copied().collect::<Vec<_>>(), vec![4, 3]);
        assert_eq!(tail.lines(), 5);
        // Rotated: a new file at the path is read from its start.
        fs::rename(&path, dir.path().join("log.jsonl.1")).unwrap();
        fs::write(&path, b"9\n").unwrap();
        tail.refresh().unwrap();
        assert_eq!(tail.newest_first().copied().collect::<Vec<_>>(), vec![9]);
        assert_eq!(tail.lines(), 1);
        fs::remove_file(&path).unwrap();
        tail.refresh().unwrap();
        assert_eq!(tail.lines(), 0);
    }
}
