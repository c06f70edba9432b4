//! The lines `row-fence install git-hook` appends to a repository's config to include the
//! transport gate, and how rollback takes them out again (ARCHITECTURE.md, "Git's layer";
//! docs/git-layer.md, "Git's own layer").
//!
//! ```text
//! # row-fence: git's transport gate; …
//! [credential]
//! [include]
//!     path = row-fence.gitconfig
//! ```
//!
//! The empty `[credential]` is there for `git config`: it writes a new key into the last
//! section of that name in the file, so `git config credential.helper ''` (git's way to
//! reset the helper list) lands there, before the include, where it cannot clear the
//! gate's helper. Without it, git appends a new `[credential]` after the include, and a
//! reset there took the gate's place. What git writes into it stays at rollback, and so
//! does what git writes under the gate's `[include]` (`git config --add include.path`
//! puts it there).
//!
//! Earlier installs appended the same lines without the `[credential]`; rollback finds
//! both.

use std::ops::Range;

/// The first line of what install appends.
pub const MARK: &str = "# row-fence: git's transport gate; row-fence install git-hook --rollback removes these lines (git config writes credential settings into the [credential] below, before the gate)";
/// The same, for a config that did not end with a line break: install added one.
pub const MARK_WITH_BREAK: &str = "# row-fence: git's transport gate; row-fence install git-hook --rollback removes these lines and the line break before them (git config writes credential settings into the [credential] below, before the gate)";
/// The marks of earlier installs (three lines, no `[credential]`).
const OLD_MARK: &str = "# row-fence: git's transport gate (row-fence install git-hook --rollback removes these three lines)";
const OLD_MARK_WITH_BREAK: &str = "# row-fence: git's transport gate (row-fence install git-hook --rollback removes these three lines and the line break before them)";

/// The section git config fills instead of appending one after the include.
const STUB: &str = "[credential]\n";

/// The gate's lines are in a config, but not as install wrote them: rollback refuses
/// rather than guess which lines are the gate's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the transport gate's lines (\"{mark}\", [credential], [include], path = {include_file}) were edited since install; remove them by hand",
    mark = MARK
)]
pub struct LinesEdited {
    /// The included file the lines name (`row-fence.gitconfig`).
    pub include_file: String,
}

/// The lines install appends to `config` (which must not hold them yet).
pub fn with_gate(config: &str, include_file: &str) -> String {
    let include = include_lines(include_file);
    if config.is_empty() || config.ends_with('\n') {
        format!("{config}{MARK}\n{STUB}{include}")
    } else {
        format!("{config}\n{MARK_WITH_BREAK}\n{STUB}{include}")
    }
}

fn include_lines(include_file: &str) -> String {
    format!("[include]\n\tpath = {include_file}\n")
}

/// The appended lines as found in a config.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    /// From the mark line (or the line break install added before it) to the end of the
    /// include line.
    range: Range<usize>,
    /// What git wrote into the gate's `[credential]` since install, header included;
    /// empty when nothing.
    kept: Range<usize>,
    /// True when git wrote settings under the gate's `[include]` since install (they
    /// follow the range): its header stays with them.
    include_kept: bool,
    /// True when install added the line break before the mark.
    added_break: bool,
    /// True for an earlier install's lines.
    earlier: bool,
}

/// True when the config holds the gate's lines, intact. `Err`: they are there but not
/// as install wrote them (rollback refuses rather than guess).
pub fn holds_gate(config: &str, include_file: &str) -> Result<bool, LinesEdited> {
    find(config, include_file).map(|found| found.is_some())
}

/// The config with an earlier install's lines (three, no `[credential]`) taken out and
/// the current ones appended; `None` when it holds the current ones or none.
pub fn upgraded(config: &str, include_file: &str) -> Result<Option<String>, LinesEdited> {
    let Some(found) = find(config, include_file)? else {
        return Ok(None);
    };
    if !found.earlier {
        return Ok(None);
    }
    let back = without_gate(config, include_file)?.unwrap_or_default();
    Ok(Some(with_gate(&back, include_file)))
}

/// The config without the appended lines: byte for byte what it was before install,
/// whatever else was edited since, with two exceptions that keep git's reading of it.
/// What git wrote into the gate's `[credential]` or under its `[include]` stays, under
/// that header. And a config that had no final line break, which install added, keeps
/// that break when something stays after it: without it the user's last line and the
/// next header would run together into one line. `None`: no gate there.
pub fn without_gate(config: &str, include_file: &str) -> Result<Option<String>, LinesEdited> {
    let Some(found) = find(config, include_file)? else {
        return Ok(None);
    };
    let mut start = found.range.start;
    let stays_after = !found.kept.is_empty() || found.range.end < config.len();
    if found.added_break && stays_after {
        start += 1;
    }
    Ok(Some(format!(
        "{}{}{}{}",
        &config[..start],
        &config[found.kept],
        if found.include_kept {
            "[include]\n"
        } else {
            ""
        },
        &config[found.range.end..]
    )))
}

fn find(config: &str, include_file: &str) -> Result<Option<Found>, LinesEdited> {
    let marks = [
        (MARK, false, false),
        (MARK_WITH_BREAK, true, false),
        (OLD_MARK, false, true),
        (OLD_MARK_WITH_BREAK, true, true),
    ];
    for (mark, added_break, earlier) in marks {
        let line = format!("{mark}\n");
        let Some(at) = line_start(config, &line) else {
            continue;
        };
        if added_break && (at == 0 || config.as_bytes()[at - 1] != b'\n') {
            continue;
        }
        let after_mark = at + line.len();
        let (kept, include_at) = stub_and_settings(config, after_mark, include_file)?;
        let end = include_at + include_lines(include_file).len();
        let include_kept = settings_follow(&config[end..]);
        let start = if added_break { at - 1 } else { at };
        return Ok(Some(Found {
            range: start..end,
            kept,
            include_kept,
            added_break,
            earlier,
        }));
    }
    if config.contains("# row-fence: git's transport gate")
        || config
            .lines()
            .any(|l| l.trim().replace(' ', "") == format!("path={include_file}"))
    {
        return Err(LinesEdited {
            include_file: include_file.to_string(),
        });
    }
    Ok(None)
}

/// Where `line` starts a line of `config`.
fn line_start(config: &str, line: &str) -> Option<usize> {
    config
        .match_indices(line)
        .map(|(at, _)| at)
        .find(|at| *at == 0 || config.as_bytes()[at - 1] == b'\n')
}

/// After the mark at `from`: the gate's `[credential]` and the settings git wrote into it
/// (the range to keep, empty when it holds none; an earlier install wrote no
/// `[credential]`), and where the include lines start.
fn stub_and_settings(
    config: &str,
    from: usize,
    include_file: &str,
) -> Result<(Range<usize>, usize), LinesEdited> {
    let include = include_lines(include_file);
    if config[from..].starts_with(&include) {
        return Ok((from..from, from));
    }
    let edited = || LinesEdited {
        include_file: include_file.to_string(),
    };
    if !config[from..].starts_with(STUB) {
        return Err(edited());
    }
    let mut at = from + STUB.len();
    let mut settings = false;
    loop {
        let rest = &config[at..];
        if rest.starts_with(&include) {
            let kept = if settings { from..at } else { from..from };
            return Ok((kept, at));
        }
        let Some(end) = rest.find('\n') else {
            return Err(edited());
        };
        let line = rest[..end].trim_start();
        if line.starts_with('[') {
            return Err(edited());
        }
        settings |= !line.is_empty();
        at += end + 1;
    }
}

/// True when a setting follows before the next section header: git wrote it under the
/// gate's `[include]` (`git config --add include.path`), so it must keep that header.
fn settings_follow(after: &str) -> bool {
    after
        .lines()
        .map(str::trim_start)
        .take_while(|l| !l.starts_with('['))
        .any(|l| !l.is_empty() && !l.starts_with(['#', ';']))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "row-fence.gitconfig";

    #[test]
    fn the_appended_lines_come_out_byte_for_byte_and_an_edit_is_refused() {
        for before in ["", "[core]\n\tbare = false\n", "[core]\n\tbare = false"] {
            let after = with_gate(before, FILE);
            assert!(holds_gate(&after, FILE).unwrap());
            assert_eq!(without_gate(&after, FILE).unwrap().as_deref(), Some(before));
            let edited = after.replace(
                "\tpath = row-fence.gitconfig\n",
                "\tpath = row-fence.gitconfig\n\tpath = x\n",
            );
            assert_eq!(
                without_gate(&edited, FILE).unwrap().unwrap(),
                format!(
                    "{before}{}[include]\n\tpath = x\n",
                    if before.is_empty() || before.ends_with('\n') {
                        ""
                    } else {
                        "\n"
                    }
                ),
                "an include git added under the gate's [include] keeps its header"
            );
            let broken = after.replace("[include]\n", "");
            assert!(without_gate(&broken, FILE).is_err());
            let headed = after.replace(STUB, "[credential]\n[user]\n");
            assert!(without_gate(&headed, FILE).is_err());
        }
        assert_eq!(without_gate("[core]\n", FILE).unwrap(), None);
    }

    #[test]
    fn what_git_appends_or_writes_into_the_gates_credential_stays_on_lines_of_its_own() {
        let joined = |before: &str, after: &str| {
            let gap = if before.is_empty() || before.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            format!("{before}{gap}{after}")
        };
        for before in ["", "[core]\n\tbare = false\n", "[core]\n\tbare = false"] {
            let installed = with_gate(before, FILE);
            let appended = format!("{installed}[user]\n\tname = x\n");
            assert_eq!(
                without_gate(&appended, FILE).unwrap().unwrap(),
                joined(before, "[user]\n\tname = x\n")
            );
            let written = installed.replace(STUB, "[credential]\n\thelper = \n\thelper = x\n");
            assert_eq!(
                without_gate(&written, FILE).unwrap().unwrap(),
                joined(before, "[credential]\n\thelper = \n\thelper = x\n")
            );
        }
    }

    #[test]
    fn an_earlier_installs_three_lines_still_come_out() {
        for (before, lines) in [
            ("[core]\n", format!("{OLD_MARK}\n{}", include_lines(FILE))),
            (
                "[core]",
                format!("\n{OLD_MARK_WITH_BREAK}\n{}", include_lines(FILE)),
            ),
        ] {
            let config = format!("{before}{lines}");
            assert_eq!(
                without_gate(&config, FILE).unwrap().as_deref(),
                Some(before)
            );
            let later = format!("{config}[user]\n\tname = x\n");
            let now = upgraded(&later, FILE).unwrap().unwrap();
            assert_eq!(now, with_gate("[core]\n[user]\n\tname = x\n", FILE));
            assert_eq!(upgraded(&now, FILE).unwrap(), None);
        }
    }
}
