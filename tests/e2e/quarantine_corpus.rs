//! Round four, generated (ARCHITECTURE.md, "Quarantine"): each kind of write a refused
//! lane once got out of the quarantine is a generator, run through each harness's
//! installed hook (`row-fence install agent-hook`, the command read back from the file it
//! wrote) fed the harness's own input shape, with the damage checked where a refused lane
//! would do it: the bare remote, a planted program (it touches a proof file, hits a
//! loopback server and pushes), files outside the worktree, in `.git`, in the fence's home
//! and in the user's home.
//!
//! - git reads × the keys that make git run a program or reach out × planted git
//!   directory layouts (the clone's own configuration with a promisor remote, a bare
//!   repository written file by file, a gitfile to a repository outside): no shell runs
//!   in quarantine, so none of them reaches git;
//! - file tools × spellings that land elsewhere than they read (`..` after a link, a
//!   dangling link, a link as the last part, `.git` in other letter cases): readers stay
//!   inside the worktree and out of `.git` and the home; nothing writes in quarantine, no
//!   spelling writes the home outside it, and a session whose row is not ALLOWED writes
//!   no `.git` and no harness settings;
//! - writes that outlive the call: denied for a row-bound session in every spelling;
//! - the everyday commands an unbound or ALLOWED session runs: they run.
//!
//! A call let through is carried out as its harness would (the shell command in bash, a
//! write through the kernel), so a failure says what it damaged.

use crate::guard::{Lane, run_with_stdin};
use crate::quarantine_shapes::Counter;
use crate::util::{Ran, bin, bin_dir, run};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The harness input shapes a call is fed in: Claude Code's `PreToolUse`, Codex's
/// `PreToolUse` (0.169: `tool_input` `{command}`, `tool_cwd`), Gemini CLI's `BeforeTool`
/// (with `mcp_context` for MCP tools), Cursor's `beforeShellExecution`/
/// `beforeMCPExecution` and its general `preToolUse`.
pub(crate) const SHAPES: &[&str] = &["claude", "codex", "gemini", "cursor", "cursor-pre"];

/// One tool call, harness-neutral.
#[derive(Clone, Debug)]
pub(crate) enum Call {
    Shell { command: String, background: bool },
    Read(String),
    List(String),
    Grep(String),
    Write(String),
    Edit(String),
    Patch(String),
}

/// The hook command each harness runs, as `install agent-hook` wrote it.
pub(crate) fn installed(lane: &Lane) -> Vec<(&'static str, String)> {
    ["claude", "codex", "gemini", "cursor"]
        .into_iter()
        .map(|h| {
            let file = lane.home.path(&format!("{h}-corpus-hooks.json"));
            let ran = run(lane
                .home
                .command(bin("row-fence"))
                .args(["install", "agent-hook", "--agent", h, "--bin-dir"])
                .arg(bin_dir())
                .arg("--settings")
                .arg(&file));
            assert_eq!(ran.code, 0, "{}", ran.stderr);
            let commands = crate::agent_hooks::installed_commands(h, &file);
            (h, commands[0].1.clone())
        })
        .collect()
}

/// `call` in `shape`'s input, `None` when that harness has no hook for such a tool.
pub(crate) fn input(shape: &str, call: &Call, session: &str, cwd: &Path) -> Option<Value> {
    let claude = |tool: &str, input: Value| {
        json!({"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": cwd,
               "permission_mode": "default", "hook_event_name": "PreToolUse",
               "tool_name": tool, "tool_input": input})
    };
    let content = "x";
    Some(match shape {
        "claude" => match call {
            Call::Shell {
                command,
                background,
            } => {
                let mut i = json!({"command": command, "description": "x"});
                if *background {
                    i["run_in_background"] = json!(true);
                }
                claude("Bash", i)
            }
            Call::Read(p) => claude("Read", json!({"file_path": p})),
            Call::List(p) => claude("LS", json!({"path": p})),
            Call::Grep(p) => claude("Grep", json!({"pattern": "x", "path": p})),
            Call::Write(p) => claude("Write", json!({"file_path": p, "content": content})),
            Call::Edit(p) => claude(
                "Edit",
                json!({"file_path": p, "old_string": "a", "new_string": "b"}),
            ),
            Call::Patch(_) => return None,
        },
        "codex" => {
            let mut v = match call {
                Call::Shell {
                    command,
                    background: false,
                } => claude("Bash", json!({"command": command})),
                Call::Patch(p) => claude(
                    "apply_patch",
                    json!({"command": format!("*** Begin Patch\n*** Add File: {p}\n+{content}\n*** End Patch\n")}),
                ),
                _ => return None,
            };
            v["turn_id"] = json!("t-1");
            v["model"] = json!("gpt-5-codex");
            v["tool_use_id"] = json!("call-1");
            v["tool_cwd"] = json!(cwd);
            v
        }
        "gemini" => {
            let (tool, i) = match call {
                Call::Shell {
                    command,
                    background,
                } => (
                    "run_shell_command",
                    json!({"command": command, "description": "x", "is_background": background}),
                ),
                Call::Read(p) => ("read_file", json!({"file_path": p})),
                Call::List(p) => ("list_directory", json!({"dir_path": p})),
                Call::Grep(p) => ("grep_search", json!({"pattern": "x", "dir_path": p})),
                Call::Write(p) => ("write_file", json!({"file_path": p, "content": content})),
                Call::Edit(p) => (
                    "replace",
                    json!({"file_path": p, "old_string": "a", "new_string": "b", "instruction": "x"}),
                ),
                Call::Patch(_) => return None,
            };
            let mut v = claude(tool, i);
            v["hook_event_name"] = json!("BeforeTool");
            v["timestamp"] = json!("2026-12-02T00:00:00Z");
            v
        }
        "cursor" => match call {
            Call::Shell {
                command,
                background: false,
            } => json!({"conversation_id": session, "generation_id": "g-1",
                        "hook_event_name": "beforeShellExecution", "command": command,
                        "cwd": cwd, "workspace_roots": [cwd]}),
            _ => return None,
        },
        _ => {
            let (tool, i) = match call {
                Call::Shell {
                    command,
                    background: false,
                } => (
                    "Shell",
                    json!({"command": command, "working_directory": cwd}),
                ),
                Call::Read(p) => ("Read", json!({"path": p})),
                Call::Write(p) => ("Write", json!({"path": p, "contents": content})),
                _ => return None,
            };
            json!({"conversation_id": session, "generation_id": "g-1", "hook_event_name": "preToolUse",
                   "workspace_roots": [cwd], "cwd": cwd, "tool_name": tool, "tool_input": i,
                   "tool_use_id": "u-1", "model": "m", "cursor_version": "2.0.0"})
        }
    })
}

/// Runs `shape`'s installed hook with `input`; the exit, and Cursor's answer read back
/// with a JSON parser (it must agree with the exit).
pub(crate) fn hook(lane: &Lane, hooks: &[(&str, String)], shape: &str, input: &Value) -> Ran {
    let harness = shape.trim_end_matches("-pre");
    let command = &hooks.iter().find(|(h, _)| *h == harness).unwrap().1;
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(command).current_dir(&lane.repo.clone);
    let ran = run_with_stdin(&mut cmd, &input.to_string());
    if harness == "cursor" {
        let answer: Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("{shape}: {e}: {:?}", ran.stdout));
        let permission = if ran.code == 0 { "allow" } else { "deny" };
        assert_eq!(answer["permission"], permission, "{shape}: {}", ran.stderr);
    }
    ran
}

/// `call` in `shape`'s input for `session` (in the lane's clone), run through its
/// installed hook; `None` when that harness has no hook for such a tool.
pub(crate) fn run_call(
    lane: &Lane,
    hooks: &[(&str, String)],
    shape: &str,
    call: &Call,
    session: &str,
) -> Option<Ran> {
    let input = input(shape, call, session, &lane.repo.clone)?;
    Some(hook(lane, hooks, shape, &input))
}

/// A shell call in the foreground.
pub(crate) fn shell(command: &str) -> Call {
    Call::Shell {
        command: command.to_string(),
        background: false,
    }
}

/// A lane that planted everything while it held its row and was then refused, every
/// harness's hook installed, and `session` bound (and quarantined) by a first call, a
/// read; the damage is watched from then on.
pub(crate) fn quarantined(session: &str) -> (Lane, Vec<(&'static str, String)>, Damage) {
    let lane = Lane::held();
    let server = Counter::start();
    planted(&lane, &server);
    let hooks = installed(&lane);
    lane.lose();
    let first = Call::Read("file.txt".into());
    let bound = run_call(&lane, &hooks, "claude", &first, session).unwrap();
    assert_eq!(bound.code, 0, "{}", bound.stderr);
    assert!(bound.stderr.contains("quarantined"), "{}", bound.stderr);
    let damage = Damage::watch(&lane, server, session);
    (lane, hooks, damage)
}

/// What a refused lane could damage, and how to tell.
pub(crate) struct Damage {
    remote: String,
    proof: PathBuf,
    server: Counter,
    /// Files whose bytes must not change.
    pub(crate) kept: Vec<(PathBuf, Option<Vec<u8>>)>,
    /// Directories that must stay empty.
    empty: Vec<PathBuf>,
}

impl Damage {
    pub(crate) fn watch(lane: &Lane, server: Counter, session: &str) -> Damage {
        let tmp = lane.tmp();
        let home = &lane.home.home;
        let kept: Vec<PathBuf> = vec![
            home.join(format!("sessions/{session}.json")),
            home.join("sessions/s.json"),
            home.join("sessions/new.json"),
            home.join("quarantine/s.json"),
            home.join("x.json"),
            lane.repo.clone.join(".git/config"),
            lane.repo.clone.join(".git/info/attributes"),
            lane.repo.clone.join(".git/row-fence.json"),
            lane.repo.clone.join(".GIT/config"),
            lane.repo.clone.join(".claude/settings.json"),
            lane.repo.clone.join(".cursor/hooks.json"),
            tmp.join(".profile"),
            tmp.join("user/.codex/config.toml"),
            lane.repo.remote.join("refs/heads/main"),
        ];
        Damage {
            remote: lane.remote_head(),
            proof: tmp.join("proof"),
            server,
            kept: kept
                .into_iter()
                .map(|p| (p.clone(), fs::read(&p).ok()))
                .collect(),
            empty: vec![tmp.join("outside")],
        }
    }

    /// What moved since [`Damage::watch`], one line each (empty: nothing).
    pub(crate) fn done(&self, lane: &Lane) -> Vec<String> {
        let mut moved = Vec::new();
        if lane.remote_head() != self.remote {
            moved.push("the remote's main moved".into());
        }
        if self.proof.exists() {
            moved.push("the planted program ran".into());
        }
        if self.server.hits() > 0 {
            moved.push(format!("the server got {} requests", self.server.hits()));
        }
        for (path, bytes) in &self.kept {
            if fs::read(path).ok() != *bytes {
                moved.push(format!("{} changed", path.display()));
            }
        }
        for dir in &self.empty {
            if fs::read_dir(dir).map(|d| d.count()).unwrap_or(0) > 0 {
                moved.push(format!("{} was written", dir.display()));
            }
        }
        moved
    }
}

/// Carries out a call the hook let through, as its harness would.
pub(crate) fn carry_out(lane: &Lane, call: &Call) {
    let at = |p: &str| lane.repo.clone.join(p);
    match call {
        Call::Shell { command, .. } => {
            let _ = run(lane
                .home
                .command("timeout")
                .args(["10", "bash", "-c"])
                .arg(command)
                .current_dir(&lane.repo.clone));
        }
        Call::Write(p) | Call::Edit(p) | Call::Patch(p) => {
            // Through the kernel: links (dangling ones too) are followed.
            if let Some(parent) = at(p).parent() {
                let _ = fs::create_dir_all(parent);
            }
            let _ = fs::write(at(p), "{\"planted\": true}\n");
        }
        Call::Read(_) | Call::List(_) | Call::Grep(_) => {}
    }
}

/// The lane and what the refused lane planted while it held its row: the evil program,
/// a promisor remote in the clone's configuration whose lazy fetch runs it, a bare
/// repository written file by file inside the worktree (`evil/`), a gitfile to a
/// repository outside (`sub/.git`), and links into the home, `.git`, outside the
/// worktree and the user's home.
pub(crate) fn planted(lane: &Lane, server: &Counter) {
    let tmp = lane.tmp();
    let clone = &lane.repo.clone;
    let remote = lane.repo.remote.display();
    let evil = tmp.join("evil.sh");
    fs::write(
        &evil,
        format!(
            "#!/bin/sh\nPATH=/usr/local/bin:/usr/bin:/bin\ntouch {tmp}/proof\n(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null\ncd {clone} && git push -q --no-verify {remote} HEAD:main\nexit 1\n",
            tmp = tmp.display(),
            port = server.port,
            clone = clone.display(),
        ),
    )
    .unwrap();
    fs::set_permissions(&evil, fs::Permissions::from_mode(0o755)).unwrap();
    let evil = evil.display().to_string();
    let promisor = format!(
        "[extensions]\n\tpartialClone = p\n[remote \"p\"]\n\turl = ext::sh -c {evil}\n\tpromisor = true\n\tuploadpack = {evil}\n[protocol \"ext\"]\n\tallow = always\n[core]\n\tsshCommand = {evil}\n\taskPass = {evil}\n[credential]\n\thelper = !{evil}\n"
    );
    // The clone's own configuration (the lane writes its .git while it holds its row).
    let config = clone.join(".git/config");
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str(&promisor);
    fs::write(&config, text).unwrap();
    // A bare repository written file by file, as four Writes would.
    let bare = clone.join("evil");
    for d in ["objects/info", "refs/heads"] {
        fs::create_dir_all(bare.join(d)).unwrap();
    }
    fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(
        bare.join("config"),
        format!("[core]\n\trepositoryformatversion = 1\n\tbare = true\n{promisor}"),
    )
    .unwrap();
    // A gitfile to a repository outside the worktree with the same configuration.
    let outside_repo = tmp.join("evilrepo");
    fs::create_dir_all(&outside_repo).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let ran = run(lane.home.command("git").current_dir(dir).args(args));
        assert_eq!(ran.code, 0, "git {args:?}: {}", ran.stderr);
    };
    git(&outside_repo, &["init", "-q"]);
    git(&outside_repo, &["commit", "-q", "--allow-empty", "-m", "x"]);
    let mut text = fs::read_to_string(outside_repo.join(".git/config")).unwrap();
    text.push_str(&promisor);
    fs::write(outside_repo.join(".git/config"), text).unwrap();
    fs::create_dir_all(clone.join("sub")).unwrap();
    fs::write(
        clone.join("sub/.git"),
        format!("gitdir: {}/.git\n", outside_repo.display()),
    )
    .unwrap();
    // Links, planted while the row was held.
    let home = &lane.home.home;
    fs::create_dir_all(home.join("sessions")).unwrap();
    fs::create_dir_all(tmp.join("outside")).unwrap();
    fs::create_dir_all(tmp.join("user/.codex")).unwrap();
    for (target, name) in [
        (home.join("sessions"), "qlink"),
        (home.clone(), "hlink"),
        (tmp.join("outside"), "olink"),
        (tmp.join("outside/new.txt"), "dangling"),
        (home.join("sessions/new.json"), "hdangling"),
        (clone.join(".git"), "glink"),
        (clone.join(".git/info/attributes"), "gdangling"),
        (tmp.join(".profile"), "profile"),
        (tmp.join("user"), "ulink"),
        (clone.join("file.txt"), "alink"),
    ] {
        std::os::unix::fs::symlink(target, clone.join(name)).unwrap();
    }
}

/// Spellings of a path, relative to the clone (or absolute), with where each lands:
/// `home`, `git`, `settings`, `outside`, `user` (the user's home) or `inside`.
fn spellings(lane: &Lane) -> Vec<(String, &'static str)> {
    let home = lane.home.home.display();
    let tmp = lane.tmp();
    let tmp = tmp.display();
    vec![
        ("qlink/../sessions/s.json".into(), "home"),
        ("qlink/s.json".into(), "home"),
        ("hlink/quarantine/s.json".into(), "home"),
        ("hdangling".into(), "home"),
        ("sub/../qlink/../x.json".into(), "home"),
        (format!("{home}/sessions/s.json"), "home"),
        ("olink/../outside/x.txt".into(), "outside"),
        ("dangling".into(), "outside"),
        ("../outside/x.txt".into(), "outside"),
        ("profile".into(), "user"),
        ("ulink/.codex/config.toml".into(), "settings-outside"),
        (".git/config".into(), "git"),
        (".GIT/config".into(), "git"),
        (".Git/info/attributes".into(), "git"),
        ("glink/config".into(), "git"),
        ("gdangling".into(), "git"),
        ("sub/../.git/info/attributes".into(), "git"),
        (
            format!("{tmp}/lane-a-remote.git/refs/heads/main"),
            "git-outside",
        ),
        (".claude/settings.json".into(), "settings"),
        (".cursor/hooks.json".into(), "settings"),
        ("notes.md".into(), "inside"),
    ]
}

/// The remote stays, no program ran, no file moved: the quarantine corpus's verdict.
#[track_caller]
pub(crate) fn nothing_moved(damage: &Damage, lane: &Lane, through: &[String]) {
    let moved = damage.done(lane);
    assert!(
        moved.is_empty() && through.is_empty(),
        "let through:\n{}\ndamage:\n{}",
        through.join("\n"),
        moved.join("\n")
    );
}

/// Kind 1 and 2: git reads × keys that run programs × planted layouts, in every
/// harness's shell shape. In quarantine no shell call runs, so git never reads the
/// planted configuration; and the same shapes really do damage without the guard.
#[test]
fn no_git_read_of_any_key_or_planted_layout_runs_in_quarantine() {
    let session = "s-corpus-git";
    let (lane, hooks, damage) = quarantined(session);
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let evil = lane.tmp().join("evil.sh").display().to_string();
    let reads = [
        format!("git show {missing}"),
        "git log -1".to_string(),
        "git diff".to_string(),
        "git status".to_string(),
        "git describe --always".to_string(),
        format!("git rev-parse {missing}^{{commit}}"),
    ];
    let keys = [
        String::new(),
        format!("-c core.sshCommand={evil} "),
        format!("-c remote.p.uploadpack={evil} "),
        format!("-c credential.helper=!{evil} "),
        format!("-c core.askPass={evil} "),
        format!("-c core.fsmonitor={evil} "),
        format!("-c core.gitProxy={evil} "),
    ];
    let layouts = ["", "cd evil && ", "git -C sub ", "GIT_DIR=evil "];
    let mut through = Vec::new();
    let mut calls = 0;
    for (k, read) in reads.iter().enumerate() {
        for key in &keys {
            for layout in layouts {
                let command = match layout.strip_prefix("git ") {
                    Some(opt) => read.replacen("git ", &format!("git {opt}{key}"), 1),
                    None => format!(
                        "{layout}{}",
                        read.replacen("git ", &format!("git {key}"), 1)
                    ),
                };
                // Every harness shape for every read; keys and layouts rotate through them.
                let shapes: Vec<&str> = if key.is_empty() {
                    SHAPES.to_vec()
                } else {
                    vec![SHAPES[(k + calls) % SHAPES.len()]]
                };
                for shape in shapes {
                    let call = shell(&command);
                    let ran = run_call(&lane, &hooks, shape, &call, session).unwrap();
                    calls += 1;
                    if ran.code != 2 {
                        carry_out(&lane, &call);
                        through.push(format!("{shape}: {command:?}: {:?}", damage.done(&lane)));
                    } else {
                        assert!(
                            ran.stderr.contains("no shell runs in quarantine"),
                            "{shape}: {command}: {}",
                            ran.stderr
                        );
                    }
                }
            }
        }
    }
    nothing_moved(&damage, &lane, &through);
    let record = lane.home.home.join(format!("quarantine/{session}.json"));
    assert!(record.exists(), "still quarantined");
    assert!(calls >= 250, "{calls} calls");
    eprintln!("{calls} git reads denied in quarantine, nothing moved");
}

/// The corpus tests something: without the guard, a read in each planted layout runs the
/// planted program, and a write in each spelling lands in the home, `.git`, outside the
/// worktree or the user's home.
#[test]
fn the_planted_layouts_and_spellings_really_damage_without_the_guard() {
    let lane = Lane::held();
    let server = Counter::start();
    planted(&lane, &server);
    let proof = lane.tmp().join("proof");
    let missing = "0123456789abcdef0123456789abcdef01234567";
    for command in [
        format!("git show {missing}"),
        format!("cd evil && git show {missing}"),
        format!("git -C sub show {missing}"),
    ] {
        let _ = fs::remove_file(&proof);
        carry_out(&lane, &shell(&command));
        assert!(
            proof.exists(),
            "{command}: the program did not run: the case tests nothing"
        );
    }
    // Each spelling the file-tool corpus denies lands where it says when written through
    // the kernel (on this case-sensitive disk `.Git` is a directory of its own).
    for (path, lands) in spellings(&lane) {
        if lands == "inside" || path.starts_with(".Git") {
            continue;
        }
        let damage = Damage::watch(&lane, Counter::start(), "s-none");
        carry_out(&lane, &Call::Write(path.clone()));
        assert!(
            !damage.done(&lane).is_empty(),
            "{path} ({lands}) moved nothing: the case tests nothing"
        );
    }
}

/// Kind 4: file tools × spellings. In quarantine readers stay inside the worktree (out of
/// `.git` and the home, never through a link as the last part) and nothing writes; the
/// spelling that rebound a session to another descriptor lifts nothing.
#[test]
fn quarantined_file_tools_read_only_inside_and_write_nothing_in_any_spelling() {
    let session = "s-corpus-files";
    let (lane, hooks, damage) = quarantined(session);
    let first = Call::Read("file.txt".into());
    let mut through = Vec::new();
    let mut calls = 0;
    let clone = lane.repo.clone.display().to_string();
    for (path, lands) in spellings(&lane) {
        let absolute = if path.starts_with('/') {
            path.clone()
        } else {
            format!("{clone}/{path}")
        };
        let mut all = vec![
            Call::Read(absolute.clone()),
            Call::List(absolute.clone()),
            Call::Grep(absolute.clone()),
            Call::Write(absolute.clone()),
            Call::Edit(absolute.clone()),
            // A patch names its files relative to where it runs.
            Call::Patch(path.clone()),
        ];
        // The session's own binding, by every spelling that reaches it.
        if lands == "home" {
            all.push(Call::Patch(
                path.replace("s.json", &format!("{session}.json")),
            ));
            all.push(Call::Write(
                absolute.replace("s.json", &format!("{session}.json")),
            ));
        }
        for call in all {
            let reads = matches!(call, Call::Read(_) | Call::List(_) | Call::Grep(_));
            // Readers inside the worktree run (a harness's settings there too: reading
            // them changes nothing); everything else is denied, and so is Gemini CLI's
            // grep, which reads by running programs.
            for shape in SHAPES {
                let gemini_grep = *shape == "gemini" && matches!(call, Call::Grep(_));
                let want = if reads && matches!(lands, "inside" | "settings") && !gemini_grep {
                    0
                } else {
                    2
                };
                let Some(ran) = run_call(&lane, &hooks, shape, &call, session) else {
                    continue;
                };
                calls += 1;
                if ran.code != want {
                    carry_out(&lane, &call);
                    through.push(format!(
                        "{shape} {call:?} ({lands}): exit {}: {}",
                        ran.code,
                        ran.stderr.lines().last().unwrap_or("")
                    ));
                }
            }
        }
    }
    // A link as the last part is not read through, even when it points inside.
    let link = Call::Read(format!("{clone}/alink"));
    for shape in ["claude", "gemini", "cursor-pre"] {
        let ran = run_call(&lane, &hooks, shape, &link, session).unwrap();
        assert_eq!(ran.code, 2, "{shape}: {}", ran.stderr);
    }
    nothing_moved(&damage, &lane, &through);
    // Still quarantined: nothing the lane wrote lifted it.
    let again = run_call(&lane, &hooks, "claude", &first, session).unwrap();
    assert!(again.stderr.contains("quarantined"), "{}", again.stderr);
    assert!(calls >= 280, "{calls} calls");
    eprintln!("{calls} file-tool calls in quarantine, nothing moved");
}

/// Kind 4 outside quarantine: no spelling writes the fence's home for any session; a
/// row-bound session whose row is not ALLOWED (the fence cannot be read, no refusal
/// remembered) writes no `.git`, bare repository or harness settings; an ALLOWED or an
/// unbound session writes the rest.
#[test]
fn outside_quarantine_no_spelling_writes_the_home_and_an_unread_row_writes_no_git() {
    let mut lane = Lane::held();
    let server = Counter::start();
    planted(&lane, &server);
    let hooks = installed(&lane);
    let damage = Damage::watch(&lane, server, "s-outside");
    let clone = lane.repo.clone.display().to_string();
    // (state, which landings are closed)
    let states: [(&str, &[&str]); 3] = [
        ("allowed", &["home"]),
        (
            "unread",
            &["home", "git", "settings", "settings-outside", "git-outside"],
        ),
        ("unbound", &["home"]),
    ];
    let mut calls = 0;
    let mut through = Vec::new();
    for (state, closed) in states {
        match state {
            "unread" => {
                // A session that asked once while the fence answered, then the daemon
                // is gone: COULD NOT READ, no refusal remembered.
                lane.daemon.take().unwrap().stop();
            }
            "unbound" => fs::remove_file(lane.repo.descriptor()).unwrap(),
            _ => {}
        }
        let session = format!("s-outside-{state}");
        let prime = Call::Read("file.txt".into());
        let primed = run_call(&lane, &hooks, "claude", &prime, &session).unwrap();
        assert_eq!(primed.code, 0, "{state}: {}", primed.stderr);
        for (path, lands) in spellings(&lane) {
            let absolute = if path.starts_with('/') {
                path.clone()
            } else {
                format!("{clone}/{path}")
            };
            for call in [
                Call::Write(absolute.clone()),
                Call::Edit(absolute.clone()),
                Call::Patch(path.clone()),
            ] {
                let want = if closed.contains(&lands) { 2 } else { 0 };
                for shape in SHAPES {
                    let Some(ran) = run_call(&lane, &hooks, shape, &call, &session) else {
                        continue;
                    };
                    calls += 1;
                    if ran.code != want {
                        through.push(format!(
                            "{state} {shape} {call:?} ({lands}): exit {}: {}",
                            ran.code,
                            ran.stderr.lines().last().unwrap_or("")
                        ));
                        if lands == "home" {
                            carry_out(&lane, &call);
                        }
                    }
                }
            }
        }
    }
    // Only the home is watched here: an ALLOWED session may write its own .git.
    let home_moved: Vec<String> = damage
        .done(&lane)
        .into_iter()
        .filter(|m| m.contains(&lane.home.home.display().to_string()))
        .collect();
    assert!(
        through.is_empty() && home_moved.is_empty(),
        "wrong verdicts:\n{}\nhome changed:\n{}",
        through.join("\n"),
        home_moved.join("\n")
    );
    assert!(calls >= 300, "{calls} calls");
    eprintln!("{calls} file-tool writes outside quarantine, the home unmoved");
}

/// Kind 5: a fenced write or opaque command that outlives the call is denied for a
/// row-bound session holding its row, in every spelling and harness; the same write in
/// the foreground runs. An unbound session's are its own business.
#[test]
fn writes_that_outlive_the_call_are_denied_for_a_row_bound_session() {
    let lane = Lane::held();
    let hooks = installed(&lane);
    let remote = lane.repo.remote.display().to_string();
    let push = format!("git push -q --no-verify {remote} HEAD:main");
    let forms = [
        format!("{push} &"),
        format!("{push} & disown"),
        format!("( {push} ) &"),
        format!("nohup {push}"),
        format!("nohup {push} > /dev/null 2>&1 &"),
        format!("setsid {push}"),
        format!("setsid -f {push}"),
        format!("echo '{push}' | at now + 1 minute"),
        format!("echo '{push}' | batch"),
        format!("systemd-run --user {push}"),
        format!("coproc {push}"),
        format!("watch -n 60 {push}"),
        format!("sleep 30; {push}"),
        format!("sleep 30 && {push}"),
        format!("until false; do sleep 5; {push}; done"),
        format!("wait; {push}"),
        "nohup python3 -c 'print(1)' &".to_string(),
        // Queues and detached sessions (round five).
        format!("pueue add -- {push}"),
        format!("tsp {push}"),
        format!("nq {push}"),
        format!("dtach -n /tmp/rt31-s {push}"),
        format!("abduco -n s {push}"),
        format!("sem {push}"),
        format!("zellij run -- {push}"),
        format!("byobu new-session -d '{push}'"),
    ];
    let session = "s-deferred";
    let mut calls = 0;
    let before = lane.remote_head();
    for form in &forms {
        for shape in SHAPES {
            let call = shell(form);
            let Some(ran) = run_call(&lane, &hooks, shape, &call, session) else {
                continue;
            };
            calls += 1;
            assert_eq!(ran.code, 2, "{shape}: {form}: {}", ran.stderr);
            assert!(
                ran.stderr.contains("after this call returns"),
                "{shape}: {form}: {}",
                ran.stderr
            );
        }
    }
    // The harness's own background flag: Claude Code's run_in_background, Gemini CLI's
    // is_background.
    for shape in ["claude", "gemini"] {
        let call = Call::Shell {
            command: push.clone(),
            background: true,
        };
        let ran = run_call(&lane, &hooks, shape, &call, session).unwrap();
        assert_eq!(ran.code, 2, "{shape}: {}", ran.stderr);
        calls += 1;
    }
    assert_eq!(lane.remote_head(), before, "nothing was pushed");
    // In the foreground, the same push runs (and the remote moves).
    let now = shell(&push);
    let ran = run_call(&lane, &hooks, "claude", &now, session).unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(calls >= 80, "{calls} calls");
    eprintln!("{calls} deferred writes denied");
}

/// The race the deferral kind stands for, without the guard: a push scheduled while the
/// row is held lands after another lane took it over.
#[test]
fn a_push_scheduled_while_allowed_lands_after_the_takeover_without_the_guard() {
    let lane = Lane::held();
    let remote = lane.repo.remote.display().to_string();
    let pushed = lane.tmp().join("pushed");
    let command = format!(
        "(sleep 1; git push -q --no-verify {remote} HEAD:main; touch {}) > /dev/null 2>&1 &",
        pushed.display()
    );
    let ran = lane.run_for_real(&command, &lane.repo.clone);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    lane.lose();
    let landed = crate::util::until(
        std::time::Duration::from_secs(20),
        || lane.run_for_real("true", &lane.repo.clone),
        |_| pushed.exists(),
    );
    assert_eq!(landed.code, 0);
    assert_eq!(
        lane.remote_head(),
        lane.repo.local_head(&lane.home),
        "the push scheduled while ALLOWED landed after the takeover"
    );
}

/// The everyday commands run for an unbound session and one holding its row, including
/// inline code after a `cd` into a directory the text does not name.
#[test]
fn everyday_commands_run_for_unbound_and_allowed_sessions() {
    let lane = Lane::held();
    let hooks = installed(&lane);
    fs::write(lane.repo.clone.join("f.csv"), "b,2\na,1\n").unwrap();
    let commands = [
        "sort -t, -k2 f.csv",
        "date -d yesterday +%F",
        "cut -c1-7 f.csv",
        "git log --format=%h -1 | cut -c1-7",
        "mkdir -p scratch && cd scratch && python3 -c 'print(1)'",
        "cd \"$(git rev-parse --show-toplevel)\" && python3 -c 'print(1)'",
        "cd \"$(mktemp -d)\" && node -e 'console.log(1)'",
        "cd \"$(mktemp -d)\" && python3 -c 'print(1)'",
    ];
    for state in ["allowed", "unbound"] {
        if state == "unbound" {
            fs::remove_file(lane.repo.descriptor()).unwrap();
        }
        for command in commands {
            for shape in SHAPES {
                let session = format!("s-everyday-{state}");
                let Some(ran) = run_call(&lane, &hooks, shape, &shell(command), &session) else {
                    continue;
                };
                assert_eq!(ran.code, 0, "{state} {shape}: {command}: {}", ran.stderr);
            }
        }
    }
}

/// After `row-fence install git-hook` (which sets `core.gitProxy` in the repository's
/// configuration), nothing in quarantine depends on git's configuration: the shell is
/// denied as a shell, and the readers run.
#[test]
fn the_git_hook_s_own_keys_do_not_matter_in_quarantine() {
    let lane = Lane::held();
    let installed_hook = run(lane
        .home
        .command(bin("row-fence"))
        .args(["install", "git-hook", "--repo"])
        .arg(&lane.repo.clone)
        .arg("--bin-dir")
        .arg(bin_dir()));
    assert_eq!(installed_hook.code, 0, "{}", installed_hook.stderr);
    let proxy = run(lane
        .home
        .command("git")
        .args(["config", "--get", "core.gitProxy"])
        .current_dir(&lane.repo.clone));
    assert!(
        !proxy.stdout.trim().is_empty(),
        "the gate sets core.gitProxy: {}",
        proxy.stderr
    );
    let hooks = installed(&lane);
    lane.lose();
    for shape in SHAPES {
        let status = shell("git status");
        let ran = run_call(&lane, &hooks, shape, &status, "s-gate").unwrap();
        assert_eq!(ran.code, 2, "{shape}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("no shell runs in quarantine"),
            "{shape}: {}",
            ran.stderr
        );
        assert!(
            !ran.stderr.to_lowercase().contains("gitproxy"),
            "{shape}: {}",
            ran.stderr
        );
    }
    let read = Call::Read(lane.repo.clone.join("file.txt").display().to_string());
    for shape in ["claude", "gemini", "cursor-pre"] {
        let ran = run_call(&lane, &hooks, shape, &read, "s-gate").unwrap();
        assert_eq!(ran.code, 0, "{shape}: {}", ran.stderr);
    }
}

/// A quarantine is not lifted by anything the lane writes: not by rebinding the session
/// to another lane's ALLOWED descriptor (written as a same-uid process could before the
/// refusal), not by a binding with a second name, and a fresh session of the refused
/// lane is quarantined while the fence cannot be read.
#[test]
fn nothing_the_lane_writes_lifts_a_quarantine() {
    let mut lane = Lane::held();
    let hooks = installed(&lane);
    // Another lane holds another row, in a clone of its own.
    let other = crate::util::Repo::new(&lane.home, "lane-c");
    let other_descriptor = other.descriptor().display().to_string();
    let took = lane.home.cli(&[
        "acquire",
        "board-1",
        "row-2",
        "--lane",
        "lane-c",
        "--write-descriptor",
        &other_descriptor,
    ]);
    assert_eq!(took.code, 0, "{}", took.stderr);
    lane.lose();
    let session = "s-lift";
    let read = Call::Read(lane.repo.clone.join("file.txt").display().to_string());
    let call = |session: &str| run_call(&lane, &hooks, "claude", &read, session).unwrap();
    assert!(call(session).stderr.to_lowercase().contains("quarantined"));
    // The binding rewritten to the other lane's descriptor.
    let binding = lane.home.home.join(format!("sessions/{session}.json"));
    let mut b: Value = serde_json::from_slice(&fs::read(&binding).unwrap()).unwrap();
    b["descriptor"] = json!(other_descriptor);
    b["cwd"] = json!(other.clone);
    fs::write(&binding, b.to_string()).unwrap();
    let rebound = call(session);
    assert!(
        rebound.stderr.to_lowercase().contains("quarantined"),
        "the record's refusal stands: {}",
        rebound.stderr
    );
    let push = shell("ls");
    let denied = run_call(&lane, &hooks, "claude", &push, session).unwrap();
    assert_eq!(denied.code, 2, "{}", denied.stderr);
    // A binding with a second name is not trusted: quarantined.
    let fresh = "s-lift-linked";
    assert!(call(fresh).stderr.to_lowercase().contains("quarantined"));
    fs::hard_link(
        lane.home.home.join(format!("sessions/{fresh}.json")),
        lane.repo.clone.join("binding-copy.json"),
    )
    .unwrap();
    let linked = run_call(&lane, &hooks, "claude", &push, fresh).unwrap();
    assert_eq!(linked.code, 2, "{}", linked.stderr);
    assert!(linked.stderr.contains("second name"), "{}", linked.stderr);
    // The fence cannot be read: a fresh session of the refused lane is quarantined.
    lane.daemon.take().unwrap().stop();
    let newcomer = run_call(&lane, &hooks, "claude", &push, "s-lift-new").unwrap();
    assert_eq!(newcomer.code, 2, "{}", newcomer.stderr);
    assert!(
        newcomer.stderr.contains("QUARANTINED"),
        "{}",
        newcomer.stderr
    );
}
