//! Which Codex runs the hook (ARCHITECTURE.md, "Agent hooks"): the guard reads where a
//! Codex shell call runs from the `tool_cwd` of its hook input, which Codex sends from
//! [`TOOL_CWD_SINCE`] on. An older Codex sends only the turn's `cwd`, so the guard takes
//! the call's directory as unknown: a row-bound session's fenced writes and opaque
//! commands are denied, as is an unbound session's fenced write. `install agent-hook
//! --agent codex` and `doctor` learn the version from `codex --version` on `PATH`, and say
//! so when there is none to ask.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The first Codex release whose `PreToolUse` input carries `tool_cwd` (its hooks crate's
/// `PreToolUseRequest::tool_cwd`, tag `rust-v0.169.0`).
pub const TOOL_CWD_SINCE: (u64, u64, u64) = (0, 169, 0);

/// How long `codex --version` may take (3 s): a version check must not hang an install.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// What the check found: a problem (an older Codex), or a note (no version to check).
#[derive(Debug, PartialEq, Eq)]
pub enum Finding {
    /// This Codex sends `tool_cwd`.
    Sends,
    /// An older Codex: the sentence for doctor's problems.
    TooOld(String),
    /// The version cannot be learned: the sentence for a note.
    Unknown(String),
}

/// What happens to a Codex shell call without `tool_cwd`, for the sentences below.
const WITHOUT: &str = "the guard cannot tell where its shell calls run, so a row-bound session's fenced writes and opaque commands are denied as directory unknown (and an unbound session's fenced writes)";

/// Checks the `codex` on `path` (a `PATH` value).
pub fn check(path: Option<&std::ffi::OsStr>) -> Finding {
    let Some(codex) = find(path) else {
        return Finding::Unknown(format!(
            "codex is not on PATH, so its version cannot be checked: Codex before {} sends no tool_cwd in its hook input, and then {WITHOUT}",
            dotted(TOOL_CWD_SINCE)
        ));
    };
    let text = match version_text(&codex) {
        Ok(text) => text,
        Err(why) => {
            return Finding::Unknown(format!(
                "{} --version {why}, so its version cannot be checked: Codex before {} sends no tool_cwd, and then {WITHOUT}",
                codex.display(),
                dotted(TOOL_CWD_SINCE)
            ));
        }
    };
    match parse(&text) {
        Some(v) if v >= TOOL_CWD_SINCE => Finding::Sends,
        Some(v) => Finding::TooOld(format!(
            "{} is Codex {}, which sends no tool_cwd in its hook input (Codex {} and later do): {WITHOUT}; upgrade Codex",
            codex.display(),
            dotted(v),
            dotted(TOOL_CWD_SINCE)
        )),
        None => Finding::Unknown(format!(
            "{} --version printed {:?}, not a version: Codex before {} sends no tool_cwd, and then {WITHOUT}",
            codex.display(),
            text.trim(),
            dotted(TOOL_CWD_SINCE)
        )),
    }
}

/// The first `MAJOR.MINOR.PATCH` in `text` (`codex-cli 0.169.0`).
pub fn parse(text: &str) -> Option<(u64, u64, u64)> {
    text.split(|c: char| c.is_whitespace() || c == 'v')
        .find_map(|word| {
            let core = word.split(['-', '+']).next()?;
            let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
            let v = (parts.next()??, parts.next()??, parts.next()??);
            parts.next().is_none().then_some(v)
        })
}

fn dotted(v: (u64, u64, u64)) -> String {
    format!("{}.{}.{}", v.0, v.1, v.2)
}

/// The executable `codex` a shell would run from `path`.
fn find(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("codex"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Why `codex --version` gave no output to read.
#[derive(Debug, thiserror::Error)]
enum VersionError {
    /// It could not be started.
    #[error("cannot run ({0})")]
    Run(#[source] std::io::Error),
    /// It did not exit within [`VERSION_TIMEOUT`].
    #[error("did not answer within {} s", VERSION_TIMEOUT.as_secs())]
    Timeout,
    /// Its exit could not be waited for.
    #[error("cannot be waited for ({0})")]
    Wait(#[source] std::io::Error),
}

/// `codex --version`'s output, within [`VERSION_TIMEOUT`].
fn version_text(codex: &Path) -> Result<String, VersionError> {
    use std::io::Read;
    let mut child = std::process::Command::new(codex)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(VersionError::Run)?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(VersionError::Timeout);
            }
            Err(e) => return Err(VersionError::Wait(e)),
        }
    }
    let mut text = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = out.take(4096).read_to_string(&mut text);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_codex_prints() {
        assert_eq!(parse("codex-cli 0.169.0\n"), Some((0, 169, 0)));
        assert_eq!(parse("codex-cli 0.170.2-alpha.1"), Some((0, 170, 2)));
        assert_eq!(parse("codex v1.2.3"), Some((1, 2, 3)));
        assert_eq!(parse("codex"), None);
        assert!((0, 168, 9) < TOOL_CWD_SINCE && (0, 169, 0) >= TOOL_CWD_SINCE);
    }
}
