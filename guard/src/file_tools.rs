//! The harnesses' built-in file tools (ARCHITECTURE.md, "Quarantine"): each one's name
//! (Claude Code's; Gemini CLI's and Cursor's are renamed to them by [`crate::harness`]),
//! whether it reads or writes, and every member of its input with what it is, so the
//! paths a call names can be read out of it. Codex's `apply_patch` names its files in the
//! patch. Both the quarantine ([`crate::quarantine::tools`]) and the rule for writes
//! outside it ([`crate::file_writes`]) read calls through this table.

use std::path::{Component, Path, PathBuf};

/// What a file tool does with the paths it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// It reads them.
    Read,
    /// It writes them (creates, replaces, edits).
    Write,
}

/// What one member of a file tool's input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// A path the tool reads or writes (a string, or an array of strings).
    Path,
    /// Glob patterns whose matches the tool reads, taken under the tool's path (a string
    /// or an array of strings).
    Pattern,
    /// A glob filter applied to the files under the tool's path (Grep's `glob`): it adds
    /// no root, but one naming `.git` picks git's own files, and is judged as a path
    /// naming it would be.
    Filter,
    /// Anything else the tool takes: contents, regexes, counts.
    Data,
}

use Member::{Data, Filter, Path as P, Pattern};

/// One built-in file tool.
pub struct FileTool {
    /// Its name (Claude Code's spelling).
    pub name: &'static str,
    /// Whether it reads or writes.
    pub access: Access,
    /// Every member of its input, with what it is. A member not listed is one the guard
    /// does not know: where the guard must see every path (quarantine), it denies.
    pub members: &'static [(&'static str, Member)],
}

/// The built-in file tools. Members spelled by more than one harness are listed once
/// per tool (Gemini CLI's `absolute_path`/`dir_path`/`include`, Cursor's `path` and
/// `contents`).
pub const FILE_TOOLS: &[FileTool] = &[
    FileTool {
        name: "Read",
        access: Access::Read,
        members: &[
            ("file_path", P),
            ("absolute_path", P),
            ("path", P),
            ("offset", Data),
            ("limit", Data),
            ("pages", Data),
            ("start_line", Data),
            ("end_line", Data),
        ],
    },
    FileTool {
        name: "read_many_files",
        access: Access::Read,
        members: &[
            ("paths", Pattern),
            ("include", Pattern),
            ("exclude", Data),
            ("recursive", Data),
            ("useDefaultExcludes", Data),
            ("respect_git_ignore", Data),
            ("file_filtering_options", Data),
        ],
    },
    FileTool {
        name: "Glob",
        access: Access::Read,
        members: &[
            ("pattern", Pattern),
            ("path", P),
            ("dir_path", P),
            ("case_sensitive", Data),
            ("respect_git_ignore", Data),
            ("respect_gemini_ignore", Data),
            ("file_filtering_options", Data),
        ],
    },
    FileTool {
        name: "Grep",
        access: Access::Read,
        members: &[
            ("pattern", Data),
            ("path", P),
            ("dir_path", P),
            ("glob", Filter),
            ("include", Filter),
            ("include_pattern", Filter),
            ("exclude_pattern", Data),
            ("names_only", Data),
            ("max_matches_per_file", Data),
            ("total_max_matches", Data),
            ("fixed_strings", Data),
            ("context", Data),
            ("after", Data),
            ("before", Data),
            ("no_ignore", Data),
            ("type", Data),
            ("output_mode", Data),
            ("-i", Data),
            ("-n", Data),
            ("-A", Data),
            ("-B", Data),
            ("-C", Data),
            ("multiline", Data),
            ("head_limit", Data),
            ("offset", Data),
        ],
    },
    FileTool {
        name: "LS",
        access: Access::Read,
        members: &[
            ("path", P),
            ("dir_path", P),
            ("ignore", Data),
            ("file_filtering_options", Data),
        ],
    },
    FileTool {
        name: "NotebookRead",
        access: Access::Read,
        members: &[("notebook_path", P), ("cell_id", Data)],
    },
    FileTool {
        name: "Write",
        access: Access::Write,
        members: &[
            ("file_path", P),
            ("absolute_path", P),
            ("path", P),
            ("content", Data),
            ("contents", Data),
        ],
    },
    FileTool {
        name: "Edit",
        access: Access::Write,
        members: &[
            ("file_path", P),
            ("absolute_path", P),
            ("path", P),
            ("old_string", Data),
            ("new_string", Data),
            ("replace_all", Data),
            ("expected_replacements", Data),
            ("allow_multiple", Data),
            ("instruction", Data),
        ],
    },
    FileTool {
        name: "MultiEdit",
        access: Access::Write,
        members: &[("file_path", P), ("edits", Data)],
    },
    // Cursor's `preToolUse` names its edits `StrReplace` and `TabWrite`, and removes a
    // file with `Delete` (removing is writing: a `.git` file or a binding gone changes
    // what runs next).
    FileTool {
        name: "StrReplace",
        access: Access::Write,
        members: &[
            ("path", P),
            ("file_path", P),
            ("old_string", Data),
            ("new_string", Data),
            ("replace_all", Data),
        ],
    },
    FileTool {
        name: "TabWrite",
        access: Access::Write,
        members: &[
            ("path", P),
            ("file_path", P),
            ("contents", Data),
            ("content", Data),
        ],
    },
    FileTool {
        name: "Delete",
        access: Access::Write,
        members: &[("path", P), ("file_path", P)],
    },
    FileTool {
        name: "NotebookEdit",
        access: Access::Write,
        members: &[
            ("notebook_path", P),
            ("cell_id", Data),
            ("new_source", Data),
            ("cell_type", Data),
            ("edit_mode", Data),
        ],
    },
];

/// Codex's file edits: one tool whose input is a patch naming every file it adds,
/// updates, deletes or moves to.
pub const APPLY_PATCH: &str = "apply_patch";

/// The file tool called `name`, if it is one.
pub fn find(name: &str) -> Option<&'static FileTool> {
    FILE_TOOLS.iter().find(|t| t.name == name)
}

/// True when the tool called `name` writes files.
pub fn writes(name: &str) -> bool {
    name == APPLY_PATCH || find(name).is_some_and(|t| t.access == Access::Write)
}

/// The paths and patterns one call names, each absolute (relative ones taken from the
/// directory the harness takes them from).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// Every path member's paths.
    pub paths: Vec<PathBuf>,
    /// Every glob pattern's literal prefix (the directory every match lies under), taken
    /// under the tool's last path (or the base).
    pub pattern_roots: Vec<PathBuf>,
    /// Every glob pattern, its braces expanded, with the directory it is taken under:
    /// what a wildcard matches is only known by walking it
    /// ([`crate::quarantine::tools`] does).
    pub patterns: Vec<(PathBuf, String)>,
    /// Outside `strict` reading: the strings of members the table does not list, each
    /// read as a path too (a harness release that names its path in a member the guard
    /// does not know still has that path judged where writes are closed).
    pub unknown: Vec<PathBuf>,
}

/// Why a call's paths cannot be read out of it (its Display is the denial's sentence).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// The tool's input is not a JSON object.
    #[error("the input of `{tool}` is not an object")]
    NotAnObject {
        /// The tool's name.
        tool: &'static str,
    },
    /// Strict reading met a member the tool's table does not list.
    #[error("`{tool}` with the member `{member}` is not one the guard reads")]
    UnknownMember {
        /// The tool's name.
        tool: &'static str,
        /// The member.
        member: String,
    },
    /// A path member holds something other than a string or an array of them.
    #[error("the tool's {member} is not a string")]
    NotAString {
        /// The member.
        member: String,
    },
    /// A filter that may pick files in git's own directory.
    #[error("the filter `{filter}` may pick files in git's own directory")]
    FilterMayPickGit {
        /// The filter as given.
        filter: String,
    },
    /// A `~` path while `$HOME` cannot place it.
    #[error(
        "`{text}` starts with `~`, which a harness reads as $HOME, and $HOME is not an absolute path here"
    )]
    TildeWithoutHome {
        /// The path as given.
        text: String,
    },
    /// An `apply_patch` call whose patch cannot be found in its input.
    #[error("the patch is not readable")]
    PatchUnreadable,
    /// An `apply_patch` patch naming no file.
    #[error("the patch names no file")]
    PatchNamesNoFile,
    /// A pattern one of whose alternatives climbs out with `..`.
    #[error("the pattern `{pattern}` climbs out with `..`")]
    PatternClimbs {
        /// The pattern as given.
        pattern: String,
    },
    /// A pattern naming git's own directory.
    #[error("the pattern `{pattern}` names git's own directory")]
    PatternNamesGit {
        /// The pattern as given.
        pattern: String,
    },
    /// A pattern whose braces expand past [`MAX_BRACE_EXPANSIONS`].
    #[error("the pattern `{pattern}` expands to more than {MAX_BRACE_EXPANSIONS} patterns")]
    TooManyExpansions {
        /// The pattern as given.
        pattern: String,
    },
}

/// The paths and patterns a call of `tool` names, relative ones from `base`. `strict`:
/// a member the table does not list is an error (the quarantine must see every path);
/// otherwise it is skipped.
pub fn named(
    tool: &FileTool,
    input: &serde_json::Value,
    base: &Path,
    strict: bool,
) -> Result<Named, Unread> {
    let empty = serde_json::Map::new();
    let fields = match input {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => &empty,
        _ => return Err(Unread::NotAnObject { tool: tool.name }),
    };
    let mut named = Named::default();
    let mut under = base.to_path_buf();
    let mut patterns = Vec::new();
    for (key, value) in fields {
        let Some(&(_, kind)) = tool.members.iter().find(|(m, _)| m == key) else {
            if strict {
                return Err(Unread::UnknownMember {
                    tool: tool.name,
                    member: key.clone(),
                });
            }
            for text in strings(value).unwrap_or_default() {
                // A text no harness could open as a path is no path (content, a mode).
                if !text.is_empty() && !text.contains('\0') {
                    named
                        .unknown
                        .extend(readings(text, base).unwrap_or_default());
                }
            }
            continue;
        };
        if kind == Data || value.is_null() {
            continue;
        }
        let texts = strings(value).ok_or_else(|| Unread::NotAString {
            member: key.clone(),
        })?;
        for text in texts {
            if kind == Filter {
                glob_prefixes(text)?;
                // A filter picks among the files its tool walks, unseen by the guard: a
                // part that may match git's own directory (`[.]git`, `*`) may pick it.
                let mut expanded = Vec::new();
                expand_braces(text, &mut expanded)?;
                if expanded.iter().any(|e| {
                    Path::new(e)
                        .components()
                        .any(|c| may_match_dot_git(c.as_os_str()))
                }) {
                    return Err(Unread::FilterMayPickGit {
                        filter: text.to_string(),
                    });
                }
                continue;
            }
            if kind == P {
                let read = readings(text, base)?;
                under = read[0].clone();
                named.paths.extend(read);
            } else {
                patterns.push(text);
            }
        }
    }
    for pattern in patterns {
        for prefix in glob_prefixes(pattern)? {
            named
                .pattern_roots
                .extend(readings(&prefix.to_string_lossy(), &under)?);
        }
        let mut expanded = Vec::new();
        expand_braces(pattern, &mut expanded)?;
        for alternative in expanded {
            for t in [alternative.as_str(), alternative.trim()] {
                let entry = (under.clone(), t.to_string());
                if !t.is_empty() && !named.patterns.contains(&entry) {
                    named.patterns.push(entry);
                }
            }
        }
    }
    Ok(named)
}

/// Every place a path's text may name to the harness reading it, relative ones from
/// `base`, the literal reading first: the text as given; the text without the white space
/// around it; and a leading `~` or `~/` expanded from `$HOME` (Codex's `apply_patch`
/// expands it, and so do file tools that take a path the way a shell does). A tool's
/// call is judged at every reading, so a spelling that one harness reads another way than
/// the guard names no place the guard did not judge. A `~` when `$HOME` is unset or
/// relative cannot be placed, and is an error.
pub fn readings(text: &str, base: &Path) -> Result<Vec<PathBuf>, Unread> {
    let mut out = vec![base.join(text)];
    let trimmed = text.trim();
    for t in [text, trimmed] {
        if t.is_empty() {
            continue;
        }
        let place = base.join(t);
        if !out.contains(&place) {
            out.push(place);
        }
        let rest = match t.strip_prefix('~') {
            Some("") => "",
            Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
            _ => continue,
        };
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .ok_or_else(|| Unread::TildeWithoutHome {
                text: text.to_string(),
            })?;
        let place = home.join(rest);
        if !out.contains(&place) {
            out.push(place);
        }
    }
    Ok(out)
}

/// Why the relative paths of a patch carried by a shell command that does not start with
/// `apply_patch` are taken from an unknown directory.
pub const PATCH_AFTER_CD: &str = "the shell command applies its patch after something else (Codex reads `cd DIR && apply_patch <<EOF` as a patch applied in DIR)";

/// Whether a shell command carries a patch to `apply_patch`: Codex applies such a patch
/// itself (its shell handlers intercept `apply_patch <<'EOF' … EOF`, also after `cd DIR
/// &&`), reporting the call as its shell, and elsewhere `apply_patch` is the program that
/// applies it. `Some(true)` when the command starts with `apply_patch` (its relative
/// paths are taken from the call's directory), `Some(false)` when something comes first,
/// `None` when it carries no patch.
pub fn shell_patch(command: &str) -> Option<bool> {
    let names = ["apply_patch", "applypatch"];
    if !command.contains("*** Begin Patch") || !names.iter().any(|n| command.contains(n)) {
        return None;
    }
    let start = command.trim_start();
    Some(names.iter().any(|n| {
        start
            .strip_prefix(n)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\n', '<']))
    }))
}

/// Every file an `apply_patch` call adds, updates, deletes or moves to, relative ones
/// from `base`.
pub fn patch_targets(input: &serde_json::Value, base: &Path) -> Result<Vec<PathBuf>, Unread> {
    let patch = ["command", "patch", "input"]
        .iter()
        .find_map(|m| input.get(*m).and_then(serde_json::Value::as_str))
        .ok_or(Unread::PatchUnreadable)?;
    let paths = patch_paths(patch);
    if paths.is_empty() {
        return Err(Unread::PatchNamesNoFile);
    }
    let mut targets = Vec::new();
    for p in &paths {
        targets.extend(readings(p, base)?);
    }
    Ok(targets)
}

/// The paths an `apply_patch` patch touches (`*** Add File:`, `*** Update File:`,
/// `*** Delete File:`, `*** Move to:`).
pub fn patch_paths(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|line| {
            // Codex's patch reader trims each line before matching a header: so must
            // the guard, or an indented header names a file it never checks.
            let line = line.trim();
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .map(str::to_string)
        })
        .collect()
}

/// A member's strings: one string, or an array of them.
fn strings(value: &serde_json::Value) -> Option<Vec<&str>> {
    match value {
        serde_json::Value::String(s) => Some(vec![s.as_str()]),
        serde_json::Value::Array(items) => items.iter().map(serde_json::Value::as_str).collect(),
        _ => None,
    }
}

/// The most patterns one glob pattern's braces expand to before the guard stops reading
/// it (and denies).
pub const MAX_BRACE_EXPANSIONS: usize = 256;

/// The directories each of a glob pattern's brace alternatives names before its first
/// wildcard (every match lies under one of them): `{/etc,src}/*` is `/etc/*` and `src/*`
/// to a glob library, so both roots are judged. A `..` anywhere in an alternative (also
/// inside an extglob group such as `@(..)`) could climb out after a wildcard, and denies.
fn glob_prefixes(pattern: &str) -> Result<Vec<PathBuf>, Unread> {
    let mut expanded = Vec::new();
    expand_braces(pattern, &mut expanded)?;
    let mut prefixes = Vec::new();
    for alternative in &expanded {
        let path = Path::new(alternative);
        // `\.\.` is `..` to a glob library that reads `\` as an escape.
        let climbs = path.components().any(|c| {
            c == Component::ParentDir || {
                let text = c.as_os_str().to_string_lossy();
                text.replace('\\', "") == ".."
                    || (text.contains("..") && text.contains(['(', ')', '|']))
            }
        });
        if climbs {
            return Err(Unread::PatternClimbs {
                pattern: pattern.to_string(),
            });
        }
        // A literal `.git` anywhere in it names git's own directory, past a wildcard too
        // (`**/.git/config`): judged as a path naming it would be (what its wildcards
        // match is judged on the disk by the quarantine's walk).
        if path
            .components()
            .any(|c| crate::real_path::is_dot_git(c.as_os_str()))
        {
            return Err(Unread::PatternNamesGit {
                pattern: pattern.to_string(),
            });
        }
        let mut prefix = PathBuf::new();
        for part in path.components() {
            if part
                .as_os_str()
                .to_string_lossy()
                .contains(['*', '?', '[', '{', '(', '!', '+', '@', '\\'])
            {
                break;
            }
            prefix.push(part);
        }
        if !prefixes.contains(&prefix) {
            prefixes.push(prefix);
        }
    }
    Ok(prefixes)
}

/// Names a disk may give git's own directory, that a glob part is tried against.
const DOT_GIT_SPELLINGS: &[&str] = &[".git", ".GIT", ".git.", ".git ", "git~1", "GIT~1"];

/// True when one part of a glob pattern may match git's own directory: a literal part
/// spelling it ([`crate::real_path::is_dot_git`]); a wildcard part that, as a glob library
/// reads it (escapes, classes, `?`, `*`, letter case ignored), matches one of its
/// spellings; or a part a glob library reads as an extglob group (`@(…)`, `!(…)`), which
/// may match anything. `**` matches directories, not a name: what lies under it is judged
/// by walking it.
pub fn may_match_dot_git(part: &std::ffi::OsStr) -> bool {
    if crate::real_path::is_dot_git(part) {
        return true;
    }
    let text = part.to_string_lossy();
    if text == "**" || !text.contains(['*', '?', '[', '\\', '(']) {
        return false;
    }
    if text.contains('(') {
        return true;
    }
    match part_matcher(&text) {
        Some(m) => DOT_GIT_SPELLINGS.iter().any(|name| m.is_match(name)),
        None => true,
    }
}

/// One glob part as the most permissive glob library reads it (letter case ignored, `\`
/// escaping, `*` matching a leading dot), or `None` when it is not a glob any library
/// reads the same way (then nothing is known of what it matches).
pub fn part_matcher(part: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(part)
        .case_insensitive(true)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Appends every pattern `pattern`'s brace alternatives (`{a,b}`, nested) expand to, as a
/// glob library expands them; at most [`MAX_BRACE_EXPANSIONS`].
pub fn expand_braces(pattern: &str, out: &mut Vec<String>) -> Result<(), Unread> {
    if out.len() >= MAX_BRACE_EXPANSIONS {
        return Err(Unread::TooManyExpansions {
            pattern: pattern.to_string(),
        });
    }
    let bytes = pattern.as_bytes();
    for (open, _) in pattern.match_indices('{') {
        // The matching `}` and the top-level commas between them.
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (k, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(k);
                        break;
                    }
                }
                b',' if depth == 1 => commas.push(k),
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        if commas.is_empty() {
            continue;
        }
        let mut bounds = vec![open];
        bounds.extend(&commas);
        bounds.push(close);
        for pair in bounds.windows(2) {
            let alternative = &pattern[pair[0] + 1..pair[1]];
            let next = format!("{}{alternative}{}", &pattern[..open], &pattern[close + 1..]);
            expand_braces(&next, out)?;
        }
        return Ok(());
    }
    out.push(pattern.to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_judged_at_every_place_a_harness_may_read_it_at() {
        let base = Path::new("/w");
        assert_eq!(
            readings("a/b", base).unwrap(),
            vec![PathBuf::from("/w/a/b")]
        );
        assert_eq!(readings("/x", base).unwrap(), vec![PathBuf::from("/x")]);
        assert_eq!(
            readings(" /x ", base).unwrap(),
            vec![PathBuf::from("/w/ /x "), PathBuf::from("/x")]
        );
        if let Some(home) = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
        {
            for (text, lands) in [
                ("~", ""),
                ("~/", ""),
                ("~/.profile", ".profile"),
                ("~//a", "a"),
            ] {
                let read = readings(text, base).unwrap();
                assert_eq!(read[0], base.join(text), "{text}");
                assert!(read.contains(&home.join(lands)), "{text}: {read:?}");
            }
        }
        // `~user` is not expanded by any harness's reader: only the literal reading.
        assert_eq!(
            readings("~u/x", base).unwrap(),
            vec![PathBuf::from("/w/~u/x")]
        );
        // Relative paths stay relative from an empty base (how a write whose directory is
        // unknown tells them apart).
        assert!(!readings("a", Path::new("")).unwrap()[0].is_absolute());
    }

    #[test]
    fn every_brace_alternative_of_a_pattern_is_a_root() {
        let roots = |p: &str| {
            glob_prefixes(p).map(|v| {
                v.into_iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(roots("src/**/*.rs").unwrap(), vec!["src"]);
        assert_eq!(roots("{/etc,src}/*").unwrap(), vec!["/etc", "src"]);
        assert_eq!(
            roots("a/{b,{/h/sessions,c}}/x*").unwrap(),
            vec!["a/b", "a/h/sessions", "a/c"]
        );
        assert_eq!(roots("{a}/x").unwrap(), vec![""]);
        for climbing in [
            "**/.git/config",
            "{src,.GIT}/*",
            "{..,src}/*",
            "src/{x,../..}/*",
            "@(..)/x",
            "src/+(..|a)/*",
            "../*",
        ] {
            assert!(glob_prefixes(climbing).is_err(), "{climbing}");
        }
        let many = "{a,b}".repeat(9);
        assert!(glob_prefixes(&many).is_err());
    }

    #[test]
    fn a_shell_command_carrying_a_patch_is_read_as_apply_patch() {
        let patch = "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n";
        assert_eq!(
            shell_patch(&format!("apply_patch <<'EOF'\n{patch}EOF\n")),
            Some(true)
        );
        assert_eq!(
            shell_patch(&format!("applypatch <<EOF\n{patch}EOF")),
            Some(true)
        );
        assert_eq!(
            shell_patch(&format!("cd /x && apply_patch <<'EOF'\n{patch}EOF\n")),
            Some(false)
        );
        assert_eq!(shell_patch("apply_patch_helper x"), None);
        assert_eq!(shell_patch("ls"), None);
        assert_eq!(shell_patch(&format!("echo '{patch}'")), None);
    }
}
