//! What is generated from the clap definitions parses in its own tool: the completion
//! scripts in bash and zsh (fish when installed), the man pages in man/groff; and the
//! `--json` of release, batch and render is one JSON object serde_json reads.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn row_fence(home: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_row-fence"))
        .args(args)
        .env("ROW_FENCE_HOME", home)
        .env_remove("ROW_FENCE_STORE")
        .current_dir(home.parent().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "row-fence {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `tool -n FILE` (parse only) and asserts it accepts the script.
fn parses(tool: &str, script: &Path) {
    let out = Command::new(tool).arg("-n").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "{tool} -n rejects the completion: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn completions_parse_in_their_shells() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    for shell in ["bash", "zsh", "fish"] {
        let out = row_fence(&home, &["completion", shell], "");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("acquire") && text.contains("completion"),
            "{shell}: {text}"
        );
        let script = dir.path().join(format!("row-fence.{shell}"));
        std::fs::write(&script, &text).unwrap();
        // bash and zsh are in scripts/test's package list; fish is not, and is checked
        // when present.
        if shell != "fish" || on_path("fish") {
            parses(shell, &script);
        }
    }
}

#[test]
fn man_pages_render() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let pages = dir.path().join("man1");
    row_fence(&home, &["man", pages.to_str().unwrap()], "");
    for page in [
        "row-fence.1",
        "row-fence-acquire.1",
        "row-fence-install-git-hook.1",
    ] {
        let path = pages.join(page);
        assert!(path.is_file(), "{page} was not written");
        // groff (groff-base, in scripts/test's package list) formats it; warnings fail.
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{page}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let top = row_fence(&home, &["man"], "");
    assert!(String::from_utf8_lossy(&top.stdout).starts_with(".ie"));
    // `man -l` is man-db's (Linux; scripts/test installs it there); macOS's man has no -l.
    if cfg!(target_os = "macos") {
        return;
    }
    let out = Command::new("man")
        .arg("-l")
        .arg(pages.join("row-fence-acquire.1"))
        .env("MANPAGER", "cat")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "man -l: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // man justifies a filled line: words, not the spaces between them.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("Example:") && words.contains("row-fence acquire board-1"),
        "{text}"
    );
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v.is_object(), "{v}");
    v
}

#[test]
fn release_batch_and_render_print_one_json_object() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let d = dir.path().join("d.json");
    let d = d.to_str().unwrap();
    row_fence(
        &home,
        &[
            "acquire",
            "b1",
            "r1",
            "--lane",
            "l1",
            "--write-descriptor",
            d,
        ],
        "",
    );
    let v = json(&row_fence(
        &home,
        &[
            "release",
            "b1",
            "r1",
            "--lane",
            "l1",
            "--generation",
            "1",
            "--descriptor",
            d,
            "--json",
        ],
        "",
    ));
    assert_eq!(v["released"], true);
    assert_eq!(v["generation"], 1);
    let batch = r#"[{"kind":"put","section":"s","key":"k","expected":-1,"value":"v"}]"#;
    let v = json(&row_fence(
        &home,
        &["batch", "b1", "--file", "-", "--json"],
        batch,
    ));
    assert_eq!(v["board"], "b1");
    assert_eq!(v["writes"], 1);
    assert!(v["revision"].as_u64().unwrap() > 0, "{v}");
    let unit = dir.path().join("row-fence-resident.service");
    let v = json(&row_fence(
        &home,
        &[
            "render",
            "systemd",
            "--bin-dir",
            "/usr/bin",
            "--json",
            "--out",
            unit.to_str().unwrap(),
        ],
        "",
    ));
    assert_eq!(v["job"], "systemd");
    assert_eq!(v["path"], unit.to_str().unwrap());
    assert_eq!(
        v["text"].as_str().unwrap(),
        std::fs::read_to_string(&unit).unwrap()
    );
}
