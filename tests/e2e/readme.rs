//! The README's and the `docs/` chapters' machine-readable examples are what the binaries
//! do: every shell block runs in a test or says why not, the worked batch example runs as
//! printed with the outputs its comments name, and every link names a file and a heading
//! that exist.

use crate::stamp::{Supervisor, install_build, install_this_build, next_digest};
use crate::util::{Home, Ran, bin_dir, git, repo_root, run, until};
use row_fence_stamp::BUILD_DIGEST;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The ```sh block of the README or a `docs/` chapter that contains `needle`.
pub(crate) fn sh_block(needle: &str) -> String {
    block("sh", needle)
}

/// The ```text block of the README or a `docs/` chapter that contains `needle`.
fn text_block(needle: &str) -> String {
    block("text", needle)
}

/// The block fenced as ```kind, in the README or a `docs/` chapter, that contains
/// `needle`.
fn block(kind: &str, needle: &str) -> String {
    crate::util::doc_blocks(kind)
        .into_iter()
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("the docs have a {kind} block with {needle:?}"))
}

#[test]
fn the_worked_batch_example_runs_as_printed() {
    let home = Home::file();
    let block = sh_block("cat > batch.json");
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = run(home
        .command("sh")
        .env("PATH", path)
        .current_dir(home.dir.path())
        .arg("-c")
        .arg(format!("{block}\necho \"exit=$?\"")));
    let lines: Vec<&str> = ran.stdout.lines().collect();
    // acquire prints the descriptor (generation 2), the batch its revision (3).
    assert_eq!(
        lines.first(),
        Some(&r#"{"board":"board-1","row":"row-1","lane":"lane-a","generation":2}"#),
        "{}\n{}",
        ran.stdout,
        ran.stderr
    );
    assert_eq!(lines.get(1), Some(&"3"), "{}", ran.stdout);
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["notes", "row-1", "r3", "{\"text\":\"ready\"}"]),
        "{}",
        ran.stdout
    );
    assert_eq!(lines.last(), Some(&"exit=3"), "{}", ran.stdout);
    assert!(
        ran.stderr.contains("revision conflict on notes/row-1"),
        "{}",
        ran.stderr
    );
}

/// The metric names, HELP and TYPE lines docs/operations.md shows are the ones `health
/// --prometheus` prints, in order (values differ: there is no heartbeat here).
#[test]
fn the_readme_prometheus_lines_are_what_health_prints() {
    let home = Home::file();
    let ran = home.cli(&["health", "--prometheus"]);
    let shape = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| match l.starts_with('#') {
                true => l.to_string(),
                false => l.split_whitespace().next().unwrap_or("").to_string(),
            })
            .collect()
    };
    assert_eq!(
        shape(&ran.stdout),
        shape(&text_block("# HELP row_fence_healthy")),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stdout.ends_with("row_fence_healthy 0\n"),
        "{}",
        ran.stdout
    );
}

/// The binaries the Install line puts in place.
const BINARIES: [&str; 5] = [
    "row-fence-ask",
    "git-remote-row-fence",
    "row-fence-guard",
    "row-fence",
    "row-fence-resident",
];

/// An executable shell script at `path`.
fn script(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A checkout of row-fence at `<tmp>/checkout` whose `scripts/build` stands in for the
/// release build (which would take minutes here): it copies the binaries of the
/// directory `$RF_BUILD` names into `target/dist/` and prints that path, as the real one
/// does.
fn checkout(home: &Home) -> PathBuf {
    let dir = home.path("checkout");
    script(
        &dir.join("scripts/build"),
        "#!/bin/sh\nset -e\nmkdir -p target/dist\nfor b in \"$RF_BUILD\"/*; do cp -f \"$b\" target/dist/; done\necho \"$PWD/target/dist\"\n",
    );
    dir
}

/// `PATH` with `dirs` first (`~/.local/bin`, as "Before you start" asks).
fn path_with(dirs: &[&Path]) -> String {
    let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    parts.push(std::env::var("PATH").unwrap_or_default());
    parts.join(":")
}

/// `shell -c line` as a user types it in `checkout`: `$HOME` is `me`, `PATH` is `path`,
/// the home is the default (`~/.row-fence`), and `scripts/build` copies `build`.
fn as_user(
    home: &Home,
    me: &Path,
    path: &str,
    checkout: &Path,
    build: &Path,
    shell: &str,
    line: &str,
) -> Ran {
    run(home
        .command(shell)
        .env("HOME", me)
        .env("PATH", path)
        .env("RF_BUILD", build)
        .env("MANPAGER", "cat")
        .env_remove("ROW_FENCE_HOME")
        .current_dir(checkout)
        .arg("-c")
        .arg(line))
}

/// The README's Linux Install line, its Upgrading step (the same line without its
/// `row-fence install …` part, run while the daemon serves) and its Liveness lines, run
/// by `sh` as printed on a fresh `$HOME`. Two stand-ins only: `scripts/build` copies an
/// already built set of binaries into `target/dist/` (a release build here would take
/// minutes), and `systemctl` logs its calls while the test supervises the daemon the
/// way the unit's `Restart=always` would.
#[test]
fn the_install_upgrading_and_liveness_sections_run_on_a_fresh_home() {
    let mut home = Home::file();
    home.home = home.dir.path().join(".row-fence");
    let me = home.dir.path().to_path_buf();
    let local = me.join(".local/bin");
    let checkout = checkout(&home);
    let (old, new) = (home.path("old-build"), home.path("new-build"));
    for name in BINARIES {
        // The remote helper carries no code stamp: it sends the daemon no ask.
        if name == "git-remote-row-fence" {
            install_this_build(&old, name);
        } else {
            install_build(&old, name, &next_digest(BUILD_DIGEST));
        }
        install_this_build(&new, name);
    }
    let manager = home.path("service-manager");
    script(
        &manager.join("systemctl"),
        &format!(
            "#!/bin/sh\necho \"systemctl $*\" >> '{}'\ncase \"$*\" in *is-active*) exit 3 ;; esac\n",
            home.path("systemctl.log").display()
        ),
    );
    let path = path_with(&[&manager, &local]);
    let sh = |line: &str, build: &Path| as_user(&home, &me, &path, &checkout, build, "sh", line);

    // Install: every binary in place (the guard too), the unit written, nothing loaded.
    let install = sh_block("install systemd");
    let ran = sh(&install, &old);
    assert_eq!(ran.code, 0, "{install}\n{}\n{}", ran.stdout, ran.stderr);
    for name in BINARIES {
        assert!(local.join(name).is_file(), "{name} is installed");
    }
    assert!(
        me.join(".config/systemd/user/row-fence-resident.service")
            .is_file()
    );
    let load = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("load:"))
        .unwrap_or_else(|| panic!("a load: line in {}", ran.stdout))
        .trim()
        .to_string();
    let loaded = sh(&load, &old);
    assert_eq!(loaded.code, 0, "{load}\n{}", loaded.stderr);
    // What systemd would now run: the unit's daemon, restarted whenever it exits.
    let supervisor = Supervisor::start(&home, local.join("row-fence-resident"));
    let (first, _) = supervisor.serving(None);
    let (_, lane) = home.acquire("b", "r", "lane-a", &[]);
    let ask = || {
        run(home
            .command(local.join("row-fence-ask"))
            .arg("--descriptor")
            .arg(&lane))
    };
    ask().expect(0, "row-fence: ALLOWED");

    // Liveness: the monitoring lines as printed, as cron runs them: its five time fields
    // dropped, in cron's environment (HOME, and PATH=/usr/bin:/bin, which has no
    // row-fence on it), the textfile collector's directory moved into the temp dir.
    let textfile = home.path("textfile");
    fs::create_dir_all(&textfile).unwrap();
    let liveness = sh_block("row-fence health --max-age 90s");
    let lines: Vec<String> = liveness
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.split(' ').skip(5).collect::<Vec<_>>().join(" ").replace(
                "/var/lib/node_exporter/textfile",
                &textfile.display().to_string(),
            )
        })
        .collect();
    assert_eq!(lines.len(), 2, "{liveness}");
    let (health, _alert) = lines[0].split_once(" || ").expect("health || alert");
    let cron = |line: &str| -> Ran {
        run(Command::new("env")
            .arg("-i")
            .arg(format!("HOME={}", me.display()))
            .args(["PATH=/usr/bin:/bin", "SHELL=/bin/sh", "LOGNAME=root"])
            .args(["/bin/sh", "-c", line]))
    };
    let healthy = |check: &str| until(Duration::from_secs(10), || cron(check), |r| r.code == 0);
    let ran = healthy(health);
    assert_eq!(ran.code, 0, "{health}\n{}", ran.stderr);
    assert_eq!(cron(&lines[1]).code, 0, "{}", lines[1]);
    let prom = fs::read_to_string(textfile.join("row_fence.prom")).unwrap();
    assert!(prom.ends_with("row_fence_healthy 1\n"), "{prom}");

    // Upgrading: the same line without its `row-fence install …` part, daemon running.
    let (upgrade, _) = install
        .split_once(" && ~/.local/bin/row-fence install")
        .expect("the install line ends with row-fence install");
    let ran = sh(upgrade, &new);
    assert_eq!(ran.code, 0, "{upgrade}\n{}", ran.stderr);
    // The first ask finds the daemon on old code: stale_code, and the daemon restarts.
    let ran = until(Duration::from_secs(15), ask, |r| r.code == 0);
    ran.expect(0, "row-fence: ALLOWED");
    let (second, _) = supervisor.serving(Some(first));
    assert_eq!(
        supervisor.exits(),
        vec![75],
        "one restart onto the new code"
    );
    assert_ne!(second, first);
    // Every binary is the new one: the guard is not left behind on old code.
    let input = serde_json::json!({
        "cwd": home.dir.path(),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push origin main"},
    })
    .to_string();
    let mut guard = home
        .command(local.join("row-fence-guard"))
        .env("ROW_FENCE_DESCRIPTOR", &lane)
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut guard.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = guard.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("ALLOWED") && !said.contains("stale_code"),
        "{said}"
    );
    let ran = healthy(health);
    assert_eq!(ran.code, 0, "{health}\n{}", ran.stderr);
    drop(supervisor);
}

/// README "Install", No service manager, on the kind of machine CI is (root in a
/// container, no user service manager): the Linux Install line on a fresh `$HOME` prints
/// the `by hand:` line, which starts the daemon detached and switches the hook on; an
/// upgrade (the same line without its `row-fence install …` part) is picked up by the
/// daemon executing its new binary in place, same pid, with nothing to restart it; the
/// printed rollback switches the hook off, removes the unit file without `systemctl` and
/// stops the daemon. Then the section's own two lines do the same. The real `systemctl`
/// runs where there is one, with no manager to reach (no `XDG_RUNTIME_DIR`, no bus).
#[test]
fn without_a_service_manager_the_by_hand_line_runs_survives_an_upgrade_and_rolls_back() {
    let mut home = Home::file();
    home.home = home.dir.path().join(".row-fence");
    let _stop = StopsDaemon {
        row_fence: crate::util::bin("row-fence"),
        home: home.home.clone(),
    };
    let me = home.dir.path().to_path_buf();
    let local = me.join(".local/bin");
    let checkout = checkout(&home);
    let (old, new) = (home.path("old-build"), home.path("new-build"));
    for name in BINARIES {
        install_this_build(&old, name);
        // The daemon and its asker are what the upgrade is about; the others stay.
        match name {
            "row-fence-ask" | "row-fence-resident" => {
                install_build(&new, name, &next_digest(BUILD_DIGEST));
            }
            _ => {
                install_this_build(&new, name);
            }
        }
    }
    let path = path_with(&[&local]);
    let sh = |line: &str, build: &Path| as_user(&home, &me, &path, &checkout, build, "sh", line);
    let line = |out: &str, tag: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("a {tag} line in {out}"))
            .trim()
            .to_string()
    };
    let unit = me.join(".config/systemd/user/row-fence-resident.service");
    let settings = me.join(".claude/settings.json");
    let (_, lane) = home.acquire("b", "r", "lane-a", &[]);
    let ask = || {
        run(home
            .command(local.join("row-fence-ask"))
            .arg("--descriptor")
            .arg(&lane))
    };
    let daemon_pid = || {
        crate::util::ping(&home.socket())
            .and_then(|a| a.pong)
            .map(|p| (p.pid, p.stamp))
    };

    let install = sh_block("install systemd");
    let ran = sh(&install, &old);
    assert_eq!(ran.code, 0, "{install}\n{}", ran.stderr);
    assert!(
        ran.stderr.contains("no user service manager answered"),
        "{}",
        ran.stderr
    );
    assert!(unit.is_file());
    let by_hand = line(&ran.stdout, "by hand:");
    let rollback = line(&ran.stdout, "rollback:");
    let started = sh(&by_hand, &old);
    assert_eq!(started.code, 0, "{by_hand}\n{}", started.stderr);
    assert!(settings.is_file(), "the hook is on once the daemon answers");
    ask().expect(0, "row-fence: ALLOWED");
    let (pid, stamp) = daemon_pid().expect("the detached daemon answers");

    // The upgrade: nothing restarts this daemon, and nothing has to.
    let (upgrade, _) = install
        .split_once(" && ~/.local/bin/row-fence install")
        .expect("the install line ends with row-fence install");
    assert_eq!(sh(upgrade, &new).code, 0);
    let ran = until(Duration::from_secs(15), ask, |r| r.code == 0);
    ran.expect(0, "row-fence: ALLOWED");
    let (same, new_stamp) = daemon_pid().expect("the daemon answers after the upgrade");
    assert_eq!(same, pid, "it ran its new binary in place");
    assert_ne!(new_stamp, stamp, "on the new code");

    let ran = sh(&rollback, &new);
    assert_eq!(ran.code, 0, "{rollback}\n{}", ran.stderr);
    assert!(!unit.exists(), "the unit file is removed without systemctl");
    assert!(
        !settings.exists(),
        "the settings file install created is gone"
    );
    assert!(daemon_pid().is_none() && !home.socket().exists(), "stopped");

    // The section's own lines, as printed.
    let start = sh_block("row-fence-resident --detach &&");
    let ran = sh(&start, &new);
    assert_eq!(ran.code, 0, "{start}\n{}", ran.stderr);
    ask().expect(0, "row-fence: ALLOWED");
    let back = sh_block("install claude-hook --rollback && ~/.local/bin/row-fence stop");
    let ran = sh(&back, &new);
    assert_eq!(ran.code, 0, "{back}\n{}", ran.stderr);
    assert!(
        !settings.exists() && daemon_pid().is_none(),
        "{}",
        ran.stderr
    );
    let ran = sh("~/.local/bin/row-fence stop", &new);
    assert_eq!(
        ran.code, 0,
        "nothing to stop is done already: {}",
        ran.stderr
    );
}

/// Stops a daemon a README line started detached, when the test ends either way: nothing
/// is left running after a failed assertion.
struct StopsDaemon {
    row_fence: PathBuf,
    home: PathBuf,
}

impl Drop for StopsDaemon {
    fn drop(&mut self) {
        let _ = Command::new(&self.row_fence)
            .arg("--home")
            .arg(&self.home)
            .arg("stop")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Every file under `dir` (not directories), with its bytes, skipping `except`.
fn files_under(dir: &Path, except: &[PathBuf]) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut found = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if except.iter().any(|e| path.starts_with(e)) {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_symlink() {
                found.insert(
                    path.clone(),
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                found.insert(path.clone(), fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// README "Install" (the Linux line, By hand, No service manager's `by hand` line, the
/// shell completion and man page lines) and "Uninstall", as printed, on a fresh `$HOME`
/// with `~/.local/bin` on `PATH` ("Before you start"): every piece goes in (the binaries,
/// the unit, the daemon, the Claude Code and Codex hooks, git's layer in `~/src/app`,
/// completions and man pages), a lane pushes through the fence, and Uninstall (with the
/// home, on request) leaves every file of `$HOME` as it was before, and the repository's
/// config byte for byte.
#[test]
fn every_piece_install_writes_comes_back_out_with_uninstall() {
    let home = Home::file();
    let me = home.path("me");
    let local = me.join(".local/bin");
    let checkout = checkout(&home);
    let build = home.path("build");
    for name in BINARIES {
        install_this_build(&build, name);
    }
    let path = path_with(&[&local]);
    let shell =
        |shell: &str, line: &str| as_user(&home, &me, &path, &checkout, &build, shell, line);
    let sh = |line: &str| shell("sh", line);
    // The lane's repository, cloned from a remote outside $HOME.
    let remote = home.path("remote.git");
    let app = me.join("src/app");
    fs::create_dir_all(&app).unwrap();
    git(
        &home,
        home.dir.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    git(&home, &app, &["init", "-q", "-b", "main"]);
    git(
        &home,
        &app,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(&home, &app, &["commit", "-q", "--allow-empty", "-m", "one"]);
    let config = fs::read(app.join(".git/config")).unwrap();
    let before = files_under(&me, std::slice::from_ref(&app));
    let _stop = StopsDaemon {
        row_fence: build.join("row-fence"),
        home: me.join(".row-fence"),
    };

    // Install: the Linux line (no user manager here: the unit is written, nothing loaded),
    // By hand, then No service manager's line for the Claude hook, and Codex's hook.
    for block in [
        sh_block("install systemd"),
        sh_block("cd ~/src/app && ~/.local/bin/row-fence acquire"),
        sh_block("row-fence-resident --detach && ~/.local/bin/row-fence install claude-hook"),
        "~/.local/bin/row-fence install agent-hook --agent codex".to_string(),
    ] {
        let ran = sh(&block);
        assert_eq!(ran.code, 0, "{block}\n{}{}", ran.stdout, ran.stderr);
    }
    for piece in [
        ".config/systemd/user/row-fence-resident.service",
        ".claude/settings.json",
        ".codex/hooks.json",
        ".row-fence/hooks/guard-bash.sh",
        "src/app/.git/hooks/pre-push",
        "src/app/.git/row-fence.json",
    ] {
        assert!(me.join(piece).is_file(), "{piece} installed");
    }
    // The lane pushes through the fence.
    git(&home, &app, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let push = run(home
        .command("git")
        .env("HOME", &me)
        .env("PATH", &path)
        .env_remove("ROW_FENCE_HOME")
        .current_dir(&app)
        .args(["push", "origin", "HEAD:main"]));
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: ALLOWED"),
        "{}",
        push.stderr
    );
    // README "Binding a lane in your own repository": lane-a pushes, lane-b takes the row
    // over in a worktree of its own, and lane-a's next push is refused, its commit local.
    let takeover = sh_block("--lane lane-b --takeover --write-descriptor");
    let ran = sh(&takeover);
    assert_eq!(
        ran.code, 1,
        "git push exits 1: {}{}",
        ran.stdout, ran.stderr
    );
    let (allowed, refused) = ran
        .stderr
        .split_once("REFUSED (different_holder")
        .unwrap_or_else(|| panic!("the second push is refused: {}", ran.stderr));
    assert!(allowed.contains("row-fence: ALLOWED"), "{}", ran.stderr);
    assert!(!refused.contains("ALLOWED"), "{}", ran.stderr);
    let head = |dir: &Path, rev: &str| git(&home, dir, &["rev-parse", rev]);
    assert_eq!(
        head(&remote, "main"),
        head(&app, "HEAD~1"),
        "lane-a's work landed"
    );
    assert_ne!(
        head(&remote, "main"),
        head(&app, "HEAD"),
        "its later commit did not"
    );
    let lane_b = me.join("src/app-b");
    git(
        &home,
        &app,
        &["worktree", "remove", "--force", lane_b.to_str().unwrap()],
    );

    // Completions and man pages, as printed, in bash (and the zsh line in sh: no $fpath).
    let completion = sh_block("mkdir -p ~/.zfunc");
    let ran = shell("bash", &completion);
    assert_eq!(ran.code, 0, "{completion}\n{}", ran.stderr);
    assert!(
        ran.stdout.contains("row-fence-acquire"),
        "man found the page: {}",
        ran.stdout
    );
    for (file, parser) in [
        (".local/share/bash-completion/completions/row-fence", "bash"),
        (".zfunc/_row-fence", "zsh"),
    ] {
        let parsed = run(Command::new(parser).arg("-n").arg(me.join(file)));
        assert_eq!(parsed.code, 0, "{file}: {}", parsed.stderr);
    }
    assert!(me.join(".config/fish/completions/row-fence.fish").is_file());
    assert!(
        me.join(".local/share/man/man1/row-fence-acquire.1")
            .is_file()
    );

    // Uninstall, and the home on request.
    for block in [
        sh_block("for agent in claude codex gemini cursor"),
        sh_block("rm -rf ~/.row-fence"),
    ] {
        let ran = sh(&block);
        assert_eq!(ran.code, 0, "{block}\n{}{}", ran.stdout, ran.stderr);
    }
    assert!(
        crate::util::ping(&me.join(".row-fence/sock")).is_none(),
        "the daemon is stopped"
    );
    let after = files_under(&me, std::slice::from_ref(&app));
    let added: Vec<_> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let changed: Vec<_> = before
        .iter()
        .filter(|(p, bytes)| after.get(*p) != Some(bytes))
        .map(|(p, _)| p)
        .collect();
    assert!(
        added.is_empty() && changed.is_empty(),
        "left behind: {added:?}; changed: {changed:?}"
    );
    assert_eq!(fs::read(app.join(".git/config")).unwrap(), config);
    assert!(!app.join(".git/hooks/pre-push").exists());
    assert!(
        !app.join(".git/row-fence.json").exists(),
        "Uninstall removes the descriptor acquire --write-descriptor wrote"
    );
}

/// The needles tests pass to [`sh_block`], read from the test sources: a README block a
/// test runs is one that holds one of them.
fn needles_tests_run() -> Vec<String> {
    let mut needles = Vec::new();
    for entry in fs::read_dir(repo_root().join("tests/e2e")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = fs::read_to_string(&path).unwrap();
        for (at, _) in source.match_indices("sh_block(") {
            let rest = source[at + "sh_block(".len()..].trim_start();
            let Some(rest) = rest.strip_prefix('"') else {
                continue;
            };
            let (mut needle, mut chars) = (String::new(), rest.chars());
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => needle.extend(chars.next()),
                    c => needle.push(c),
                }
            }
            if !needle.is_empty() && !needle.contains("{needle}") {
                needles.push(needle);
            }
        }
    }
    needles
}

/// Why a README block is not run by a test, from the marker line right before it.
const MARKER: &str = "<!-- not run by a test: ";

/// The kinds of reason a marker may give.
const REASONS: [&str; 6] = [
    "root:",
    "macOS:",
    "synopsis:",
    "suite:",
    "cluster:",
    "bench:",
];

/// Every ```sh block of the README and of each `docs/` chapter runs in a test on a fresh
/// `$HOME`, or says in a marker line right before it why it cannot (root, macOS, a
/// synopsis, …). A synopsis's every `row-fence …` line names subcommands that exist, with
/// flags their `--help` has.
#[test]
fn every_readme_shell_block_runs_in_a_test_or_says_why_not() {
    let needles = needles_tests_run();
    let mut unrun = Vec::new();
    let mut synopses = Vec::new();
    let docs = crate::util::user_docs();
    assert!(docs.len() > 1, "the docs/ chapters are found");
    let mut blocks = 0;
    for (file, text) in &docs {
        let lines: Vec<&str> = text.lines().collect();
        shell_blocks_of(file, &lines, &needles, &mut unrun, &mut synopses);
        blocks += lines.iter().filter(|l| **l == "```sh").count();
    }
    assert!(
        blocks > 15,
        "only {blocks} sh blocks found: is the scan broken?"
    );
    check_unrun_and_synopses(unrun, synopses);
}

/// Sorts the ```sh blocks of `file` (its `lines`) into run (a test's needle is in it),
/// marked (a synopsis goes to `synopses`) and wrong (into `unrun`, naming the line).
fn shell_blocks_of<'a>(
    file: &str,
    lines: &[&'a str],
    needles: &[String],
    unrun: &mut Vec<String>,
    synopses: &mut Vec<Vec<&'a str>>,
) {
    for (i, line) in lines.iter().enumerate() {
        if *line != "```sh" {
            continue;
        }
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| **l != "```")
            .copied()
            .collect();
        let text = body.join("\n");
        let covered = needles.iter().any(|n| text.contains(n.as_str()));
        let marker = i
            .checked_sub(1)
            .and_then(|p| lines[p].strip_prefix(MARKER))
            .and_then(|m| m.strip_suffix(" -->"));
        match (covered, marker) {
            (true, None) => {}
            (true, Some(_)) => unrun.push(format!("{file}:{}: run by a test, yet marked", i + 1)),
            (false, Some(reason)) if REASONS.iter().any(|r| reason.starts_with(r)) => {
                if reason.starts_with("synopsis:") {
                    synopses.push(body.clone());
                }
            }
            (false, Some(reason)) => {
                unrun.push(format!("{file}:{}: unknown reason {reason:?}", i + 1))
            }
            (false, None) => {
                unrun.push(format!("{file}:{}: neither run nor marked:\n{text}", i + 1))
            }
        }
    }
}

/// Fails naming every block in `unrun`; then checks that each synopsis line names
/// subcommands that exist, with flags their `--help` has.
fn check_unrun_and_synopses(unrun: Vec<String>, synopses: Vec<Vec<&str>>) {
    assert!(unrun.is_empty(), "{}", unrun.join("\n"));
    assert!(!synopses.is_empty());

    let home = Home::file();
    let help = |path: &[&str]| -> String {
        let mut args = path.to_vec();
        args.push("--help");
        let ran = home.cli(&args);
        assert_eq!(ran.code, 0, "row-fence {path:?} --help: {}", ran.stderr);
        ran.stdout
    };
    let commands_of = |text: &str| -> Vec<String> {
        text.split("\nCommands:\n")
            .nth(1)
            .map(|list| {
                list.lines()
                    .take_while(|l| l.starts_with("  "))
                    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    for line in synopses.iter().flatten() {
        let Some(rest) = line.strip_prefix("row-fence ") else {
            continue;
        };
        let words: Vec<&str> = rest.split('#').next().unwrap().split_whitespace().collect();
        // The subcommand path, each word possibly `a|b|c`.
        let mut paths: Vec<Vec<&str>> = vec![Vec::new()];
        for word in &words {
            let next: Vec<Vec<&str>> = paths
                .iter()
                .flat_map(|p| {
                    let known = commands_of(&help(p));
                    word.split('|')
                        .filter(|w| known.iter().any(|k| k == w))
                        .map(|w| {
                            let mut q = p.clone();
                            q.push(w);
                            q
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            if next.is_empty() {
                break;
            }
            paths = next;
        }
        assert!(
            paths.iter().all(|p| !p.is_empty()),
            "{line}: names no subcommand"
        );
        let helps: String = paths.iter().map(|p| help(p)).collect();
        for flag in words.iter().flat_map(|w| w.split('|')).filter_map(|w| {
            let w = w.trim_start_matches('[');
            w.starts_with("--").then(|| {
                w.trim_end_matches([']', '.'])
                    .split('=')
                    .next()
                    .unwrap()
                    .to_string()
            })
        }) {
            assert!(
                helps.contains(&flag),
                "{line}: no {flag} in {paths:?}'s --help"
            );
        }
    }
}

/// GitHub's anchor for a heading: lower case, every character but letters, digits, `-`,
/// `_` and spaces dropped, spaces turned into `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a Markdown text outside its fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown text's headings, a repeated one numbered as GitHub does.
fn anchors_of(text: &str) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    prose_lines(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            let anchor = anchor_of(l.trim_start_matches('#'));
            let n = seen.entry(anchor.clone()).or_default();
            *n += 1;
            match *n {
                1 => anchor,
                n => format!("{anchor}-{}", n - 1),
            }
        })
        .collect()
}

/// Every relative link of the README, the `docs/` chapters and ARCHITECTURE.md names a
/// file that exists, and its `#anchor`, when it has one, a heading of that file: the
/// split into chapters left no link pointing at a section that moved.
#[test]
fn every_link_of_the_docs_names_a_file_and_a_heading_that_exist() {
    let root = repo_root();
    let mut docs = crate::util::user_docs();
    docs.push((
        "ARCHITECTURE.md".to_string(),
        fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap(),
    ));
    let mut broken = Vec::new();
    let mut links = 0;
    for (file, text) in &docs {
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        for line in prose_lines(text) {
            for (at, _) in line.match_indices("](") {
                let rest = &line[at + 2..];
                let Some(target) = rest.split(')').next() else {
                    continue;
                };
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                links += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let linked = match path {
                    "" => root.join(file),
                    path => root.join(dir).join(path),
                };
                if !linked.exists() {
                    broken.push(format!("{file}: {target}: no such file"));
                    continue;
                }
                if anchor.is_empty() {
                    continue;
                }
                let anchors = fs::read_to_string(&linked)
                    .map(|t| anchors_of(&t))
                    .unwrap_or_default();
                if !anchors.contains(anchor) {
                    broken.push(format!("{file}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(links > 20, "only {links} links found: is the scan broken?");
}

/// The README is one a newcomer finishes in about ten minutes: its sections are the ones a
/// first day needs, its prose (outside code blocks and tables) stays within 2,500 words,
/// and its "Read on" table links every `docs/` chapter, so a chapter is never orphaned.
#[test]
fn the_readme_is_a_ten_minute_read_that_links_every_chapter() {
    let docs = crate::util::user_docs();
    let (_, readme) = &docs[0];
    let headings: Vec<&str> = prose_lines(readme)
        .into_iter()
        .filter_map(|l| l.strip_prefix("## "))
        .collect();
    for needed in [
        "Before you start",
        "Quick start",
        "Install",
        "Binding a lane in your own repository",
        "Verdicts and exit codes",
        "Uninstall",
        "Read on",
    ] {
        assert!(headings.contains(&needed), "no {needed:?} in {headings:?}");
    }
    let words: usize = prose_lines(readme)
        .into_iter()
        .filter(|l| !l.starts_with('|'))
        .map(|l| l.split_whitespace().count())
        .sum();
    assert!(words <= 2500, "the README's prose has {words} words");
    let read_on = readme
        .split("\n## Read on\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default();
    for (chapter, _) in &docs[1..] {
        assert!(
            read_on.contains(&format!("]({chapter})")),
            "README \"Read on\" does not link {chapter}"
        );
    }
}
