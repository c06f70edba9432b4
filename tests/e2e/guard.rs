//! The agent guard as Claude Code runs it: `sh -c '<the command row-fence install
//! claude-hook wrote>'` with the PreToolUse JSON on stdin, against the real daemon and a
//! real bare remote. Table-driven: each case is a command shape, the directory the agent
//! is in, the exit the hook must give, and for git shapes whether the remote ref may move.
//! A shape the hook lets through (exit 0) is then run for real, as the agent would, and
//! the remote ref is checked; for the reported git shapes the test also shows, without the
//! guard, that the shape really moves the remote (so the denial is what stops it).
//!
//! Setup (as reported): a clone with the pre-push hook, lane-a acquires board-1/row-1 with
//! the descriptor in the clone's git dir, lane-b takes the row over.

use crate::util::{Daemon, Home, Ran, Repo, bin, bin_dir, git, run};
use serde_json::json;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the agent's shell is when it runs a shape.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cwd {
    /// The lane's clone (row-bound).
    Clone,
    /// The temp dir holding the clone (not row-bound).
    Tmp,
    /// `<tmp>/ws`, holding the bound worktree `my repo` (not row-bound itself).
    Ws,
}

/// What may happen to the remote's `main` when the shape runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Remote {
    /// Not a git write (gh, row-fence): nothing to check at the remote.
    NotGit,
    /// The remote ref must not move.
    Stays,
    /// The remote ref must move to the clone's HEAD (an allowed push).
    Moves,
}

/// One row of a table.
pub(crate) struct Case {
    pub(crate) shape: String,
    pub(crate) cwd: Cwd,
    pub(crate) exit: i32,
    pub(crate) remote: Remote,
    /// The session id sent, if any (a bound session is judged with its binding).
    pub(crate) session: Option<String>,
}

pub(crate) fn case(shape: &str, cwd: Cwd, exit: i32, remote: Remote) -> Case {
    Case {
        shape: shape.to_string(),
        cwd,
        exit,
        remote,
        session: None,
    }
}

/// What Claude Code sends a PreToolUse hook for a Bash call.
fn pre_tool_use(session: Option<&str>, cwd: &Path, command: &str) -> String {
    let mut v = json!({
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "what the agent wants"},
    });
    if let Some(session) = session {
        v["session_id"] = json!(session);
    }
    v.to_string()
}

/// Runs `cmd` with `input` on stdin.
pub(crate) fn run_with_stdin(cmd: &mut Command, input: &str) -> Ran {
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

/// A lane: a home, a bare remote, a clone with one commit to push and the pre-push hook,
/// the daemon, and the hook installed into a settings file.
pub(crate) struct Lane {
    /// First, so it is stopped (and writes its last files) before the home is removed.
    pub(crate) daemon: Option<Daemon>,
    pub(crate) home: Home,
    pub(crate) repo: Repo,
    /// The settings entry's command, as `install claude-hook` wrote it.
    pub(crate) hook: String,
}

impl Lane {
    fn new() -> Lane {
        Lane::with_bin_dir(&bin_dir())
    }

    fn with_bin_dir(bins: &Path) -> Lane {
        let home = Home::file();
        let repo = Repo::new(&home, "lane-a");
        fs::write(repo.clone.join("file.txt"), "work").unwrap();
        git(&home, &repo.clone, &["add", "file.txt"]);
        git(&home, &repo.clone, &["commit", "-q", "-m", "work"]);
        // `git push` alone pushes main to origin, as in an agent's clone.
        git(
            &home,
            &repo.clone,
            &["config", "branch.main.remote", "origin"],
        );
        git(
            &home,
            &repo.clone,
            &["config", "branch.main.merge", "refs/heads/main"],
        );
        fs::create_dir_all(repo.clone.join("sub")).unwrap();
        // The project's own scripts: running them is ordinary work.
        fs::write(repo.clone.join("sub/run.sh"), "#!/bin/sh\necho ran\n").unwrap();
        fs::set_permissions(
            repo.clone.join("sub/run.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        fs::write(repo.clone.join("sub/run.py"), "print('ran')\n").unwrap();
        let hook = install(&home, bins);
        Lane {
            home,
            repo,
            hook,
            daemon: None,
        }
    }

    /// Lane A holds the row (descriptor in the clone's git dir) and the daemon runs.
    pub(crate) fn held() -> Lane {
        let mut lane = Lane::new();
        lane.hold();
        lane.daemon = Some(lane.home.daemon());
        lane
    }

    /// Lane A held the row; lane B took it over; the daemon runs.
    pub(crate) fn refused() -> Lane {
        let mut lane = Lane::new();
        lane.hold();
        lane.lose();
        lane.daemon = Some(lane.home.daemon());
        lane
    }

    fn hold(&self) {
        self.grant_a(&[]);
    }

    /// `row-fence acquire board-1 row-1 --lane lane-a EXTRA… --write-descriptor` into the
    /// clone's git dir.
    fn grant_a(&self, extra: &[&str]) {
        let descriptor = self.repo.descriptor().display().to_string();
        let mut args = vec!["acquire", "board-1", "row-1", "--lane", "lane-a"];
        args.extend_from_slice(extra);
        args.extend(["--write-descriptor", descriptor.as_str()]);
        let ran = self.home.cli(&args);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }

    /// Lane A takes the row back (a takeover), its descriptor rewritten.
    pub(crate) fn regain(&self) {
        self.grant_a(&["--takeover"]);
    }

    pub(crate) fn lose(&self) {
        self.home
            .acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    }

    pub(crate) fn tmp(&self) -> PathBuf {
        self.home.dir.path().to_path_buf()
    }

    pub(crate) fn dir(&self, cwd: Cwd) -> PathBuf {
        match cwd {
            Cwd::Clone => self.repo.clone.clone(),
            Cwd::Tmp => self.tmp(),
            Cwd::Ws => self.tmp().join("ws"),
        }
    }

    /// The shape with its placeholders filled in.
    pub(crate) fn fill(&self, shape: &str) -> String {
        let exec = run(self.home.command("git").arg("--exec-path"))
            .stdout
            .trim()
            .to_string();
        shape
            .replace("{clone}", &self.repo.clone.display().to_string())
            .replace("{remote}", &self.repo.remote.display().to_string())
            .replace("{tmp}", &self.tmp().display().to_string())
            .replace("{exec}", &exec)
            .replace("{git}", &program_path("git").display().to_string())
    }

    /// Runs the installed hook for `command` from `cwd`, as Claude Code does.
    pub(crate) fn hook_in(&self, command: &str, cwd: &Path, session: Option<&str>) -> Ran {
        let mut cmd = self.home.command("sh");
        cmd.arg("-c").arg(&self.hook).current_dir(cwd);
        run_with_stdin(&mut cmd, &pre_tool_use(session, cwd, command))
    }

    /// Runs `command` for real in `cwd`, as the agent's shell would.
    pub(crate) fn run_for_real(&self, command: &str, cwd: &Path) -> Ran {
        run(self
            .home
            .command("sh")
            .arg("-c")
            .arg(command)
            .env("ROW_FENCE_BIN_DIR", bin_dir())
            .current_dir(cwd))
    }

    pub(crate) fn remote_head(&self) -> String {
        self.repo.remote_head(&self.home)
    }

    pub(crate) fn reset_remote(&self) {
        let _ = run(self
            .home
            .command("git")
            .arg("--git-dir")
            .arg(&self.repo.remote)
            .args(["update-ref", "-d", "refs/heads/main"]));
    }

    /// Checks one case: the hook's exit, no verdict asked for exit-0 harmless shapes
    /// when `quiet`, and for a shape let through, the remote after running it for real.
    #[track_caller]
    pub(crate) fn check(&self, c: &Case, quiet: bool) {
        let shape = self.fill(&c.shape);
        let cwd = self.dir(c.cwd);
        let before = self.remote_head();
        let hook = self.hook_in(&shape, &cwd, c.session.as_deref());
        assert_eq!(
            hook.code, c.exit,
            "{shape:?} from {:?}: expected exit {}, got {}:\n{}",
            c.cwd, c.exit, hook.code, hook.stderr
        );
        assert!(
            hook.elapsed < Duration::from_secs(8),
            "{shape:?} took {:?}",
            hook.elapsed
        );
        if c.exit == 2 {
            assert!(
                hook.stderr.contains("row-fence"),
                "a denial says why: {shape:?}: {}",
                hook.stderr
            );
            assert_eq!(self.remote_head(), before, "{shape:?}: denied, nothing ran");
            return;
        }
        if quiet {
            assert!(
                !hook.stderr.contains("row-fence: asking"),
                "{shape:?} passes without asking the fence:\n{}",
                hook.stderr
            );
        }
        if c.remote == Remote::NotGit {
            return;
        }
        if c.remote == Remote::Moves {
            self.reset_remote();
        }
        let ran = self.run_for_real(&shape, &cwd);
        match c.remote {
            Remote::Moves => {
                assert_eq!(ran.code, 0, "{shape:?} ran: {}", ran.stderr);
                assert_eq!(
                    self.remote_head(),
                    self.repo.local_head(&self.home),
                    "{shape:?}: allowed, and the remote moved"
                );
            }
            Remote::Stays => assert_eq!(
                self.remote_head(),
                before,
                "{shape:?} was let through and moved the remote:\n{}",
                ran.stderr
            ),
            Remote::NotGit => {}
        }
    }
}

/// Where `PATH` finds `name` (a path that does not exist when nothing does).
pub(crate) fn program_path(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(format!("/nonexistent/{name}")))
}

/// `row-fence install claude-hook` into a settings file of this home (one per bin dir);
/// the entry's command.
fn install(home: &Home, bins: &Path) -> String {
    let name = bins.file_name().unwrap().to_string_lossy();
    let settings = home.path(&format!("settings-{name}.json"));
    let installed = run(home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--bin-dir"])
        .arg(bins)
        .arg("--settings")
        .arg(&settings));
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&settings).unwrap()).unwrap();
    v["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The ten kinds first reported, as they were given: each exits 2 for the refused lane.
fn reported_kinds() -> Vec<(&'static str, Case)> {
    let bound = |mut c: Case| {
        c.session = Some("session-kind-8".into());
        c
    };
    let many: String = (0..1000)
        .map(|k| format!("git -C {{tmp}}/nx/d{k} push; "))
        .collect::<String>()
        + "git push --no-verify";
    vec![
        (
            "1 plumbing skips pre-push",
            case("git send-pack {remote} main", Cwd::Clone, 2, Remote::Stays),
        ),
        (
            "2 command word not literally git",
            case("$(echo git) push --no-verify", Cwd::Clone, 2, Remote::Stays),
        ),
        (
            "3 subcommand not literally push",
            case(
                "git -c alias.p='push --no-verify' p",
                Cwd::Clone,
                2,
                Remote::Stays,
            ),
        ),
        (
            "4 a wrapper",
            case(
                "timeout --signal KILL 5 git push --no-verify",
                Cwd::Clone,
                2,
                Remote::Stays,
            ),
        ),
        (
            "5 code handed to a shell",
            case(
                "echo 'git push --no-verify' | sh",
                Cwd::Clone,
                2,
                Remote::Stays,
            ),
        ),
        (
            "6 a subshell's cd does not leak",
            case(
                "(cd /tmp); git push --no-verify",
                Cwd::Clone,
                2,
                Remote::Stays,
            ),
        ),
        (
            "7 quoted paths",
            case(
                "cd \"my repo\" && gh pr merge 12",
                Cwd::Ws,
                2,
                Remote::NotGit,
            ),
        ),
        (
            "8 a fresh clone",
            bound(case(
                "git clone -q {clone} {tmp}/x && cd {tmp}/x && git push -q {remote} HEAD:main",
                Cwd::Clone,
                2,
                Remote::Stays,
            )),
        ),
        (
            "9 gh verbs outside the list",
            case("gh pr ready 1", Cwd::Clone, 2, Remote::NotGit),
        ),
        (
            "9 gh verbs outside the list",
            case("gh repo sync", Cwd::Clone, 2, Remote::NotGit),
        ),
        (
            "10 1,000 clauses inside the deadline",
            case(&many, Cwd::Clone, 2, Remote::Stays),
        ),
    ]
}

/// Makes `<tmp>/ws/my repo`, a linked worktree of the clone whose lane is refused.
pub(crate) fn bound_worktree(lane: &Lane) -> PathBuf {
    let ws = lane.tmp().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let wt = ws.join("my repo");
    git(
        &lane.home,
        &lane.repo.clone,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            wt.to_str().unwrap(),
        ],
    );
    let git_dir = git(&lane.home, &wt, &["rev-parse", "--absolute-git-dir"]);
    fs::copy(
        lane.repo.descriptor(),
        Path::new(git_dir.trim()).join("row-fence.json"),
    )
    .unwrap();
    wt
}

#[test]
fn the_issues_ten_kinds_are_denied_for_a_refused_lane_and_the_remote_stays() {
    let lane = Lane::refused();
    bound_worktree(&lane);
    for (kind, c) in reported_kinds() {
        let started = Instant::now();
        lane.check(&c, false);
        if kind.starts_with("10") {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{kind}: {:?}",
                started.elapsed()
            );
        }
    }
}

#[test]
fn the_issues_git_shapes_really_move_the_remote_without_the_guard() {
    // Proof that the table above tests real bypasses: run straight, each moves the ref.
    let lane = Lane::refused();
    for (kind, c) in reported_kinds() {
        if c.remote != Remote::Stays || kind.starts_with("10") {
            continue;
        }
        lane.reset_remote();
        let shape = lane.fill(&c.shape);
        let _ = fs::remove_dir_all(lane.tmp().join("x"));
        let ran = lane.run_for_real(&shape, &lane.dir(c.cwd));
        assert_eq!(
            lane.remote_head(),
            lane.repo.local_head(&lane.home),
            "{kind}: {shape:?} did not move the remote by itself ({}): the case tests nothing",
            ran.stderr
        );
    }
}

#[test]
fn the_issues_ten_kinds_are_denied_under_an_empty_environment() {
    let lane = Lane::refused();
    bound_worktree(&lane);
    for (kind, c) in reported_kinds() {
        let shape = lane.fill(&c.shape);
        let cwd = lane.dir(c.cwd);
        let mut cmd = Command::new("env");
        cmd.args(["-i", "PATH=/usr/bin:/bin", "sh", "-c"])
            .arg(&lane.hook)
            .current_dir(&cwd);
        let hook = run_with_stdin(&mut cmd, &pre_tool_use(c.session.as_deref(), &cwd, &shape));
        assert_eq!(hook.code, 2, "{kind}: {shape:?}: {}", hook.stderr);
    }
}

/// A lane that holds its row runs everyday commands that mention pushes (each call asks:
/// ALLOWED); a refused lane is quarantined instead (guard/src/quarantine).
#[test]
fn the_issues_harmless_commands_pass_for_a_held_lane() {
    let lane = Lane::held();
    let ledger = lane.home.home.join("refusals.jsonl");
    let before = fs::read_to_string(&ledger).unwrap_or_default();
    for shape in [
        "git commit -q -m \"fix; git push later\"",
        "grep -E \"git push|gh pr merge\" README.md",
        "cat > notes.txt <<EOF\ngit push origin main\nEOF",
    ] {
        lane.check(&case(shape, Cwd::Clone, 0, Remote::Stays), false);
    }
    assert_eq!(
        fs::read_to_string(&ledger).unwrap_or_default(),
        before,
        "nothing refused, nothing in the ledger"
    );
    assert_eq!(
        fs::read_to_string(lane.repo.clone.join("notes.txt")).unwrap(),
        "git push origin main\n"
    );
}

/// Shapes of every kind that a refused lane must not get through (exit 2). `{tmp}` is
/// not row-bound; `Cwd::Tmp` shapes must find the clone through the text alone.
fn refused_shapes() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |cwd: Cwd, shapes: &[&str]| {
        for shape in shapes {
            cases.push(case(shape, cwd, 2, Remote::Stays));
        }
    };
    // 1. Plumbing and git-core programs.
    add(
        Cwd::Clone,
        &[
            "git push --no-verify",
            "git push --no-verify origin main",
            "git push -f --no-verify origin HEAD:main",
            "git push --mirror --no-verify {remote}",
            "git send-pack --all {remote}",
            "git send-pack {remote} refs/heads/main:refs/heads/main",
            "git http-push https://example.invalid/r.git main",
            "git -c core.hooksPath=/dev/null push origin main",
            "{exec}/git-send-pack {remote} main",
            "{exec}/git-push --no-verify",
            "git-send-pack {remote} main",
            "git receive-pack {remote}",
            "git remote-ext 'x' y",
            "git subtree push --prefix sub origin main",
            "git lfs push origin main",
            "git send-email --to x@example.invalid HEAD~1",
        ],
    );
    // 2. The command word is not literally git.
    add(
        Cwd::Clone,
        &[
            "`echo git` push --no-verify",
            "\"$(printf git)\" push --no-verify",
            "${GIT:-git} push --no-verify",
            "$'\\x67it' push --no-verify",
            "g=git; $g push --no-verify",
            "eval git push --no-verify",
            "eval \"$(echo git push --no-verify)\"",
            "/usr/bin/git push --no-verify",
            "\\git push --no-verify",
            "'git' push --no-verify",
            "g''it push --no-verify",
            "ln -s \"$(command -v git)\" {tmp}/g && {tmp}/g push --no-verify",
            "x=(git push --no-verify); \"${x[@]}\"",
            "set -- git push --no-verify; \"$@\"",
            "alias g=git; g push --no-verify",
            "f() { git push --no-verify; }; f",
            "function up { git push --no-verify; }; up",
            "ls() { git push --no-verify; }; ls",
            "G=$(command -v git); $G push --no-verify",
            "builtin eval 'git push --no-verify'",
            "source /dev/stdin <<< 'git push --no-verify'",
            ". <(echo git push --no-verify)",
        ],
    );
    // 3. The subcommand is not literally push.
    add(
        Cwd::Clone,
        &[
            "git -c alias.p='!git push --no-verify' p",
            "git config alias.p 'push --no-verify' && git p",
            "git config --global alias.sync '!git push --no-verify' && git sync",
            "git $(echo push) --no-verify",
            "git \"${SUB:-push}\" --no-verify",
            "git pu\\sh --no-verify",
            "git 'push' --no-verify",
            "git --no-pager push --no-verify",
            "git -P -C . push --no-verify",
            "git -c core.sshCommand='ssh -v' fetch",
            "git -c credential.helper= fetch",
            "git --config-env=alias.p=X p",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p",
            "git --exec-path={tmp} status",
            "git rebase -x 'git push --no-verify' HEAD~1",
            "git rebase --exec='git push --no-verify' HEAD~1",
            "git bisect run git push --no-verify",
            "git submodule foreach git push --no-verify",
            "git filter-branch --tree-filter 'git push' HEAD",
            "git config core.hooksPath /dev/null",
            "git config --add include.path {tmp}/evil",
            "git config core.sshCommand 'ssh -v'",
            "git sync",
            "git -c include.path={tmp}/evil status",
            "GIT_EDITOR='git push --no-verify' git commit --amend",
            "GIT_SSH_COMMAND='ssh -v' git fetch",
            "export GIT_SSH_COMMAND='ssh -v'",
            "GIT_EXEC_PATH={tmp} git status",
            "git difftool -x 'git push' HEAD",
        ],
    );
    // 4. Wrappers.
    add(
        Cwd::Clone,
        &[
            "timeout 5 git push --no-verify",
            "timeout -k 1 5 git push --no-verify",
            "timeout --bogus 5 git push --no-verify",
            "nice -n 5 git push --no-verify",
            "nice git push --no-verify",
            "nohup git push --no-verify",
            "setsid git push --no-verify",
            "stdbuf -o0 git push --no-verify",
            "ionice -c 3 git push --no-verify",
            "taskset -c 0 git push --no-verify",
            "flock {tmp}/lock git push --no-verify",
            "flock {tmp}/lock -c 'git push --no-verify'",
            "env git push --no-verify",
            "env -i PATH=/usr/bin:/bin git push --no-verify",
            "env -u HOME git push --no-verify",
            "sudo git push --no-verify",
            "exec git push --no-verify",
            "command git push --no-verify",
            "command -p git push --no-verify",
            "time git push --no-verify",
            "echo main | xargs git push --no-verify origin",
            "xargs -0 git push --no-verify < /dev/null",
            "echo push | xargs git",
            "find . -maxdepth 0 -exec git push --no-verify \\;",
            "watch -n 1 git push --no-verify",
            "strace -f git push --no-verify",
            "script -qc 'git push --no-verify' /dev/null",
            "timeout 5 timeout 5 git push --no-verify",
            "nice -n 1 env timeout 5 git push --no-verify",
            "nohup sh -c 'git push --no-verify'",
            "busybox sh -c 'git push --no-verify'",
            "chrt -o 0 git push --no-verify",
            "unbuffer git push --no-verify",
            "runuser -u nobody -- git push --no-verify",
            "ssh localhost 'cd {clone} && git push --no-verify'",
        ],
    );
    // 5. Code handed to a shell or an interpreter.
    add(
        Cwd::Clone,
        &[
            "echo 'git push --no-verify' | bash",
            "echo 'git push --no-verify' | bash -s",
            "printf 'git push --no-verify\\n' | sh -",
            "sh <<'EOF'\ngit push --no-verify\nEOF",
            "bash <<< 'git push --no-verify'",
            "sh -c 'git push --no-verify'",
            "bash -c \"git push --no-verify\"",
            "bash -lc 'git push --no-verify'",
            "sh -ec 'git push --no-verify'",
            "bash -c \"$CMD\"",
            "dash -c 'git push --no-verify'",
            "zsh -c 'git push --no-verify'",
            "bash -c 'bash -c \"git push --no-verify\"'",
            "python3 -c 'import subprocess; subprocess.run([\"git\",\"push\",\"--no-verify\"])'",
            "python3 - <<'EOF'\nimport os\nos.system('git push --no-verify')\nEOF",
            "echo 'import os' | python3",
            "node -e 'require(\"child_process\").execSync(\"git push --no-verify\")'",
            "perl -e 'system(\"git push --no-verify\")'",
            "ruby -e 'system(\"git push --no-verify\")'",
            "awk 'BEGIN{system(\"git push --no-verify\")}'",
            "trap 'git push --no-verify' EXIT",
            "echo \"$(git push --no-verify)\"",
            "x=$(git push --no-verify)",
            "echo ${x:-$(git push --no-verify)}",
            "echo $((1 + $(git push --no-verify; echo 1)))",
            "cat <<EOF\n$(git push --no-verify)\nEOF",
            "diff <(git push --no-verify) /dev/null",
            "[[ -n $(git push --no-verify) ]]",
            "GIT_PAGER='git push --no-verify' git log -n 1",
            "x='$(git push --no-verify)'; echo ${x@P}",
            "vim -c '!git push --no-verify' -c q",
        ],
    );
    // 6. Where it runs: subshells, pipelines and background jobs do not leak a cd.
    add(
        Cwd::Clone,
        &[
            "(cd /tmp && true); git push --no-verify",
            "cd /tmp | true; git push --no-verify",
            "cd /tmp & wait; git push --no-verify",
            "x=$(cd /tmp); git push --no-verify",
            "cd /nonexistent; git push --no-verify",
            "cd /nonexistent || git push --no-verify",
            "if false; then cd /tmp; fi; git push --no-verify",
            "cd /tmp; cd -; git push --no-verify",
            "pushd /tmp && popd && git push --no-verify",
            "{ cd /tmp; cd {clone}; }; git push --no-verify",
        ],
    );
    add(
        Cwd::Tmp,
        &[
            "cd {clone} && git push --no-verify",
            "cd {clone}; git push --no-verify",
            "cd lane-a-clone && git push --no-verify",
            "cd ./lane-a-clone/ && git push --no-verify",
            "cd lane-a-clone/sub && git push --no-verify",
            "cd lane-a-clone/.git && git push --no-verify",
            "cd lane-a-clone/sub/.. && git push --no-verify",
            "git -C lane-a-clone push --no-verify",
            "git -C {tmp} -C lane-a-clone push --no-verify",
            "git -C /nonexistent -C {clone} push --no-verify",
            "git --git-dir={clone}/.git push --no-verify origin main",
            "git --git-dir {clone}/.git push --no-verify origin main",
            "GIT_DIR={clone}/.git git push --no-verify origin main",
            "export GIT_DIR={clone}/.git; git push --no-verify origin main",
            "env GIT_DIR={clone}/.git git push --no-verify origin main",
            "env -C {clone} git push --no-verify",
            "sudo -D {clone} git push --no-verify",
            "pushd {clone} && git push --no-verify",
            "cd {clone} && (git push --no-verify)",
            "cd {clone} && bash -c 'git push --no-verify'",
            "d={clone}; cd \"$d\" && git push --no-verify",
            "cd \"$PWD/lane-a-clone\" && git push --no-verify",
            "cd $D && git push --no-verify",
            "cd \"$(git -C {clone} rev-parse --show-toplevel)\" && git push --no-verify",
            "for d in {clone}; do (cd $d && git push --no-verify); done",
            "cd {clone} && $(echo git) push --no-verify",
            "cd {clone} && echo 'git push' | sh",
            "cd {clone} && eval git push",
            "cd {clone} && python3 -c 'print(1)'",
            "xargs -I{} git -C {} push --no-verify <<< {clone}",
            "find {clone} -maxdepth 0 -execdir git push --no-verify \\;",
            "if true; then cd {clone}; fi; git push --no-verify",
            "while true; do cd {clone}; break; done; git push --no-verify",
            "case x in x) cd {clone};; esac; git push --no-verify",
            "f() { cd {clone}; }; f; git push --no-verify",
            "eval cd {clone}; git push --no-verify",
            "cd ~/lane-a-clone && git push --no-verify",
            "git -C ~/lane-a-clone push --no-verify",
        ],
    );
    // Found by an adversarial pass over the README and the reported inputs: new shapes of
    // the same kinds.
    add(
        Cwd::Clone,
        &[
            "bash /dev/stdin <<< 'git push --no-verify'",
            "bash <(echo 'git push --no-verify')",
            "echo 'git push --no-verify' > {tmp}/p.sh && sh {tmp}/p.sh",
            "printf 'import os\\nos.system(\"git push --no-verify\")\\n' > {tmp}/p.py && python3 {tmp}/p.py",
            "echo 'git push --no-verify' > {tmp}/q.sh && chmod +x {tmp}/q.sh && {tmp}/q.sh",
            "command_not_found_handle() { git push --no-verify; }; no-such-command",
            "git fetch --upload-pack='git push --no-verify; git-upload-pack' origin",
            "git clone -u 'git push --no-verify; git-upload-pack' {remote} {tmp}/u",
            "git clone -c core.fsmonitor='git push --no-verify' {remote} {tmp}/v",
            "git grep -O'git push --no-verify' work",
            "GIT push --no-verify",
            "make -f - <<< $'all:\\n\\tgit push --no-verify'",
            "make --eval='all: ; git push --no-verify' all",
            "x='a[$(git push --no-verify)]'; echo $((x))",
            "HOME={tmp} git status",
            "hub push --no-verify",
            "git -c protocol.ext.allow=always fetch 'ext::sh -c git%20push'",
            "GIT_ALLOW_PROTOCOL=ext git fetch 'ext::sh -c x'",
            "read -r GIT_SSH_COMMAND <<< 'ssh -v'; export GIT_SSH_COMMAND",
            "printf -v GIT_SSH_COMMAND %s 'ssh -v'; export GIT_SSH_COMMAND",
            "for GIT_SSH_COMMAND in ssh; do export GIT_SSH_COMMAND; done",
            "x=$(printf 'a[$(git push --no-verify)]'); echo $((x))",
            "python3 -m code <<< 'import os'",
            "python3 -m timeit 'import os; os.system(\"git push --no-verify\")'",
        ],
    );
    add(
        Cwd::Tmp,
        &[
            "ln -s {clone} {tmp}/l && cd {tmp}/l && git push --no-verify",
            "cp -r {clone} {tmp}/c && cd {tmp}/c && git push --no-verify",
            "git -C {clone} worktree add -q {tmp}/w2 && git -C {tmp}/w2 push --no-verify",
            "CDPATH={tmp} cd lane-a-clone/sub && git push --no-verify",
        ],
    );
    for shape in [
        "curl -X POST https://api.github.com/repos/o/r/pulls/1/merge",
        "curl -sS -d '{}' https://api.github.com/repos/o/r/issues",
        "curl --request=PATCH https://api.github.com/repos/o/r",
        "wget --post-data=x https://example.invalid/",
        "http POST example.invalid/x a=b",
        "scp notes.txt host:/srv/x",
        "rsync -a . host:repo",
    ] {
        cases.push(case(shape, Cwd::Clone, 2, Remote::NotGit));
    }
    // 9. gh outside the read-only list, and row-fence lease writes.
    for shape in [
        "gh pr checkout 1",
        "gh issue reopen 3",
        "gh issue comment 3 -b hi",
        "gh pr review 1 --approve",
        "gh release upload v1 f",
        "gh label create x",
        "gh workflow run ci",
        "gh run rerun 5",
        "gh secret set X",
        "gh repo create x",
        "gh repo fork",
        "gh repo edit --description x",
        "gh gist create f",
        "gh api -X PATCH repos/o/r",
        "gh api repos/o/r/issues -f title=t",
        "gh api graphql -f query=q",
        "gh api --method=DELETE x",
        "gh api -XPUT x",
        "gh api x --input f.json",
        "gh alias set co 'pr checkout'",
        "gh co 1",
        "gh extension install x",
        "gh pr comment 3 --body hi",
        "gh auth logout",
        "gh $(echo pr) merge 1",
        "gh pr \"$VERB\" 1",
        "gh -R o/r pr merge 1",
        "gh pr merge -R o/r 1",
        "gh pr merge 1 --body --help",
        "gh pr create --fill",
        "gh release create v1.0",
        "gh issue edit 5 --add-label x",
        "row-fence acquire board-1 row-2 --lane lane-a",
        "row-fence renew board-1 row-1 --lane lane-a",
        "row-fence release board-1 row-1 --lane lane-a",
        "row-fence install claude-hook --rollback",
    ] {
        cases.push(case(shape, Cwd::Clone, 2, Remote::NotGit));
    }
    for shape in [
        "cd 'my repo' && gh pr merge 12",
        "cd my\\ repo && gh pr merge 12",
        "cd \"./my repo/\" && gh pr merge 12",
        "cd \"$PWD/my repo\" && gh pr merge 12",
        "pushd \"my repo\" && gh pr merge 12",
        "cd -- \"my repo\" && gh pr merge 12",
        "cd -P \"my repo\" && gh pr merge 12",
        "cd \"my repo\"; gh pr merge 12",
    ] {
        cases.push(case(shape, Cwd::Ws, 2, Remote::NotGit));
    }
    for shape in [
        "git -C \"my repo\" push --no-verify",
        "cd \"my repo\" && git push --no-verify",
    ] {
        cases.push(case(shape, Cwd::Ws, 2, Remote::Stays));
    }
    cases
}

#[test]
fn every_shape_of_every_kind_is_denied_for_a_refused_lane() {
    let lane = Lane::refused();
    bound_worktree(&lane);
    let cases = refused_shapes();
    assert!(cases.len() >= 150, "{} shapes", cases.len());
    for c in &cases {
        lane.check(c, false);
    }
}

/// Shapes that write nothing fenced and run nothing opaque: exit 0 for a lane that holds
/// its row; run for real, the remote stays.
fn harmless_shapes() -> Vec<Case> {
    let mut cases = Vec::new();
    // Deep enough to be walked on the guard's large-stack thread.
    let nested = format!("{}echo deep{}", "( ".repeat(40), " )".repeat(40));
    cases.push(case(&nested, Cwd::Clone, 0, Remote::Stays));
    for shape in [
        "git status --short",
        "git log --oneline -n 3",
        "git diff HEAD",
        "git fetch -q origin",
        "git show HEAD --stat",
        "git branch -a",
        "git remote -v",
        "git tag -l",
        "git rev-parse --show-toplevel",
        "git ls-remote origin",
        "git worktree list",
        "git stash list",
        "git grep -n push || true",
        "git log --format='%H git push' -n 1",
        "git config user.name",
        "git config user.name bob",
        "git config --get remote.origin.url",
        "git -c color.ui=never log -n 1",
        "git -c user.name=x commit -q --allow-empty -m m",
        "GIT_PAGER=cat git log -n 1",
        "PAGER=cat git log -n 1",
        "EDITOR=true git commit -q --allow-empty",
        "ls -la",
        "echo \"git push\"",
        "printf '%s\\n' 'gh pr merge 1'",
        "grep -rn \"git push\" . || true",
        "cat <<'EOF' > f.txt\ngh pr merge 12\nEOF",
        "echo $(date)",
        "for f in a b; do echo $f; done",
        "if [ -f x ]; then echo y; fi",
        "(cd /tmp && ls) > /dev/null",
        "cd /tmp && ls > /dev/null",
        "x=$(git rev-parse HEAD); echo $x",
        "echo 'git push' > notes.txt",
        "bash -c 'echo hi'",
        "sh -c 'ls | wc -l'",
        "timeout 5 ls",
        "env FOO=1 ls",
        "nice ls",
        "xargs echo < /dev/null",
        "find . -name '*.txt' -exec grep -l push {} +",
        "git commit -q -am 'push it later' --allow-empty",
        "echo 'gh pr merge 12 && git push' # a note",
        "[[ -d .git ]] && echo repo",
        "case $x in push) echo p;; esac",
        "python3 sub/run.py",
        "sh ./sub/run.sh",
        "./sub/run.sh",
        "bash sub/run.sh arg",
        "python3 --version",
        "node --version 2>/dev/null || true",
        "awk '{print $1}' /dev/null",
        "git diff --stat HEAD~0",
        "test -n \"$(git status --porcelain)\" || echo clean",
    ] {
        cases.push(case(shape, Cwd::Clone, 0, Remote::Stays));
    }
    for shape in [
        "gh pr view 3",
        "gh pr list",
        "gh issue list",
        "gh pr checks 3",
        "gh pr diff 3",
        "gh pr status",
        "gh api repos/o/r/pulls",
        "gh api -X GET repos/o/r",
        "gh auth status",
        "gh search issues x",
        "gh --version",
        "gh pr merge --help",
        "gh run list",
        "gh repo view",
        "row-fence status",
        "row-fence show board-1 row-1",
        "curl -sI https://example.invalid/",
        "curl -X GET https://example.invalid/",
        "rsync -a sub/ /tmp/elsewhere/",
        "x=1; echo $((x + 1))",
        "f() { echo hi; }; f",
        "for i in 1 2 3; do echo $((i * 2)); done",
        "for ((i = 0; i < 3; i++)); do echo $i; done",
    ] {
        cases.push(case(shape, Cwd::Clone, 0, Remote::NotGit));
    }
    cases
}

#[test]
fn harmless_shapes_pass_for_a_held_lane() {
    let lane = Lane::held();
    for c in &harmless_shapes() {
        lane.check(c, false);
    }
}

#[test]
fn an_allowed_lane_gets_every_route_through_and_the_remote_moves() {
    let lane = Lane::held();
    for (shape, cwd) in [
        ("git push -q origin main", Cwd::Clone),
        ("git push -q --no-verify origin main", Cwd::Clone),
        ("git send-pack {remote} main", Cwd::Clone),
        ("timeout 5 git push -q origin main", Cwd::Clone),
        ("sh -c 'git push -q origin main'", Cwd::Clone),
        ("echo 'git push -q origin main' | sh", Cwd::Clone),
        ("git -c alias.p='push -q' p origin main", Cwd::Clone),
        ("$(echo git) push -q origin main", Cwd::Clone),
        ("cd {clone} && git push -q origin main", Cwd::Tmp),
        ("GIT_DIR={clone}/.git git push -q origin main", Cwd::Tmp),
        ("git -C lane-a-clone push -q origin main", Cwd::Tmp),
        (
            "python3 -c \"import subprocess; subprocess.run(['git','push','-q','origin','main'])\"",
            Cwd::Clone,
        ),
    ] {
        lane.check(&case(shape, cwd, 0, Remote::Moves), false);
    }
}

#[test]
fn an_allowed_push_prints_the_askers_lines() {
    let lane = Lane::held();
    let hook = lane.hook_in("git push -q origin main", &lane.repo.clone, Some("s-1"));
    assert_eq!(hook.code, 0, "{}", hook.stderr);
    let lines: Vec<&str> = hook.stderr.lines().collect();
    assert!(
        lines[0].starts_with("row-fence: asking "),
        "{}",
        hook.stderr
    );
    assert!(
        lines[1].starts_with("row-fence: ALLOWED"),
        "{}",
        hook.stderr
    );
}

#[test]
fn a_refused_push_is_filed_under_the_session_and_its_directory() {
    let mut lane = Lane::refused();
    let hook = lane.hook_in(
        "git push -q origin main",
        &lane.repo.clone,
        Some("session-7"),
    );
    assert_eq!(hook.code, 2);
    assert!(
        hook.stderr
            .contains("row-fence: REFUSED (different_holder)"),
        "{}",
        hook.stderr
    );
    lane.daemon.take().unwrap().stop();
    let ledger = row_fence_contract::ledger::read(&lane.home.home.join("refusals.jsonl")).unwrap();
    let last = ledger.last().expect("the refusal is in the ledger");
    assert_eq!(last.session.as_deref(), Some("session-7"));
    assert!(
        hook.stderr.contains("QUARANTINED"),
        "the refused session is quarantined: {}",
        hook.stderr
    );
    assert_eq!(last.action, "git push origin");
    assert_eq!(last.cwd.as_deref(), lane.repo.clone.to_str());
}

#[test]
fn an_unbound_lane_pushes_unfenced_with_no_daemon_at_all() {
    let lane = Lane::new();
    lane.check(
        &case("git push -q origin main", Cwd::Clone, 0, Remote::Moves),
        false,
    );
}

#[test]
fn the_daemon_down_is_could_not_read_and_the_guard_records_it() {
    let lane = Lane::new();
    lane.hold();
    let hook = lane.hook_in("git push --no-verify", &lane.repo.clone, Some("s-down"));
    assert_eq!(hook.code, 2);
    assert!(
        hook.stderr
            .contains("row-fence: COULD NOT READ (fence_unreadable)"),
        "{}",
        hook.stderr
    );
    let ledger = row_fence_contract::ledger::read(&lane.home.home.join("refusals.jsonl")).unwrap();
    let last = ledger.last().expect("recorded");
    assert_eq!(
        (last.decided_by, last.verdict),
        (
            row_fence_contract::ledger::DecidedBy::Guard,
            row_fence_contract::Verdict::CouldNotRead(row_fence_contract::Reason::FenceUnreadable)
        )
    );
    assert_eq!(last.session.as_deref(), Some("s-down"));
}

#[test]
fn a_bound_session_is_judged_with_its_binding_from_any_directory() {
    let lane = Lane::refused();
    let session = Some("session-bound");
    // The session's first call, in its worktree, binds it (0600); the lane is refused,
    // so the call itself is a shell call in quarantine, denied.
    let first = lane.hook_in("ls", &lane.repo.clone, session);
    assert_eq!(first.code, 2, "{}", first.stderr);
    assert!(first.stderr.contains("QUARANTINED"), "{}", first.stderr);
    let binding = lane.home.home.join("sessions/session-bound.json");
    assert_eq!(
        fs::metadata(&binding).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let tmp = lane.tmp();
    for shape in [
        "git clone -q {clone} {tmp}/x && cd {tmp}/x && git push -q {remote} HEAD:main",
        "git clone -q {remote} {tmp}/y && git -C {tmp}/y push -q origin HEAD:main",
        "mkdir {tmp}/w && cd {tmp}/w && git init -q && git push {remote} HEAD:main",
        "git -C {clone} worktree add -q {tmp}/wt && cd {tmp}/wt && git push --no-verify",
        "cp -r {clone} {tmp}/z && rm {tmp}/z/.git/row-fence.json && cd {tmp}/z && git push --no-verify",
        "cd /tmp && python3 -c 'print(1)'",
        "gh pr create --fill",
    ] {
        let shape = lane.fill(shape);
        let hook = lane.hook_in(&shape, &tmp, session);
        assert_eq!(hook.code, 2, "{shape}: {}", hook.stderr);
        assert!(
            hook.stderr.contains("REFUSED (different_holder)"),
            "{shape}: {}",
            hook.stderr
        );
    }
    // The same shapes from a session that never was in a worktree are its own business.
    let other = lane.hook_in(
        &lane.fill("git clone -q {remote} {tmp}/q && git -C {tmp}/q log -n 1"),
        &tmp,
        Some("session-free"),
    );
    assert_eq!(other.code, 0, "{}", other.stderr);
    assert_eq!(lane.remote_head(), "", "nothing reached the remote");
}

#[test]
fn a_directory_the_text_does_not_name_is_denied_even_for_an_unbound_session() {
    let lane = Lane::new();
    for shape in [
        "cd \"$REPO\" && git push",
        "cd $(mktemp -d) && gh pr merge 1",
    ] {
        let hook = lane.hook_in(shape, &lane.tmp(), None);
        assert_eq!(hook.code, 2, "{shape}: {}", hook.stderr);
        assert!(
            hook.stderr
                .contains("cannot tell whether that directory is row-bound"),
            "{}",
            hook.stderr
        );
    }
}

#[test]
fn hook_input_that_is_not_claude_codes_json_is_denied() {
    let lane = Lane::new();
    for input in ["", "not json", "{\"tool_input\": {}}", "[1]"] {
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c").arg(&lane.hook).current_dir(lane.tmp());
        let hook = run_with_stdin(&mut cmd, input);
        assert_eq!(hook.code, 2, "{input:?}: {}", hook.stderr);
    }
    let unparseable = lane.hook_in("echo 'unterminated", &lane.tmp(), None);
    assert_eq!(unparseable.code, 2, "{}", unparseable.stderr);
    assert!(
        unparseable.stderr.contains("does not parse"),
        "{}",
        unparseable.stderr
    );
    let deep = format!("{}true{}", "(".repeat(600), ")".repeat(600));
    let hook = lane.hook_in(&deep, &lane.tmp(), None);
    assert_eq!(hook.code, 2, "{}", hook.stderr);
}

/// A bin dir whose `row-fence-guard` runs `body` (a stand-in for a broken guard).
fn stand_in_bins(lane_tmp: &Path, name: &str, body: &str) -> PathBuf {
    let dir = lane_tmp.join(name);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("row-fence-guard");
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// How a stand-in guard is broken after the hook is installed.
type Breakage = Box<dyn Fn(&Path)>;

/// The three ways the guard never runs, each installed as the hook would meet it.
fn never_running(home_tmp: &Path) -> Vec<(&'static str, PathBuf, Breakage)> {
    vec![
        (
            "missing",
            stand_in_bins(home_tmp, "missing", "exit 0"),
            Box::new(|dir: &Path| fs::remove_file(dir.join("row-fence-guard")).unwrap()),
        ),
        (
            "not executable",
            stand_in_bins(home_tmp, "not-executable", "exit 0"),
            Box::new(|dir: &Path| {
                fs::set_permissions(
                    dir.join("row-fence-guard"),
                    fs::Permissions::from_mode(0o644),
                )
                .unwrap()
            }),
        ),
        (
            "killed before asking",
            stand_in_bins(home_tmp, "killed", "kill -9 $$"),
            Box::new(|_: &Path| {}),
        ),
    ]
}

#[test]
fn a_guard_that_never_ran_blocks_a_row_bound_lane_and_warns_an_unbound_one() {
    let lane = Lane::new();
    lane.hold();
    let unbound = lane.tmp().join("plain");
    fs::create_dir_all(&unbound).unwrap();
    for (why, bins, breakage) in never_running(&lane.tmp()) {
        let hook = install(&lane.home, &bins);
        breakage(&bins);
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c").arg(&hook).current_dir(&lane.repo.clone);
        let ran = run_with_stdin(
            &mut cmd,
            &pre_tool_use(Some("s-nr"), &lane.repo.clone, "git push --no-verify"),
        );
        assert_eq!(ran.code, 2, "{why}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("never ran")
                && ran
                    .stderr
                    .contains(&lane.repo.descriptor().display().to_string()),
            "{why}: {}",
            ran.stderr
        );
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c").arg(&hook).current_dir(&unbound);
        let ran = run_with_stdin(&mut cmd, &pre_tool_use(Some("s-free"), &unbound, "ls"));
        assert_eq!(ran.code, 0, "{why}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("WARNING") && ran.stderr.contains("UNFENCED"),
            "{why}: {}",
            ran.stderr
        );
    }
    assert_eq!(lane.remote_head(), "");
}

/// Cursor names the session `conversation_id`: a bound conversation is row-bound to the
/// shim too, from a directory that is not, when the guard never ran.
#[test]
fn a_guard_that_never_ran_reads_cursors_conversation_as_the_session() {
    let lane = Lane::new();
    let unbound = lane.tmp().join("plain");
    fs::create_dir_all(&unbound).unwrap();
    let sessions = lane.home.home.join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::write(sessions.join("k-bound.json"), "{}").unwrap();
    let (_, bins, breakage) = never_running(&lane.tmp()).remove(0);
    let hook = install(&lane.home, &bins);
    breakage(&bins);
    let input = json!({"conversation_id": "k-bound", "generation_id": "g",
                       "hook_event_name": "beforeShellExecution", "command": "ls",
                       "cwd": unbound, "workspace_roots": [unbound]});
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(&hook).current_dir(&unbound);
    let ran = run_with_stdin(&mut cmd, &input.to_string());
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("k-bound.json"), "{}", ran.stderr);
}

#[test]
fn a_guard_killed_mid_ask_is_cut_off_and_says_retry() {
    let lane = Lane::new();
    // Dies as the real guard would if killed while its asking marker is down.
    let body = "mkdir -p \"$ROW_FENCE_HOME/guard\" && echo x > \"$ROW_FENCE_HOME/guard/asking.$PPID\"\necho 'row-fence: asking' >&2\nkill -9 $$";
    let bins = stand_in_bins(&lane.tmp(), "mid-ask", body);
    let hook = install(&lane.home, &bins);
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(&hook).current_dir(lane.tmp());
    // Even from an unbound directory: the guard was asking, so something was bound.
    let ran = run_with_stdin(
        &mut cmd,
        &pre_tool_use(None, &lane.tmp(), "cd {clone} && git push"),
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("cut off mid-ask") && ran.stderr.contains("retry"),
        "{}",
        ran.stderr
    );
    assert!(
        fs::read_dir(lane.home.home.join("guard"))
            .unwrap()
            .next()
            .is_none(),
        "the marker is cleared"
    );
}

#[test]
fn a_daemon_that_never_answers_is_cut_off_inside_claude_codes_timeout() {
    let lane = Lane::new();
    lane.hold();
    // A socket that accepts and never answers.
    fs::create_dir_all(&lane.home.home).unwrap();
    fs::set_permissions(&lane.home.home, fs::Permissions::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(lane.home.socket()).unwrap();
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c")
        .arg(&lane.hook)
        .env("ROW_FENCE_GUARD_TIMEOUT_MS", "1500")
        .current_dir(&lane.repo.clone);
    let ran = run_with_stdin(
        &mut cmd,
        &pre_tool_use(None, &lane.repo.clone, "git push --no-verify"),
    );
    drop(listener);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("cut off mid-ask") && ran.stderr.contains("retry"),
        "{}",
        ran.stderr
    );
    let timeout = row_fence_install::claude_settings::timeout_s().expect("the snippet's timeout");
    assert!(
        ran.elapsed < Duration::from_secs(timeout.min(4)),
        "{:?}",
        ran.elapsed
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
            .args(["install", "claude-hook", "--bin-dir"])
            .arg(bin_dir())
            .arg("--settings")
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
    assert_eq!(ours["matcher"], "*", "every tool is hooked");
    assert_eq!(
        ours["hooks"][0]["timeout"].as_u64(),
        row_fence_install::claude_settings::timeout_s()
    );
    let shim = home.home.join("hooks/guard-bash.sh");
    let command = ours["hooks"][0]["command"].as_str().unwrap();
    assert!(
        command.contains(&shim.display().to_string())
            && command.contains(&bin_dir().join("row-fence-guard").display().to_string()),
        "{command}"
    );
    assert_eq!(
        fs::read(&shim).unwrap(),
        fs::read(crate::util::repo_root().join("hooks/guard-bash.sh")).unwrap()
    );
    assert_eq!(
        fs::metadata(&shim).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(v["model"], "opus");
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

    // A bin dir without the guard is refused, naming it.
    let empty = home.path("empty-bin");
    fs::create_dir_all(&empty).unwrap();
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--bin-dir"])
        .arg(&empty)
        .arg("--settings")
        .arg(&settings));
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("row-fence-guard"), "{}", ran.stderr);
    assert_eq!(fs::read_to_string(&settings).unwrap(), before);
}

#[test]
fn the_guard_answers_version_and_help_and_refuses_bad_flags_closed() {
    let out = Command::new(bin("row-fence-guard"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("row-fence-guard "));
    let out = Command::new(bin("row-fence-guard"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Exit: 0"));
    let out = Command::new(bin("row-fence-guard"))
        .arg("--no-such-flag")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a broken entry denies");
}

/// A command line the guard does not take, read before `--harness` names the harness:
/// no harness's convention is known, so the denial is plain (nothing on stdout, exit 2,
/// which every harness reads as a block) and says how to fix the hook.
#[test]
fn a_usage_error_before_the_harness_is_named_is_a_plain_denial_that_says_what_to_do() {
    let home = Home::file();
    let dir = home.path("unbound");
    fs::create_dir_all(&dir).unwrap();
    let input = json!({"conversation_id": "k1", "hook_event_name": "beforeShellExecution",
                       "command": "echo hi", "cwd": dir})
    .to_string();
    for args in [
        &["--no-such-flag", "--harness", "cursor"][..],
        &["--harness"][..],
        &["--harness", "vscode"][..],
    ] {
        let mut cmd = home.command(bin("row-fence-guard"));
        cmd.args(args).current_dir(&dir);
        let ran = run_with_stdin(&mut cmd, &input);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stdout, "", "{args:?}: no harness's answer");
        assert!(
            ran.stderr.contains("row-fence-guard: error: ")
                && ran.stderr.contains("did not run")
                && ran.stderr.contains("row-fence-guard --help")
                && ran.stderr.contains("install agent-hook --agent"),
            "{args:?}: {}",
            ran.stderr
        );
    }
}

/// Cursor reads the guard's answer from stdout (`{"permission": …}`): every way the guard
/// ends gives it, not only the judge's verdict: a usage error, input it cannot read, a
/// `--harness` given twice, and the hard deadline's alarm (stdin left open and silent).
#[test]
fn every_exit_of_the_guard_answers_in_the_harness_convention() {
    let home = Home::file();
    let dir = home.path("unbound");
    fs::create_dir_all(&dir).unwrap();
    let guard = |args: &[&str], input: &str| {
        let mut cmd = home.command(bin("row-fence-guard"));
        cmd.args(args).current_dir(&dir);
        run_with_stdin(&mut cmd, input)
    };
    let permission = |ran: &Ran| -> String {
        let line = ran.stdout.lines().last().unwrap_or_default();
        let answer: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout {:?} is no JSON answer: {e}", ran.stdout));
        answer["permission"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let harmless = json!({"conversation_id": "k1", "hook_event_name": "beforeShellExecution",
                          "command": "echo hi", "cwd": dir})
    .to_string();
    let allowed = guard(&["--harness", "cursor"], &harmless);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert_eq!(permission(&allowed), "allow");
    for (args, input) in [
        (
            &["--harness", "cursor", "--no-such-flag"][..],
            harmless.as_str(),
        ),
        (&["--harness", "cursor"][..], "not json"),
        (&["--harness", "cursor"][..], "{\"command\": \"echo hi\"}"),
        (
            &["--harness", "cursor", "--harness", "claude"][..],
            harmless.as_str(),
        ),
    ] {
        let ran = guard(args, input);
        assert_eq!(ran.code, 2, "{args:?} {input}: {}", ran.stderr);
        assert_eq!(permission(&ran), "deny", "{args:?} {input}");
    }
    // The deadline passes while the guard waits for input that never comes.
    let started = Instant::now();
    let mut child = home
        .command(bin("row-fence-guard"))
        .args(["--harness", "cursor", "--timeout-ms", "100"])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let ran = Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    };
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("deadline passed"), "{}", ran.stderr);
    assert_eq!(permission(&ran), "deny");
    assert!(ran.elapsed < Duration::from_secs(10), "{:?}", ran.elapsed);
}
