//! Running it for real: the rendered launchd and systemd jobs read back by real parsers
//! (the `plist` crate, `systemd-analyze verify`), the printed load and rollback commands
//! run in their order, the daemon's READY=1/WATCHDOG=1 to systemd, and the git hook's
//! install and rollback around a repository's own hook.
//!
//! No service manager runs here. Where a command of one must run (`launchctl`,
//! `systemctl`), a stand-in on PATH records its arguments and whether the agent hook was
//! on at that moment: that is what the order of the printed commands is for.

use crate::util::{Home, Ran, Repo, bin, bin_dir, git, ping, run};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A directory name with every character the job files must escape or quote.
const HOSTILE: &str = "a & b <c> 'd' \"e\" %f $g \\h";

/// What systemd accepts in an executable's path: no quote, no backslash (it refuses
/// those however they are quoted), but specifiers and `$` to escape or keep.
const HOSTILE_FOR_SYSTEMD: &str = "a & b <c> %f $g";

fn render(home: &Home, args: &[&str]) -> Ran {
    let ran = home.cli(args);
    assert_eq!(ran.code, 0, "row-fence {args:?}: {}", ran.stderr);
    ran
}

/// A bin dir under `name` whose row-fence-resident is the real one (a symlink: the
/// service manager checks the path it will run).
fn hostile_bin_dir(home: &Home, name: &str) -> PathBuf {
    let dir = home.path(name).join("bin");
    fs::create_dir_all(&dir).unwrap();
    for name in ["row-fence-resident", "row-fence-ask"] {
        std::os::unix::fs::symlink(bin(name), dir.join(name)).unwrap();
    }
    dir
}

#[test]
fn the_rendered_plist_has_every_key_with_its_type_and_a_hostile_home_round_trips() {
    let home = Home::file();
    let rf_home = home.path(HOSTILE).join("home");
    let bin_dir = hostile_bin_dir(&home, HOSTILE);
    let out = home.path("job.plist");
    let (rf_home_s, bin_s, out_s) = (
        rf_home.display().to_string(),
        bin_dir.display().to_string(),
        out.display().to_string(),
    );
    let store = "redis://:p&<w>'\"@127.0.0.1:1/0";
    render(
        &home,
        &[
            "--home",
            &rf_home_s,
            "--store",
            store,
            "render",
            "launchd",
            "--label",
            "dev.row-fence.test",
            "--bin-dir",
            &bin_s,
            "--env",
            "RUST_LOG=debug",
            "--env",
            "ROW_FENCE_ALLOWED_UIDS=501,502",
            "--out",
            &out_s,
        ],
    );
    assert_eq!(
        fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600,
        "it may hold the store's password"
    );
    let job = plist::Value::from_file(&out).expect("launchd can read it");
    let job = job.as_dictionary().expect("a dictionary");
    let string = |key: &str| {
        job.get(key)
            .and_then(plist::Value::as_string)
            .unwrap_or_else(|| panic!("{key} is a string"))
    };
    assert_eq!(string("Label"), "dev.row-fence.test");
    assert_eq!(string("ProcessType"), "Interactive");
    let log_dir = rf_home.join("log");
    assert_eq!(
        Path::new(string("StandardOutPath")).parent(),
        Some(log_dir.as_path())
    );
    assert_eq!(
        Path::new(string("StandardErrorPath")).parent(),
        Some(log_dir.as_path())
    );
    let program: Vec<&str> = job["ProgramArguments"]
        .as_array()
        .expect("ProgramArguments is an array")
        .iter()
        .map(|v| v.as_string().expect("of strings"))
        .collect();
    assert_eq!(
        program,
        [
            bin_dir.join("row-fence-resident").to_str().unwrap(),
            "--supervised"
        ]
    );
    assert_eq!(job["KeepAlive"].as_boolean(), Some(true));
    assert_eq!(job["RunAtLoad"].as_boolean(), Some(true));
    assert_eq!(
        job["ThrottleInterval"].as_signed_integer(),
        Some(2),
        "a code-stamp restart costs seconds, not launchd's default 10"
    );
    let env: BTreeMap<&str, &str> = job["EnvironmentVariables"]
        .as_dictionary()
        .expect("EnvironmentVariables is a dictionary")
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_string().expect("string values")))
        .collect();
    assert_eq!(
        env["ROW_FENCE_HOME"], rf_home_s,
        "the hostile home round-trips exactly"
    );
    assert_eq!(env["ROW_FENCE_STORE"], store);
    assert_eq!(env["RUST_LOG"], "debug");
    assert_eq!(env["ROW_FENCE_ALLOWED_UIDS"], "501,502");
    assert!(
        env["PATH"].starts_with(&format!("{bin_s}:")),
        "{}",
        env["PATH"]
    );
}

#[test]
fn a_value_no_job_file_can_carry_is_refused_and_nothing_is_written() {
    let home = Home::file();
    for (job, value) in [
        ("launchd", "a\u{FFFE}b"),
        ("launchd", "a\u{FFFF}b"),
        ("launchd", "tab\there"),
        ("systemd", "new\nline"),
    ] {
        let out = home.path(&format!("job-{job}"));
        let out_s = out.display().to_string();
        let env = format!("X={value}");
        let ran = home.cli(&["render", job, "--env", &env, "--out", &out_s]);
        assert_eq!(ran.code, 1, "{job} {value:?}: {}", ran.stderr);
        assert!(ran.stderr.contains("cannot carry"), "{}", ran.stderr);
        assert!(!out.exists(), "{job} {value:?}: nothing is written");
    }
    // What a plist can carry (any other Unicode, XML's specials) reads back exactly.
    let out = home.path("job.plist");
    let out_s = out.display().to_string();
    let value = "é ✓ 𝄞 \u{FFFD} <&>\"'";
    let env = format!("X={value}");
    render(
        &home,
        &["render", "launchd", "--env", &env, "--out", &out_s],
    );
    let job = plist::Value::from_file(&out).expect("launchd can read it");
    assert_eq!(
        job.as_dictionary().unwrap()["EnvironmentVariables"]
            .as_dictionary()
            .unwrap()["X"]
            .as_string(),
        Some(value)
    );
}

#[test]
fn the_rendered_unit_passes_systemd_analyze_and_its_keys_read_back() {
    let home = Home::file();
    let rf_home = home.path(HOSTILE).join("home");
    let bin_dir = hostile_bin_dir(&home, HOSTILE_FOR_SYSTEMD);
    let units = home.path("units");
    fs::create_dir_all(&units).unwrap();
    let unit = units.join("row-fence-resident.service");
    let (rf_home_s, bin_s, unit_s) = (
        rf_home.display().to_string(),
        bin_dir.display().to_string(),
        unit.display().to_string(),
    );
    let store = "redis://:p%w$d\\\"@127.0.0.1:1/0";
    render(
        &home,
        &[
            "--home",
            &rf_home_s,
            "--store",
            store,
            "render",
            "systemd",
            "--bin-dir",
            &bin_s,
            "--env",
            "RUST_LOG=info,row_fence=debug",
            "--out",
            &unit_s,
        ],
    );
    let text = fs::read_to_string(&unit).unwrap();
    let sections = parse_unit(&text);
    let one = |section: &str, key: &str| -> String {
        let values = &sections[section][key];
        assert_eq!(values.len(), 1, "[{section}] {key}: {values:?}");
        values[0].clone()
    };
    assert_eq!(one("Service", "Type"), "notify");
    assert_eq!(one("Service", "Restart"), "always");
    assert_eq!(one("Service", "RestartSec"), "1");
    assert!(one("Service", "WatchdogSec").parse::<u32>().unwrap() > 0);
    assert!(one("Unit", "StartLimitIntervalSec").parse::<u32>().unwrap() > 0);
    assert!(one("Unit", "StartLimitBurst").parse::<u32>().unwrap() > 0);
    let exec = one("Service", "ExecStart");
    let (program, flags) = exec
        .rsplit_once(' ')
        .expect("ExecStart has the program and a flag");
    assert_eq!(
        unquote(program),
        bin_dir.join("row-fence-resident").display().to_string()
    );
    assert_eq!(flags, "--supervised");
    let env: BTreeMap<String, String> = sections["Service"]["Environment"]
        .iter()
        .map(|line| {
            let assignment = unquote(line);
            let (k, v) = assignment.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    assert_eq!(env["ROW_FENCE_HOME"], rf_home_s);
    assert_eq!(env["ROW_FENCE_STORE"], store);
    assert_eq!(env["RUST_LOG"], "info,row_fence=debug");
    assert!(env["PATH"].starts_with(&format!("{bin_s}:")));
    assert_eq!(one("Install", "WantedBy"), "default.target");

    verify_unit(&home, &unit);
}

/// `systemd-analyze verify --user UNIT` must pass silently (scripts/test installs
/// systemd-analyze, so the unit is always verified).
fn verify_unit(home: &Home, unit: &Path) {
    if cfg!(target_os = "macos") {
        eprintln!("skipped `systemd-analyze verify`: macOS has no systemd");
        return;
    }
    let analyze = which("systemd-analyze")
        .expect("systemd-analyze is needed to verify the unit (scripts/test installs it)");
    // A user manager's runtime directory is all `verify --user` needs of a session.
    let runtime = home.path("xdg-runtime");
    fs::create_dir_all(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    let ran = run(home
        .command(analyze)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["verify", "--user"])
        .arg(unit));
    assert!(
        ran.code == 0 && ran.stderr.trim().is_empty(),
        "systemd-analyze verify: exit {}\n{}\n{}",
        ran.code,
        ran.stderr,
        fs::read_to_string(unit).unwrap_or_default()
    );
}

/// A unit file's `[Section] Key=value` lines (comments and blanks skipped).
fn parse_unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut sections: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.to_string();
            sections.entry(current.clone()).or_default();
            continue;
        }
        let (key, value) = line.split_once('=').expect("Key=value");
        sections
            .entry(current.clone())
            .or_default()
            .entry(key.trim().to_string())
            .or_default()
            .push(value.trim().to_string());
    }
    sections
}

/// Undoes systemd's quoting of one word: `"…"` with `\\` and `\"` escapes, `%%` → `%`.
fn unquote(word: &str) -> String {
    let inner = word
        .strip_prefix('"')
        .and_then(|w| w.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{word} is not one quoted word"));
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().expect("an escaped character")),
            '%' => {
                assert_eq!(chars.next(), Some('%'), "a lone % is a specifier: {word}");
                out.push('%');
            }
            c => out.push(c),
        }
    }
    out
}

fn which(program: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}

/// A stand-in for a service manager's command: appends `<hook on|off> <args>` to `log`,
/// the hook being "on" when `settings` runs guard-bash.sh at that moment. `print` and
/// `is-active` answer "not loaded".
fn stand_in(dir: &Path, program: &str, log: &Path, settings: &Path) {
    fs::create_dir_all(dir).unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$1 $2\" in print*|*is-active*) exit 3 ;; esac\nif grep -q guard-bash.sh '{}' 2>/dev/null; then hook=on; else hook=off; fi\necho \"$hook {program} $*\" >> '{}'\n",
        settings.display(),
        log.display()
    );
    let path = dir.join(program);
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The `load:` and `rollback:` commands `install` printed.
fn printed(ran: &Ran) -> (String, String) {
    let line = |prefix: &str| {
        ran.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line in:\n{}", ran.stdout))
            .trim()
            .to_string()
    };
    (line("load:"), line("rollback:"))
}

/// `install launchd|systemd`, then its load command, then its rollback command, each run
/// by `sh -c` as an operator would paste it; returns the stand-in's log.
fn install_load_and_roll_back(job: &str, program: &str, job_file: &Path) -> Vec<String> {
    let home = Home::file();
    let fake_bin = home.path("service-manager");
    let log = home.path("service-manager.log");
    let settings = home.path("claude/settings.json");
    fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let before = "{\n  \"model\": \"opus\",\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}\n";
    fs::write(&settings, before).unwrap();
    stand_in(&fake_bin, program, &log, &settings);
    let path = format!(
        "{}:{}",
        fake_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = run(home
        .command(bin("row-fence"))
        .env("PATH", &path)
        .env("HOME", home.dir.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["install", job, "--bin-dir"])
        .arg(bin_dir())
        .arg("--settings")
        .arg(&settings));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let job_file = home.dir.path().join(job_file);
    assert!(job_file.is_file(), "{} was written", job_file.display());
    match job {
        "launchd" => {
            plist::Value::from_file(&job_file).expect("launchd can read the installed plist");
        }
        _ => verify_unit(&home, &job_file),
    }
    assert_eq!(
        fs::metadata(&job_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let log_dir = home.home.join("log");
    match job {
        "launchd" => assert_eq!(
            fs::metadata(&log_dir).unwrap().permissions().mode() & 0o777,
            0o700
        ),
        _ => assert!(
            !log_dir.exists(),
            "a unit logs to the journal: no empty log dir"
        ),
    }
    assert!(
        fs::read_to_string(&log).unwrap_or_default().is_empty(),
        "install loads nothing itself"
    );
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        before,
        "nor switches the hook"
    );

    let (load, rollback) = printed(&ran);
    let sh = |line: &str| {
        let ran = run(home.command("sh").env("PATH", &path).arg("-c").arg(line));
        assert_eq!(ran.code, 0, "{line}\n{}", ran.stderr);
    };
    sh(&load);
    let on: serde_json::Value = serde_json::from_str(&fs::read_to_string(&settings).unwrap())
        .expect("the switched settings parse");
    assert_eq!(on["model"], "opus", "every other setting is kept");
    assert!(
        on["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .contains("guard-bash.sh")
    );
    sh(&rollback);
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        before,
        "the rollback gives back the settings byte for byte"
    );
    assert!(!job_file.exists(), "the rollback removes the job file");
    fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.replace(&job_file.display().to_string(), "JOB"))
        .collect()
}

#[test]
fn install_launchd_prints_load_then_hook_and_hook_then_unload() {
    let uid = nix::unistd::geteuid().as_raw();
    let calls = install_load_and_roll_back(
        "launchd",
        "launchctl",
        Path::new("Library/LaunchAgents/row-fence-resident.plist"),
    );
    assert_eq!(
        calls,
        [
            format!("off launchctl bootstrap gui/{uid} JOB"),
            format!("off launchctl bootout gui/{uid}/row-fence-resident"),
        ],
        "the job loads before the hook is on, and unloads after it is off"
    );
}

#[test]
fn install_systemd_prints_load_then_hook_and_hook_then_unload() {
    let calls = install_load_and_roll_back(
        "systemd",
        "systemctl",
        Path::new(".config/systemd/user/row-fence-resident.service"),
    );
    assert_eq!(
        calls,
        [
            "off systemctl --user daemon-reload",
            "off systemctl --user enable --now row-fence-resident.service",
            "off systemctl --user disable --now row-fence-resident.service",
            "off systemctl --user daemon-reload",
        ],
        "the unit starts before the hook is on, and stops after it is off"
    );
}

#[test]
fn the_daemon_says_ready_only_once_bound_and_pets_the_watchdog_from_its_serving_loop() {
    let home = Home::file();
    let notify = home.path("notify.sock");
    let listener = UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let notify_s = notify.display().to_string();
    let mut daemon = home.spawn_daemon(
        &[],
        &[("NOTIFY_SOCKET", &notify_s), ("WATCHDOG_USEC", "200000")],
    );
    let mut buf = [0u8; 4096];
    let mut next = || {
        let n = listener.recv(&mut buf).expect("a notification within 10 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let first = next();
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    assert!(
        ping(&home.socket()).is_some(),
        "READY=1 comes only once the socket answers"
    );
    let started = Instant::now();
    let mut pings = 0;
    while pings < 3 {
        if next().lines().any(|l| l == "WATCHDOG=1") {
            pings += 1;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let mut stopping = false;
    while !stopping {
        stopping = next().lines().any(|l| l == "STOPPING=1");
    }
    assert_eq!(daemon.wait_exit(Duration::from_secs(15)), Some(0));
}

/// A repository whose own pre-push hook records the refs git gives it.
fn repo_with_its_own_hook(home: &Home) -> (Repo, PathBuf, String) {
    let repo = Repo::new(home, "own-hook");
    let hook = repo.clone.join(".git/hooks/pre-push");
    let marker = home.path("own-hook.ran");
    let text = format!("#!/bin/sh\ncat >> '{}'\nexit 0\n", marker.display());
    fs::write(&hook, &text).unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o750)).unwrap();
    (repo, marker, text)
}

fn install_git_hook(home: &Home, repo: &Repo, args: &[&str]) -> Ran {
    run(home
        .command(bin("row-fence"))
        .args(["install", "git-hook", "--repo"])
        .arg(&repo.clone)
        .args(args))
}

#[test]
fn install_git_hook_refuses_another_hook_chains_it_and_rolls_back_exactly() {
    let home = Home::file();
    let (repo, marker, own) = repo_with_its_own_hook(&home);
    let hook = repo.clone.join(".git/hooks/pre-push");
    let refused = install_git_hook(&home, &repo, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("--chain"), "{}", refused.stderr);
    assert_eq!(fs::read_to_string(&hook).unwrap(), own, "left alone");

    let chained = install_git_hook(&home, &repo, &["--chain"]);
    assert_eq!(chained.code, 0, "{}", chained.stderr);
    let descriptor = repo.descriptor().display().to_string();
    let acquired = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--write-descriptor",
        &descriptor,
    ]);
    assert_eq!(acquired.code, 0, "{}", acquired.stderr);
    let _daemon = home.daemon();

    let push = repo.commit_and_push(&home, "one");
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: ALLOWED"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), repo.local_head(&home));
    let refs = fs::read_to_string(&marker).unwrap();
    assert!(
        refs.contains("refs/heads/main") && refs.contains(&repo.local_head(&home)),
        "the repository's own hook ran, with git's refs: {refs:?}"
    );

    home.acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    let before = repo.remote_head(&home);
    let push = repo.commit_and_push(&home, "two");
    assert_ne!(push.code, 0);
    assert!(
        push.stderr
            .contains("row-fence: REFUSED (different_holder)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), before);
    // The repository's own hook runs first and the fence asks last, right before the
    // upload: the chained hook's time is not spent from the lease's margin.
    let after = fs::read_to_string(&marker).unwrap();
    assert!(
        after.len() > refs.len() && after.contains(&repo.local_head(&home)),
        "the repository's own hook ran before the fence refused: {after:?}"
    );

    let back = install_git_hook(&home, &repo, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert_eq!(fs::read_to_string(&hook).unwrap(), own, "byte for byte");
    assert_eq!(
        fs::metadata(&hook).unwrap().permissions().mode() & 0o777,
        0o750
    );
    for gone in ["pre-push.row-fence", "pre-push.chained"] {
        assert!(!repo.clone.join(".git/hooks").join(gone).exists(), "{gone}");
    }
}

#[test]
fn install_git_hook_into_a_repository_without_one_fences_pushes_and_rolls_back_to_none() {
    let home = Home::file();
    let repo = Repo::new(&home, "bare-hooks");
    let hook = repo.clone.join(".git/hooks/pre-push");
    fs::remove_file(&hook).unwrap();
    let ran = install_git_hook(&home, &repo, &[]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let installed = fs::read_to_string(&hook).unwrap();
    assert!(
        row_fence_install::git_hook::is_fence(&installed),
        "{installed}"
    );
    assert!(
        installed.contains(&format!("row_fence_home={}\n", home.home.display())),
        "the daemon's home is baked in: {installed}"
    );
    assert_ne!(fs::metadata(&hook).unwrap().permissions().mode() & 0o111, 0);
    let again = install_git_hook(&home, &repo, &[]);
    assert_eq!(again.code, 0);
    assert!(again.stderr.contains("already"), "{}", again.stderr);

    // Row-bound with no daemon: the installed hook refuses, the remote ref stays.
    let descriptor = repo.descriptor().display().to_string();
    let acquired = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--write-descriptor",
        &descriptor,
    ]);
    assert_eq!(acquired.code, 0, "{}", acquired.stderr);
    let push = repo.commit_and_push(&home, "one");
    assert_ne!(push.code, 0);
    assert!(
        push.stderr
            .contains("row-fence: COULD NOT READ (fence_unreadable)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), "");

    let back = install_git_hook(&home, &repo, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert!(!hook.exists());
    git(&home, &repo.clone, &["status", "--short"]);
}

/// The second reproduction: a chained pre-push hook that takes 3 s, behind which
/// a push would land after the lease's time. The fence asks after the chained hook, so a
/// lease with 7 s left when the push starts has about 4 s when the fence asks: less than
/// the 5 s margin, REFUSED `lease_expiring`, the remote unmoved (asked before the hook, it
/// would have been ALLOWED with the hook's 3 s then spent from the lease).
#[test]
fn a_slow_chained_hook_is_not_spent_from_the_lease_the_fence_asks_after_it() {
    let home = Home::file();
    let repo = Repo::new(&home, "slow-hook");
    let hook = repo.clone.join(".git/hooks/pre-push");
    fs::write(&hook, "#!/bin/sh\ncat >/dev/null\nsleep 3\nexit 0\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o750)).unwrap();
    let chained = install_git_hook(&home, &repo, &["--chain"]);
    assert_eq!(chained.code, 0, "{}", chained.stderr);
    let _daemon = home.daemon();
    let before = repo.remote_head(&home);
    let descriptor = repo.descriptor().display().to_string();
    let acquired = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--ttl",
        "7s",
        "--write-descriptor",
        &descriptor,
    ]);
    assert_eq!(acquired.code, 0, "{}", acquired.stderr);
    let push = repo.commit_and_push(&home, "slow");
    assert_ne!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: REFUSED (lease_expiring)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), before);
}
