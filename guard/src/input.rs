//! The hook's input: Claude Code's `PreToolUse` JSON on stdin (`session_id`, `cwd`,
//! `tool_input.command`), read within bounds. Input that is not that JSON is an error the
//! guard denies on (fail closed: a hook input it cannot read never yields ALLOWED).

use crate::parse::MAX_COMMAND_BYTES;
use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;

/// The most hook input read (8 MiB): a 1 MiB command escaped as JSON fits.
pub const MAX_INPUT_BYTES: u64 = 8 * 1024 * 1024;

/// Why the hook input is not read (the guard denies: fail closed). Each message is a
/// sentence for the denial.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Stdin could not be read.
    #[error("cannot read the hook input: {0}")]
    Read(#[source] std::io::Error),
    /// Over [`MAX_INPUT_BYTES`].
    #[error("the hook input is over {MAX_INPUT_BYTES} bytes")]
    TooLarge,
    /// Not JSON, or not the shape of Claude Code's `PreToolUse` input.
    #[error("the hook input is not Claude Code's PreToolUse JSON: {0}")]
    NotHookJson(#[source] serde_json::Error),
    /// `tool_input.command` is there but not a string.
    #[error("the hook input's tool_input.command is not a string")]
    CommandNotString,
    /// No `tool_input.command`.
    #[error("the hook input has no tool_input.command")]
    NoCommand,
    /// The command is over [`MAX_COMMAND_BYTES`].
    #[error("the command is {bytes} bytes, over the guard's {MAX_COMMAND_BYTES}-byte limit")]
    CommandTooLong {
        /// The command's length in bytes.
        bytes: usize,
    },
    /// `session_id` or `cwd` is there but not a string.
    #[error("the hook input's {field} is not a string")]
    NotString {
        /// The member's name.
        field: &'static str,
    },
    /// `cwd` is a relative path.
    #[error("the hook input's cwd {} is not absolute", cwd.display())]
    CwdNotAbsolute {
        /// The path given.
        cwd: PathBuf,
    },
}

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
pub fn read(reader: impl Read) -> Result<Hook, InputError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(InputError::Read)?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(InputError::TooLarge);
    }
    parse(&bytes)
}

/// Parses hook input bytes.
pub fn parse(bytes: &[u8]) -> Result<Hook, InputError> {
    let raw: Raw = serde_json::from_slice(bytes).map_err(InputError::NotHookJson)?;
    let command = match raw.tool_input.and_then(|t| t.command) {
        Some(serde_json::Value::String(command)) => command,
        Some(_) => return Err(InputError::CommandNotString),
        None => return Err(InputError::NoCommand),
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(InputError::CommandTooLong {
            bytes: command.len(),
        });
    }
    let string = |v: Option<serde_json::Value>, field: &'static str| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(InputError::NotString { field }),
    };
    let session = string(raw.session_id, "session_id")?;
    let cwd = string(raw.cwd, "cwd")?.map(PathBuf::from);
    if let Some(cwd) = &cwd
        && !cwd.is_absolute()
    {
        return Err(InputError::CwdNotAbsolute { cwd: cwd.clone() });
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

    #[test]
    fn each_unreadable_input_says_what_is_wrong_as_the_denial_reads() {
        let said = |bytes: &[u8]| parse(bytes).unwrap_err().to_string();
        assert_eq!(
            said(br#"{"tool_input":{}}"#),
            "the hook input has no tool_input.command"
        );
        assert_eq!(
            said(br#"{"tool_input":{"command":7}}"#),
            "the hook input's tool_input.command is not a string"
        );
        assert_eq!(
            said(br#"{"cwd":"relative","tool_input":{"command":"ls"}}"#),
            "the hook input's cwd relative is not absolute"
        );
        assert_eq!(
            said(br#"{"session_id":[1],"tool_input":{"command":"ls"}}"#),
            "the hook input's session_id is not a string"
        );
        assert!(matches!(
            parse(b"not json").unwrap_err(),
            InputError::NotHookJson(_)
        ));
        let over = vec![b' '; MAX_INPUT_BYTES as usize + 1];
        assert!(matches!(read(&over[..]).unwrap_err(), InputError::TooLarge));
    }
}
