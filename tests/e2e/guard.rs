//! `hooks/guard-bash.sh`, the Claude Code PreToolUse hook, fed the JSON Claude Code sends,
//! for each of its five states; and a simulated agent: the hook runs, and the command runs
//! only when the hook exits 0 (Claude Code blocks a tool call only on exit 2), so every
//! deny is checked where it matters: the remote ref did not move.
//!
//! The asker and the daemon are the real ones, except for CUT OFF MID-ASK and NEVER RAN,
//! which need an asker that dies or hangs on cue: a stand-in `row-fence-ask` on PATH.
//! The clones here have no git pre-push hook, so the guard alone stands between the
//! agent and the remote.

use crate::util::{Home, Ran, Repo, bin, bin_dir, git, repo_root, run};
use serde_json::json;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The hook as shipped.
fn guard() -> PathBuf {
    repo_root().join("hooks/guard-bash.sh")
}

/// Runs `cmd` with `input` on stdin.
fn run_with_stdin(cmd: &mut Command, input: &str) -> Ran {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    // A hook that exits without reading its stdin is allowed to.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    let output = child.wait_with_output().unwrap();
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// What Claude Code sends a PreToolUse hook for a Bash call.
fn pre_tool_use(session: &str, cwd: &Path, command: &str) -> String {
    json!({
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "what the agent wants"},
    })
    .to_string()
}

/// How the hook finds an asker in a test.
enum Asker {
    /// The real one, through `ROW_FENCE_BIN_DIR` (as `install claude-hook` sets it).
    Real,
    /// Whatever `row-fence-ask` is in this directory, through `PATH` only.
    OnPath(PathBuf),
    /// `ROW_FENCE_BIN_DIR` names this directory.
    BinDir(PathBuf),
}

/// A lane: a home, a bare remote and a clone with one commit to push.
struct Lane {
    home: Home,
    repo: Repo,
}

impl Lane {
    fn new() -> Lane {
        let home = Home::file();
        let repo = Repo::new(&home, "lane-a");
        fs::remove_file(repo.clone.join(".git/hooks/pre-push")).unwrap();
        fs::write(repo.clone.join("file.txt"), "work").unwrap();
        git(&home, &repo.clone, &["add", "file.txt"]);
        git(&home, &repo.clone, &["commit", "-q", "-m", "work"]);
        Lane { home, repo }
    }

    /// Lane A takes the row and writes the descriptor into the clone's git dir.
    fn hold(&self) {
        let descriptor = self.repo.descriptor().display().to_string();
        let ran = self.home.cli(&[
            "acquire",
            "board-1",
            "row-1",
            "--lane",
            "lane-a",
            "--write-descriptor",
            &descriptor,
        ]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }

    /// Lane B takes the row over: lane A's descriptor is stale.
    fn lose(&self) {
        self.home
            .acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    }

    /// Runs the hook for `command` in `cwd`.
    fn hook(&self, command: &str, cwd: &Path, asker: &Asker) -> Ran {
        let mut cmd = self.home.command(guard());
        match asker {
            Asker::Real => {
                cmd.env("ROW_FENCE_BIN_DIR", bin_dir());
            }
            Asker::OnPath(dir) => {
                cmd.env("PATH", format!("{}:/usr/bin:/bin", dir.display()));
            }
            Asker::BinDir(dir) => {
                cmd.env("ROW_FENCE_BIN_DIR", dir)
                    .env("PATH", "/usr/bin:/bin");
            }
        }
        run_with_stdin(
            cmd.current_dir(self.home.dir.path()),
            &pre_tool_use("session-7", cwd, command),
        )
    }

    /// The agent: the hook, then the command only if the hook said 0.
    fn attempt(&self, command: &str, asker: &Asker) -> (Ran, Option<Ran>) {
        let hook = self.hook(command, &self.repo.clone, asker);
        let ran = (hook.code == 0).then(|| {
            run(self
                .home
                .command("sh")
                .current_dir(&self.repo.clone)
                .arg("-c")
                .arg(command))
        });
        (hook, ran)
    }

    fn pushed(&self) -> bool {
        self.repo.remote_head(&self.home) == self.repo.local_head(&self.home)
    }
}

const PUSH: &str = "git push -q origin main";

#[track_caller]
fn blocked(hook: &Ran, ran: &Option<Ran>, says: &str) {
    assert!(
        hook.code == 2 && hook.stderr.contains(says),
        "expected exit 2 saying {says:?}, got exit {}:\n{}",
        hook.code,
        hook.stderr
    );
    assert!(ran.is_none(), "a blocked command never runs");
}

#[test]
fn an_allowed_push_runs_and_the_remote_ref_moves() {
    let lane = Lane::new();
    lane.hold();
    let _daemon = lane.home.daemon();
    let (hook, ran) = lane.attempt(PUSH, &Asker::Real);
    assert_eq!(
        (hook.code, hook.stderr.as_str()),
        (0, ""),
        "silent when allowed"
    );
    assert_eq!(ran.unwrap().code, 0);
    assert!(lane.pushed());
}

#[test]
fn an_unbound_lane_pushes_unfenced_with_no_daemon_at_all() {
    let lane = Lane::new();
    let (hook, ran) = lane.attempt(PUSH, &Asker::Real);
    assert_eq!(hook.code, 0, "{}", hook.stderr);
    assert_eq!(ran.unwrap().code, 0);
    assert!(lane.pushed());
}

#[test]
fn a_refused_push_is_blocked_with_the_verdict_filed_under_the_session() {
    let lane = Lane::new();
    lane.hold();
    lane.lose();
    let mut daemon = lane.home.daemon();
    let (hook, ran) = lane.attempt(PUSH, &Asker::Real);
    blocked(&hook, &ran, "row-fence: REFUSED (different_holder)");
    assert_eq!(
        lane.repo.remote_head(&lane.home),
        "",
        "the remote ref did not move"
    );
    daemon.stop();
    let ledger = row_fence_ask::ledger::read(&lane.home.home.join("refusals.jsonl")).unwrap();
    let last = ledger.last().expect("the refusal is in the ledger");
    assert_eq!(last.session.as_deref(), Some("session-7"));
    assert_eq!(last.action, "git push origin");
    assert_eq!(last.cwd.as_deref(), lane.repo.clone.to_str());
}

#[test]
fn a_push_with_the_daemon_down_is_blocked_could_not_read() {
    let lane = Lane::new();
    lane.hold();
    let (hook, ran) = lane.attempt(PUSH, &Asker::Real);
    blocked(&hook, &ran, "row-fence: COULD NOT READ (fence_unreadable)");
    assert_eq!(lane.repo.remote_head(&lane.home), "");
}

#[test]
fn every_fenced_write_of_a_stale_lane_is_blocked_in_whatever_form_it_takes() {
    let lane = Lane::new();
    lane.hold();
    lane.lose();
    let _daemon = lane.home.daemon();
    let clone = lane.repo.clone.display().to_string();
    for command in [
        "gh pr create --fill".to_string(),
        "gh pr merge 3 --squash".into(),
        "gh pr comment 3 --body hi".into(),
        "gh issue edit 5 --add-label x".into(),
        "gh issue close 5".into(),
        "gh release create v1.0".into(),
        "gh api -X POST repos/o/r/issues".into(),
        "gh api repos/o/r/issues -f title=t".into(),
        "gh api --method=DELETE repos/o/r/git/refs/heads/x".into(),
        "git status && git push origin main".into(),
        "echo start; git push origin main | cat".into(),
        "bash -c 'git push origin main'".into(),
        "FOO=1 timeout 60 git push origin main".into(),
        format!("git -C '{clone}' push origin main"),
    ] {
        let (hook, ran) = lane.attempt(&command, &Asker::Real);
        blocked(&hook, &ran, "row-fence: REFUSED (different_holder)");
    }
    // From a session whose own directory is outside the lane: `cd` says where it runs.
    let outside = lane.home.dir.path();
    let hook = lane.hook(&format!("cd {clone} && {PUSH}"), outside, &Asker::Real);
    blocked(&hook, &None, "row-fence: REFUSED (different_holder)");
    assert_eq!(lane.repo.remote_head(&lane.home), "");
}

/// A stand-in `row-fence-ask` running `body`; every run appends a line to `asked.log`.
fn stand_in(lane: &Lane, body: &str) -> PathBuf {
    let dir = lane.home.path("stand-in");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("row-fence-ask");
    let log = lane.home.path("asked.log");
    fs::write(
        &path,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}\n", log.display()),
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn asked(lane: &Lane) -> String {
    fs::read_to_string(lane.home.path("asked.log")).unwrap_or_default()
}

#[test]
fn commands_that_write_nothing_fenced_pass_through_without_an_ask() {
    // Row-bound with no daemon: any ask would be COULD NOT READ, exit 2, in the ledger.
    let lane = Lane::new();
    lane.hold();
    for command in [
        "ls -la",
        "git status --short",
        "git log --oneline | head -n 3",
        "git fetch origin && git diff origin/main",
        "gh pr view 3 --comments",
        "gh pr list",
        "gh api repos/o/r/pulls",
        "gh api -X GET repos/o/r/issues",
        "echo \"remember to git push later\"",
        "cargo build --release 2>&1 | tail",
    ] {
        let hook = lane.hook(command, &lane.repo.clone, &Asker::Real);
        assert_eq!(
            (hook.code, hook.stderr.as_str()),
            (0, ""),
            "{command} passes untouched"
        );
    }
    assert!(
        !lane.home.home.join("refusals.jsonl").exists(),
        "no ask was made"
    );
}

#[test]
fn an_asker_cut_off_mid_ask_is_blocked_with_retry() {
    let lane = Lane::new();
    lane.hold();
    let asking = "echo 'row-fence: asking /x/sock for board-1/row-1 as lane-a at generation 1' >&2";
    let dir = stand_in(&lane, &format!("{asking}\nkill -9 $$"));
    let (hook, ran) = lane.attempt(PUSH, &Asker::OnPath(dir.clone()));
    blocked(&hook, &ran, "cut off mid-ask");
    assert!(hook.stderr.contains("retry"), "{}", hook.stderr);
    assert!(
        asked(&lane).contains("--action git push origin"),
        "{}",
        asked(&lane)
    );
    assert!(!lane.pushed());
}

#[test]
fn an_asker_that_hangs_is_cut_off_by_the_hook_before_claude_codes_timeout() {
    let lane = Lane::new();
    let asking = "echo 'row-fence: asking /x/sock for board-1/row-1 as lane-a at generation 1' >&2";
    let dir = stand_in(&lane, &format!("{asking}\nexec sleep 600"));
    // Even an unbound lane: the asker said it was asking, so it found a descriptor.
    let (hook, ran) = lane.attempt(PUSH, &Asker::OnPath(dir.clone()));
    blocked(&hook, &ran, "cut off mid-ask");
    let timeout = row_fence::claude_settings::timeout_s().expect("the snippet's timeout");
    assert!(
        hook.elapsed < Duration::from_secs(timeout),
        "the hook answered in {:?}, inside the {timeout} s Claude Code gives it (past it, the command would run)",
        hook.elapsed
    );
    assert!(!lane.pushed());
}

/// The three ways an asker never runs, each as the hook would meet it.
fn never_running_askers(lane: &Lane) -> Vec<(&'static str, Asker)> {
    let empty = lane.home.path("no-asker");
    fs::create_dir_all(&empty).unwrap();
    let not_executable = lane.home.path("not-executable");
    fs::create_dir_all(&not_executable).unwrap();
    fs::copy(bin("row-fence-ask"), not_executable.join("row-fence-ask")).unwrap();
    fs::set_permissions(
        not_executable.join("row-fence-ask"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let killed = stand_in(lane, "kill -9 $$");
    vec![
        ("missing", Asker::OnPath(empty)),
        ("not executable", Asker::BinDir(not_executable)),
        ("killed before asking", Asker::OnPath(killed)),
    ]
}

#[test]
fn an_asker_that_never_ran_blocks_a_row_bound_lane() {
    let lane = Lane::new();
    lane.hold();
    for (why, asker) in never_running_askers(&lane) {
        let (hook, ran) = lane.attempt(PUSH, &asker);
        blocked(&hook, &ran, "never ran");
        assert!(
            hook.stderr
                .contains(&lane.repo.descriptor().display().to_string()),
            "{why}: {}",
            hook.stderr
        );
    }
    assert!(!lane.pushed());
}

#[test]
fn an_asker_that_never_ran_lets_an_unbound_lane_through_with_a_loud_warning() {
    let lane = Lane::new();
    for (why, asker) in never_running_askers(&lane) {
        let (hook, ran) = lane.attempt(PUSH, &asker);
        assert_eq!(hook.code, 0, "{why}: {}", hook.stderr);
        assert!(
            hook.stderr.contains("WARNING") && hook.stderr.contains("UNFENCED"),
            "{why}: {}",
            hook.stderr
        );
        assert_eq!(ran.unwrap().code, 0, "{why}");
    }
    assert!(lane.pushed());
}

#[test]
fn a_hook_with_an_empty_environment_still_denies_a_row_bound_push() {
    let lane = Lane::new();
    lane.hold();
    lane.lose();
    let _daemon = lane.home.daemon();
    let input = pre_tool_use("session-7", &lane.repo.clone, PUSH);
    // Bare: no ROW_FENCE_*, no HOME, no asker on /usr/bin:/bin.
    let bare = run_with_stdin(
        Command::new("env")
            .args(["-i", "PATH=/usr/bin:/bin"])
            .arg(guard()),
        &input,
    );
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(bare.stderr.contains("never ran"), "{}", bare.stderr);

    // As installed: the settings' command carries the binaries and the home itself.
    let settings = lane.home.path("settings.json");
    let installed = run(lane
        .home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--bin-dir"])
        .arg(bin_dir())
        .arg("--settings")
        .arg(&settings));
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&settings).unwrap()).unwrap();
    let command = v["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    let hook = run_with_stdin(
        Command::new("env")
            .args(["-i", "PATH=/usr/bin:/bin", "sh", "-c"])
            .arg(&command),
        &input,
    );
    assert_eq!(hook.code, 2, "{command}: {}", hook.stderr);
    assert!(
        hook.stderr
            .contains("row-fence: REFUSED (different_holder)"),
        "{}",
        hook.stderr
    );
    assert_eq!(lane.repo.remote_head(&lane.home), "");
}

#[test]
fn a_push_naming_the_git_dir_from_elsewhere_is_blocked() {
    let lane = Lane::new();
    lane.hold();
    lane.lose();
    let _daemon = lane.home.daemon();
    let elsewhere = lane.home.path("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let git_dir = lane.repo.clone.join(".git");
    for command in [
        format!("git --git-dir={} push -q origin main", git_dir.display()),
        format!("git --git-dir {} push -q origin main", git_dir.display()),
        format!("GIT_DIR={} git push -q origin main", git_dir.display()),
    ] {
        let hook = lane.hook(&command, &elsewhere, &Asker::Real);
        assert_eq!(hook.code, 2, "{command}: {}", hook.stderr);
        assert!(
            hook.stderr
                .contains("row-fence: REFUSED (different_holder)"),
            "{command}: {}",
            hook.stderr
        );
    }
    assert!(!lane.pushed());
}

#[test]
fn a_hook_that_cannot_read_its_input_still_asks_the_fence() {
    let lane = Lane::new();
    lane.hold();
    lane.lose();
    let _daemon = lane.home.daemon();
    // A PATH with every tool the hook uses but awk: the plan cannot be made.
    let tools = lane.home.path("no-awk");
    fs::create_dir(&tools).unwrap();
    for tool in [
        "sh", "sed", "grep", "head", "tail", "dirname", "mktemp", "sleep", "rm", "cat", "kill",
    ] {
        if let Some(path) = ["/bin", "/usr/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
        {
            std::os::unix::fs::symlink(path, tools.join(tool)).unwrap();
        }
    }
    let mut cmd = lane.home.command(guard());
    cmd.env("ROW_FENCE_BIN_DIR", bin_dir())
        .env("PATH", &tools)
        .current_dir(&lane.repo.clone);
    let hook = run_with_stdin(&mut cmd, &pre_tool_use("session-7", &lane.repo.clone, PUSH));
    assert_eq!(hook.code, 2, "{}", hook.stderr);
    assert!(
        hook.stderr.contains("could not read the hook input"),
        "{}",
        hook.stderr
    );
    assert!(
        hook.stderr
            .contains("row-fence: REFUSED (different_holder)"),
        "{}",
        hook.stderr
    );
}

#[test]
fn install_claude_hook_then_rollback_gives_back_the_settings_byte_for_byte() {
    let home = Home::file();
    let settings = home.path("claude/settings.json");
    fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let before = concat!(
        "{\n",
        "    \"permissions\": {\"allow\": [\"Bash(git status:*)\"], \"deny\": []},\n",
        "    \"hooks\": {\n",
        "        \"PreToolUse\": [\n",
        "            {\"matcher\": \"Edit\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]}\n",
        "        ],\n",
        "        \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify.sh\"}]}]\n",
        "    },\n",
        "    \"model\": \"opus\"\n",
        "}\n",
    );
    fs::write(&settings, before).unwrap();
    fs::set_permissions(&settings, fs::Permissions::from_mode(0o640)).unwrap();
    let install = |args: &[&str]| {
        let ran = run(home
            .command(bin("row-fence"))
            .args(["install", "claude-hook", "--settings"])
            .arg(&settings)
            .args(args));
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        ran
    };
    install(&[]);
    let on = fs::read_to_string(&settings).unwrap();
    let v: serde_json::Value = serde_json::from_str(&on).expect("the installed file is JSON");
    let entries = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0]["matcher"], "Edit",
        "the other entry is kept, first"
    );
    let ours = &entries[1];
    assert_eq!(ours["matcher"], "Bash");
    assert_eq!(
        ours["hooks"][0]["timeout"].as_u64(),
        row_fence::claude_settings::timeout_s()
    );
    let hook_path = home.home.join("hooks/guard-bash.sh");
    let command = ours["hooks"][0]["command"].as_str().unwrap();
    assert!(
        command.contains(&hook_path.display().to_string()),
        "{command}"
    );
    assert_eq!(fs::read(&hook_path).unwrap(), fs::read(guard()).unwrap());
    assert_eq!(
        fs::metadata(&hook_path).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(v["model"], "opus");
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "notify.sh");
    assert_eq!(
        fs::metadata(&settings).unwrap().permissions().mode() & 0o777,
        0o640
    );

    install(&[]);
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        on,
        "installing twice adds nothing"
    );
    install(&["--rollback"]);
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        before,
        "byte for byte"
    );
    install(&["--rollback"]);
    assert_eq!(fs::read_to_string(&settings).unwrap(), before);
    assert!(
        hook_path.exists(),
        "the hook stays: another settings file may still run it"
    );

    // No settings file at all: install makes one, rollback takes it away again.
    let fresh = home.path("fresh/settings.json");
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--settings"])
        .arg(&fresh));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    serde_json::from_slice::<serde_json::Value>(&fs::read(&fresh).unwrap()).unwrap();
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--rollback", "--settings"])
        .arg(&fresh));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(!fresh.exists());
}
