//! The hook's input: Claude Code's `PreToolUse` JSON on stdin (`session_id`, `cwd`,
//! `tool_input.command`), read within bounds. Input that is not that JSON is an error the
//! guard denies on (fail closed: a hook input it cannot read never yields ALLOWED).

use crate::parse::MAX_COMMAND_BYTES;
use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;

/// The most hook input read (8 MiB): a 1 MiB command escaped as JSON fits.
pub const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

/// What the guard reads from the hook input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The agent session (`session_id`), when given.
    pub session: Option<String>,
    /// The agent shell's working directory (`cwd`), when given.
    pub cwd: Option<PathBuf>,
    /// The Bash command (`tool_input.command`).
    pub command: String,
}

#[derive(Deserialize)]
struct Raw {
    session_id: Option<serde_json::Value>,
    cwd: Option<serde_json::Value>,
    tool_input: Option<ToolInput>,
}

#[derive(Deserialize)]
struct ToolInput {
    command: Option<serde_json::Value>,
}

/// Reads and parses the hook input from `reader`.
pub fn read(reader: impl Read) -> Result<Hook, String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the hook input: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!("the hook input is over {MAX_INPUT_BYTES} bytes"));
    }
    parse(&bytes)
}

/// Parses hook input bytes.
pub fn parse(bytes: &[u8]) -> Result<Hook, String> {
    let raw: Raw = serde_json::from_slice(bytes)
        .map_err(|e| format!("the hook input is not Claude Code's PreToolUse JSON: {e}"))?;
    let command = match raw.tool_input.and_then(|t| t.command) {
        Some(serde_json::Value::String(command)) => command,
        Some(_) => return Err("the hook input's tool_input.command is not a string".into()),
        None => return Err("the hook input has no tool_input.command".into()),
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command is {} bytes, over the guard's {MAX_COMMAND_BYTES}-byte limit",
            command.len()
        ));
    }
    let string = |v: Option<serde_json::Value>, what: &str| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("the hook input's {what} is not a string")),
    };
    let session = string(raw.session_id, "session_id")?;
    let cwd = string(raw.cwd, "cwd")?.map(PathBuf::from);
    if let Some(cwd) = &cwd
        && !cwd.is_absolute()
    {
        return Err(format!(
            "the hook input's cwd {} is not absolute",
            cwd.display()
        ));
    }
    Ok(Hook {
        session,
        cwd,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_input_is_read_and_anything_else_is_an_error() {
        let hook = parse(
            br#"{"session_id":"s1","cwd":"/w","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
        )
        .unwrap();
        assert_eq!(hook.session.as_deref(), Some("s1"));
        assert_eq!(hook.command, "ls");
        for bad in [
            &b""[..],
            b"not json",
            b"[]",
            br#"{"tool_input":{}}"#,
            br#"{"tool_input":{"command":7}}"#,
            br#"{"cwd":"relative","tool_input":{"command":"ls"}}"#,
            br#"{"session_id":[1],"tool_input":{"command":"ls"}}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
