//! What the README and `--help` claim is what the programs do (README, "Before you start"
//! and "Liveness and monitoring"): no internal crate name in any `--help` or the man
//! page's NAME line, the options every command takes listed apart from its own,
//! `controller show --json` always one object, every client that finds no daemon saying
//! how to start it, and `--help`'s examples naming what exists.

use crate::util::{Home, bin};

/// The workspace's package names that are not a program's name.
const CRATES: [&str; 6] = [
    "row-fence-install",
    "row-fence-resident-bin",
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
