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
use toml::Value;

/// The comment line a block starts with when install added only its own blank line.
const MARK: &str = "# row-fence agent hook: `row-fence install agent-hook --agent codex --rollback` removes this block.\n";

/// The comment line a block starts with when install also ended the file's last line
/// (the file had no final line break): rollback removes that line break too.
const MARK_ENDED: &str = "# row-fence agent hook (and the line break before it): `row-fence install agent-hook --agent codex --rollback` removes this block.\n";

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
    format!(
        "[[hooks.PreToolUse]]\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = {command}\ntimeout = {timeout_s}\n"
    )
}

/// True when the parsed config holds a `hooks.PreToolUse` handler running `command`.
pub fn runs(config: &toml::Table, command: &str) -> bool {
    config
        .get("hooks")
        .and_then(|h| h.get("PreToolUse"))
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
/// unless a `hooks.PreToolUse` handler runs `command` already.
pub fn install(text: Option<&str>, command: &str, timeout_s: u64) -> Result<Edit, TomlError> {
    let text = text.unwrap_or("");
    if runs(&parse(text)?, command) {
        return Ok(Edit::Unchanged);
    }
    let body = body(command, timeout_s);
    let chunk = if text.is_empty() {
        format!("{MARK}{body}")
    } else if text.ends_with('\n') {
        format!("\n{MARK}{body}")
    } else {
        format!("\n\n{MARK_ENDED}{body}")
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
    let ended = format!("\n\n{MARK_ENDED}{body}");
    let plain = format!("{MARK}{body}");
    let (start, end) = if let Some(at) = text.find(&ended) {
        (at, at + ended.len())
    } else if let Some(at) = text.find(&plain) {
        // Install put one blank line before a block that does not open the file.
        let start = if at > 0 && text[..at].ends_with('\n') {
            at - 1
        } else {
            at
        };
        (start, at + plain.len())
    } else {
        return Ok(Edit::Unchanged);
    };
    let mut out = text.to_string();
    out.replace_range(start..end, "");
    Ok(Edit::Changed(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "export ROW_FENCE_HOME='/h'; '/b/row-fence-guard' --harness codex";

    fn round_trip(before: Option<&str>) -> String {
        let Edit::Changed(after) = install(before, COMMAND, 10).unwrap() else {
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
        assert_eq!(install(Some(&after), COMMAND, 10).unwrap(), Edit::Unchanged);
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

    #[test]
    fn a_file_whose_hooks_cannot_take_the_table_is_refused() {
        for text in [
            "[hooks]\nPreToolUse = []\n",
            "hooks = { PreToolUse = [] }\n",
            "hooks = 1\n",
            "not toml [",
        ] {
            assert!(install(Some(text), COMMAND, 10).is_err(), "{text}");
        }
        assert_eq!(
            rollback(Some("model = 1\n"), COMMAND, 10).unwrap(),
            Edit::Unchanged
        );
        assert_eq!(rollback(None, COMMAND, 10).unwrap(), Edit::Unchanged);
    }
}
