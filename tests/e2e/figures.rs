//! What the docs and `--help` claim is what the programs do (README, "Before you start";
//! docs/operations.md, "Liveness and monitoring"): no internal crate name in any `--help`
//! or the man page's NAME line, the options every command takes listed apart from its own,
//! `controller show --json` always one object, every client that finds no daemon saying how
//! to start it, and `--help`'s examples naming what exists.

use crate::util::{Home, bin};

/// The workspace's package names that are not a program's name.
const CRATES: [&str; 8] = [
    "row-fence-install",
    "row-fence-resident-bin",
    "row-fence-guard-bin",
    "row-fence-bench-bin",
    "row-fence-contract",
    "row-fence-store",
    "row-fence-stamp",
    " crate",
];

#[test]
fn no_help_or_man_page_names_an_internal_crate() {
    let home = Home::file();
    for (program, args) in [
        ("row-fence", vec!["--help"]),
        ("row-fence", vec!["install", "--help"]),
        ("row-fence", vec!["doctor", "--help"]),
        ("row-fence-resident", vec!["--help"]),
        ("row-fence-ask", vec!["--help"]),
        ("row-fence-guard", vec!["--help"]),
    ] {
        let ran = crate::util::run(home.command(bin(program)).args(&args));
        assert_eq!(ran.code, 0, "{program} {args:?}: {}", ran.stderr);
        let text = format!("{}{}", ran.stdout, ran.stderr);
        for name in CRATES {
            assert!(
                !text.contains(name),
                "{program} {args:?} names {name:?}:\n{text}"
            );
        }
    }
    let man = home.cli(&["man"]);
    let name_line = man
        .stdout
        .lines()
        .skip_while(|l| *l != ".SH NAME")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(name_line.starts_with("row\\-fence \\- "), "{name_line}");
    for name in CRATES {
        assert!(
            !name_line.contains(&name.replace('-', "\\-")),
            "{name_line}"
        );
    }
}

#[test]
fn a_commands_help_lists_the_options_every_command_takes_apart_from_its_own() {
    let home = Home::file();
    let help = home.cli(&["completion", "--help"]).stdout;
    let (own, global) = help
        .split_once("Global options (every command):")
        .unwrap_or_else(|| panic!("a heading of their own:\n{help}"));
    assert!(!own.contains("--store") && !own.contains("--home"), "{own}");
    assert!(
        global.contains("--store") && global.contains("--timeout"),
        "{global}"
    );
}

#[test]
fn controller_show_json_is_one_object_with_or_without_a_lease() {
    let home = Home::file();
    let none = home.cli(&["controller", "show", "board-1", "--json"]);
    assert_eq!(none.code, 0, "{}", none.stderr);
    assert_eq!(
        none.json(),
        serde_json::json!({"board": "board-1", "owner": null, "epoch": null, "expires_at_ms": null, "live": false})
    );
    assert_eq!(
        home.cli(&["controller", "acquire", "board-1", "--owner", "c1"])
            .code,
        0
    );
    let held = home
        .cli(&["controller", "show", "board-1", "--json"])
        .json();
    assert_eq!(held["owner"], "c1", "{held}");
    assert_eq!(held["live"], true, "{held}");
    assert!(held["epoch"].as_u64().is_some(), "{held}");
}

#[test]
fn every_client_that_finds_no_daemon_says_how_to_start_it() {
    let home = Home::file();
    let how = "start it with row-fence-resident --detach";
    let (_, lane) = home.acquire("board-1", "row-1", "lane-a", &[]);
    let ask = home.ask_with(&lane, &[]);
    let status = home.cli(&["status"]);
    let health = home.cli(&["health"]);
    for (who, ran) in [("asker", &ask), ("status", &status), ("health", &health)] {
        assert_eq!(ran.code, 1, "{who}");
        assert!(ran.stderr.contains(how), "{who}: {}", ran.stderr);
    }
    let start = home.cli(&["start"]);
    assert!(
        start.stderr.contains("row-fence-resident --detach"),
        "{}",
        start.stderr
    );
}

#[test]
fn the_records_example_names_a_section_a_board_has() {
    let home = Home::file();
    let help = home.cli(&["records", "--help"]).stdout;
    let example = help
        .lines()
        .skip_while(|l| !l.starts_with("Example:"))
        .nth(1)
        .expect("an example")
        .trim()
        .to_string();
    home.acquire("board-1", "row-7", "lane-a", &[]);
    let words: Vec<&str> = example.split_whitespace().collect();
    let ran = home.cli(&words[1..]);
    assert_eq!(ran.code, 0, "{example}: {}", ran.stderr);
    assert!(ran.stdout.contains("row-7"), "{example}: {}", ran.stdout);
}

/// The commands row-fence prints for an operator to run (the reissue for a lease granted
/// before lease tokens, the re-acquire for a lost descriptor) run as printed for a row or
/// lane whose name starts with `-`, which the spelling rule allows and a command-line
/// parser would otherwise take for a flag.
#[test]
fn printed_commands_run_as_printed_for_names_that_start_with_a_dash() {
    let home = Home::file();
    let repo = crate::util::Repo::new(&home, "dash");
    let sh = |line: &str| {
        crate::util::run(
            home.command("sh")
                .env(
                    "PATH",
                    format!(
                        "{}:{}",
                        crate::util::bin_dir().display(),
                        std::env::var("PATH").unwrap_or_default()
                    ),
                )
                .current_dir(&repo.clone)
                .arg("-c")
                .arg(line),
        )
    };
    // The command a detail names: from `row-fence` to the end of the command.
    let printed = |text: &str, ends: &str| -> String {
        let at = text.find("row-fence acquire").expect("a printed command");
        let rest = &text[at..];
        rest[..rest.find(ends).unwrap_or(rest.len())]
            .trim()
            .to_string()
    };
    let ran = sh("row-fence acquire --lane lane-a --write-descriptor -- board-1 -r1");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ran = sh("row-fence acquire --lane lane-a --reissue --write-descriptor -- board-1 -r1");
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    let again = printed(&ran.stderr, "):");
    assert!(again.contains("-- board-1 -r1"), "{again}");
    let ran = sh(&again);
    assert_eq!(ran.code, 0, "{again}: {}", ran.stderr);

    // A lease put by a batch (no token) for a lane named `-x`: the reissue the refusal
    // names arms it, as printed.
    let expires = row_fence_contract::ledger::now_ms() + 3_600_000;
    let batch = home.path("b.json");
    std::fs::write(
        &batch,
        format!(
            r#"[{{"kind":"put","section":"claims","key":"-r2","expected":0,"value":{{"holder":"-x","generation":1,"expires_at_ms":{expires}}}}}]"#
        ),
    )
    .unwrap();
    assert_eq!(
        home.cli(&["batch", "board-2", "--file", batch.to_str().unwrap()])
            .code,
        0
    );
    let d = home.path("d.json");
    std::fs::write(
        &d,
        r#"{"board":"board-2","row":"-r2","lane":"-x","generation":1}"#,
    )
    .unwrap();
    let ran = home.cli(&["check", "--descriptor", d.to_str().unwrap()]);
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    let reissue = printed(&ran.stderr, "\n");
    assert!(
        reissue.contains("--lane=-x") && reissue.ends_with("-- board-2 -r2"),
        "{reissue}"
    );
    let ran = sh(&reissue);
    assert_eq!(ran.code, 0, "{reissue}: {}", ran.stderr);
    assert!(ran.stdout.contains(r#""row":"-r2""#), "{}", ran.stdout);
}

/// The comment install writes into Codex's `config.toml` names the rollback that removes
/// its block, and that command, run as written there, gives the file back byte for byte
/// (without `--settings` it would look in `~/.codex/hooks.json` and do nothing).
#[test]
fn the_rollback_named_in_codexs_config_toml_runs_as_written_there() {
    let home = Home::file();
    let config = home.dir.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let before = "model = \"o3\"\n";
    std::fs::write(&config, before).unwrap();
    let ran = crate::util::run(
        home.command(bin("row-fence"))
            .args(["install", "agent-hook", "--agent", "codex", "--settings"])
            .arg(&config)
            .arg("--bin-dir")
            .arg(crate::util::bin_dir()),
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let text = std::fs::read_to_string(&config).unwrap();
    let comment = text
        .lines()
        .find(|l| l.starts_with("# row-fence agent hook"))
        .expect("the block's comment line");
    let (_, rest) = comment.split_once('`').expect("a command in backquotes");
    let (rollback, _) = rest.split_once('`').expect("a closing backquote");
    assert!(rollback.contains("--settings"), "{rollback}");
    let ran = crate::util::run(home.command("sh").arg("-c").arg(rollback));
    assert_eq!(ran.code, 0, "{rollback}: {}", ran.stderr);
    assert!(ran.stderr.contains("is off"), "{}", ran.stderr);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
}
