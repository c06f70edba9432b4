//! The command line's documentation generated from its clap definitions: an example in
//! every subcommand's `--help` (and so in its man page), shell completions
//! (`row-fence completion bash|zsh|fish`, clap_complete) and man pages (`row-fence man
//! [DIR]`, clap_mangen). One table holds the examples so a test can walk the whole
//! command tree and find none missing.

use clap::CommandFactory;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use std::path::PathBuf;

/// One example per subcommand, keyed by its path below `row-fence` (words joined by one
/// space). A subcommand whose definition already carries an `after_help` keeps it.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "acquire",
        "row-fence acquire board-1 row-7 --lane lane-a --ttl 2h --write-descriptor",
    ),
    (
        "renew",
        "row-fence renew board-1 row-7 --lane lane-a --generation 3 --ttl 2h",
    ),
    (
        "release",
        "row-fence release board-1 row-7 --lane lane-a --generation 3",
    ),
    ("show", "row-fence show board-1 --json"),
    (
        "check",
        "row-fence check --descriptor .git/row-fence.json --action 'git push origin'",
    ),
    ("status", "row-fence status --json"),
    ("top", "row-fence top --board board-1 --refresh-ms 500"),
    ("health", "row-fence health --max-age 90s && echo healthy"),
    ("stop", "row-fence stop && row-fence status"),
    (
        "controller",
        "row-fence controller acquire board-1 --owner ctl-1 --ttl 60s",
    ),
    (
        "controller acquire",
        "row-fence controller acquire board-1 --owner ctl-1 --ttl 60s",
    ),
    (
        "controller renew",
        "row-fence controller renew board-1 --owner ctl-1",
    ),
    (
        "controller release",
        "row-fence controller release board-1 --owner ctl-1",
    ),
    (
        "controller show",
        "row-fence controller show board-1 --json",
    ),
    (
        "batch",
        "echo '[{\"kind\":\"put\",\"section\":\"s\",\"key\":\"k\",\"expected\":-1,\"value\":\"v\"}]' | row-fence batch board-1 --file - --json",
    ),
    ("records", "row-fence records board-1 claims --json"),
    ("log", "row-fence log board-1 --count 5"),
    (
        "migrate",
        "row-fence migrate board-1 --writers-upgraded --from file --to redis://127.0.0.1:6379",
    ),
    ("render", "row-fence render systemd --env RUST_LOG=info"),
    ("install", "row-fence install systemd"),
    (
        "install launchd",
        "row-fence install launchd --bin-dir ~/.local/bin",
    ),
    (
        "install systemd",
        "row-fence install systemd --bin-dir ~/.local/bin",
    ),
    (
        "install claude-hook",
        "row-fence install claude-hook --settings ~/.claude/settings.json",
    ),
    (
        "install agent-hook",
        "row-fence install agent-hook --agent codex --settings ~/.codex/hooks.json",
    ),
    (
        "install broker",
        "row-fence install broker --repo /srv/lanes/a --broker-socket /run/row-fence/agent.sock --key-pub /etc/row-fence/push.pub",
    ),
    (
        "install gh",
        "row-fence install gh --lane lane-a --repo o/r --gh-config-dir /srv/lanes/a/.config/gh --forge-api-socket /run/row-fence/forge.sock",
    ),
    (
        "install git-hook",
        "row-fence install git-hook --repo ~/src/app --recurse-submodules",
    ),
    (
        "install forge-hook",
        "row-fence install forge-hook --repo /srv/git/app.git --agent /run/row-fence/agent.sock --lane-from env:ROW_FENCE_LANE",
    ),
    ("doctor", "row-fence doctor --repo ~/src/app --json"),
    (
        "forge-check",
        "row-fence forge-check --agent /run/row-fence/agent.sock --lane-from remote-user",
    ),
    ("store", "row-fence store check"),
    ("store check", "row-fence store check --json"),
    (
        "store accept-regression",
        "row-fence store accept-regression board-1",
    ),
    ("keys", "row-fence keys add ~/.row-fence/push"),
    ("keys add", "row-fence keys add ~/.row-fence/push"),
    ("keys list", "row-fence keys list --json"),
    (
        "keys remove",
        "row-fence keys remove SHA256:3lwEbdg2cOpBPzJyBDiDQC1s2V3ZALqM3cStsvBWkKM",
    ),
    (
        "lane",
        "row-fence lane add lane-a --uid lane-a --worktree /srv/lanes/a",
    ),
    (
        "lane add",
        "row-fence lane add lane-a --uid lane-a --worktree /srv/lanes/a",
    ),
    ("lane list", "row-fence lane list --json"),
    ("lane remove", "row-fence lane remove lane-a"),
    ("lane reload", "row-fence lane reload"),
    ("token", "row-fence token add -"),
    ("token add", "row-fence token add ~/.row-fence/forge-token"),
    (
        "completion",
        "row-fence completion bash > ~/.local/share/bash-completion/completions/row-fence",
    ),
    (
        "man",
        "row-fence man ~/.local/share/man/man1 && man row-fence-acquire",
    ),
];

/// The full command: the derive's definitions with every example from [`EXAMPLES`] set
/// as `after_help`.
pub fn command<C: CommandFactory>() -> clap::Command {
    with_examples(C::command(), "")
}

fn with_examples(mut cmd: clap::Command, path: &str) -> clap::Command {
    if cmd.get_after_help().is_none()
        && let Some((_, example)) = EXAMPLES.iter().find(|(p, _)| *p == path)
    {
        cmd = cmd.after_help(format!("Example:\n  {example}"));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |s| with_examples(s, &sub));
    }
    cmd
}

/// `row-fence completion SHELL`.
#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// `row-fence man [DIR]`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write row-fence.1 and one page per subcommand (row-fence-acquire.1, …) into this
    /// directory, made if missing; without it, print row-fence.1 on stdout
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` on stdout.
pub fn completion(args: CompletionArgs, mut cmd: clap::Command) -> Outcome {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "row-fence", &mut script);
    out(String::from_utf8_lossy(&script).trim_end());
    Ok(exit::ALLOWED)
}

/// Prints the top man page, or writes every page into `args.dir`.
pub fn man(args: ManArgs, cmd: clap::Command) -> Outcome {
    let Some(dir) = args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| Failure::could_not(format!("cannot render the man page: {e}")))?;
        out(ascii_roff(&String::from_utf8_lossy(&page)).trim_end());
        return Ok(exit::ALLOWED);
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::could_not(format!("cannot create {}: {e}", dir.display())))?;
    let cannot_write =
        |e: std::io::Error| Failure::could_not(format!("cannot write into {}: {e}", dir.display()));
    clap_mangen::generate_to(cmd, &dir).map_err(cannot_write)?;
    for entry in std::fs::read_dir(&dir).map_err(cannot_write)? {
        let path = entry.map_err(cannot_write)?.path();
        let ours = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("row-fence") && n.ends_with(".1"));
        if ours {
            let page = std::fs::read_to_string(&path).map_err(cannot_write)?;
            std::fs::write(&path, ascii_roff(&page)).map_err(cannot_write)?;
        }
    }
    say!("row-fence: man pages written to {}", dir.display());
    Ok(exit::ALLOWED)
}

/// A page's text with every character outside ASCII spelled as a glyph groff has on
/// every output device: in a C or POSIX locale (a container, a login with no `LANG`)
/// `man` formats for ASCII, where a raw `…` is "can't find special character" on
/// stderr for each line that holds one.
fn ascii_roff(page: &str) -> String {
    let mut text = String::with_capacity(page.len());
    for c in page.chars() {
        match c {
            // `\&` first: three dots at a line's start would read as a request.
            '…' => text.push_str("\\&..."),
            '→' => text.push_str("\\(->"),
            '—' => text.push_str("\\(em"),
            '–' => text.push_str("\\(en"),
            '×' => text.push_str("\\(mu"),
            '≤' => text.push_str("\\(<="),
            '≥' => text.push_str("\\(>="),
            '‘' | '’' => text.push('\''),
            '“' | '”' => text.push('"'),
            c if c.is_ascii() => text.push(c),
            // Any other: groff's own Unicode escape, which names it on every device.
            c => text.push_str(&format!("\\[u{:04X}]", c as u32)),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand's path below `row-fence`, depth first (clap's own `help` left out).
    fn paths(cmd: &clap::Command, path: &str, into: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = if path.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{path} {}", sub.get_name())
            };
            into.push((p.clone(), sub.clone()));
            paths(sub, &p, into);
        }
    }

    /// The words of the `row-fence …` part of an example, as a shell would split them
    /// (single quotes only; cut at the first `|`, `&&` or `>` after it).
    fn words(example: &str) -> Vec<String> {
        let start = example
            .find("row-fence ")
            .expect("an example runs row-fence");
        let (mut words, mut word, mut quoted, mut started) =
            (Vec::new(), String::new(), false, false);
        for c in example[start..].chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    started = true;
                }
                ' ' if !quoted => {
                    if started {
                        words.push(std::mem::take(&mut word));
                    }
                    started = false;
                }
                _ => {
                    word.push(c);
                    started = true;
                }
            }
        }
        if started {
            words.push(word);
        }
        let end = words
            .iter()
            .position(|w| ["|", "&&", ">"].contains(&w.as_str()))
            .unwrap_or(words.len());
        words.truncate(end);
        words
    }

    #[test]
    fn every_subcommand_has_an_example_that_parses() {
        let cmd = command::<crate::Cli>();
        let mut all = Vec::new();
        paths(&cmd, "", &mut all);
        assert!(all.len() > 20, "the walk found {} subcommands", all.len());
        for (path, sub) in &all {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                help.starts_with("Example:\n  ") && help.contains("row-fence "),
                "`row-fence {path}` has no example in its --help"
            );
            let example = help.lines().nth(1).unwrap().trim();
            let argv = words(example);
            assert!(
                argv[1..].join(" ").starts_with(path.as_str()),
                "`row-fence {path}`'s example runs another command: {example}"
            );
            if let Err(e) = command::<crate::Cli>().try_get_matches_from(&argv) {
                panic!("`row-fence {path}`'s example does not parse: {example}\n{e}");
            }
        }
        for (path, _) in EXAMPLES {
            assert!(
                all.iter().any(|(p, _)| p == path),
                "EXAMPLES names no command `{path}`"
            );
        }
    }

    #[test]
    fn every_man_page_is_ascii_so_a_c_locale_formats_it_without_warnings() {
        assert_eq!(ascii_roff("a…b → c"), "a\\&...b \\(-> c");
        assert_eq!(ascii_roff("\u{2603}"), "\\[u2603]");
        let dir = tempfile::tempdir().unwrap();
        let args = ManArgs {
            dir: Some(dir.path().to_path_buf()),
        };
        man(args, command::<crate::Cli>()).unwrap();
        let mut pages = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            let page = std::fs::read_to_string(&path).unwrap();
            assert!(page.is_ascii(), "{} is not ASCII", path.display());
            pages += 1;
        }
        assert!(pages > 20, "{pages} pages");
    }

    #[test]
    fn the_man_page_holds_the_examples() {
        let mut page = Vec::new();
        let acquire = command::<crate::Cli>()
            .find_subcommand("acquire")
            .unwrap()
            .clone();
        clap_mangen::Man::new(acquire).render(&mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.contains("Example:"), "{page}");
        assert!(page.contains("\\-\\-write\\-descriptor"), "{page}");
    }
}
