//! ssh client configs as `row-fence doctor` reads them for a lane (ARCHITECTURE.md, "Key
//! broker"): the lines that turn connection multiplexing on, in a config and every file it
//! `Include`s, as ssh reads them. A connection kept open while the lane was ALLOWED pushes
//! later with no new signature, and a setting moved into an included file is still ssh's.
//! Keywords are found anywhere, whatever `Host`/`Match` block holds them: a block that
//! applies to the forge is enough, so every one counts.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How deep `Include`s nest before ssh gives up (OpenSSH's `READCONF_MAX_DEPTH`).
const MAX_DEPTH: usize = 16;

/// How much of a file is read (a config, or a file looked at for a private key).
const HEAD_BYTES: u64 = 256 * 1024;

/// The lines of the config at `path` and of every file it includes that turn multiplexing
/// on, each with the file it is in. `base` is where relative `Include` paths start (`~/.ssh`
/// for a user's config, `/etc/ssh` for the system's) and `home` what `~` means. A file that
/// cannot be read has nothing to say.
pub fn multiplexing(path: &Path, base: &Path, home: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut seen = Vec::new();
    walk(path, base, home, 0, &mut seen, &mut found);
    found
}

/// The config at `path` and every file it includes that exists, as [`multiplexing`] reads
/// them: what ssh reads, so what another lane must not be able to write.
pub fn files(path: &Path, base: &Path, home: &Path) -> Vec<PathBuf> {
    let mut seen = Vec::new();
    walk(path, base, home, 0, &mut seen, &mut Vec::new());
    seen.retain(|p| p.is_file());
    seen
}

fn walk(
    path: &Path,
    base: &Path,
    home: &Path,
    depth: usize,
    seen: &mut Vec<PathBuf>,
    found: &mut Vec<(PathBuf, String)>,
) {
    if depth > MAX_DEPTH || seen.iter().any(|p| p == path) {
        return;
    }
    seen.push(path.to_path_buf());
    let Some(text) = head(path) else {
        return;
    };
    for line in text.lines() {
        let Some((keyword, value)) = keyword_value(line) else {
            continue;
        };
        match keyword.as_str() {
            "include" => {
                for pattern in words(value) {
                    for included in expand(&pattern, base, home) {
                        walk(&included, base, home, depth + 1, seen, found);
                    }
                }
            }
            "controlmaster" | "controlpersist" => {
                let value = words(value)
                    .into_iter()
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                if !value.is_empty() && value != "no" {
                    found.push((path.to_path_buf(), line.trim().to_string()));
                }
            }
            _ => {}
        }
    }
}

/// A config line's keyword (lowercase) and the rest: ssh takes keywords in any case,
/// separated from the value by spaces or `=`.
fn keyword_value(line: &str) -> Option<(String, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (keyword, value) = line.split_once(|c: char| c.is_whitespace() || c == '=')?;
    let value = value.trim_start_matches(|c: char| c.is_whitespace() || c == '=');
    Some((keyword.to_ascii_lowercase(), value))
}

/// A line's arguments as ssh splits them (`argv_split` in OpenSSH's `misc.c`): words
/// between spaces or tabs; `"…"` and `'…'` quote (spaces included); a backslash keeps a
/// quote, a backslash, or outside quotes a space, as the next character; an unquoted `#`
/// that starts a word ends the line.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        if chars.peek().is_none_or(|c| *c == '#') {
            return words;
        }
        let mut word = String::new();
        let mut quote = None;
        while let Some(c) = chars.next() {
            match (c, quote) {
                ('\\', _) => match chars.peek() {
                    Some(&next @ ('\'' | '"' | '\\')) => {
                        word.push(next);
                        chars.next();
                    }
                    Some(' ') if quote.is_none() => {
                        word.push(' ');
                        chars.next();
                    }
                    _ => word.push(c),
                },
                (' ' | '\t', None) => break,
                ('"' | '\'', None) => quote = Some(c),
                (c, Some(q)) if c == q => quote = None,
                (c, _) => word.push(c),
            }
        }
        words.push(word);
    }
}

/// An `Include` pattern as a path: `~/` is `home`, `~name/` that user's home (ssh's
/// `tilde_expand_filename`), a relative pattern starts at `base`. `None` for a user that
/// does not exist (ssh reads nothing then either).
fn anchored(pattern: &str, base: &Path, home: &Path) -> Option<PathBuf> {
    if let Some(rest) = pattern.strip_prefix("~/") {
        Some(home.join(rest))
    } else if let Some(named) = pattern.strip_prefix('~') {
        let (name, rest) = named.split_once('/').unwrap_or((named, ""));
        let user = nix::unistd::User::from_name(name).ok().flatten()?;
        Some(user.dir.join(rest))
    } else if Path::new(pattern).is_absolute() {
        Some(PathBuf::from(pattern))
    } else {
        Some(base.join(pattern))
    }
}

/// An `Include` pattern's files ([`anchored`]), sorted as ssh globs them: `*`, `?` and
/// `[…]` match within one path component.
fn expand(pattern: &str, base: &Path, home: &Path) -> Vec<PathBuf> {
    let Some(path) = anchored(pattern, base, home) else {
        return Vec::new();
    };
    let mut matches = vec![PathBuf::from("/")];
    for component in path.components().skip(1) {
        let part = component.as_os_str().to_string_lossy().into_owned();
        let mut next = Vec::new();
        for dir in &matches {
            if !has_wildcard(&part) {
                next.push(dir.join(&part));
                continue;
            }
            let mut names: Vec<String> = fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|name| !name.starts_with('.') && glob_match(&part, name))
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            next.extend(names.into_iter().map(|name| dir.join(name)));
        }
        matches = next;
    }
    matches.into_iter().filter(|p| p.is_file()).collect()
}

fn has_wildcard(part: &str) -> bool {
    part.contains(['*', '?', '['])
}

/// `fnmatch` for one component: `*`, `?`, and `[…]` classes (`!` negates, `a-z` ranges).
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    matches_from(&p, &n)
}

fn matches_from(p: &[char], n: &[char]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some('*') => (0..=n.len()).any(|skip| matches_from(&p[1..], &n[skip..])),
        Some('?') => !n.is_empty() && matches_from(&p[1..], &n[1..]),
        Some('[') => match (class_end(p), n.first()) {
            (Some(end), Some(c)) => {
                in_class(&p[1..end], *c) && matches_from(&p[end + 1..], &n[1..])
            }
            (None, Some(c)) => *c == '[' && matches_from(&p[1..], &n[1..]),
            (_, None) => false,
        },
        Some(c) => n.first() == Some(c) && matches_from(&p[1..], &n[1..]),
    }
}

fn class_end(p: &[char]) -> Option<usize> {
    p.iter().skip(2).position(|c| *c == ']').map(|i| i + 2)
}

fn in_class(class: &[char], c: char) -> bool {
    let (negate, class) = match class.first() {
        Some('!' | '^') => (true, &class[1..]),
        _ => (false, class),
    };
    let mut hit = false;
    let mut i = 0;
    while i < class.len() {
        if i + 2 < class.len() && class[i + 1] == '-' {
            hit |= class[i] <= c && c <= class[i + 2];
            i += 3;
        } else {
            hit |= class[i] == c;
            i += 1;
        }
    }
    hit != negate
}

/// The first 256 KiB of a file as text (invalid UTF-8 replaced); `None` when it cannot be
/// read.
pub fn head(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(HEAD_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplexing_is_found_in_any_case_and_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        fs::write(
            &config,
            "Host *\n  ControlMaster auto\n  controlpersist=10m\n# ControlMaster yes\n  ControlMaster no\n  ControlPath ~/.ssh/%C\nHost x\n  CONTROLPERSIST = yes\n  ControlPersist no # not kept\n  ControlMaster \"no\"\n",
        )
        .unwrap();
        let lines: Vec<String> = multiplexing(&config, dir.path(), dir.path())
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(
            lines,
            vec![
                "ControlMaster auto",
                "controlpersist=10m",
                "CONTROLPERSIST = yes"
            ]
        );
    }

    #[test]
    fn included_files_are_followed_relative_absolute_and_globbed_without_loops() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ssh = home.join(".ssh");
        fs::create_dir_all(ssh.join("conf.d")).unwrap();
        let config = ssh.join("config");
        let absolute = dir.path().join("elsewhere.conf");
        fs::write(
            &config,
            format!(
                "Include conf.d/*.conf\nHost forge\n  Include \"{}\" ~/.ssh/tilde # a comment\nInclude config ~nosuchuser4242/x\nInclude \"conf.d/with space.cfg\" conf.d/back\\ slash.cfg\n",
                absolute.display(),
            ),
        )
        .unwrap();
        fs::write(ssh.join("conf.d/with space.cfg"), "ControlMaster ask\n").unwrap();
        fs::write(ssh.join("conf.d/back slash.cfg"), "ControlPersist 9\n").unwrap();
        fs::write(ssh.join("conf.d/10-mux.conf"), "ControlPersist 4h\n").unwrap();
        fs::write(ssh.join("conf.d/20-other.txt"), "ControlMaster yes\n").unwrap();
        fs::write(ssh.join("conf.d/30-[x].conf"), "Include deeper\n").unwrap();
        fs::write(ssh.join("deeper"), "ControlMaster=autoask\n").unwrap();
        fs::write(&absolute, "ControlMaster yes\n").unwrap();
        fs::write(ssh.join("tilde"), "ControlPersist=yes\n").unwrap();
        let found = multiplexing(&config, &ssh, &home);
        let lines: Vec<(String, &str)> = found
            .iter()
            .map(|(p, l)| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    l.as_str(),
                )
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                ("10-mux.conf".to_string(), "ControlPersist 4h"),
                ("deeper".to_string(), "ControlMaster=autoask"),
                ("elsewhere.conf".to_string(), "ControlMaster yes"),
                ("tilde".to_string(), "ControlPersist=yes"),
                ("with space.cfg".to_string(), "ControlMaster ask"),
                ("back slash.cfg".to_string(), "ControlPersist 9"),
            ]
        );
        assert!(multiplexing(&dir.path().join("missing"), &ssh, &home).is_empty());
    }

    #[test]
    fn include_paths_anchor_as_ssh_anchors_them() {
        let (base, home) = (Path::new("/b"), Path::new("/h"));
        let root = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(0))
            .unwrap()
            .unwrap();
        let at = |p: &str| anchored(p, base, home);
        assert_eq!(at("x.conf"), Some(PathBuf::from("/b/x.conf")));
        assert_eq!(at("/etc/x"), Some(PathBuf::from("/etc/x")));
        assert_eq!(at("~/x"), Some(PathBuf::from("/h/x")));
        assert_eq!(
            at(&format!("~{}/.ssh/x", root.name)),
            Some(root.dir.join(".ssh/x"))
        );
        assert_eq!(at("~nosuchuser4242/x"), None);
    }

    #[test]
    fn a_line_splits_into_words_as_ssh_splits_it() {
        assert_eq!(words("a  b\tc"), ["a", "b", "c"]);
        assert_eq!(
            words(r#""a b" 'c d' e\ f g\"h"#),
            ["a b", "c d", "e f", "g\"h"]
        );
        assert_eq!(words("a # b"), ["a"]);
        assert_eq!(words("a#b"), ["a#b"]);
        assert_eq!(words(r"a\x"), [r"a\x"]);
        assert!(words("  ").is_empty());
    }

    #[test]
    fn globs_match_one_component_as_fnmatch_does() {
        assert!(glob_match("*.conf", "10-mux.conf"));
        assert!(!glob_match("*.conf", "10-mux.txt"));
        assert!(glob_match("?0-*", "10-x"));
        assert!(glob_match("[0-9]*", "5a"));
        assert!(!glob_match("[!0-9]*", "5a"));
        assert!(glob_match("a[", "a["));
    }
}
