//! Git's transport gate in a repository's config (ARCHITECTURE.md, "Git's layer"): the
//! fence's ssh command (`row-fence-ask --git-ssh`) and its credential helper, placed
//! first, in a file of their own, `<common git dir>/row-fence.gitconfig`, which the
//! repository's `config` includes with lines appended at its end ([`crate::gate_lines`]).
//! Linked worktrees share that config, so one install covers every worktree, those added
//! later included.
//!
//! The included file carries what the repository had before, as git resolved it from
//! every config file (system, global, local): the ssh command becomes the gate's
//! `--then`, and the credential helpers follow the gate's after a reset (an empty
//! `credential.helper`), which is what puts the gate's first. Rollback removes the lines
//! and the file, so the config comes back byte for byte; an edit since install that
//! touched those lines is refused, never guessed at.

use crate::gate_lines;
use crate::git_hook::Baked;
use crate::git_repo::git;
use crate::shell::sh_quote;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The included file, in the common git dir (a relative include is read from beside the
/// config that names it).
pub const INCLUDE_FILE: &str = row_fence_contract::git_layout::INCLUDE_FILE;

/// What the included file says of the broker's part.
pub const INCLUDE_NOTE: &str = "# The key broker (`row-fence install broker`; `row-fence install broker --rollback` takes it\n\
     # out): the ssh below offers only the push key the daemon's agent holds, through the\n\
     # daemon's socket, on a connection of its own (no multiplexing).\n";

/// The script git runs as its `core.gitProxy` for `git://` remotes, beside the included
/// file (git runs a proxy without a shell, so the gate's flags live in the script).
pub const PROXY_FILE: &str = "row-fence-git-proxy";

/// The keys the gate sets or carries over, as `git config --get-regexp` matches them.
pub const KEYS: &str =
    r"^core\.sshcommand$|^core\.gitproxy$|^ssh\.variant$|^credential\.(.+\.)?helper$";

/// Why the gate could not be planned, written or taken out of a repository's config.
/// Nothing is written after a refusal found while planning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// `git` could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[source] io::Error),
    /// `git config` failed in a worktree or bare repository.
    #[error("git config in {} failed: {stderr}", dir.display())]
    Config {
        /// Where git ran.
        dir: PathBuf,
        /// Git's stderr, trimmed.
        stderr: String,
    },
    /// A key of the gate's is written without `=` (git itself refuses it).
    #[error("{key} in {origin} has no value; fix it first")]
    NoValue {
        /// The key, as git lists it.
        key: String,
        /// Where git read it.
        origin: String,
    },
    /// The asker the gate would run is not there to run.
    #[error(
        "{} is not an executable file; install the binaries first (or give --bin-dir)",
        asker.display()
    )]
    NoAsker {
        /// The asker's path.
        asker: PathBuf,
    },
    /// The proxy script's path holds ` for `, which git reads as `core.gitProxy`'s domain.
    #[error(
        "{} holds \" for \", which git reads as core.gitProxy's domain",
        proxy.display()
    )]
    ProxyPath {
        /// The proxy script's path.
        proxy: PathBuf,
    },
    /// A path the gate would write into the config is not UTF-8.
    #[error(transparent)]
    PathNotUtf8(#[from] crate::shell::NotUtf8),
    /// A config file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The config.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A config file is not UTF-8: its lines cannot be found, so it is left alone.
    #[error("{} is not UTF-8; leaving it alone", path.display())]
    NotUtf8 {
        /// The config.
        path: PathBuf,
    },
    /// The bytes to write back as a config (taking back an install) are not UTF-8.
    #[error("{} was not UTF-8", path.display())]
    RestoredNotUtf8 {
        /// The config.
        path: PathBuf,
    },
    /// The gate's lines are in the config, edited since install (the config's path given).
    #[error("{}: {source}", config.display())]
    Edited {
        /// The config.
        config: PathBuf,
        /// What is wrong with the lines.
        source: gate_lines::LinesEdited,
    },
    /// The gate's lines are in the config, edited since install.
    #[error(transparent)]
    Lines(#[from] gate_lines::LinesEdited),
    /// Another git process holds the config's lock file (or one died and left it).
    #[error(
        "{} exists: another git process is writing the config (or one died: remove it)",
        lock.display()
    )]
    Locked {
        /// The lock file, `<config>.lock`.
        lock: PathBuf,
    },
    /// A file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The included file an install replaced cannot be written back.
    #[error("cannot restore {}: {source}", path.display())]
    Restore {
        /// The included file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The key broker's wiring file cannot be read.
    #[error(transparent)]
    Broker(#[from] crate::broker_wiring::WiringError),
    /// The key broker is wired into a repository that runs an ssh command of its own: the
    /// broker's options must be the first ssh reads, and a command of the repository's
    /// may be anything (a script, plink).
    #[error(
        "the repository runs its own ssh command {command:?} ({origin}); the key broker needs git to run OpenSSH with its options: remove that core.sshCommand first"
    )]
    OwnSshCommand {
        /// The command.
        command: String,
        /// Where git read it.
        origin: String,
    },
    /// The included file's `core.sshCommand` is not the wrapper as install writes it, so
    /// the asker, home and socket it was written with cannot be read back.
    #[error(
        "{}: its core.sshCommand is not the fence's as install writes it; fix or remove it by hand",
        include.display()
    )]
    NotBaked {
        /// The included file.
        include: PathBuf,
    },
    /// A file cannot be removed.
    #[error("cannot remove {}: {source}", path.display())]
    Remove {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// One config entry as git lists it, in the order git reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `system`, `global`, `local`, `worktree` or `command`.
    pub scope: String,
    /// Where git read it, e.g. `file:/repo/.git/config`.
    pub origin: String,
    /// The key, section and name lowercased (`credential.https://host.helper`).
    pub key: String,
    /// The value; `None` for a key written without `=`.
    pub value: Option<String>,
}

impl Entry {
    /// Read from the gate's included file (git names it relative to the directory it ran
    /// in when that is the git dir).
    pub fn is_the_gates(&self) -> bool {
        let file = self.origin.strip_prefix("file:").unwrap_or(&self.origin);
        Path::new(file).file_name() == Some(std::ffi::OsStr::new(INCLUDE_FILE))
    }

    fn is_helper(&self) -> bool {
        self.key.starts_with("credential.") && self.key.ends_with(".helper")
    }

    /// The URL of a `credential.<url>.helper`; `None` for the generic one.
    fn helper_url(&self) -> Option<&str> {
        self.key
            .strip_prefix("credential.")?
            .strip_suffix(".helper")
            .filter(|url| !url.is_empty())
    }
}

/// Every entry of the gate's keys that git reads in `dir` (a worktree or a bare
/// repository), in git's order, `-c` settings left out.
pub fn entries(dir: &Path) -> Result<Vec<Entry>, GateError> {
    let out = git(dir)
        .args([
            "config",
            "--show-scope",
            "--show-origin",
            "-z",
            "--get-regexp",
            KEYS,
        ])
        .output()
        .map_err(GateError::Spawn)?;
    // Exit 1: no entry matched.
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(GateError::Config {
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let fields: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    Ok(fields
        .chunks_exact(3)
        .map(|c| {
            let (key, value) = match c[2].split_once('\n') {
                Some((key, value)) => (key.to_string(), Some(value.to_string())),
                None => (c[2].clone(), None),
            };
            Entry {
                scope: c[0].clone(),
                origin: c[1].clone(),
                key,
                value,
            }
        })
        .filter(|e| e.scope != "command")
        .collect())
}

/// What the repository had before the gate: the entries git reads before the gate's own
/// (or all of them, before an install), from the system, global and local configs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Previous {
    /// The ssh command git would run.
    pub ssh_command: Option<String>,
    /// Where git read [`Previous::ssh_command`].
    pub ssh_command_origin: String,
    /// `ssh.variant`, when set.
    pub ssh_variant: Option<String>,
    /// The `git://` proxy git would run (`core.gitProxy`), when set.
    pub git_proxy: Option<String>,
    /// The credential helper settings git read, in order: `(url, helper)`, `url` empty
    /// for the generic `credential.helper`. An empty `helper` with a `url` is a reset for
    /// that URL (`gh auth setup-git` writes one), replayed with the gate's helper after it;
    /// a generic reset is not kept (it clears what came before it).
    pub helpers: Vec<(String, String)>,
}

/// Reads [`Previous`] from `entries`. A helper without a value (git itself refuses it) is
/// refused.
pub fn previous(entries: &[Entry]) -> Result<Previous, GateError> {
    let before = entries
        .iter()
        .take_while(|e| !e.is_the_gates())
        .filter(|e| matches!(e.scope.as_str(), "system" | "global" | "local"));
    let mut prev = Previous::default();
    for e in before {
        let Some(value) = e.value.clone() else {
            return Err(GateError::NoValue {
                key: e.key.clone(),
                origin: e.origin.clone(),
            });
        };
        match e.key.as_str() {
            "core.sshcommand" => {
                prev.ssh_command = Some(value).filter(|v| !v.is_empty());
                prev.ssh_command_origin = e.origin.clone();
            }
            "ssh.variant" => prev.ssh_variant = Some(value),
            "core.gitproxy" => prev.git_proxy = Some(value).filter(|v| !v.is_empty()),
            _ if e.is_helper() => match (e.helper_url(), value.is_empty()) {
                (None, true) => prev.helpers.clear(),
                (url, _) => prev
                    .helpers
                    .push((url.unwrap_or_default().to_string(), value)),
            },
            _ => {}
        }
    }
    Ok(prev)
}

/// The gate for one repository: the included file's text.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The common git dir.
    pub common_dir: PathBuf,
    /// The text of `row-fence.gitconfig`.
    pub include: String,
    /// The text of the `git://` proxy script; `None` when the repository has a proxy of
    /// its own (then `git://` is not gated).
    pub proxy: Option<String>,
    /// What the repository had (for the summary line).
    pub previous: Previous,
}

/// Plans the gate for the repository at `common_dir`, baked with the daemon's asker,
/// home and socket (with the key broker's ssh options when it is wired in).
pub fn plan(common_dir: &Path, baked: &Baked) -> Result<Plan, GateError> {
    plan_parts(common_dir, baked, true)
}

/// True when the included file in `common_dir` holds the transport gate's own parts (its
/// credential helper), not only the key broker's ssh command.
pub fn gate_in(common_dir: &Path) -> bool {
    fs::read_to_string(common_dir.join(INCLUDE_FILE))
        .is_ok_and(|text| text.contains("--git-credential"))
}

/// Plans the one included file of `common_dir`: one `core.sshCommand` (the gate's
/// wrapper, carrying the key broker's ssh options when `row-fence install broker` wired
/// it in) and, with `with_gate`, the transport gate's `git://` proxy and credential
/// helpers. Without it the file is the broker's alone.
pub fn plan_parts(common_dir: &Path, baked: &Baked, with_gate: bool) -> Result<Plan, GateError> {
    let asker = baked.bin_dir.join("row-fence-ask");
    if !fs::metadata(&asker).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0) {
        return Err(GateError::NoAsker { asker });
    }
    let previous = previous(&entries(common_dir)?)?;
    let broker = crate::broker_wiring::Wiring::read(common_dir)?;
    // The ssh the wrapper runs once the fence says yes: the broker's OpenSSH with its
    // options first, else what the repository ran before.
    let then = match (&broker, &previous.ssh_command) {
        (Some(_), Some(own)) => {
            return Err(GateError::OwnSshCommand {
                command: own.clone(),
                origin: previous.ssh_command_origin.clone(),
            });
        }
        (Some(wiring), None) => Some(wiring.ssh_line()),
        (None, own) => own.clone(),
    };
    let texts = [&asker, &baked.home, &baked.socket, common_dir]
        .map(|p| crate::shell::text(p).map(str::to_string));
    let [asker_text, home_text, socket_text, repo_text] = texts;
    let (asker_text, home_text, socket_text, repo_text) =
        (asker_text?, home_text?, socket_text?, repo_text?);
    let base = |mode: &str| {
        let mut words = vec![
            asker_text.clone(),
            mode.to_string(),
            "--home".into(),
            home_text.clone(),
            "--socket".into(),
            socket_text.clone(),
            "--repo".into(),
            repo_text.clone(),
        ];
        if mode == "--git-ssh"
            && let Some(then) = &then
        {
            words.extend(["--then".to_string(), then.clone()]);
        }
        words
            .iter()
            .map(|w| sh_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let ssh_command = base("--git-ssh");
    let proxy_path = common_dir.join(PROXY_FILE);
    let proxy = match &previous.git_proxy {
        _ if !with_gate => None,
        Some(_) => None,
        None if proxy_path.to_string_lossy().contains(" for ") => {
            return Err(GateError::ProxyPath { proxy: proxy_path });
        }
        None => Some(format!(
            "#!/bin/sh\n# Written by `row-fence install git-hook`: git's core.gitProxy for git:// remotes\n# (git runs it as PROXY HOST PORT); `--rollback` removes it.\nexec {} \"$@\"\n",
            base("--git-proxy")
        )),
    };
    // Git appends the operation (` get`) to a `!` helper and runs it through sh; a helper
    // that cannot run at all must stop git too, hence `|| echo quit=1`.
    let gate = format!(
        "!f() {{ {} \"$@\" || echo quit=1; }}; f",
        base("--git-credential")
    );
    let mut include = String::new();
    if with_gate {
        include.push_str(
            "# Written by `row-fence install git-hook`; `row-fence install git-hook --rollback` removes it.\n\
             # Git's transport gate: a push over ssh asks the row fence first (core.sshCommand), so\n\
             # does one over git:// (core.gitProxy) and every request for credentials over http(s)\n\
             # (the first credential helper).\n\
             # The repository's own ssh command and credential helpers, as they were at install,\n\
             # run after the fence's.\n",
        );
    }
    if broker.is_some() {
        include.push_str(INCLUDE_NOTE);
    }
    include.push_str(&format!(
        "[core]\n\tsshCommand = {}\n",
        config_value(&ssh_command)
    ));
    if let Some(push) = broker.as_ref().and_then(|w| w.push.as_ref()) {
        include.push_str(&push.include());
    }
    if !with_gate {
        return Ok(Plan {
            common_dir: common_dir.to_path_buf(),
            include,
            proxy,
            previous,
        });
    }
    if proxy.is_some() {
        include.push_str(&format!(
            "\tgitProxy = {}\n",
            config_value(crate::shell::text(&proxy_path)?)
        ));
    }
    if previous.ssh_variant.is_none()
        && let Some(variant) = previous.ssh_command.as_deref().and_then(ssh_variant)
    {
        // Git names the variant after the command's first word; the gate's is ours.
        include.push_str(&format!("[ssh]\n\tvariant = {variant}\n"));
    }
    include.push_str(&format!(
        "[credential]\n\thelper =\n\thelper = {}\n",
        config_value(&gate)
    ));
    // Git folds every `credential.<url>.helper` that matches the URL in config order: a
    // value appends, an empty one clears. Replaying what was read keeps each URL's list,
    // and the gate's helper right after a URL's reset keeps it first for that URL too.
    for (url, helper) in &previous.helpers {
        if url.is_empty() {
            include.push_str("[credential]\n");
        } else {
            include.push_str(&format!("[credential {}]\n", config_value(url)));
        }
        if helper.is_empty() {
            include.push_str(&format!("\thelper =\n\thelper = {}\n", config_value(&gate)));
        } else {
            include.push_str(&format!("\thelper = {}\n", config_value(helper)));
        }
    }
    Ok(Plan {
        common_dir: common_dir.to_path_buf(),
        include,
        proxy,
        previous,
    })
}

/// Why the gate in `common_dir` no longer carries what the repository has: its included
/// file differs from what install would write now with the same asker, home and socket
/// (an ssh command, `git://` proxy or credential helper changed since install, and git
/// still runs the one install saw). `None`: it matches, or there is no gate.
pub fn drift(common_dir: &Path) -> Option<String> {
    let path = common_dir.join(INCLUDE_FILE);
    let text = fs::read_to_string(&path).ok()?;
    let said = |what: String| Some(format!("{}: {what}", path.display()));
    let Some(baked) = baked_in(common_dir) else {
        return said("its core.sshCommand is not the gate's as install writes it; rerun row-fence install git-hook".into());
    };
    match plan_parts(common_dir, &baked, gate_in(common_dir)) {
        Ok(plan) if plan.include == text => None,
        Ok(_) => said(
            "it is not what install writes now: the repository moved, or its ssh command, git:// proxy or credential helpers changed since install, and the gate still runs the ones it saw then; rerun row-fence install git-hook".into(),
        ),
        Err(e) => said(e.to_string()),
    }
}

/// The asker directory, home and socket the gate in `common_dir` was written with, read
/// back from its `core.sshCommand`.
pub fn baked_in(common_dir: &Path) -> Option<Baked> {
    let out = git(common_dir)
        .args(["config", "--file", INCLUDE_FILE, "core.sshCommand"])
        .output()
        .ok()?;
    let words = shlex::split(String::from_utf8_lossy(&out.stdout).trim_end_matches('\n'))?;
    let after = |flag: &str| {
        let at = words.iter().position(|w| w == flag)?;
        words.get(at + 1).map(PathBuf::from)
    };
    Some(Baked {
        bin_dir: Path::new(words.first()?).parent()?.to_path_buf(),
        home: after("--home")?,
        socket: after("--socket")?,
    })
}

/// The variant git infers from an ssh command's first word, when it is not plain ssh
/// (`plink`, `tortoiseplink`): the gate's command would hide it from git.
fn ssh_variant(command: &str) -> Option<&'static str> {
    let first = shlex::split(command)?.into_iter().next()?;
    let name = Path::new(&first)
        .file_name()?
        .to_str()?
        .to_ascii_lowercase();
    match name.strip_suffix(".exe").unwrap_or(&name) {
        "plink" => Some("plink"),
        "tortoiseplink" => Some("tortoiseplink"),
        _ => None,
    }
}

/// A value as git's config parser reads it back: in double quotes, with `\`, `"`, line
/// feed, tab and backspace escaped.
pub fn config_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What install or rollback did to a repository's config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// The lines were appended and the included file written.
    Installed,
    /// The lines were there; the included file was written afresh.
    Refreshed,
    /// Rollback: the lines and the file are gone.
    RolledBack,
    /// Rollback: there was no gate.
    NotInstalled,
}

/// Writes the gate: the included file, then (when missing) the lines that include it.
pub fn install(plan: &Plan) -> Result<Done, GateError> {
    let config_path = plan.common_dir.join("config");
    let config = read_config(&config_path)?;
    let mode = fs::metadata(&config_path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    if let Some(script) = &plan.proxy {
        let path = plan.common_dir.join(PROXY_FILE);
        row_fence_store::atomic_file::write(&path, script.as_bytes(), 0o755, false)
            .map_err(|source| GateError::Write { path, source })?;
    }
    let include_path = plan.common_dir.join(INCLUDE_FILE);
    row_fence_store::atomic_file::write(&include_path, plan.include.as_bytes(), mode, false)
        .map_err(|source| GateError::Write {
            path: include_path,
            source,
        })?;
    if gate_lines::holds_gate(&config, INCLUDE_FILE)? {
        if let Some(text) = gate_lines::upgraded(&config, INCLUDE_FILE)? {
            write_config(&config_path, &text, mode)?;
        }
        return Ok(Done::Refreshed);
    }
    write_config(
        &config_path,
        &gate_lines::with_gate(&config, INCLUDE_FILE),
        mode,
    )?;
    Ok(Done::Installed)
}

/// Writes `bytes` back as the config of the repository at `common_dir`, as git would
/// (an install that is taken back).
pub fn restore_config(common_dir: &Path, bytes: &[u8]) -> Result<(), GateError> {
    let config_path = common_dir.join("config");
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| GateError::RestoredNotUtf8 {
        path: config_path.clone(),
    })?;
    let mode = fs::metadata(&config_path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    write_config(&config_path, &text, mode)
}

/// Why [`rollback`] would refuse this repository (checked before anything is changed).
pub fn rollback_refusal(common_dir: &Path) -> Result<(), GateError> {
    let config_path = common_dir.join("config");
    gate_lines::holds_gate(&read_config(&config_path)?, INCLUDE_FILE)
        .map(drop)
        .map_err(|source| GateError::Edited {
            config: config_path,
            source,
        })
}

/// Removes the gate: the appended lines ([`gate_lines::without_gate`]: the config comes
/// back byte for byte, whatever else was edited since, but for what git wrote into the
/// gate's `[credential]`) and the included file.
///
/// When the key broker is wired in (`row-fence install broker`), its ssh command stays:
/// the included file is written again with the broker's part alone and the lines stay
/// (`Done::NotInstalled` when the file was the broker's alone).
pub fn rollback(common_dir: &Path) -> Result<Done, GateError> {
    if crate::broker_wiring::Wiring::read(common_dir)?.is_some() {
        // The included file is the broker's alone when it holds no gate: nothing to take.
        return match gate_in(common_dir) {
            true => broker_only(common_dir),
            false => Ok(Done::NotInstalled),
        };
    }
    let config_path = common_dir.join("config");
    let config = read_config(&config_path)?;
    let back =
        gate_lines::without_gate(&config, INCLUDE_FILE).map_err(|source| GateError::Edited {
            config: config_path.clone(),
            source,
        })?;
    let include_path = common_dir.join(INCLUDE_FILE);
    let done = match back {
        Some(text) => {
            let mode =
                fs::metadata(&config_path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
            write_config(&config_path, &text, mode)?;
            Done::RolledBack
        }
        None if include_path.exists() => Done::RolledBack,
        None => Done::NotInstalled,
    };
    for path in [include_path, common_dir.join(PROXY_FILE)] {
        match fs::remove_file(&path) {
            Err(source) if source.kind() != io::ErrorKind::NotFound => {
                return Err(GateError::Remove { path, source });
            }
            _ => {}
        }
    }
    Ok(done)
}

/// Writes the included file again with the key broker's ssh command alone (the gate's
/// proxy script removed), baked as it was.
fn broker_only(common_dir: &Path) -> Result<Done, GateError> {
    let include_path = common_dir.join(INCLUDE_FILE);
    let Some(baked) = baked_in(common_dir) else {
        return Err(GateError::NotBaked {
            include: include_path,
        });
    };
    let plan = plan_parts(common_dir, &baked, false)?;
    let mode = fs::metadata(&include_path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    row_fence_store::atomic_file::write(&include_path, plan.include.as_bytes(), mode, false)
        .map_err(|source| GateError::Write {
            path: include_path,
            source,
        })?;
    match fs::remove_file(common_dir.join(PROXY_FILE)) {
        Err(source) if source.kind() != io::ErrorKind::NotFound => Err(GateError::Remove {
            path: common_dir.join(PROXY_FILE),
            source,
        }),
        _ => Ok(Done::RolledBack),
    }
}

/// What keeps the gate from being the one git runs in `dir` (a worktree, or a bare
/// repository): a later `core.sshCommand` (a worktree's own config, an include after the
/// gate's), an earlier `core.gitProxy`, a later empty `credential.helper`, or no gate at
/// all.
/// Empty: git runs the gate.
pub fn problems(dir: &Path) -> Result<Vec<String>, GateError> {
    let entries = entries(dir)?;
    let mut found = Vec::new();
    match entries.iter().rfind(|e| e.key == "core.sshcommand") {
        Some(e) if e.is_the_gates() => {}
        Some(e) => found.push(format!(
            "core.sshCommand comes from {} ({:?}), not from the gate: pushes over ssh skip the fence",
            e.origin,
            e.value.as_deref().unwrap_or("")
        )),
        None => found.push("no core.sshCommand: pushes over ssh skip the fence".into()),
    }
    let gate_proxies = entries
        .iter()
        .any(|e| e.is_the_gates() && e.key == "core.gitproxy");
    // Git runs the first core.gitProxy that matches the host (unlike core.sshCommand).
    if let Some(e) = entries.iter().find(|e| e.key == "core.gitproxy")
        && gate_proxies
        && !e.is_the_gates()
    {
        found.push(format!(
            "core.gitProxy comes from {} ({:?}), not from the gate: pushes over git:// skip the fence",
            e.origin,
            e.value.as_deref().unwrap_or("")
        ));
    }
    let gate_helper = entries.iter().position(|e| {
        e.is_the_gates() && e.is_helper() && e.value.as_deref().is_some_and(|v| !v.is_empty())
    });
    match gate_helper {
        None => found.push("no gate credential helper: pushes over http(s) skip the fence".into()),
        Some(at) => {
            // The gate's own URL resets are each followed by the gate's helper.
            for e in entries[at + 1..].iter().filter(|e| !e.is_the_gates()) {
                if e.is_helper() && e.value.as_deref().is_none_or(str::is_empty) {
                    found.push(format!(
                        "{} is set empty in {}, after the gate's helper: it clears the gate",
                        e.key, e.origin
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// [`problems`] in the worktree at `dir`, each a sentence that names it; one that could
/// not be asked about is a problem too.
pub fn problems_in(dir: &Path) -> Vec<String> {
    match problems(dir) {
        Ok(found) => found
            .into_iter()
            .map(|p| format!("in {}: {p}", dir.display()))
            .collect(),
        Err(e) => vec![e.to_string()],
    }
}

fn read_config(path: &Path) -> Result<String, GateError> {
    let bytes = fs::read(path).map_err(|source| GateError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|_| GateError::NotUtf8 {
        path: path.to_path_buf(),
    })
}

/// Writes the config the way git does: through a symlink to the file it names (a config
/// kept elsewhere stays a symlink), `<file>.lock` created exclusively (so a concurrent
/// `git config` fails instead of losing an edit), written, synced, renamed over the
/// file; the mode kept.
fn write_config(path: &Path, text: &str, mode: u32) -> Result<(), GateError> {
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = resolved.as_path();
    let mut lock = path.as_os_str().to_owned();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    let fail = |source: io::Error| GateError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&lock)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => GateError::Locked { lock: lock.clone() },
            _ => fail(e),
        })?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.set_permissions(fs::Permissions::from_mode(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&lock, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&lock);
        return Err(fail(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(scope: &str, origin: &str, key: &str, value: &str) -> Entry {
        Entry {
            scope: scope.into(),
            origin: origin.into(),
            key: key.into(),
            value: Some(value.into()),
        }
    }

    #[test]
    fn previous_settings_are_what_git_read_before_the_gate() {
        let entries = vec![
            entry("global", "file:/h/.gitconfig", "credential.helper", "cache"),
            entry("global", "file:/h/.gitconfig", "credential.helper", ""),
            entry(
                "global",
                "file:/h/.gitconfig",
                "credential.https://x.invalid.helper",
                "x",
            ),
            entry(
                "local",
                "file:/r/.git/config",
                "core.sshcommand",
                "ssh -i key",
            ),
            entry("local", "file:/r/.git/config", "credential.helper", "store"),
            entry(
                "worktree",
                "file:/r/.git/config.worktree",
                "credential.helper",
                "wt",
            ),
            entry(
                "local",
                "file:/r/.git/row-fence.gitconfig",
                "core.sshcommand",
                "gate",
            ),
            entry("local", "file:/r/.git/config", "credential.helper", "after"),
        ];
        let prev = previous(&entries).unwrap();
        assert_eq!(prev.ssh_command.as_deref(), Some("ssh -i key"));
        assert_eq!(
            prev.helpers,
            vec![
                ("https://x.invalid".to_string(), "x".to_string()),
                (String::new(), "store".to_string())
            ]
        );
        let reset = [entry(
            "global",
            "file:/h/.gitconfig",
            "credential.https://x.invalid.helper",
            "",
        )];
        assert_eq!(
            previous(&reset).unwrap().helpers,
            vec![("https://x.invalid".to_string(), String::new())],
            "a URL's reset is kept, to be replayed with the gate after it"
        );
    }

    #[test]
    fn values_are_quoted_as_git_reads_them() {
        assert_eq!(
            config_value(r#"!f() { a "$@"; }; f"#),
            r#""!f() { a \"$@\"; }; f""#
        );
        assert_eq!(config_value("a\\b\tc\nd"), r#""a\\b\tc\nd""#);
        assert_eq!(ssh_variant("/usr/bin/plink -batch"), Some("plink"));
        assert_eq!(ssh_variant("ssh -i key"), None);
    }
}
