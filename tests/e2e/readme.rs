//! The README's machine-readable examples are what the binaries do: its worked batch
//! example runs as printed, with the outputs its comments name.

use crate::util::{Home, bin_dir, repo_root, run};

/// The ```sh block of README.md that contains `needle`.
fn sh_block(needle: &str) -> String {
    block("sh", needle)
}

/// The ```text block of README.md that contains `needle`.
fn text_block(needle: &str) -> String {
    block("text", needle)
}

/// The README.md block fenced as ```kind that contains `needle`.
fn block(kind: &str, needle: &str) -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    readme
        .split(&format!("```{kind}\n"))
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("README.md has a {kind} block with {needle:?}"))
        .to_string()
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

/// The metric names, HELP and TYPE lines the README shows are the ones `health
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
