//! `row-fence install agent-hook --agent claude|codex|gemini|cursor` and `row-fence
//! doctor`'s agent section, through the real binary (ARCHITECTURE.md, "Agent hooks"):
//! each harness's own file and format, read back with a real parser (serde_json, toml),
//! installed twice to no effect, and rolled back byte for byte; doctor reading each
//! harness's entry, its guard and the harness's own switches.

use crate::util::{Home, Ran, Repo, bin, bin_dir, run};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// `row-fence install agent-hook --agent AGENT [--settings FILE] [ARGS]`.
fn agent_hook(home: &Home, agent: &str, file: Option<&Path>, args: &[&str]) -> Ran {
    let mut cmd = home.command(bin("row-fence"));
    cmd.args(["install", "agent-hook", "--agent", agent, "--bin-dir"])
        .arg(bin_dir());
    if let Some(file) = file {
        cmd.arg("--settings").arg(file);
    }
    run(cmd.args(args))
}

/// The commands of a harness file's row-fence entries, per event, read with a real parser.
pub(crate) fn installed_commands(agent: &str, file: &Path) -> Vec<(String, String)> {
    let text = fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    let ours = |c: &str| c.contains("row-fence-guard");
    if file.extension().is_some_and(|e| e == "toml") {
        let config: toml::Table = text.parse().expect("the written config.toml is TOML");
        for entry in config["hooks"]["PreToolUse"].as_array().unwrap() {
            for h in entry["hooks"].as_array().unwrap() {
                let command = h["command"].as_str().unwrap();
                if ours(command) {
                    assert!(entry.get("matcher").is_none(), "no matcher: every tool");
                    assert_eq!(h["timeout"].as_integer(), Some(10));
                    found.push(("PreToolUse".to_string(), command.to_string()));
                }
            }
        }
    } else {
        let v: Value = serde_json::from_str(&text).expect("the written file is JSON");
        let events: &[&str] = match agent {
            "claude" | "codex" => &["PreToolUse"],
            "gemini" => &["BeforeTool"],
            _ => &["beforeShellExecution", "beforeMCPExecution"],
        };
        for event in events {
            for entry in v["hooks"][event].as_array().into_iter().flatten() {
                if agent == "cursor" {
                    let command = entry["command"].as_str().unwrap();
                    if ours(command) {
                        assert_eq!(entry["failClosed"], true);
                        found.push((event.to_string(), command.to_string()));
                    }
                    continue;
                }
                for h in entry["hooks"].as_array().unwrap() {
                    let command = h["command"].as_str().unwrap();
                    if !ours(command) {
                        continue;
                    }
                    match agent {
                        "claude" => assert_eq!(entry["matcher"], "*"),
                        _ => assert!(entry.get("matcher").is_none(), "no matcher: every tool"),
                    }
                    let timeout = h["timeout"].as_u64().unwrap();
                    // Gemini CLI counts milliseconds, the others seconds; each above the
                    // guard's 8 s deadline.
                    assert!(
                        if agent == "gemini" {
                            timeout > 8000
                        } else {
                            (9..60).contains(&timeout)
                        },
                        "{agent}: timeout {timeout}"
                    );
                    found.push((event.to_string(), command.to_string()));
                }
            }
        }
        if agent == "cursor" {
            assert_eq!(v["version"], 1, "Cursor loads only version 1");
        }
    }
    found
}

/// Installs into `file` (holding `before`, or missing), checks the entries, installs
/// again to no effect, rolls back to `before` byte for byte.
fn round_trip(home: &Home, agent: &str, file: &Path, before: Option<&str>) {
    if let Some(before) = before {
        fs::write(file, before).unwrap();
    }
    let ran = agent_hook(home, agent, Some(file), &["--json"]);
    assert_eq!(ran.code, 0, "{agent}: {}", ran.stderr);
    let said: Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    assert_eq!(said["agent"], agent);
    assert_eq!(said["changed"], true);
    let on = fs::read_to_string(file).unwrap();
    let ours = installed_commands(agent, file);
    let events = if agent == "cursor" { 2 } else { 1 };
    assert_eq!(ours.len(), events, "{agent}: {on}");
    for (_, command) in &ours {
        assert_eq!(command, said["command"].as_str().unwrap());
        if agent == "claude" {
            assert!(!command.contains("--harness"), "{command}");
        } else {
            assert!(
                command.contains(&format!("row-fence-guard --harness {agent};"))
                    || command.contains(&format!("row-fence-guard' --harness {agent};")),
                "{command}"
            );
        }
    }
    let again = agent_hook(home, agent, Some(file), &["--json"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(fs::read_to_string(file).unwrap(), on, "twice adds nothing");
    let off = agent_hook(home, agent, Some(file), &["--rollback"]);
    assert_eq!(off.code, 0, "{}", off.stderr);
    match before {
        Some(before) => assert_eq!(
            fs::read_to_string(file).unwrap(),
            before,
            "{agent}: byte for byte"
        ),
        None => assert!(
            !file.exists(),
            "{agent}: install created it, rollback removes it"
        ),
    }
}

#[test]
fn each_harness_file_is_written_in_its_format_and_rolled_back_byte_for_byte() {
    let home = Home::file();
    let cases: [(&str, &str, &str); 5] = [
        (
            "claude",
            "claude.json",
            "{\n  \"model\": \"opus\",\n  \"hooks\": {\"PreToolUse\": [{\"matcher\": \"Edit\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]}]}\n}\n",
        ),
        (
            "codex",
            "hooks.json",
            "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"^Bash$\", \"hooks\": [{\"type\": \"command\", \"command\": \"python3 policy.py\", \"timeout\": 30}]}\n    ],\n    \"Stop\": []\n  }\n}\n",
        ),
        (
            "codex",
            "config.toml",
            "model = \"gpt-5-codex\"\n\n[features]\nhooks = true\n\n[[hooks.PreToolUse]]\nmatcher = \"^Bash$\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"python3 policy.py\"\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"",
        ),
        (
            "gemini",
            "gemini.json",
            "{\n    \"general\": {\"vimMode\": true},\n    \"hooks\": {\"enabled\": true, \"BeforeTool\": [{\"matcher\": \"write_file\", \"hooks\": [{\"name\": \"scan\", \"type\": \"command\", \"command\": \"scan.sh\", \"timeout\": 5000}]}]}\n}\n",
        ),
        (
            "cursor",
            "cursor.json",
            "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [{\"command\": \"./format.sh\"}]\n  }\n}\n",
        ),
    ];
    for (agent, name, before) in cases {
        let dir = home.path(agent);
        fs::create_dir_all(&dir).unwrap();
        round_trip(&home, agent, &dir.join(name), Some(before));
        // Into a file that is not there yet: created, and rollback removes it.
        round_trip(&home, agent, &dir.join(format!("new-{name}")), None);
    }
    // Each harness's usual place under $HOME, when no --settings is given.
    for (agent, default) in [
        ("claude", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("gemini", ".gemini/settings.json"),
        ("cursor", ".cursor/hooks.json"),
    ] {
        let ran = agent_hook(&home, agent, None, &[]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let file = home.dir.path().join(default);
        assert_eq!(
            installed_commands(agent, &file).len(),
            if agent == "cursor" { 2 } else { 1 }
        );
        assert_eq!(agent_hook(&home, agent, None, &["--rollback"]).code, 0);
        assert!(
            !file.exists(),
            "{agent}: {default} was install's and is gone"
        );
    }
    // A file that is not its format, or whose hooks cannot take the entry, is refused and
    // left as it was.
    for (agent, name, text) in [
        ("gemini", "bad.json", "{\"hooks\": []}\n"),
        ("cursor", "bad.json", "{\"version\": 1,}\n"),
        ("codex", "bad.toml", "[hooks]\nPreToolUse = []\n"),
        ("codex", "worse.toml", "model = \n"),
    ] {
        let file = home.path(name);
        fs::write(&file, text).unwrap();
        let ran = agent_hook(&home, agent, Some(&file), &[]);
        assert_ne!(ran.code, 0, "{agent} {text}");
        assert!(
            ran.stderr.contains(&file.display().to_string()),
            "{}",
            ran.stderr
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), text);
    }
    let ran = agent_hook(&home, "aider", Some(&home.path("x.json")), &[]);
    assert_eq!(
        ran.code, 2,
        "an unknown harness is a usage error: {}",
        ran.stderr
    );
}

/// `doctor --json`'s problem count (git's included: this repository has no gate) and
/// agent reports.
fn doctor(home: &Home, repo: &Path) -> (u64, Vec<Value>) {
    let ran = home.cli(&["doctor", "--json", "--repo", repo.to_str().unwrap()]);
    let v: Value = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", ran.stdout, ran.stderr));
    let problems = v["problems"].as_u64().unwrap();
    assert_eq!(ran.code, if problems == 0 { 0 } else { 1 });
    (problems, v["agents"].as_array().unwrap().clone())
}

fn report<'a>(agents: &'a [Value], file: &Path) -> &'a Value {
    agents
        .iter()
        .find(|a| a["file"] == file.display().to_string())
        .unwrap_or_else(|| panic!("no report for {}: {agents:?}", file.display()))
}

#[test]
fn doctor_reads_each_harness_entry_its_guard_and_the_harness_switches() {
    let home = Home::file();
    let repo = Repo::new(&home, "doc");
    let installed = |agent: &str| {
        let ran = agent_hook(&home, agent, None, &[]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        ran
    };
    let (git_problems, agents) = doctor(&home, &repo.clone);
    assert!(
        agents.is_empty(),
        "nothing installed, nothing reported: {agents:?}"
    );
    for agent in ["claude", "codex", "gemini", "cursor"] {
        let ran = installed(agent);
        if agent == "codex" {
            assert!(
                ran.stderr.contains("/hooks"),
                "install says to trust it: {}",
                ran.stderr
            );
        }
    }
    let user = home.dir.path().to_path_buf();
    let file = |p: &str| -> PathBuf { user.join(p) };
    let (code, agents) = doctor(&home, &repo.clone);
    for (agent, f) in [
        ("claude", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("gemini", ".gemini/settings.json"),
        ("cursor", ".cursor/hooks.json"),
    ] {
        let r = report(&agents, &file(f));
        assert_eq!(r["agent"], agent);
        assert_eq!(r["hook"], "on", "{r}");
        assert_eq!(r["problems"].as_array().unwrap().len(), 0, "{r}");
        assert_eq!(
            r["guards"][0].as_str().unwrap(),
            bin_dir().join("row-fence-guard").display().to_string()
        );
    }
    assert!(
        report(&agents, &file(".codex/hooks.json"))["notes"]
            .to_string()
            .contains("trust"),
        "Codex's hook trust is named"
    );
    assert_eq!(code, git_problems, "every hook is whole: {agents:?}");

    // The harnesses' own switches, a missing event, and a guard that is gone: each a
    // problem, and doctor exits 1.
    fs::write(file(".codex/config.toml"), "[features]\nhooks = false\n").unwrap();
    let gemini = fs::read_to_string(file(".gemini/settings.json")).unwrap();
    fs::write(
        file(".gemini/settings.json"),
        gemini.replacen("\"hooks\": {", "\"hooks\": {\"enabled\": false, ", 1),
    )
    .unwrap();
    let mut cursor: Value =
        serde_json::from_str(&fs::read_to_string(file(".cursor/hooks.json")).unwrap()).unwrap();
    cursor["hooks"]
        .as_object_mut()
        .unwrap()
        .remove("beforeMCPExecution");
    fs::write(file(".cursor/hooks.json"), cursor.to_string()).unwrap();
    let claude = fs::read_to_string(file(".claude/settings.json")).unwrap();
    let gone = home.path("gone-bin").join("row-fence-guard");
    fs::write(
        file(".claude/settings.json"),
        claude.replace(
            &bin_dir().join("row-fence-guard").display().to_string(),
            &gone.display().to_string(),
        ),
    )
    .unwrap();
    let (code, agents) = doctor(&home, &repo.clone);
    assert_eq!(code, git_problems + 4, "{agents:?}");
    let problems = |f: &str| report(&agents, &file(f))["problems"].to_string();
    assert!(
        problems(".codex/hooks.json").contains("hooks = false"),
        "{agents:?}"
    );
    assert!(problems(".gemini/settings.json").contains("hooks.enabled false"));
    assert!(problems(".cursor/hooks.json").contains("beforeMCPExecution"));
    assert_eq!(
        report(&agents, &file(".cursor/hooks.json"))["hook"],
        "partial"
    );
    assert!(problems(".claude/settings.json").contains("not an executable file"));

    // A Codex project hook file in an untrusted project is not loaded.
    let project = repo.clone.join(".codex");
    fs::create_dir_all(&project).unwrap();
    fs::write(file(".codex/config.toml"), "model = \"o3\"\n").unwrap();
    assert_eq!(
        agent_hook(&home, "codex", Some(&project.join("hooks.json")), &[]).code,
        0
    );
    let (_, agents) = doctor(&home, &repo.clone);
    let r = report(
        &agents,
        &fs::canonicalize(project.join("hooks.json")).unwrap(),
    );
    assert!(
        r["problems"].to_string().contains("not a trusted project"),
        "{r}"
    );
    let top = fs::canonicalize(&repo.clone).unwrap();
    fs::write(
        file(".codex/config.toml"),
        format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            top.display().to_string()
        ),
    )
    .unwrap();
    let (_, agents) = doctor(&home, &repo.clone);
    let r = report(
        &agents,
        &fs::canonicalize(project.join("hooks.json")).unwrap(),
    );
    assert_eq!(r["problems"].as_array().unwrap().len(), 0, "{r}");
}

/// Codex tells the hook where a tool runs (`tool_cwd`) only from 0.169.0 on: `install
/// agent-hook --agent codex` warns and `doctor` reports a problem for an older Codex on
/// `PATH` (asked with `codex --version`), a note when there is no Codex to ask or it
/// prints no version, and nothing for a new enough one. Codex itself needs a model to
/// run, so a stand-in prints its version line (`codex-cli X.Y.Z`).
#[test]
fn an_older_codex_that_sends_no_tool_cwd_is_reported_by_install_and_doctor() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::file();
    let repo = Repo::new(&home, "ver");
    let stand_in = home.path("codex-bin");
    fs::create_dir_all(&stand_in).unwrap();
    let codex = stand_in.join("codex");
    let path = format!(
        "{}:{}",
        stand_in.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let file = home.dir.path().join(".codex/hooks.json");
    // (what `codex --version` prints, doctor's problem, doctor's note)
    for (printed, problem, note) in [
        (Some("codex-cli 0.150.0"), true, false),
        (Some("codex-cli 0.169.0"), false, false),
        (Some("codex-cli 0.171.3-alpha.2"), false, false),
        (Some("not a version"), false, true),
        (None, false, true),
    ] {
        match printed {
            Some(line) => {
                fs::write(&codex, format!("#!/bin/sh\necho '{line}'\n")).unwrap();
                fs::set_permissions(&codex, fs::Permissions::from_mode(0o755)).unwrap();
            }
            None => {
                let _ = fs::remove_file(&codex);
            }
        }
        let installed = run(home
            .command(bin("row-fence"))
            .env("PATH", &path)
            .args(["install", "agent-hook", "--agent", "codex", "--bin-dir"])
            .arg(bin_dir()));
        assert_eq!(installed.code, 0, "{printed:?}: {}", installed.stderr);
        assert_eq!(
            installed.stderr.contains("tool_cwd"),
            problem || note,
            "{printed:?}: {}",
            installed.stderr
        );
        let ran = run(home.command(bin("row-fence")).env("PATH", &path).args([
            "doctor",
            "--json",
            "--repo",
            repo.clone.to_str().unwrap(),
        ]));
        let v: Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", ran.stdout, ran.stderr));
        let r = report(v["agents"].as_array().unwrap(), &file);
        let has = |list: &str| r[list].to_string().contains("tool_cwd");
        assert_eq!(has("problems"), problem, "{printed:?}: {r}");
        assert_eq!(has("notes"), note, "{printed:?}: {r}");
        if problem {
            assert!(r["problems"].to_string().contains("0.150.0"), "{r}");
            assert_eq!(ran.code, 1, "a problem exits 1");
        }
        let rollback = run(home.command(bin("row-fence")).env("PATH", &path).args([
            "install",
            "agent-hook",
            "--agent",
            "codex",
            "--rollback",
        ]));
        assert_eq!(rollback.code, 0, "{}", rollback.stderr);
    }
}
