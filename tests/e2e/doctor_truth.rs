//! `row-fence doctor` says "on" only for a hook the harness runs, and "fenced" only for
//! what it checked (docs/agent-hooks.md and docs/git-layer.md): every shape of a Claude
//! Code settings file that switches the entry off, a doctor run outside any repository,
//! and a local-path remote, which git's layer can only fence with the pre-push hook.

use crate::util::{Home, Ran, Repo, bin, bin_dir, git, run};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// `row-fence install claude-hook` into the user's settings, asserting success.
fn claude_hook(home: &Home) {
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "claude-hook", "--bin-dir"])
        .arg(bin_dir()));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

/// `row-fence doctor --json` run in `cwd` (with `--repo` when given).
fn doctor_in(home: &Home, cwd: &Path, repo: Option<&Path>) -> (Ran, Value) {
    let mut cmd = home.command(bin("row-fence"));
    cmd.current_dir(cwd).args(["doctor", "--json"]);
    if let Some(repo) = repo {
        cmd.arg("--repo").arg(repo);
    }
    let ran = run(&mut cmd);
    let v: Value = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", ran.stdout, ran.stderr));
    (ran, v)
}

/// The Claude Code report of `doctor --json` for the user's settings file.
fn claude_report(v: &Value, file: &Path) -> Value {
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "claude" && a["file"] == file.display().to_string())
        .cloned()
        .unwrap_or_else(|| panic!("no Claude Code report for {}: {v}", file.display()))
}

#[test]
fn doctor_says_on_only_when_claude_code_runs_the_hook() {
    let home = Home::file();
    let repo = Repo::new(&home, "claude");
    git(
        &home,
        &repo.clone,
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    claude_hook(&home);
    let user = home.dir.path().join(".claude");
    let settings = user.join("settings.json");
    let project = repo.clone.join(".claude");
    fs::create_dir_all(&project).unwrap();
    let installed = fs::read_to_string(&settings).unwrap();

    let (ran, v) = doctor_in(&home, &repo.clone, None);
    let baseline = v["problems"].as_u64().unwrap();
    assert_eq!(claude_report(&v, &settings)["hook"], "on", "{}", ran.stdout);

    // Each file Claude Code reads, with a switch that turns every non-managed hook off.
    for (file, text, why) in [
        (&settings, None, "disableAllHooks"),
        (
            &project.join("settings.json"),
            Some(r#"{"disableAllHooks": true}"#),
            "disableAllHooks",
        ),
        (
            &project.join("settings.local.json"),
            Some(r#"{"disableAllHooks": true}"#),
            "disableAllHooks",
        ),
        (
            &user.join("remote-settings.json"),
            Some(r#"{"disableAllHooks": true}"#),
            "disableAllHooks",
        ),
        (
            &user.join("remote-settings.json"),
            Some(r#"{"allowManagedHooksOnly": true}"#),
            "allowManagedHooksOnly",
        ),
        (
            &user.join("remote-settings.json"),
            Some(r#"{"strictPluginOnlyCustomization": ["hooks"]}"#),
            "strictPluginOnlyCustomization",
        ),
    ] {
        let text = text.map_or_else(
            || {
                let mut v: Value = serde_json::from_str(&installed).unwrap();
                v["disableAllHooks"] = Value::Bool(true);
                v.to_string()
            },
            str::to_string,
        );
        fs::write(file, &text).unwrap();
        let (ran, v) = doctor_in(&home, &repo.clone, None);
        let r = claude_report(&v, &settings);
        assert_eq!(r["hook"], "disabled", "{} {text}: {r}", file.display());
        assert!(r["problems"].to_string().contains(why), "{r}");
        assert_eq!(v["problems"].as_u64().unwrap(), baseline + 1, "{r}");
        assert_eq!(ran.code, 1, "{}", ran.stdout);
        if file == &settings {
            fs::write(file, &installed).unwrap();
        } else {
            fs::remove_file(file).unwrap();
        }
    }

    // Claude Code skips a whole file its settings schema rejects: another entry's matcher
    // an object (or a list), a handler that is not an object, a command that is not text.
    for bad in [
        serde_json::json!([{"matcher": {"type": "always"}, "hooks": [{"type": "command", "command": "true"}]}]),
        serde_json::json!([{"matcher": ["Bash"], "hooks": [{"type": "command", "command": "true"}]}]),
        serde_json::json!([{"hooks": ["true"]}]),
        serde_json::json!([{"hooks": [{"type": "command", "command": ["true"]}]}]),
        serde_json::json!({"matcher": "*"}),
    ] {
        let mut v: Value = serde_json::from_str(&installed).unwrap();
        v["hooks"]["Stop"] = bad.clone();
        fs::write(&settings, v.to_string()).unwrap();
        let (ran, v) = doctor_in(&home, &repo.clone, None);
        let r = claude_report(&v, &settings);
        assert_eq!(r["hook"], "skipped", "{bad}: {r}");
        assert!(r["problems"].to_string().contains("schema rejects"), "{r}");
        assert_eq!(ran.code, 1);
    }
    fs::write(&settings, &installed).unwrap();

    // What does not turn it off stays on: allowManagedHooksOnly outside managed settings
    // (a note), and a switch in a file Claude Code skips whole.
    fs::write(
        project.join("settings.json"),
        r#"{"allowManagedHooksOnly": true}"#,
    )
    .unwrap();
    fs::write(
        project.join("settings.local.json"),
        r#"{"disableAllHooks": true, "hooks": {"Stop": [{"matcher": {}, "hooks": []}]}}"#,
    )
    .unwrap();
    let (_, v) = doctor_in(&home, &repo.clone, None);
    let r = claude_report(&v, &settings);
    assert_eq!(r["hook"], "on", "{r}");
    assert!(r["notes"].to_string().contains("managed settings"), "{r}");
    assert_eq!(v["problems"].as_u64().unwrap(), baseline, "{v}");
}

#[test]
fn doctor_outside_a_repository_checks_the_agent_hooks_and_says_no_repository_was() {
    let home = Home::file();
    claude_hook(&home);
    let outside = home.path("not-a-repo");
    fs::create_dir_all(&outside).unwrap();
    let settings = home.dir.path().join(".claude/settings.json");

    let (ran, v) = doctor_in(&home, &outside, None);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(claude_report(&v, &settings)["hook"], "on");
    assert_eq!(v["repositories"], serde_json::json!([]));
    assert!(
        v["unchecked"]
            .as_str()
            .unwrap()
            .contains("no repository was checked"),
        "{v}"
    );
    let text = run(home
        .command(bin("row-fence"))
        .current_dir(&outside)
        .arg("doctor"));
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("agent claude hook: on"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("no repository was checked"),
        "{}",
        text.stdout
    );
    assert!(
        !text.stdout.contains("fenced") && !text.stderr.contains("fatal"),
        "{}{}",
        text.stdout,
        text.stderr
    );

    // A directory named with --repo that is no repository is a problem, said plainly.
    let (ran, v) = doctor_in(&home, &outside, Some(&outside));
    assert_eq!(ran.code, 1);
    assert_eq!(v["problems"], 1, "{v}");
    assert!(!ran.stderr.contains("fatal"), "{}", ran.stderr);
}

#[test]
fn doctor_calls_a_local_path_remote_a_limit_and_never_says_every_push_is_fenced() {
    let home = Home::file();
    let repo = Repo::new(&home, "local");
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "git-hook", "--bin-dir"])
        .arg(bin_dir())
        .arg("--repo")
        .arg(&repo.clone));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let text = home.cli(&["doctor", "--repo", repo.clone.to_str().unwrap()]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    assert!(
        text.stdout.contains("limit: remote origin") && text.stdout.contains("--no-verify"),
        "{}",
        text.stdout
    );
    assert!(
        !text
            .stdout
            .contains("every worktree and submodule is fenced"),
        "{}",
        text.stdout
    );
    // The limit is real: a push that skips the hook moves the local remote.
    git(
        &home,
        &repo.clone,
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    git(
        &home,
        &repo.clone,
        &["push", "-q", "--no-verify", "origin", "HEAD:main"],
    );
    assert!(!git(&home, &repo.remote, &["rev-parse", "main"]).is_empty());
    // With only a gated remote it is fenced, and says so.
    git(
        &home,
        &repo.clone,
        &["remote", "set-url", "origin", "ssh://git@127.0.0.1/r.git"],
    );
    let text = home.cli(&["doctor", "--repo", repo.clone.to_str().unwrap()]);
    assert!(
        text.stdout
            .contains("every worktree and submodule is fenced"),
        "{}",
        text.stdout
    );
}
