//! `row-fence install broker`: git in a repository signs through the key broker, the
//! daemon's ssh agent (ARCHITECTURE.md, "Key broker").
//!
//! The repository keeps ONE `core.sshCommand`, the transport gate's wrapper in the one
//! included file ([`crate::git_gate`]), which already owns that key. Wiring the broker in
//! makes the wrapper run OpenSSH with the broker's options first:
//! `-o IdentityAgent=<socket> -o IdentitiesOnly=yes -o IdentityFile=<the push key's .pub>
//! -o ControlMaster=no -o ControlPath=none`. Without the `IdentityFile`, `IdentitiesOnly`
//! makes ssh offer only default key files and never the agent's; without the two
//! `Control*` options a connection opened while ALLOWED could be kept and reused later
//! with no new signature.
//!
//! What is wired in is kept in a file of the broker's own beside the config
//! ([`WIRING_FILE`], not read by git), so the gate and the broker compose: the included
//! file is written from both, installing one keeps the other, and taking one back writes
//! the file again with the other's part alone. Taking the last one back removes the lines
//! from the config, which comes back byte for byte.

use crate::git_gate::{self, Done, GateError};
use crate::git_hook::Baked;
use crate::git_repo::{self, Repository};
use crate::render::bin_dir;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_resident::config::Settings;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The broker's wiring file, in the common git dir.
pub const WIRING_FILE: &str = "row-fence-broker.json";

/// What the included file says of the broker's part.
pub const INCLUDE_NOTE: &str = "# The key broker (`row-fence install broker`; `row-fence install broker --rollback` takes it\n\
     # out): the ssh below offers only the push key the daemon's agent holds, through the\n\
     # daemon's socket, on a connection of its own (no multiplexing).\n";

/// A wiring file or public key file is refused above this size.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Where ssh reaches the broker and which of its keys it offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wiring {
    /// The daemon's agent socket (absolute): ssh's `IdentityAgent`.
    pub agent: PathBuf,
    /// The push key's public half (absolute): ssh's `IdentityFile`, which with
    /// `IdentitiesOnly` selects that key among the agent's.
    pub identity_file: PathBuf,
}

/// Why the broker's wiring cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WiringError {
    /// A file cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The wiring file is not what install writes.
    #[error("{}: not the key broker's wiring ({reason}); fix or remove it by hand", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A path holds a character ssh's option parser or its `%`/`~`/`${}` expansion reads
    /// specially, or is not absolute: ssh would look elsewhere.
    #[error(
        "{what} {path:?} must be an absolute path of letters, digits and / . _ + @ , : - only (ssh expands or splits others)"
    )]
    Path {
        /// Which path.
        what: &'static str,
        /// The path given.
        path: PathBuf,
    },
    /// The key file is not one OpenSSH public key line.
    #[error("{}: not an OpenSSH public key ({reason})", path.display())]
    NotPublicKey {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

impl Wiring {
    /// Checks both paths (absolute, characters ssh reads literally) and that
    /// `identity_file` holds one public key line.
    pub fn new(agent: PathBuf, identity_file: PathBuf) -> Result<Wiring, WiringError> {
        literal_path("--broker-socket", &agent)?;
        literal_path("--key-pub", &identity_file)?;
        public_key(&identity_file)?;
        Ok(Wiring {
            agent,
            identity_file,
        })
    }

    /// The wiring in `common_dir`; `None` when the broker is not wired in there.
    pub fn read(common_dir: &Path) -> Result<Option<Wiring>, WiringError> {
        let path = common_dir.join(WIRING_FILE);
        let text = match read_small(&path) {
            Ok(text) => text,
            Err(WiringError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let wiring: Wiring = serde_json::from_str(&text).map_err(|e| WiringError::Invalid {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        for (what, p) in [
            ("agent", &wiring.agent),
            ("identity_file", &wiring.identity_file),
        ] {
            literal_path(what, p).map_err(|e| WiringError::Invalid {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(Some(wiring))
    }

    /// The ssh options, in the order ssh reads them (the first value of an option wins).
    pub fn ssh_options(&self) -> Vec<String> {
        [
            format!("IdentityAgent={}", self.agent.display()),
            "IdentitiesOnly=yes".into(),
            format!("IdentityFile={}", self.identity_file.display()),
            "ControlMaster=no".into(),
            "ControlPath=none".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    /// The ssh command the gate's wrapper runs once the fence says yes. Every word is
    /// one a shell reads as is (the paths are allowlisted), so the options read plainly.
    pub fn ssh_line(&self) -> String {
        std::iter::once("ssh".to_string())
            .chain(self.ssh_options())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Allowlist: what ssh's option parser and its `%`, `~` and `${}` expansions read as is.
fn literal_path(what: &'static str, path: &Path) -> Result<(), WiringError> {
    let text = path.to_str().unwrap_or("");
    let literal = path.is_absolute()
        && !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+@,:-".contains(c));
    if literal {
        Ok(())
    } else {
        Err(WiringError::Path {
            what,
            path: path.to_path_buf(),
        })
    }
}

fn read_small(path: &Path) -> Result<String, WiringError> {
    let io_error = |source| WiringError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    fs::File::open(path)
        .map_err(io_error)?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(io_error)?;
    Ok(text)
}

/// Checks that `path` holds one OpenSSH public key line: `TYPE BASE64 [comment]`.
fn public_key(path: &Path) -> Result<(), WiringError> {
    let text = read_small(path)?;
    let refuse = |reason| {
        Err(WiringError::NotPublicKey {
            path: path.to_path_buf(),
            reason,
        })
    };
    if text.contains("PRIVATE KEY") {
        return refuse("it is a private key: give its .pub");
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [line] = lines.as_slice() else {
        return refuse("it must hold exactly one key line");
    };
    let mut words = line.split_whitespace();
    let kind = words.next().unwrap_or("");
    let blob = words.next().unwrap_or("");
    let known = kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
    let base64 = !blob.is_empty()
        && blob
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c));
    if !known || !base64 {
        return refuse("no key type and base64 key");
    }
    Ok(())
}

/// `row-fence install broker`'s flags.
#[derive(clap::Args, Debug)]
pub struct BrokerArgs {
    /// The repository (any directory in it)
    #[arg(long, value_name = "PATH", default_value = ".")]
    repo: PathBuf,
    /// The daemon's agent socket [default: $ROW_FENCE_BROKER_SOCKET, as the daemon reads it]
    #[arg(long, value_name = "PATH", conflicts_with = "rollback")]
    broker_socket: Option<PathBuf>,
    /// The push key's public half, which ssh offers from the agent [default: the first of $ROW_FENCE_BROKER_KEYS with .pub appended]
    #[arg(long, value_name = "FILE", conflicts_with = "rollback")]
    key_pub: Option<PathBuf>,
    /// The directory holding the row-fence-ask the wrapper runs [default: the transport gate's, else this program's directory]
    #[arg(long, value_name = "DIR", conflicts_with = "rollback")]
    bin_dir: Option<PathBuf>,
    /// Take the broker's options out (the transport gate, if installed, stays; else the config comes back byte for byte)
    #[arg(long)]
    rollback: bool,
}

/// `install broker`: wires the broker into the repository's ssh command (or with
/// `--rollback` takes it out); with `json`, prints
/// `{"rollback","repository","agent","identity_file","gate","done"}` once done.
pub fn run(args: BrokerArgs, settings: &Settings, json: bool) -> Outcome {
    let repos = git_repo::discover(&args.repo, false).map_err(Failure::could_not)?;
    let repo = repos
        .first()
        .ok_or_else(|| Failure::could_not("no repository found"))?;
    let (wiring, done) = if args.rollback {
        (
            Wiring::read(&repo.common_dir).map_err(|e| Failure::could_not(e.to_string()))?,
            rollback(repo)?,
        )
    } else {
        let wiring = wiring(&args)?;
        crate::lane_socket::reachable(&repo.common_dir, &wiring.agent)?;
        let done = install(repo, &args, settings, &wiring)?;
        (Some(wiring), done)
    };
    let config = repo.config();
    say(&match done {
        Done::Installed | Done::Refreshed => format!(
            "git in {} signs through the key broker at {} (key {})",
            config.display(),
            wiring
                .as_ref()
                .map_or(String::new(), |w| w.agent.display().to_string()),
            wiring
                .as_ref()
                .map_or(String::new(), |w| w.identity_file.display().to_string()),
        ),
        Done::RolledBack => format!("took the key broker out of {}", config.display()),
        Done::NotInstalled => format!("no key broker in {}", config.display()),
    });
    if json {
        out(&serde_json::json!({
            "rollback": args.rollback,
            "repository": config.display().to_string(),
            "agent": wiring.as_ref().map(|w| w.agent.display().to_string()),
            "identity_file": wiring.as_ref().map(|w| w.identity_file.display().to_string()),
            "gate": git_gate::gate_in(&repo.common_dir),
            "done": match done {
                Done::Installed => "installed",
                Done::Refreshed => "refreshed",
                Done::RolledBack => "rolled back",
                Done::NotInstalled => "not installed",
            },
        })
        .to_string());
    }
    Ok(exit::ALLOWED)
}

/// The socket and key from the flags, else the daemon's environment, made absolute.
fn wiring(args: &BrokerArgs) -> Result<Wiring, Failure> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let socket = args
        .broker_socket
        .clone()
        .or_else(|| env("ROW_FENCE_BROKER_SOCKET").map(PathBuf::from))
        .ok_or_else(|| {
            Failure::usage(
                "give --broker-socket (or set ROW_FENCE_BROKER_SOCKET as the daemon has it)",
            )
        })?;
    let key = args
        .key_pub
        .clone()
        .or_else(|| {
            let keys = env("ROW_FENCE_BROKER_KEYS")?.into_string().ok()?;
            let first = keys.split(',').find(|k| !k.is_empty())?;
            Some(PathBuf::from(format!("{first}.pub")))
        })
        .ok_or_else(|| {
            Failure::usage("give --key-pub (or set ROW_FENCE_BROKER_KEYS as the daemon has it)")
        })?;
    let absolute = |p: &Path| {
        std::path::absolute(p).map_err(|e| Failure::could_not(format!("{}: {e}", p.display())))
    };
    Wiring::new(absolute(&socket)?, absolute(&key)?).map_err(|e| Failure::usage(e.to_string()))
}

/// What the repository held before, to write back when the install cannot finish.
struct Snapshot {
    config: Option<Vec<u8>>,
    include: Option<Vec<u8>>,
    wiring: Option<Vec<u8>>,
}

impl Snapshot {
    fn take(common_dir: &Path) -> Snapshot {
        Snapshot {
            config: fs::read(common_dir.join("config")).ok(),
            include: fs::read(common_dir.join(git_gate::INCLUDE_FILE)).ok(),
            wiring: fs::read(common_dir.join(WIRING_FILE)).ok(),
        }
    }

    /// Writes everything back as it was; the first failure is returned.
    fn restore(&self, common_dir: &Path) -> Result<(), String> {
        if let Some(bytes) = &self.config
            && fs::read(common_dir.join("config")).ok().as_ref() != Some(bytes)
        {
            git_gate::restore_config(common_dir, bytes).map_err(|e| e.to_string())?;
        }
        for (name, bytes) in [
            (git_gate::INCLUDE_FILE, &self.include),
            (WIRING_FILE, &self.wiring),
        ] {
            let path = common_dir.join(name);
            let done = match bytes {
                Some(bytes) => row_fence_store::atomic_file::write(&path, bytes, 0o644, false),
                None => match fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
            };
            done.map_err(|e| format!("cannot restore {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

fn install(
    repo: &Repository,
    args: &BrokerArgs,
    settings: &Settings,
    wiring: &Wiring,
) -> Result<Done, Failure> {
    let common = &repo.common_dir;
    let gate = git_gate::gate_in(common);
    // The gate's wrapper keeps the asker, home and socket it was installed with.
    let baked = match (&args.bin_dir, git_gate::baked_in(common)) {
        (None, Some(baked)) if gate => baked,
        _ => Baked {
            bin_dir: bin_dir(args.bin_dir.as_ref())?,
            home: settings.home.clone(),
            socket: settings.socket.clone(),
        },
    };
    let before = Snapshot::take(common);
    let undo = |failure: String| -> Failure {
        match before.restore(common) {
            Ok(()) => Failure::could_not(format!("nothing was installed: {failure}")),
            Err(stuck) => Failure::could_not(format!(
                "{failure}; and taking the install back failed: {stuck}"
            )),
        }
    };
    let wiring_path = common.join(WIRING_FILE);
    row_fence_store::atomic_file::write(&wiring_path, wiring.text().as_bytes(), 0o644, false)
        .map_err(|e| undo(format!("cannot write {}: {e}", wiring_path.display())))?;
    let plan = git_gate::plan_parts(common, &baked, gate)
        .map_err(|e| undo(format!("{}: {e}", repo.config().display())))?;
    git_gate::install(&plan).map_err(|e| undo(format!("{}: {e}", repo.config().display())))?;
    let problems: Vec<String> = repo
        .worktrees
        .iter()
        .filter(|w| w.present)
        .filter_map(|w| not_run(&w.path))
        .collect();
    if !problems.is_empty() {
        return Err(undo(format!(
            "git would not run the broker's ssh command: {}",
            problems.join("; ")
        )));
    }
    Ok(if before.wiring.is_some() {
        Done::Refreshed
    } else {
        Done::Installed
    })
}

/// Why git in the worktree `dir` would not run the included file's `core.sshCommand` (a
/// later one wins: a worktree's own config, an include after the fence's).
fn not_run(dir: &Path) -> Option<String> {
    let entries = match git_gate::entries(dir) {
        Ok(entries) => entries,
        Err(e) => return Some(e.to_string()),
    };
    match entries.iter().rfind(|e| e.key == "core.sshcommand") {
        Some(e) if e.is_the_gates() => None,
        Some(e) => Some(format!(
            "in {}: core.sshCommand comes from {} ({:?})",
            dir.display(),
            e.origin,
            e.value.as_deref().unwrap_or("")
        )),
        None => Some(format!("in {}: no core.sshCommand", dir.display())),
    }
}

fn rollback(repo: &Repository) -> Result<Done, Failure> {
    let common = &repo.common_dir;
    let failed = |e: String| Failure::could_not(format!("{}: {e}", repo.config().display()));
    if Wiring::read(common)
        .map_err(|e| failed(e.to_string()))?
        .is_none()
    {
        return Ok(Done::NotInstalled);
    }
    let wiring_path = common.join(WIRING_FILE);
    if git_gate::gate_in(common) {
        // The gate stays: its included file is written again without the broker's part.
        let baked = git_gate::baked_in(common).ok_or_else(|| {
            failed(
                GateError::NotBaked {
                    include: common.join(git_gate::INCLUDE_FILE),
                }
                .to_string(),
            )
        })?;
        let before = Snapshot::take(common);
        fs::remove_file(&wiring_path).map_err(|e| failed(e.to_string()))?;
        let written = git_gate::plan(common, &baked).and_then(|plan| git_gate::install(&plan));
        if let Err(e) = written {
            let _ = before.restore(common);
            return Err(failed(e.to_string()));
        }
        return Ok(Done::RolledBack);
    }
    // The broker's alone: without its wiring the gate's rollback takes the lines and the
    // included file out; the wiring comes back if that fails.
    git_gate::rollback_refusal(common).map_err(|e| failed(e.to_string()))?;
    let before = Snapshot::take(common);
    fs::remove_file(&wiring_path).map_err(|e| failed(e.to_string()))?;
    if let Err(e) = git_gate::rollback(common) {
        let _ = before.restore(common);
        return Err(failed(e.to_string()));
    }
    Ok(Done::RolledBack)
}

fn say(line: &str) {
    row_fence_contract::report::say(&format!("row-fence: {line}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_ssh_would_expand_or_split_are_refused() {
        for bad in [
            "relative/agent.sock",
            "/a b/agent.sock",
            "/a%d/agent.sock",
            "/a/${HOME}/agent.sock",
            "/a\"b",
            "/a=b",
            "",
        ] {
            assert!(literal_path("x", Path::new(bad)).is_err(), "{bad:?}");
        }
        literal_path("x", Path::new("/run/row-fence/agent.sock")).unwrap();
    }

    #[test]
    fn the_ssh_line_is_openssh_with_the_brokers_options_in_order() {
        let wiring = Wiring {
            agent: "/run/rf/agent.sock".into(),
            identity_file: "/etc/rf/push.pub".into(),
        };
        assert_eq!(
            wiring.ssh_line(),
            "ssh -o IdentityAgent=/run/rf/agent.sock -o IdentitiesOnly=yes -o IdentityFile=/etc/rf/push.pub -o ControlMaster=no -o ControlPath=none"
        );
    }

    #[test]
    fn only_one_public_key_line_is_a_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k");
        for (text, ok) in [
            ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB push\n", true),
            ("ecdsa-sha2-nistp256 AAAA=\n", true),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", false),
            ("ssh-ed25519\n", false),
            ("ssh-ed25519 AAAA\nssh-ed25519 BBBB\n", false),
            ("hello world\n", false),
            ("", false),
        ] {
            fs::write(&file, text).unwrap();
            assert_eq!(public_key(&file).is_ok(), ok, "{text:?}");
        }
    }
}
