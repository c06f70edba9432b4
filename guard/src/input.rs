//! The hook's input: the JSON value on stdin, read within bounds, and the call it names
//! ([`Hook`]), whatever harness sent it ([`crate::harness`] reads each harness's shape into
//! [`Call`]). Every tool is read: the shell tool's command, and any other tool's name and
//! input as they are. The first complete JSON value is read without waiting for the end
//! of the input (a host that never closes stdin is answered). Input that is not that JSON
//! is an error the guard denies on (fail closed: a hook input it cannot read never yields
//! ALLOWED).

use crate::parse::MAX_COMMAND_BYTES;
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
    /// JSON, but not an object.
    #[error("the hook input is not a JSON object")]
    NotObject,
    /// A member of the wrong type (the message names it), or a tool input sent as JSON
    /// text that is not JSON.
    #[error("{0}")]
    Shape(#[source] serde_json::Error),
    /// A member the harness always sends is not there.
    #[error("the hook input has no {member}")]
    Missing {
        /// The member's name.
        member: &'static str,
    },
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

/// One tool call as every harness names it, read from the harness's own shape
/// ([`crate::harness`]): the members [`Call::hook`] checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The agent session, when given (a null or empty one is none).
    pub session: Option<String>,
    /// The session's working directory, when given; absolute, or refused.
    pub cwd: Option<String>,
    /// The tool, in Claude Code's names (`Bash` for a shell tool).
    pub tool_name: String,
    /// The tool's input (`null` when the harness sent none).
    pub tool_input: serde_json::Value,
    /// Where the tool runs.
    pub runs_in: RunsIn,
}

impl Call {
    /// The call the guard judges: a `Bash` call's `tool_input.command` (a string within
    /// [`MAX_COMMAND_BYTES`]) and whether it runs in the background; any other tool as
    /// it is. A relative `cwd` is refused: the guard cannot tell which worktree, and so
    /// which lane, a relative directory means.
    pub fn hook(self) -> Result<Hook, InputError> {
        let cwd = self.cwd.filter(|c| !c.is_empty()).map(PathBuf::from);
        let session = self.session.filter(|s| !s.is_empty());
        if self.tool_name != "Bash" {
            if let Some(cwd) = &cwd
                && !cwd.is_absolute()
            {
                return Err(InputError::CwdNotAbsolute { cwd: cwd.clone() });
            }
            return Ok(Hook {
                session,
                cwd,
                runs_in: self.runs_in,
                command: String::new(),
                tool: Tool::Other {
                    name: self.tool_name,
                    input: self.tool_input,
                },
            });
        }
        let command = match self.tool_input.get("command") {
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
            self.tool_input
                .get(*k)
                .is_some_and(|v| *v != serde_json::Value::Bool(false) && !v.is_null())
        });
        if let Some(cwd) = &cwd
            && !cwd.is_absolute()
        {
            return Err(InputError::CwdNotAbsolute { cwd: cwd.clone() });
        }
        Ok(Hook {
            session,
            cwd,
            runs_in: self.runs_in,
            tool: Tool::Bash {
                command: command.clone(),
                background,
            },
            command,
        })
    }
}
