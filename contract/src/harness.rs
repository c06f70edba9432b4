//! The agent harnesses whose hooks run the guard (ARCHITECTURE.md, "Agent hooks"): one
//! name per harness, one parser, one list. The guard reads each one's hook input and
//! answers in its convention, the installer writes each one's hook file, the bench runs
//! each one's hook; what is their own (file locations, inputs, cases) stays with them, as
//! matches on this enum.
//!
//! The name is the one `row-fence-guard --harness` and `row-fence install agent-hook
//! --agent` take. A command-line parser adapts [`Harness`] through [`std::str::FromStr`]
//! and [`Harness::ALL`]: this crate links none.

use std::fmt;
use std::str::FromStr;

/// An agent harness the row fence hooks.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Harness {
    /// Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
    /// Google's Gemini CLI.
    Gemini,
    /// Cursor.
    Cursor,
}

impl Harness {
    /// Every harness, in the order reports list them (`doctor`, the bench).
    pub const ALL: [Harness; 4] = [
        Harness::Claude,
        Harness::Codex,
        Harness::Gemini,
        Harness::Cursor,
    ];

    /// The harness `row-fence-guard --harness` and `install agent-hook --agent` take when
    /// none is named.
    pub const DEFAULT: Harness = Harness::Claude;

    /// The name `--harness` and `--agent` take, and reports print.
    pub const fn name(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Gemini => "gemini",
            Harness::Cursor => "cursor",
        }
    }

    /// Every harness's name, as a sentence lists them: `claude, codex, gemini or cursor`.
    pub fn listed() -> String {
        let names = Harness::ALL.map(Harness::name);
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// The harness's own name, as a sentence names it.
    pub fn title(self) -> &'static str {
        match self {
            Harness::Claude => "Claude Code",
            Harness::Codex => "Codex",
            Harness::Gemini => "Gemini CLI",
            Harness::Cursor => "Cursor",
        }
    }

    /// The events whose hooks run the guard, as the harness's hook file and its hook
    /// input name them; the first is its shell tool's.
    pub const fn hook_events(self) -> &'static [&'static str] {
        match self {
            Harness::Claude | Harness::Codex => &[events::PRE_TOOL_USE],
            Harness::Gemini => &[events::BEFORE_TOOL],
            Harness::Cursor => &[events::BEFORE_SHELL_EXECUTION, events::BEFORE_MCP_EXECUTION],
        }
    }

    /// The directory the harness reads its settings and hooks from, in the user's home
    /// and in a project: a hook switched off there is off for the next session.
    pub const fn settings_dir(self) -> &'static str {
        match self {
            Harness::Claude => ".claude",
            Harness::Codex => ".codex",
            Harness::Gemini => ".gemini",
            Harness::Cursor => ".cursor",
        }
    }
}

/// The hook events the harnesses call before a tool runs, as their hook files and hook
/// inputs spell them ([`Harness::hook_events`]).
pub mod events {
    /// Claude Code's and Codex's.
    pub const PRE_TOOL_USE: &str = "PreToolUse";
    /// Gemini CLI's.
    pub const BEFORE_TOOL: &str = "BeforeTool";
    /// Cursor's, for its shell tool.
    pub const BEFORE_SHELL_EXECUTION: &str = "beforeShellExecution";
    /// Cursor's, for an MCP tool.
    pub const BEFORE_MCP_EXECUTION: &str = "beforeMCPExecution";
    /// Cursor 2's, for any tool: the guard reads it; install writes the two above.
    pub const CURSOR_PRE_TOOL_USE: &str = "preToolUse";
}

/// How long every harness is given for one hook, in seconds (each hook file says it in
/// its harness's unit): past it the harness gives up on the hook.
pub const HOOK_TIMEOUT_S: u64 = 10;

/// The guard's own deadline for one hook, in ms: inside [`HOOK_TIMEOUT_S`], so the
/// guard's deny reaches the harness before the harness gives up on the hook and the tool
/// call runs.
pub const GUARD_DEADLINE_MS: u64 = 8000;

const _: () = assert!(GUARD_DEADLINE_MS < HOOK_TIMEOUT_S * 1000);

impl Default for Harness {
    fn default() -> Harness {
        Harness::DEFAULT
    }
}

impl fmt::Display for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of [`Harness::ALL`]'s (exact, lowercase: the names are a
/// contract with the hook files installs write, so no other spelling is guessed at).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownHarness {
    /// The name given.
    pub name: String,
}

impl fmt::Display for UnknownHarness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no harness is named {:?}: give {}",
            self.name,
            Harness::listed()
        )
    }
}

impl std::error::Error for UnknownHarness {}

impl FromStr for Harness {
    type Err = UnknownHarness;

    fn from_str(name: &str) -> Result<Harness, UnknownHarness> {
        Harness::ALL
            .into_iter()
            .find(|h| h.name() == name)
            .ok_or_else(|| UnknownHarness {
                name: name.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_harness_parses_from_its_name_and_no_other_spelling() {
        for h in Harness::ALL {
            assert_eq!(h.name().parse::<Harness>(), Ok(h));
            assert_eq!(h.to_string(), h.name());
            assert_eq!(
                serde_json::to_value(h).unwrap(),
                serde_json::json!(h.name())
            );
        }
        for bad in ["", "Claude", "claude-code", " codex", "vscode"] {
            let err = bad.parse::<Harness>().unwrap_err();
            assert_eq!(err.name, bad);
            assert!(err.to_string().contains("claude, codex, gemini or cursor"));
        }
        assert_eq!(Harness::default(), Harness::DEFAULT);
        assert_eq!(Harness::DEFAULT.name(), "claude");
        assert_eq!(Harness::listed(), "claude, codex, gemini or cursor");
    }

    #[test]
    fn each_harness_has_a_settings_directory_of_its_own() {
        let dirs: Vec<&str> = Harness::ALL.iter().map(|h| h.settings_dir()).collect();
        assert_eq!(dirs, [".claude", ".codex", ".gemini", ".cursor"]);
    }
}
