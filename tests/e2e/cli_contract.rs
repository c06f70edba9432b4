//! What a newcomer meets on the command line: usage lines, help, flag pairs, printed
//! commands that work, and no silent success on a typo.

use crate::util::{Home, Redis, bin, run};
use std::fs;

#[test]
fn usage_lines_do_not_list_flags_set_through_the_environment() {
    let home = Home::file();
    // `home.command` sets ROW_FENCE_HOME and ROW_FENCE_STORE, as an operator's shell would.
    let ran = home.cli(&["acquire"]);
    assert_eq!(ran.code, 2);
    let usage = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap_or_else(|| panic!("a usage line: {}", ran.stderr));
    assert_eq!(
        usage,
        "Usage: row-fence acquire --lane <LANE> <BOARD> <ROW>"
    );
    let mut check = home.command(bin("row-fence"));
    check
        .env("ROW_FENCE_TIMEOUT_MS", "500")
        .env("ROW_FENCE_LOCATION", "here")
        .args(["check", "--bogus"]);
    let ran = run(&mut check);
    assert_eq!(ran.code, 2);
    assert!(
        !ran.stderr.contains("--timeout-ms <N>") && !ran.stderr.contains("--location <ID>"),
        "{}",
        ran.stderr
    );
}

#[test]
fn help_never_shows_an_unset_variable_as_set_to_empty_and_each_program_says_what_it_is() {
    let home = Home::file();
    let mut abouts = Vec::new();
    for program in ["row-fence", "row-fence-resident"] {
        let mut cmd = home.command(bin(program));
        cmd.env_remove("ROW_FENCE_HOME")
            .env_remove("ROW_FENCE_STORE")
            .arg("--help");
        let ran = run(&mut cmd);
        assert_eq!(ran.code, 0);
        assert!(!ran.stdout.contains("=]"), "{program}:\n{}", ran.stdout);
        assert!(
            ran.stdout.contains("[env: ROW_FENCE_SOCKET]"),
            "{program}:\n{}",
            ran.stdout
        );
        abouts.push(ran.stdout.lines().next().unwrap_or_default().to_string());
    }
    assert_ne!(abouts[0], abouts[1], "one about line each");
}

#[test]
fn owner_and_epoch_go_together_and_controller_changes_take_only_their_flags() {
    let home = Home::file();
    for args in [
        &["acquire", "b", "r", "--lane", "l", "--epoch", "1"][..],
        &["acquire", "b", "r", "--lane", "l", "--owner", "c"][..],
        &["batch", "b", "--file", "x.json", "--epoch", "1"][..],
        &["controller", "release", "b", "--owner", "c", "--ttl", "5s"][..],
        &["controller", "release", "b", "--owner", "c", "--takeover"][..],
        &["controller", "renew", "b", "--owner", "c", "--takeover"][..],
    ] {
        let ran = home.cli(args);
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stderr);
    }
    assert!(
        !home.home.join("store").exists(),
        "a usage error writes nothing"
    );
}

#[test]
fn every_program_prints_the_same_stamp() {
    let home = Home::file();
    let stamps: Vec<String> = ["row-fence", "row-fence-ask", "row-fence-resident"]
        .iter()
        .map(|program| {
            let ran = run(home.command(bin(program)).arg("--print-stamp"));
            assert_eq!(ran.code, 0, "{program}: {}", ran.stderr);
            ran.stdout.trim().to_string()
        })
        .collect();
    assert_eq!(stamps[0].len(), 64);
    assert!(stamps.iter().all(|s| *s == stamps[0]), "{stamps:?}");
    assert_eq!(home.cli(&["--print-stamp", "status"]).code, 2);
}

#[test]
fn a_typo_in_a_board_or_row_is_said_not_passed_over() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    home.acquire("board-1", "row-1", "lane-a", &[]);
    let ran = home.cli(&["show", "board-1", "row-2"]);
    assert_eq!(
        (ran.code, ran.stdout.trim()),
        (0, "no lease on board-1/row-2")
    );
    let ran = home.cli(&["show", "bord-1"]);
    assert_eq!(ran.code, 0);
    assert!(
        ran.stdout.contains("no board named bord-1"),
        "{}",
        ran.stdout
    );
    for args in [&["records", "bord-1"][..], &["log", "bord-1"][..]] {
        let ran = home.cli(args);
        assert_eq!(ran.code, 0, "{args:?}");
        assert!(
            ran.stderr.contains("no board named bord-1"),
            "{args:?}: {}",
            ran.stderr
        );
    }
    let ran = home.cli(&["migrate", "bord-1", "--writers-upgraded"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("no board named bord-1"),
        "{}",
        ran.stderr
    );
}

#[test]
fn printed_job_commands_work_where_the_file_is_written() {
    let home = Home::file();
    let units = home.path("elsewhere");
    fs::create_dir_all(&units).unwrap();
    let unit = units.join("row-fence-resident.service");
    let mut install = home.command(bin("row-fence"));
    install
        .args(["install", "systemd", "--bin-dir"])
        .arg(crate::util::bin_dir())
        .arg("--out")
        .arg(&unit)
        .arg("--settings")
        .arg(home.path("settings.json"));
    let ran = run(&mut install);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let load = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("load:"))
        .unwrap()
        .trim();
    assert!(
        load.starts_with(&format!("systemctl --user link {} && ", unit.display())),
        "systemd finds a unit outside its path only once linked: {load}"
    );
    // A unit is known by its file name: another name is refused, nothing written.
    let other = units.join("custom.service");
    let mut install = home.command(bin("row-fence"));
    install
        .args(["install", "systemd", "--bin-dir"])
        .arg(crate::util::bin_dir())
        .arg("--out")
        .arg(&other);
    let ran = run(&mut install);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(!other.exists());

    if !cfg!(target_os = "macos") {
        let mut install = home.command(bin("row-fence"));
        install
            .args(["install", "launchd", "--bin-dir"])
            .arg(crate::util::bin_dir())
            .arg("--out")
            .arg(home.path("job.plist"))
            .arg("--settings")
            .arg(home.path("settings.json"));
        let ran = run(&mut install);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert!(
            ran.stderr
                .contains("launchd is not this machine's service manager"),
            "{}",
            ran.stderr
        );
    }

    let missing = home.path("no-such-dir/job.plist");
    let missing_s = missing.display().to_string();
    let ran = home.cli(&["render", "launchd", "--out", &missing_s]);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr
            .contains("no-such-dir: the directory does not exist")
            && !ran.stderr.contains(".row-fence."),
        "{}",
        ran.stderr
    );
}

/// `row-fence install claude-hook --settings FILE [--rollback]`.
fn claude_hook(home: &Home, file: &std::path::Path, rollback: bool) -> crate::util::Ran {
    let mut cmd = home.command(bin("row-fence"));
    cmd.args(["install", "claude-hook", "--bin-dir"])
        .arg(crate::util::bin_dir())
        .arg("--settings")
        .arg(file);
    if rollback {
        cmd.arg("--rollback");
    }
    run(&mut cmd)
}

#[test]
fn rollback_gives_back_a_settings_file_byte_for_byte_and_removes_only_one_install_created() {
    let home = Home::file();
    for (i, before) in ["{}\n", "{}", "{ }\n", "{\"a\": 1}\n", "{\n}\n"]
        .iter()
        .enumerate()
    {
        let file = home.path(&format!("s{i}.json"));
        fs::write(&file, before).unwrap();
        assert_eq!(claude_hook(&home, &file, false).code, 0);
        assert_ne!(fs::read_to_string(&file).unwrap(), *before, "installed");
        let ran = claude_hook(&home, &file, true);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert_eq!(
            fs::read_to_string(&file).ok().as_deref(),
            Some(*before),
            "{before:?} comes back byte for byte"
        );
    }
    // A file install created is install's to remove...
    let new = home.path("claude/new.json");
    assert_eq!(claude_hook(&home, &new, false).code, 0);
    assert!(new.exists());
    assert_eq!(claude_hook(&home, &new, true).code, 0);
    assert!(!new.exists(), "install created it, rollback removes it");
    // ...unless the operator wrote something into it since: then it stays, without us.
    assert_eq!(claude_hook(&home, &new, false).code, 0);
    let installed = fs::read_to_string(&new).unwrap();
    let edited = installed.replacen('{', "{\n  \"model\": \"opus\",", 1);
    fs::write(&new, &edited).unwrap();
    assert_eq!(claude_hook(&home, &new, true).code, 0);
    let kept: serde_json::Value = serde_json::from_str(&fs::read_to_string(&new).unwrap()).unwrap();
    assert_eq!(kept, serde_json::json!({"model": "opus"}));
    // And a later install and rollback of that same file no longer removes it.
    assert_eq!(claude_hook(&home, &new, false).code, 0);
    assert_eq!(claude_hook(&home, &new, true).code, 0);
    assert!(new.exists());
}

/// A command whose output is its product does not exit 0 when that output was lost to a
/// full device; a closed pipe is the reader's choice and changes nothing.
#[test]
fn output_lost_to_a_full_device_exits_1() {
    let home = Home::file();
    home.acquire("board-1", "row-1", "lane-a", &[]);
    let _daemon = home.daemon();
    for args in [&["show", "board-1"][..], &["status", "--json"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let ran = run(home.command(bin("row-fence")).args(args).stdout(full));
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("cannot write the output"),
            "{args:?}: {}",
            ran.stderr
        );
    }
}

/// Messages a newcomer met, said once and plainly.
#[test]
fn messages_say_what_is_wrong_once_and_plainly() {
    let home = Home::file();
    let ran = home.ask(&["--descriptor", "/dev/null"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("is a device, not a regular file")
            && !ran.stderr.contains("not a regular file, not"),
        "{}",
        ran.stderr
    );
    let batch = home.path("batch.json");
    fs::write(&batch, "{not json").unwrap();
    let ran = home.cli(&["batch", "b", "--file", batch.to_str().unwrap()]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("not JSON: key must be a string"),
        "{}",
        ran.stderr
    );
    fs::write(&batch, "{\"kind\": \"put\"}").unwrap();
    let ran = home.cli(&["batch", "b", "--file", batch.to_str().unwrap()]);
    assert!(
        ran.stderr.contains("it is JSON but not an array"),
        "{}",
        ran.stderr
    );
    let _daemon = home.daemon();
    let ran = run(&mut home.command(bin("row-fence-resident")));
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert_eq!(
        ran.stderr.matches("already running").count(),
        1,
        "{}",
        ran.stderr
    );
    // TOML's caret stays under the column it points at.
    let other = Home::file();
    fs::create_dir_all(other.home.join("registry")).unwrap();
    fs::write(
        other.home.join("registry/boards.toml"),
        "[boards]\nb = = 1\n",
    )
    .unwrap();
    let ran = run(&mut other.command(bin("row-fence-resident")));
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .lines()
            .any(|l| l.trim_start().starts_with('|') && l.contains('^')),
        "{}",
        ran.stderr
    );
}
