//! `row-fence-ask --git-credential`: git's first credential helper, for https (and http)
//! remotes. On `get` it asks the fence: ALLOWED (or UNFENCED) prints nothing, so the
//! repository's own helpers answer as before; anything else prints `quit=1`, and git stops
//! without asking another helper or the terminal. `store` and `erase` print nothing.
//!
//! A helper cannot tell a push from a fetch (git asks for credentials before either), so a
//! refused lane cannot fetch over https from a server that wants credentials either. The
//! installer wraps the command in `|| echo quit=1`, so a helper that cannot run at all
//! stops git too.

use crate::transport::{self, GateUsage};
use row_fence_contract::exit;
use std::ffi::OsString;
use std::io::{Read, Write};

/// The first argument that selects this mode.
pub const FLAG: &str = "--git-credential";

/// Git's credential input is a few short lines; more than this (64 KiB) is not read.
const MAX_INPUT_BYTES: u64 = 64 * 1024;

/// Runs the mode with the arguments after [`FLAG`]; returns the exit code. `Err`: a usage
/// error (git passes exactly one operation).
pub fn main(args: &[OsString]) -> Result<i32, GateUsage> {
    let (gate, rest) = transport::split(args)?;
    let operation = match rest {
        [op] => op.to_string_lossy().into_owned(),
        _ => return Err(GateUsage::CredentialOperation),
    };
    // Read what git writes, so it never meets a closed pipe.
    let mut input = Vec::new();
    let _ = std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES)
        .read_to_end(&mut input);
    if operation != "get" {
        return Ok(exit::ALLOWED);
    }
    let action = format!(
        "git push or fetch over {}",
        describe(&String::from_utf8_lossy(&input))
    );
    if gate.ask(action) == exit::ALLOWED {
        return Ok(exit::ALLOWED);
    }
    let mut out = std::io::stdout().lock();
    Ok(
        match out.write_all(b"quit=1\n").and_then(|()| out.flush()) {
            Ok(()) => exit::ALLOWED,
            // Not said: exit non-zero so the installer's `|| echo quit=1` says it.
            Err(_) => exit::COULD_NOT_READ,
        },
    )
}

/// `protocol://host/path` from git's `key=value` lines (for the ledger's action).
pub fn describe(input: &str) -> String {
    let field = |key: &str| {
        input
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("")
    };
    let path = field("path");
    format!(
        "{}://{}{}{}",
        field("protocol"),
        field("host"),
        if path.is_empty() { "" } else { "/" },
        path
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_names_the_url_git_asks_about() {
        let input = "capability[]=authtype\nprotocol=https\nhost=example.invalid:8443\npath=r.git\nwwwauth[]=Basic realm=\"x\"\n\nhost=late\n";
        assert_eq!(describe(input), "https://example.invalid:8443/r.git");
        assert_eq!(describe("protocol=http\nhost=h\n"), "http://h");
        assert_eq!(describe(""), "://");
    }
}
