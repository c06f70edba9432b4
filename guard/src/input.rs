//! The hook's input: Claude Code's `PreToolUse` JSON on stdin (`session_id`, `cwd`,
//! `tool_name`, `tool_input`), read within bounds. Every tool is read: Bash's
//! `tool_input.command`, and any other tool's name and input as they are. The first
//! complete JSON value is read without waiting for the end of the input (a host that
//! never closes stdin is answered). Input that is not that JSON is an error the guard
//! denies on (fail closed: a hook input it cannot read never yields ALLOWED).

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
    /// The session's working directory (`cwd`), when given: where the session is bound
    /// from and relative file-tool paths are taken from.
    pub cwd: Option<PathBuf>,
    /// Where the tool itself runs, when the harness says it runs elsewhere than `cwd`
    /// (set by [`crate::harness`]; [`RunsIn::Cwd`] for Claude Code's input).
    pub runs_in: RunsIn,
    /// The Bash command (`tool_input.command`); empty for any other tool.
    pub command: String,
    /// The tool called.
    pub tool: Tool,
}

/// Where a tool call runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RunsIn {
    /// In the session's `cwd`.
    #[default]
    Cwd,
    /// In this directory (Gemini CLI's `dir_path`, Codex's `tool_cwd`, Cursor's
    /// `working_directory`), absolute.
    At(PathBuf),
    /// The harness does not say where (a Codex release that sends no `tool_cwd`, a
    /// directory member that is not a path): the sentence says why. A row-bound session's
    /// fenced writes and opaque commands there are denied.
    Unknown(String),
}

/// The tool a hook input is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tool {
    /// The shell tool (`tool_name` `Bash`, or absent with a `tool_input.command`).
    Bash {
        /// The command.
        command: String,
        /// True when the harness runs it in the background and returns at once (Claude
        /// Code's `run_in_background`, Gemini CLI's and Cursor's `is_background`): every
        /// write in it lands after the call, when the row may be gone.
        background: bool,
    },
    /// Any other tool: a built-in file tool, an MCP tool (`mcp__SERVER__TOOL`), a web
    /// tool, one the guard does not know.
    Other {
        /// `tool_name`.
        name: String,
        /// `tool_input`, as given (`null` when absent).
        input: serde_json::Value,
    },
}

impl Tool {
    /// A short name for messages and the ledger: `Bash`, or the tool's name.
    pub fn name(&self) -> &str {
        match self {
            Tool::Bash { .. } => "Bash",
            Tool::Other { name, .. } => name,
        }
    }
}

#[derive(Deserialize)]
struct Raw {
    session_id: Option<serde_json::Value>,
    cwd: Option<serde_json::Value>,
    tool_name: Option<serde_json::Value>,
    tool_input: Option<serde_json::Value>,
}

/// Counts the bytes read through it, so an input cut at the bound is told apart.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads and parses the hook input from `reader`: the first JSON value, without waiting
/// for the end of the input.
pub fn read(reader: impl Read) -> Result<Hook, InputError> {
    from_value(read_value(reader)?)
}

/// Reads the first JSON value from `reader` (within [`MAX_INPUT_BYTES`]), without waiting
/// for the end of the input.
pub fn read_value(reader: impl Read) -> Result<serde_json::Value, InputError> {
    let mut counted = Counted {
        inner: std::io::BufReader::new(reader.take(MAX_INPUT_BYTES + 1)),
        read: 0,
    };
    let value = serde_json::Deserializer::from_reader(&mut counted)
        .into_iter::<serde_json::Value>()
        .next();
    let value = match value {
        Some(Ok(value)) => value,
        Some(Err(e)) if e.is_io() => {
            return Err(InputError::Read(std::io::Error::other(e.to_string())));
        }
        Some(Err(_)) | None if counted.read > MAX_INPUT_BYTES => return Err(InputError::TooLarge),
        Some(Err(e)) => return Err(InputError::NotHookJson(e)),
        None => {
            return Err(InputError::NotHookJson(
                serde_json::from_slice::<serde_json::Value>(b"").unwrap_err(),
            ));
        }
    };
    Ok(value)
}

/// Parses hook input bytes.
pub fn parse(bytes: &[u8]) -> Result<Hook, InputError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(InputError::NotHookJson)?;
    from_value(value)
}

/// Reads Claude Code's `PreToolUse` input from a JSON value.
pub fn from_value(value: serde_json::Value) -> Result<Hook, InputError> {
    let raw: Raw = serde_json::from_value(value).map_err(InputError::NotHookJson)?;
    let name = match raw.tool_name {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(_) => return Err(InputError::NotString { field: "tool_name" }),
    };
    let bash = name.as_deref().is_none_or(|n| n == "Bash");
    if !bash {
        let (session, cwd) = session_and_cwd(raw.session_id, raw.cwd)?;
        return Ok(Hook {
            session,
            cwd,
            runs_in: RunsIn::Cwd,
            command: String::new(),
            tool: Tool::Other {
                name: name.unwrap_or_default(),
                input: raw.tool_input.unwrap_or(serde_json::Value::Null),
            },
        });
    }
    let command = match raw.tool_input.as_ref().and_then(|t| t.get("command")) {
        Some(serde_json::Value::String(command)) => command.clone(),
        Some(_) => return Err(InputError::CommandNotString),
        None => return Err(InputError::NoCommand),
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(InputError::CommandTooLong {
            bytes: command.len(),
        });
    }
    let background = ["run_in_background", "is_background"].iter().any(|k| {
        raw.tool_input
            .as_ref()
            .and_then(|t| t.get(*k))
            .is_some_and(|v| *v != serde_json::Value::Bool(false) && !v.is_null())
    });
    let (session, cwd) = session_and_cwd(raw.session_id, raw.cwd)?;
    Ok(Hook {
        session,
        cwd,
        runs_in: RunsIn::Cwd,
        tool: Tool::Bash {
            command: command.clone(),
            background,
        },
        command,
    })
}

/// The hook input's `session_id` and `cwd`, each absent when missing, null or empty; a
/// value that is not a string, or a relative `cwd`, is an error (the guard cannot tell
/// which worktree, and so which lane, a relative directory means).
fn session_and_cwd(
    session: Option<serde_json::Value>,
    cwd: Option<serde_json::Value>,
) -> Result<(Option<String>, Option<PathBuf>), InputError> {
    let string = |v: Option<serde_json::Value>, field: &'static str| match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(InputError::NotString { field }),
    };
    let session = string(session, "session_id")?;
    let cwd = string(cwd, "cwd")?.map(PathBuf::from);
    if let Some(cwd) = &cwd
        && !cwd.is_absolute()
    {
        return Err(InputError::CwdNotAbsolute { cwd: cwd.clone() });
    }
    Ok((session, cwd))
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

    #[test]
    fn every_tool_is_read_and_a_complete_object_is_read_without_eof() {
        let hook = parse(br#"{"session_id":"s","tool_name":"mcp__github__merge_pull_request","tool_input":{"pull_number":3}}"#).unwrap();
        assert_eq!(hook.tool.name(), "mcp__github__merge_pull_request");
        assert!(hook.command.is_empty());
        let hook = parse(br#"{"tool_name":"Read","tool_input":{"file_path":"/x"}}"#).unwrap();
        assert!(matches!(hook.tool, Tool::Other { .. }));
        assert!(parse(br#"{"tool_name":7,"tool_input":{}}"#).is_err());
        // A key given twice is read as the last one, as every harness's own JSON reader
        // (JavaScript's, Rust's serde, Go's) reads it: the tool the harness runs is the
        // tool judged.
        let twice = parse(
            br#"{"tool_name":"Read","tool_name":"Write","tool_input":{"file_path":"a","file_path":"/h/x"}}"#,
        )
        .unwrap();
        assert_eq!(twice.tool.name(), "Write");
        let Tool::Other { input, .. } = &twice.tool else {
            panic!("not a file tool");
        };
        assert_eq!(input["file_path"], "/h/x");
        assert!(parse(br#"{"tool_name":"Bash","tool_input":{}}"#).is_err());
        // A reader that would block after the object (a host that never closes stdin)
        // is not read past it.
        struct Then<'a>(&'a [u8]);
        impl Read for Then<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    panic!("read past the object");
                }
                let n = buf.len().min(self.0.len()).min(1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let hook = read(Then(br#"{"tool_input":{"command":"ls"}}"#)).unwrap();
        assert_eq!(hook.command, "ls");
    }
}
