//! `row-fence doctor`: what fences git in a repository, and where it does not. For the
//! repository and every initialized submodule: each worktree (row-bound or not) and
//! whether its hooks directory holds the fence's pre-push hook, whether git runs the
//! transport gate there, and each remote's transport with what gates it. Exits 1 when
//! something lacks the fence (a worktree added after install, a submodule initialized
//! after it, a later `core.sshCommand`, credentials in a remote's URL), 0 otherwise.
//! Outside a repository (and without `--repo`) it checks the agent hooks alone and says
//! that no repository was checked. A remote git's layer cannot fence whole (a local path:
//! `git push --no-verify` runs receive-pack in this process, with no transport to gate)
//! is a limit, named as one, never "fenced".
//! With the key broker's bindings (`--broker-lanes`), each lane's uid too: a private key
//! it can read, another agent, an ssh master or a kept connection to the forge, ssh
//! multiplexing in its configs and what they include, and its HOME, worktree or git dir
//! writable by another lane ([`crate::lane_reach`]).

use crate::agent_doctor::{self, AgentReport};
use crate::git_gate;
use crate::git_hook::{self, State};
use crate::git_repo::{self, Repository, Worktree, git};
use row_fence_contract::descriptor::{self, Resolution};
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// The repository (any directory in it) [default: the current directory; outside a repository only the agent hooks are checked]
    #[arg(long, value_name = "PATH")]
    repo: Option<PathBuf>,
    /// Print the findings as one JSON object
    #[arg(long)]
    json: bool,
    /// The key broker's uid → lane bindings (TOML `[[lane]] lane, uid, descriptor`, with the lease's `board` and `row`; `lane` is required): each lane's uid is checked for a way past the broker (a key it can read, another agent, an ssh master or a connection kept to the forge, multiplexing in its ssh configs and the files they Include, a HOME, worktree or git dir another lane can write)
    #[arg(long, value_name = "FILE", env = "ROW_FENCE_BROKER_LANES")]
    broker_lanes: Option<PathBuf>,
    /// The broker's agent socket (a lane's SSH_AUTH_SOCK may name it)
    #[arg(long, value_name = "PATH", env = "ROW_FENCE_BROKER_SOCKET")]
    broker_socket: Option<PathBuf>,
    /// The daemon's forge host keys file, as its known_hosts lines name the forge (`host`, `[host]:port`): a connection a lane keeps to those addresses is one to the forge, whatever the lane's own remotes say; repeatable
    #[arg(
        long = "broker-forge-host-key",
        value_name = "FILE",
        env = "ROW_FENCE_BROKER_FORGE_HOST_KEYS",
        value_delimiter = ','
    )]
    broker_forge_host_keys: Vec<PathBuf>,
}

/// What a lane's uid can push with past the key broker.
#[derive(Debug, Serialize)]
struct LaneReport {
    uid: u32,
    #[serde(serialize_with = "crate::shell::json_path::serialize")]
    descriptor: PathBuf,
    warnings: Vec<String>,
    /// Why its uid cannot connect to the broker's socket, if it cannot.
    unreachable: Option<String>,
    /// The pinned lease's board has no scope in the registry: its holder may push any
    /// ref the forge lets the key push (ARCHITECTURE.md, "Forge hook"). A warning, not a
    /// problem: no scope is today's behaviour, chosen by the operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_scope: Option<String>,
}

/// Each bound lane's warnings ([`crate::lane_reach`]); a bindings file that cannot be
/// read is an error (doctor was asked to check the lanes and cannot). `forges`: the ssh
/// addresses of the repository's remotes, where a kept connection is one to the forge.
fn lanes(args: &DoctorArgs, forges: &[std::net::SocketAddr]) -> Result<Vec<LaneReport>, Failure> {
    let Some(path) = &args.broker_lanes else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::could_not(format!("lane bindings {}: {e}", path.display())))?;
    let lanes = row_fence_resident::broker::lanes::Lanes::parse(&text)
        .map_err(|e| Failure::could_not(format!("lane bindings {}: {e}", path.display())))?;
    let uids: Vec<u32> = lanes.bindings().map(|b| b.uid).collect();
    let registry = row_fence_contract::paths::home(None)
        .ok()
        .and_then(|home| row_fence_resident::registry::Registry::load(&home).ok());
    Ok(lanes
        .bindings()
        .map(|b| {
            let lane = crate::lane_reach::Lane {
                uid: b.uid,
                worktree: b.worktree.clone(),
            };
            LaneReport {
                uid: b.uid,
                descriptor: b.descriptor.clone(),
                warnings: crate::lane_reach::warnings(
                    &lane,
                    &uids,
                    args.broker_socket.as_deref(),
                    forges,
                ),
                // A socket the lane cannot reach signs nothing for it: every push fails.
                unreachable: args.broker_socket.as_ref().and_then(|socket| {
                    row_fence_resident::socket_reach::check(b.uid, socket)
                        .err()
                        .map(|e| e.to_string())
                }),
                no_scope: b.pinned().and_then(|(board, _)| {
                    let scoped = registry.as_ref().is_some_and(|r| r.scope(board).is_some());
                    (!scoped).then(|| format!(
                        "board {board} has no scope in registry/boards.toml: the holder of its rows may push any ref of any repository the forge lets the push key write ([boards.{board}.scope], docs/forge.md)"
                    ))
                }),
            }
        })
        .collect())
}

/// Where the forge is, for the lanes' kept connections: the hosts the daemon's forge host
/// keys file names (the operator's: a lane cannot edit it), and the repository's ssh
/// remotes (which a lane can point elsewhere, so they only add).
fn forge_addresses(
    args: &DoctorArgs,
    reports: &[Report],
) -> Result<Vec<std::net::SocketAddr>, Failure> {
    let named = row_fence_resident::broker::forges::named_hosts(&args.broker_forge_host_keys)
        .map_err(|e| Failure::could_not(e.to_string()))?;
    let mut forges: Vec<std::net::SocketAddr> = named
        .iter()
        .flat_map(|(host, port)| crate::lane_procs::host_addresses(host, *port))
        .collect();
    forges.extend(
        reports
            .iter()
            .flat_map(|r| &r.remotes)
            .filter(|r| r.transport == "ssh")
            .flat_map(|r| crate::lane_procs::ssh_addresses(&r.url)),
    );
    forges.sort();
    forges.dedup();
    Ok(forges)
}

/// What doctor found in one repository.
#[derive(Debug, Serialize)]
struct Report {
    #[serde(serialize_with = "crate::shell::json_path::serialize")]
    common_dir: PathBuf,
    submodule: bool,
    gate: bool,
    /// The key broker wired in by `install broker`, if any.
    broker: Option<crate::broker_wiring::Wiring>,
    worktrees: Vec<WorktreeReport>,
    remotes: Vec<Remote>,
    problems: Vec<String>,
    /// What is not a way past the fence but wants fixing (a gate older than the config).
    notes: Vec<String>,
    /// What git's layer cannot fence whole, by construction (a local-path remote).
    limits: Vec<String>,
}

#[derive(Debug, Serialize)]
struct WorktreeReport {
    #[serde(serialize_with = "crate::shell::json_path::serialize")]
    path: PathBuf,
    /// The descriptor that binds it, if any.
    #[serde(serialize_with = "crate::shell::json_path::option")]
    descriptor: Option<PathBuf>,
    #[serde(serialize_with = "crate::shell::json_path::option")]
    hooks: Option<PathBuf>,
    /// `fence`, `chain`, `missing`, `other` or `gone`.
    hook: &'static str,
}

#[derive(Debug, Serialize)]
struct Remote {
    name: String,
    url: String,
    /// `ssh`, `http`, `local`, `git`, or the remote helper's name.
    transport: String,
    /// What gates a push to it.
    gated_by: &'static str,
}

/// `doctor --json`'s one object.
#[derive(Serialize)]
struct JsonReport<'a> {
    repositories: &'a [Report],
    environment: &'a [String],
    agents: &'a [AgentReport],
    lanes: &'a [LaneReport],
    problems: usize,
    /// Why no repository was checked, when none was.
    unchecked: Option<&'a str>,
}

/// Why no repository was examined: the sentence doctor prints, and whether it is a
/// problem (a repository was named, or git refused one) or just where doctor ran.
struct Unchecked {
    why: String,
    problem: bool,
}

pub fn run(args: DoctorArgs) -> Outcome {
    let dir = args.repo.clone().unwrap_or_else(|| PathBuf::from("."));
    let (repos, unchecked) = match git_repo::discover(&dir, true) {
        Ok(repos) => (repos, None),
        Err(git_repo::GitError::NotARepository { start, .. }) => {
            let shown = std::path::absolute(&start).unwrap_or(start);
            let why = format!(
                "no repository was checked: {} is not in a git repository. Run row-fence doctor --repo <repo> for each repository lanes push from",
                shown.display()
            );
            (
                Vec::new(),
                Some(Unchecked {
                    why,
                    problem: args.repo.is_some(),
                }),
            )
        }
        Err(e) => (
            Vec::new(),
            Some(Unchecked {
                why: format!("no repository was checked: {e}"),
                problem: true,
            }),
        ),
    };
    let reports: Vec<Report> = repos.iter().map(examine).collect();
    let environment = environment_overrides(&dir);
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let top = repos
        .iter()
        .find(|r| !r.submodule)
        .and_then(|r| r.worktrees.iter().find(|w| args_in(&dir, &w.path)))
        .map(|w| w.path.clone());
    let agents = user_home
        .as_deref()
        .map(|h| agent_doctor::examine(h, top.as_deref()))
        .unwrap_or_default();
    let forges = forge_addresses(&args, &reports)?;
    let lanes = lanes(&args, &forges)?;
    let limits: usize = reports.iter().map(|r| r.limits.len()).sum();
    let problems: usize = reports.iter().map(|r| r.problems.len()).sum::<usize>()
        + usize::from(unchecked.as_ref().is_some_and(|u| u.problem))
        + environment.len()
        + agents.iter().map(|a| a.problems.len()).sum::<usize>()
        + lanes
            .iter()
            .map(|l| l.warnings.len() + usize::from(l.unreachable.is_some()))
            .sum::<usize>();
    if args.json {
        let report = serde_json::to_string(&JsonReport {
            repositories: &reports,
            environment: &environment,
            agents: &agents,
            lanes: &lanes,
            problems,
            unchecked: unchecked.as_ref().map(|u| u.why.as_str()),
        })
        .map_err(|e| Failure::could_not(format!("cannot write the report as JSON: {e}")))?;
        out(&report);
    } else {
        if let Some(u) = &unchecked {
            out(&format!("{}{}", if u.problem { "!! " } else { "" }, u.why));
        }
        for report in &reports {
            print(report);
        }
        for problem in &environment {
            out(&format!("!! {problem}"));
        }
        for agent in &agents {
            print_agent(agent);
        }
        for lane in &lanes {
            out(&format!(
                "lane uid {} ({}): {}",
                lane.uid,
                lane.descriptor.display(),
                if lane.warnings.is_empty() {
                    "no way past the key broker found"
                } else {
                    "!! can push past the key broker"
                }
            ));
            for warning in &lane.warnings {
                out(&format!("  !! {warning}"));
            }
            if let Some(why) = &lane.unreachable {
                out(&format!("  !! the key broker signs nothing for it: {why}"));
            }
            if let Some(why) = &lane.no_scope {
                out(&format!("  warning: {why}"));
            }
        }
        out(&summary(
            problems,
            limits,
            unchecked.is_some(),
            agents.len(),
        ));
    }
    Ok(if problems == 0 {
        exit::ALLOWED
    } else {
        exit::COULD_NOT_READ
    })
}

/// The last line: what was found, never "fenced" for more than was checked.
fn summary(problems: usize, limits: usize, unchecked: bool, agents: usize) -> String {
    match (problems, unchecked, limits) {
        (0, true, _) if agents == 0 => {
            "no problem found in the agent hooks (none installed); no repository was checked"
                .to_string()
        }
        (0, true, _) => "the agent hooks above are on; no repository was checked".to_string(),
        (0, false, 0) => "every worktree and submodule is fenced".to_string(),
        (0, false, n) => format!(
            "no problem found, and {n} limit(s) of git's layer, marked limit: (a push there that skips the pre-push hook is not fenced)"
        ),
        (n, _, _) => {
            format!("{n} problem(s): git or an agent can get past the fence where marked !!")
        }
    }
}

/// What doctor's own environment sets that git runs instead of the gate, for every push
/// from this shell: `GIT_SSH_COMMAND`, `GIT_PROXY_COMMAND`, and `GIT_CONFIG_PARAMETERS` /
/// `GIT_CONFIG_COUNT` settings of the gate's keys or of `core.hooksPath`.
fn environment_overrides(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (name, key) in [
        ("GIT_SSH_COMMAND", "core.sshCommand"),
        ("GIT_PROXY_COMMAND", "core.gitProxy"),
    ] {
        if let Some(value) = std::env::var_os(name).filter(|v| !v.is_empty()) {
            found.push(format!(
                "this shell exports {name} ({value:?}): git runs it instead of {key}, so pushes from this shell skip the gate"
            ));
        }
    }
    let regexp = format!("{}|^core\\.hookspath$", git_gate::KEYS);
    let listed = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["config", "--show-scope", "-z", "--get-regexp", &regexp])
        .output();
    if let Ok(listed) = listed {
        for entry in listed
            .stdout
            .split(|b| *b == 0)
            .collect::<Vec<_>>()
            .chunks_exact(2)
        {
            let setting = String::from_utf8_lossy(entry[1]);
            if entry[0] == b"command" {
                let (key, value) = setting.split_once('\n').unwrap_or((&setting, ""));
                found.push(format!(
                    "this shell's GIT_CONFIG_PARAMETERS or GIT_CONFIG_COUNT sets {key} ({value:?}): it comes after every config file, so pushes from this shell may skip the gate or the hook"
                ));
            }
        }
    }
    found
}

fn examine(repo: &Repository) -> Report {
    let mut problems = Vec::new();
    let gate = repo.common_dir.join(git_gate::INCLUDE_FILE).is_file();
    if !gate {
        problems.push(format!(
            "no transport gate in {}: pushes that skip the hook (--no-verify, git send-pack) go through",
            repo.config().display()
        ));
    }
    let worktrees: Vec<WorktreeReport> = repo
        .worktrees
        .iter()
        .map(|w| worktree(repo, w, gate, &mut problems))
        .collect();
    let mut limits = Vec::new();
    let remotes = remotes(repo, &mut problems, &mut limits);
    let notes = git_gate::drift(&repo.common_dir).into_iter().collect();
    let broker = crate::broker_wiring::Wiring::read(&repo.common_dir).unwrap_or_else(|e| {
        problems.push(e.to_string());
        None
    });
    Report {
        common_dir: repo.common_dir.clone(),
        submodule: repo.submodule,
        gate,
        broker,
        worktrees,
        remotes,
        problems,
        notes,
        limits,
    }
}

fn worktree(
    repo: &Repository,
    w: &Worktree,
    gate: bool,
    problems: &mut Vec<String>,
) -> WorktreeReport {
    let git_dir = match descriptor::find_git_dir(&w.path) {
        _ if !w.present => git_repo::linked_git_dir(&repo.common_dir, &w.path),
        Ok(Some(git_dir)) => Some(git_dir),
        _ => Some(repo.common_dir.clone()),
    };
    let descriptor = match git_dir.and_then(|g| descriptor::in_git_dir(&g)) {
        Some(Resolution::Found(path, _) | Resolution::Unreadable(path, _)) => Some(path),
        _ => None,
    };
    let hook = match &w.hooks {
        Err(e) => {
            problems.push(e.to_string());
            "gone"
        }
        Ok(dir) => match git_hook::state(dir) {
            Ok(State::Fence) => "fence",
            Ok(State::Chain) => "chain",
            Ok(state) => {
                problems.push(format!(
                    "{} lacks the fence's pre-push hook ({}): run row-fence install git-hook",
                    dir.display(),
                    if state == State::Empty {
                        "no pre-push"
                    } else {
                        "another pre-push; --chain keeps it"
                    }
                ));
                if state == State::Empty {
                    "missing"
                } else {
                    "other"
                }
            }
            Err(e) => {
                problems.push(e.to_string());
                "other"
            }
        },
    };
    if gate && w.present {
        problems.extend(git_gate::problems_in(&w.path));
    }
    WorktreeReport {
        path: w.path.clone(),
        descriptor,
        hooks: w.hooks.as_ref().ok().cloned(),
        hook,
    }
}

/// Each remote's push URLs (after git's `insteadOf` and `pushInsteadOf` rewriting, every
/// `pushurl`) and what gates each. A password in a URL is shown as `<redacted>`.
fn remotes(repo: &Repository, problems: &mut Vec<String>, limits: &mut Vec<String>) -> Vec<Remote> {
    let listing = match git_repo::output(git(&repo.common_dir).args(["remote", "-v"])) {
        Ok(listing) => listing,
        Err(e) => {
            problems.push(e.to_string());
            return Vec::new();
        }
    };
    let helpers = foreign_vcs(&repo.common_dir);
    let mut remotes = Vec::new();
    for line in String::from_utf8_lossy(&listing).lines() {
        let Some((name, rest)) = line.split_once('\t') else {
            continue;
        };
        let Some(url) = rest.strip_suffix(" (push)") else {
            continue;
        };
        let shown = redacted(url);
        let (transport, gated_by) = match (helpers.get(name), classify(url)) {
            // `remote.<name>.vcs`: git hands the remote to `git-remote-<vcs>`, whatever the URL.
            (Some(vcs), _) => (vcs.clone(), "nothing"),
            (None, (t, _)) if t == "http" && has_password(url) => (t, "nothing"),
            (None, (t, _))
                if t == "git" && repo.common_dir.join(git_gate::PROXY_FILE).is_file() =>
            {
                (t, "the gate's git:// proxy")
            }
            (None, other) => other,
        };
        if transport == "http" && has_password(url) {
            problems.push(format!(
                "remote {name} ({shown}) carries credentials in its URL: git asks no credential helper, so pushes over it skip the gate"
            ));
        } else if matches!(gated_by, "nothing") && transport != "local" {
            problems.push(format!(
                "remote {name} ({shown}) uses a transport the gate cannot see ({transport})"
            ));
        } else if transport == "local" {
            limits.push(format!(
                "remote {name} ({shown}) is a local path: git runs receive-pack itself, so the transport gate never sees a push to it; only the pre-push hook fences it, and git push --no-verify goes around that"
            ));
        }
        remotes.push(Remote {
            name: name.to_string(),
            url: shown,
            transport,
            gated_by,
        });
    }
    if let Ok(entries) = extra_headers(&repo.common_dir)
        && !entries.is_empty()
    {
        problems.push(format!(
            "http.extraHeader is set ({}): a server that takes it never asks for credentials, so the gate never runs",
            entries.join(", ")
        ));
    }
    remotes
}

/// The transport of a push URL and what gates a push over it.
fn classify(url: &str) -> (String, &'static str) {
    if let Some((helper, _)) = url.split_once("::") {
        return (helper.to_string(), "nothing");
    }
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("ssh" | "git+ssh" | "ssh+git") => ("ssh".into(), "the gate's ssh command"),
        Some("http" | "https") => ("http".into(), "the gate's credential helper"),
        Some("file") => ("local".into(), "the pre-push hook only"),
        Some("git") => ("git".into(), "nothing"),
        Some(other) => (other.to_string(), "nothing"),
        // scp-like `[user@]host:path`: a colon before the first slash.
        None if url
            .find(':')
            .is_some_and(|c| url.find('/').is_none_or(|s| c < s)) =>
        {
            ("ssh".into(), "the gate's ssh command")
        }
        None => ("local".into(), "the pre-push hook only"),
    }
}

/// The `user:password` of a URL's authority, when it has one.
fn password_span(url: &str) -> Option<std::ops::Range<usize>> {
    let (scheme, rest) = url.split_once("://")?;
    let start = scheme.len() + 3;
    let authority = rest.split('/').next().unwrap_or("");
    let (userinfo, _) = authority.rsplit_once('@')?;
    let colon = userinfo.find(':')?;
    Some(start + colon + 1..start + userinfo.len())
}

fn has_password(url: &str) -> bool {
    password_span(url).is_some()
}

/// `url` with its password, if any, replaced by `<redacted>`: doctor's report goes to
/// terminals and logs, and a token in it would leak there.
fn redacted(url: &str) -> String {
    match password_span(url) {
        Some(span) => format!("{}<redacted>{}", &url[..span.start], &url[span.end..]),
        None => url.to_string(),
    }
}

/// `remote.<name>.vcs` of every remote that has one: git runs `git-remote-<vcs>` for it.
fn foreign_vcs(dir: &Path) -> std::collections::HashMap<String, String> {
    let out = git(dir)
        .args(["config", "-z", "--get-regexp", r"^remote\..*\.vcs$"])
        .output();
    let Ok(out) = out else {
        return Default::default();
    };
    out.stdout
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (key, value) = entry.split_once('\n')?;
            let name = key.strip_prefix("remote.")?.strip_suffix(".vcs")?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

fn extra_headers(dir: &Path) -> std::io::Result<Vec<String>> {
    let out = git(dir)
        .args([
            "config",
            "--show-origin",
            "--get-regexp",
            r"^http\..*extraheader$",
        ])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or(l).to_string())
        .collect())
}

/// True when `dir` (doctor's `--repo`) is inside the worktree at `path`.
fn args_in(dir: &Path, path: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    dir.starts_with(path)
}

fn print_agent(report: &AgentReport) {
    out(&format!(
        "agent {} hook: {} in {}",
        report.agent.name(),
        report.hook,
        report.file.display()
    ));
    for guard in &report.guards {
        out(&format!("  runs {}", guard.display()));
    }
    for problem in &report.problems {
        out(&format!("  !! {problem}"));
    }
    for note in &report.notes {
        out(&format!("  note: {note}"));
    }
}

fn print(report: &Report) {
    out(&format!(
        "{} {}",
        if report.submodule {
            "submodule"
        } else {
            "repository"
        },
        report.common_dir.display()
    ));
    out(&format!(
        "  transport gate: {}",
        if report.gate {
            "on"
        } else {
            "!! off (row-fence install git-hook)"
        }
    ));
    if let Some(wiring) = &report.broker {
        out(&format!(
            "  key broker: git's ssh signs through {} (key {})",
            wiring.agent.display(),
            wiring.identity_file.display()
        ));
    }
    for w in &report.worktrees {
        let bound = w
            .descriptor
            .as_ref()
            .map_or("not row-bound".to_string(), |d| {
                format!("row-bound by {}", d.display())
            });
        out(&format!("  worktree {} ({bound})", w.path.display()));
        let mark = if matches!(w.hook, "fence" | "chain") {
            ""
        } else {
            "!! "
        };
        out(&format!(
            "    {mark}pre-push: {} in {}",
            w.hook,
            w.hooks
                .as_ref()
                .map_or("?".to_string(), |h| h.display().to_string())
        ));
    }
    for r in &report.remotes {
        out(&format!(
            "  remote {} {} ({}): pushes fenced by {}",
            r.name, r.url, r.transport, r.gated_by
        ));
    }
    for problem in &report.problems {
        out(&format!("  !! {problem}"));
    }
    for note in &report.notes {
        out(&format!("  note: {note}"));
    }
    for limit in &report.limits {
        out(&format!("  limit: {limit}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_urls_are_classified_by_transport() {
        for (url, transport) in [
            ("ssh://host/r.git", "ssh"),
            ("git+ssh://host/r.git", "ssh"),
            ("user@host:r.git", "ssh"),
            ("host:dir/r.git", "ssh"),
            ("https://host/r.git", "http"),
            ("HTTP://host/r.git", "http"),
            ("/srv/r.git", "local"),
            ("../r.git", "local"),
            ("./a:b/r.git", "local"),
            ("file:///srv/r.git", "local"),
            ("git://host/r.git", "git"),
            ("ext::sh -c x", "ext"),
        ] {
            assert_eq!(classify(url).0, transport, "{url}");
        }
        assert!(has_password("https://u:tok@host/r.git"));
        assert!(!has_password("https://u@host/r.git"));
        assert!(!has_password("https://host/a:b@c"));
        assert_eq!(
            redacted("https://u:t:o@k@host:8443/r.git"),
            "https://u:<redacted>@host:8443/r.git"
        );
        assert_eq!(redacted("https://u@host/a:b@c"), "https://u@host/a:b@c");
    }
}
