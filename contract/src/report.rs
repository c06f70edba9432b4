//! How a verdict is shown: the one `row-fence:` line on stderr and the `--json` object on
//! stdout. The asker and the cold `row-fence check` print through this, so a hook reads
//! the same lines from either. Writes never fail the process: a closed or full stdout or
//! stderr does not change the exit code (ARCHITECTURE.md, "Fail closed").

use crate::descriptor::Descriptor;
use crate::verdict::Verdict;
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// A verdict with what it was about and how long it took.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The verdict.
    pub verdict: Verdict,
    /// A human sentence: who holds the row, what failed, where we looked.
    pub detail: String,
    /// The descriptor judged, when one was read.
    pub descriptor: Option<Descriptor>,
    /// Wall time from start to verdict, in ms.
    pub elapsed_ms: u64,
}

impl Shown {
    /// The verdict line, e.g. `row-fence: REFUSED (stale_generation) lane-a holds …`.
    pub fn line(&self) -> String {
        let headline = self.verdict.headline();
        if self.detail.is_empty() {
            format!("row-fence: {headline}")
        } else {
            format!("row-fence: {headline} {}", one_line(&self.detail))
        }
    }

    /// The `--json` object:
    /// `{"verdict","reason","detail","board","row","lane","generation","elapsed_ms"}`.
    pub fn json(&self) -> serde_json::Value {
        let d = self.descriptor.as_ref();
        json!({
            "verdict": self.verdict.wire_name(),
            "reason": self.verdict.reason().map(|r| r.as_str()),
            "detail": self.detail,
            "board": d.map(|d| d.board.as_str()),
            "row": d.map(|d| d.row.as_str()),
            "lane": d.map(|d| d.lane.as_str()),
            "generation": d.map(|d| d.generation),
            "elapsed_ms": self.elapsed_ms,
        })
    }

    /// Prints the verdict line on stderr and, with `json`, the object on stdout.
    pub fn print(&self, json: bool) {
        say(&self.line());
        if json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", self.json());
            let _ = out.flush();
        }
    }
}

/// The line printed, and flushed, before the asker connects, so a hook that kills the
/// asker mid-ask can tell CUT OFF MID-ASK from NEVER RAN.
pub fn asking_line(socket: &Path, d: &Descriptor) -> String {
    format!(
        "row-fence: asking {} for {}/{} as {} at generation {}",
        socket.display(),
        d.board,
        d.row,
        d.lane,
        d.generation
    )
}

/// Writes one line to stderr and flushes it, ignoring every error: a program whose work
/// is done never dies on its report (`row-fence acquire … 2>&1 | head -1`).
/// Unsafe characters are written as `\u{…}` ([`crate::spelling::escape_unsafe`]).
pub fn say(line: &str) {
    let line = crate::spelling::escape_unsafe(line, true);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

/// The first error writing stdout other than a closed pipe, for [`stdout_lost`].
static STDOUT_LOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Writes one line to stdout and flushes it, never failing the process on it (a closed
/// or full stdout); an error other than a closed pipe is kept for [`stdout_lost`]. A human
/// line's unsafe characters are written as `\u{…}` ([`crate::spelling::escape_unsafe`]); a
/// JSON line (starting `{` or `[`) is left as serde_json wrote it, which escapes every C0
/// control itself and must stay valid JSON.
pub fn out(line: &str) {
    let line = if line.starts_with(['{', '[']) {
        std::borrow::Cow::Borrowed(line)
    } else {
        std::borrow::Cow::Owned(crate::spelling::escape_unsafe(line, true))
    };
    let mut stdout = std::io::stdout().lock();
    let wrote = writeln!(stdout, "{line}").and_then(|_| stdout.flush());
    if let Err(e) = wrote
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        let _ = STDOUT_LOST.set(e.to_string());
    }
}

/// Why output printed with [`out`] was lost, if it was (a full disk, `/dev/full`): a
/// command whose output is its product (`show`, `status --json`) then exits 1 rather than
/// 0 over nothing. A closed pipe (`| head -1`) is the reader's choice, not a loss.
pub fn stdout_lost() -> Option<&'static str> {
    STDOUT_LOST.get().map(String::as_str)
}

/// [`say`] with `format!`'s arguments: `say!("row-fence: wrote {}", path.display())`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::report::say(&format!($($arg)*))
    };
}

/// Keeps a detail on the verdict's one line.
/// Every other unsafe character is written as `\u{…}`, so a detail cannot forge a line.
fn one_line(text: &str) -> String {
    crate::spelling::escape_unsafe(&text.replace(['\n', '\r'], " "), false)
}
