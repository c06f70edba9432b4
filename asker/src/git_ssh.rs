//! `row-fence-ask --git-ssh`: git's `core.sshCommand`. Git runs it as `<command> [ssh
//! options] HOST REMOTE_COMMAND` (through `sh -c`), the remote command last. A fetch
//! (`git-upload-pack '<path>'`, `git-upload-archive '<path>'`) and ssh's `-G` (which prints
//! the configuration and connects nowhere; git uses it to learn what kind of ssh it runs)
//! pass untouched; anything else (`git-receive-pack`, a `--receive-pack` of the user's, a
//! command we cannot read) asks the fence first. Then it execs the ssh the repository had:
//! `--then COMMAND` as git would run it, else `$GIT_SSH`, else `ssh`.

use crate::transport;
use row_fence_contract::exit;
use row_fence_contract::report;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The first argument that selects this mode.
pub const FLAG: &str = "--git-ssh";

/// Runs the mode with the arguments after [`FLAG`]; returns the exit code when it does not
/// exec ssh. `Err`: a usage error.
pub fn main(args: &[OsString]) -> Result<i32, transport::GateUsage> {
    let (gate, ssh_args) = transport::split(args)?;
    if ssh_args.first().is_some_and(|a| a == "-G") && named_ssh(gate.then.as_deref()) {
        // Git probes a command it does not know by name with `-G`; for one named `ssh` it
        // never did (it took it for OpenSSH), so answer as OpenSSH does, without a process.
        return Ok(exit::ALLOWED);
    }
    if let Some(write) = remote_write(ssh_args) {
        let code = gate.ask(format!("git push over ssh: {write}"));
        if code != exit::ALLOWED {
            return Ok(code);
        }
    }
    Ok(exec_ssh(gate.then.as_deref(), ssh_args))
}

/// What the remote is asked to run, as `HOST COMMAND`, when it may write; `None` for a
/// fetch and for `-G`. Arguments git would never pass (no command at all) may write.
pub fn remote_write(args: &[OsString]) -> Option<String> {
    if args.first().is_some_and(|a| a == "-G") {
        return None;
    }
    let text = |a: &OsString| a.to_string_lossy().into_owned();
    match args {
        [.., host, command] => {
            let command = text(command);
            (!is_fetch(&command)).then(|| format!("{} {command}", text(host)))
        }
        _ => Some(args.iter().map(text).collect::<Vec<_>>().join(" ")),
    }
}

/// True for the remote commands git runs to read: `git-upload-pack` or
/// `git-upload-archive`, also by a path (`remote.<name>.uploadpack =
/// /opt/git/bin/git-upload-pack`, for a host whose `PATH` lacks git) or in git's dashless
/// form (`git upload-pack`), followed by one path quoted as git quotes it. A program
/// path holds only characters no shell reads specially, so it names one program.
pub fn is_fetch(command: &str) -> bool {
    let Some((program, path)) = command
        .strip_prefix("git upload-pack ")
        .map(|path| ("git-upload-pack", path))
        .or_else(|| {
            command
                .strip_prefix("git upload-archive ")
                .map(|path| ("git-upload-archive", path))
        })
        .or_else(|| command.split_once(' '))
    else {
        return false;
    };
    let plain = program
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._+-".contains(c));
    let name = program.rsplit('/').next().unwrap_or(program);
    plain && matches!(name, "git-upload-pack" | "git-upload-archive") && is_one_quoted_word(path)
}

/// True when `text` is one word as git's `sq_quote_buf` writes it: single-quoted runs,
/// joined by `\'` or `\!` outside the quotes, and nothing else.
fn is_one_quoted_word(text: &str) -> bool {
    let mut rest = text;
    loop {
        let Some(inner) = rest.strip_prefix('\'') else {
            return false;
        };
        let Some(end) = inner.find('\'') else {
            return false;
        };
        rest = &inner[end + 1..];
        if rest.is_empty() {
            return true;
        }
        match rest
            .strip_prefix("\\'")
            .or_else(|| rest.strip_prefix("\\!"))
        {
            Some(after) => rest = after,
            None => return false,
        }
    }
}

/// True when the command [`exec_ssh`] runs is one git calls by its name `ssh` (the first
/// word of `then`, else `$GIT_SSH`, else `ssh`), so git would have taken it for OpenSSH.
fn named_ssh(then: Option<&str>) -> bool {
    let git_ssh = std::env::var("GIT_SSH").ok().filter(|v| !v.is_empty());
    let program = match then.filter(|c| !c.is_empty()) {
        Some(line) => line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(['\'', '"'])
            .to_string(),
        None => git_ssh.unwrap_or_else(|| "ssh".into()),
    };
    let name = std::path::Path::new(&program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    name == "ssh" || name == "ssh.exe"
}

/// Characters for which git runs a command through `sh -c` (`prepare_shell_cmd`).
const SHELL_METACHARACTERS: &str = "|&;<>()$`\\\"' \t\n*?[#~=%";

/// Execs the ssh the repository had, as git would have run it; returns only when that
/// fails (exit 255, what ssh exits with when it cannot connect).
fn exec_ssh(then: Option<&str>, args: &[OsString]) -> i32 {
    let mut command = match then.filter(|c| !c.is_empty()) {
        Some(line) if line.contains(|c| SHELL_METACHARACTERS.contains(c)) => {
            let mut sh = Command::new("sh");
            sh.arg("-c").arg(format!("{line} \"$@\"")).arg(line);
            sh
        }
        Some(program) => Command::new(program),
        None => match std::env::var_os("GIT_SSH").filter(|v| !v.is_empty()) {
            Some(program) => Command::new(program),
            None => Command::new("ssh"),
        },
    };
    command.args(args);
    let error = command.exec();
    report::say(&format!(
        "row-fence: cannot run the ssh command {:?}: {error}",
        command.get_program()
    ));
    255
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn fetches_pass_and_everything_else_asks() {
        for fetch in [
            "git-upload-pack '/srv/r.git'",
            "git-upload-pack 'r.git'",
            "git-upload-archive '/srv/r.git'",
            "git-upload-pack 'it'\\''s'",
            "git-upload-pack 'a'\\!'b'",
            "/usr/lib/git-core/git-upload-pack '/srv/r.git'",
            "git upload-pack '/srv/r.git'",
            "git upload-archive '/srv/r.git'",
            "../bin/git-upload-pack 'r.git'",
        ] {
            assert!(is_fetch(fetch), "{fetch}");
            assert_eq!(remote_write(&os(&["-p", "22", "host", fetch])), None);
        }
        for write in [
            "git-receive-pack '/srv/r.git'",
            "git receive-pack '/srv/r.git'",
            "/usr/lib/git-core/git-receive-pack '/srv/r.git'",
            "git-upload-pack '/srv/r.git'; git-receive-pack '/srv/r.git'",
            "git-upload-pack '/srv/r.git' && touch x",
            "git-upload-pack /srv/r.git",
            "git-upload-pack '/srv/r.git",
            "git-upload-pack ''\\x",
            "git-upload-pack",
            "sh -c 'git-upload-pack x'",
            "/opt/$(touch x)/git-upload-pack '/srv/r.git'",
            "/opt/a;b/git-upload-pack '/srv/r.git'",
            "~evil/git-upload-pack '/srv/r.git'",
            "/opt/git-upload-packx '/srv/r.git'",
            "git upload-pack  '/srv/r.git'",
            "git -c x=y upload-pack '/srv/r.git'",
            "/usr/lib/git-core/git-receive-pack '/srv/r.git'",
        ] {
            assert!(!is_fetch(write), "{write}");
            assert_eq!(
                remote_write(&os(&["host", write])),
                Some(format!("host {write}"))
            );
        }
        assert_eq!(remote_write(&os(&["-G", "-p", "22", "host"])), None);
    }

    #[test]
    fn a_command_named_ssh_is_taken_for_openssh_as_git_takes_it() {
        assert!(named_ssh(Some("ssh -o BatchMode=yes")));
        assert!(named_ssh(Some("/usr/bin/ssh")));
        assert!(named_ssh(Some("'/usr/bin/ssh' -i key")));
        assert!(!named_ssh(Some("plink -batch")));
        assert!(!named_ssh(Some("/opt/wrap-ssh")));
        assert_eq!(remote_write(&os(&["host"])), Some("host".into()));
        assert_eq!(remote_write(&os(&[])), Some(String::new()));
    }
}
