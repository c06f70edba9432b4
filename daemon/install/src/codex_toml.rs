//! The agent hook in a Codex `config.toml` (Codex 0.124+, "Hooks": inline `[hooks]` tables
//! take the same event → matcher group → handlers outline as `hooks.json`): adds it,
//! finds it, removes it.
//!
//! Install appends one block of array-of-tables (`[[hooks.PreToolUse]]` with no matcher,
//! so every tool, and its `[[hooks.PreToolUse.hooks]]` handler) at the end of the file,
//! under a comment line that names it; rollback removes exactly that block and the line
//! break install put before it, so install then rollback gives back the same bytes. The
//! file is parsed with `toml` before and after: a file that is not TOML, or whose
//! `hooks` is written so that an appended table cannot join it (an inline
//! `PreToolUse = [...]`), is refused and left as it was.

use crate::claude_settings::Edit;
use row_fence_contract::harness::events;
use toml::Value;

/// How the comment line a block starts with begins. It names the command that removes
/// the block as the operator runs it: with `--settings` (without it rollback looks in
/// `~/.codex/hooks.json` and finds nothing) and the home and binaries the entry names.
const MARK: &str = "# row-fence agent hook";

/// What the comment line says when install also ended the file's last line (the file had
/// no final line break): rollback removes that line break too.
const ENDED: &str = " (and the line break before it)";

/// The comment line naming `rollback` (one line: a command holding a line break is named
/// by what it does instead).
fn mark(rollback: &str, ended: bool) -> String {
    let rollback = if rollback.contains(['\n', '\r']) {
        "row-fence install agent-hook --agent codex --settings <this file> --rollback"
    } else {
        rollback
    };
    format!(
        "{MARK}{}: `{rollback}` removes this block.\n",
        if ended { ENDED } else { "" }
    )
}

/// Why a `config.toml` was left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TomlError {
    /// Not TOML (the parser's message, with its line and column).
    #[error("not valid TOML: {0}")]
    NotToml(String),
    /// The file's `hooks` cannot take an appended `[[hooks.PreToolUse]]` (why).
    #[error(
        "its hooks are written so that an appended [[hooks.PreToolUse]] table cannot join them ({0}); install into ~/.codex/hooks.json instead"
    )]
    Conflicts(String),
}

/// The block's body: the entry with its handler running `command`, `timeout_s` seconds
/// (Codex's unit for a hook's `timeout`).
fn body(command: &str, timeout_s: u64) -> String {
    let command = Value::String(command.to_string()).to_string();
    let event = events::PRE_TOOL_USE;
    format!(
        "[[hooks.{event}]]\n\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {command}\ntimeout = {timeout_s}\n"
    )
}

/// True when the parsed config holds a `hooks.PreToolUse` handler running `command`.
pub fn runs(config: &toml::Table, command: &str) -> bool {
    config
        .get("hooks")
        .and_then(|h| h.get(events::PRE_TOOL_USE))
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
                    hs.iter()
                        .any(|h| h.get("command").and_then(Value::as_str) == Some(command))
                })
            })
        })
}

fn parse(text: &str) -> Result<toml::Table, TomlError> {
    text.parse::<toml::Table>()
        .map_err(|e| TomlError::NotToml(e.to_string().trim().to_string()))
}

/// Appends the block running `command` to `text` (`None`: no file yet, taken as empty)
/// unless a `hooks.PreToolUse` handler runs `command` already; its comment line names
/// `rollback`, the command that removes it.
pub fn install(
    text: Option<&str>,
    command: &str,
    timeout_s: u64,
    rollback: &str,
) -> Result<Edit, TomlError> {
    let text = text.unwrap_or("");
    if runs(&parse(text)?, command) {
        return Ok(Edit::Unchanged);
    }
    let body = body(command, timeout_s);
    let chunk = if text.is_empty() {
        format!("{}{body}", mark(rollback, false))
    } else if text.ends_with('\n') {
        format!("\n{}{body}", mark(rollback, false))
    } else {
        format!("\n\n{}{body}", mark(rollback, true))
    };
    let out = format!("{text}{chunk}");
    let parsed = parse(&out).map_err(|e| TomlError::Conflicts(e.to_string()))?;
    if !runs(&parsed, command) {
        return Err(TomlError::Conflicts(
            "the appended handler does not read back".into(),
        ));
    }
    Ok(Edit::Changed(out))
}

/// Removes the block running `command` that install appended, with the line breaks
/// install put before it. `None` text, or no such block: unchanged.
pub fn rollback(text: Option<&str>, command: &str, timeout_s: u64) -> Result<Edit, TomlError> {
    let Some(text) = text else {
        return Ok(Edit::Unchanged);
    };
    let body = body(command, timeout_s);
    let Some((start, end)) = text
        .match_indices(&body)
        .find_map(|(at, _)| block_around(text, at, body.len()))
    else {
        return Ok(Edit::Unchanged);
    };
    let mut out = text.to_string();
    out.replace_range(start..end, "");
    Ok(Edit::Changed(out))
}

/// The byte range install added for the block whose body is at `at..at + len`: its
/// comment line just before it (whatever rollback it names), and the line breaks install
/// put before that. `None` when the body has no such comment line (not install's).
fn block_around(text: &str, at: usize, len: usize) -> Option<(usize, usize)> {
    let before = text[..at].strip_suffix('\n')?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..at];
    if !line.starts_with(MARK) || !line.ends_with("` removes this block.\n") {
        return None;
    }
    let start = if line.starts_with(&format!("{MARK}{ENDED}:")) {
        line_start
            .checked_sub(2)
            .filter(|s| text[*s..line_start] == *"\n\n")?
    } else if line_start > 0 && text[..line_start].ends_with('\n') {
        // Install put one blank line before a block that does not open the file.
        line_start - 1
    } else {
        line_start
    };
    Some((start, at + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "export ROW_FENCE_HOME='/h'; '/b/row-fence-guard' --harness codex";

    const ROLLBACK: &str = "'/b/row-fence' --home '/h' install agent-hook --agent codex --settings '/u/.codex/config.toml' --bin-dir '/b' --rollback";

    fn round_trip(before: Option<&str>) -> String {
        let Edit::Changed(after) = install(before, COMMAND, 10, ROLLBACK).unwrap() else {
            panic!("install changed nothing in {before:?}");
        };
        let parsed: toml::Table = after.parse().unwrap();
        assert!(runs(&parsed, COMMAND), "{after}");
        let handler = &parsed["hooks"]["PreToolUse"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["hooks"][0];
        assert_eq!(handler["type"].as_str(), Some("command"));
        assert_eq!(handler["timeout"].as_integer(), Some(10));
        assert_eq!(
            install(Some(&after), COMMAND, 10, ROLLBACK).unwrap(),
            Edit::Unchanged
        );
        assert!(after.contains(&format!("`{ROLLBACK}`")), "{after}");
        assert_eq!(
            rollback(Some(&after), COMMAND, 10).unwrap(),
            Edit::Changed(before.unwrap_or("").to_string()),
            "from:\n{after}"
        );
        after
    }

    #[test]
    fn every_shape_round_trips_byte_for_byte() {
        round_trip(None);
        round_trip(Some(""));
        round_trip(Some("\n"));
        round_trip(Some("model = \"o3\""));
        round_trip(Some("model = \"o3\"\n"));
        round_trip(Some("model = \"o3\"\n\n\n"));
        round_trip(Some(
            "[features]\nhooks = true\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n",
        ));
        round_trip(Some(
            "[[hooks.PreToolUse]]\nmatcher = \"^Bash$\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"x\"\n",
        ));
        round_trip(Some(
            "[hooks]\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ncommand = \"y\"\n",
        ));
    }

    /// The rollback an earlier release named in its comment line.
    const OLD_ROLLBACK: &str = "row-fence install agent-hook --agent codex --rollback";

    #[test]
    fn a_block_an_earlier_release_wrote_is_removed_too() {
        for (before, ended) in [("model = 1\n", false), ("model = 1", true)] {
            let sep = if ended { "\n\n" } else { "\n" };
            let after = format!(
                "{before}{sep}{}{}",
                mark(OLD_ROLLBACK, ended),
                body(COMMAND, 10)
            );
            assert_eq!(
                rollback(Some(&after), COMMAND, 10).unwrap(),
                Edit::Changed(before.to_string())
            );
        }
    }

    #[test]
    fn a_file_whose_hooks_cannot_take_the_table_is_refused() {
        for text in [
            "[hooks]\nPreToolUse = []\n",
            "hooks = { PreToolUse = [] }\n",
            "hooks = 1\n",
            "not toml [",
        ] {
            assert!(
                install(Some(text), COMMAND, 10, ROLLBACK).is_err(),
                "{text}"
            );
        }
        assert_eq!(
            rollback(Some("model = 1\n"), COMMAND, 10).unwrap(),
            Edit::Unchanged
        );
        assert_eq!(rollback(None, COMMAND, 10).unwrap(), Edit::Unchanged);
    }
}
