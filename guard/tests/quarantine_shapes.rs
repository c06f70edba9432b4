//! The quarantine's rule in process, against generated shapes of every kind the rounds
//! have shown (ARCHITECTURE.md, "Quarantine"): no shell call runs whatever it spells
//! (each git read × each key that makes git run a program, planted git directories,
//! every program and syntax of earlier rounds, the harmless reads beside them); the file
//! readers stay inside the worktree and out of `.git` and the home in every spelling a
//! path can take (`..`, links, dangling links, letter case); no file tool writes. Outside
//! quarantine, no file tool spelling writes the fence's home, and a session whose row is
//! not ALLOWED writes no git directory and no harness settings. The end-to-end corpus
//! (`tests/e2e/quarantine_corpus.rs`) runs these kinds through each harness's installed
//! hook and checks the damage.

use row_fence_guard::file_writes::{self, Rules};
use row_fence_guard::input::Tool;
use row_fence_guard::quarantine::permits;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Git reads a refused agent would reach for first.
const GIT_READS: &[&str] = &[
    "git status",
    "git status --short",
    "git log -1",
    "git log -p -1",
    "git show HEAD",
    "git show 0123456789abcdef0123456789abcdef01234567",
    "git diff",
    "git diff HEAD~1",
    "git describe --tags",
    "git blame README.md",
    "git rev-parse HEAD",
    "git ls-files",
    "git branch -a",
    "git remote -v",
    "git config --list",
];

/// Configuration keys that make git run something (or reach out) on a read.
const RUNNING_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.pager",
    "core.sshCommand",
    "core.askPass",
    "core.gitProxy",
    "core.hooksPath",
    "credential.helper",
    "diff.external",
    "diff.x.textconv",
    "filter.x.clean",
    "remote.p.uploadpack",
    "remote.p.promisor",
    "extensions.partialClone",
    "url.ext::sh.insteadOf",
    "protocol.ext.allow",
    "gpg.program",
    "include.path",
];

/// Where a git read can be made to read a planted configuration from.
const LAYOUTS: &[&str] = &[
    "",
    "cd evil && ",
    "git -C evil ",
    "GIT_DIR=evil ",
    "git --git-dir=evil ",
    "cd .GIT && ",
    "HOME=evil ",
    "GIT_CONFIG_GLOBAL=evil/config ",
];

fn shell_shapes() -> Vec<String> {
    let mut shapes = Vec::new();
    for layout in LAYOUTS {
        for read in GIT_READS {
            let read = match layout.strip_prefix("git ") {
                Some(opt) => read.replacen("git ", &format!("git {opt}"), 1),
                None => format!("{layout}{read}"),
            };
            shapes.push(read.clone());
            for key in RUNNING_KEYS {
                shapes.push(read.replacen("git ", &format!("git -c {key}=x "), 1));
            }
        }
    }
    // Everything else of earlier rounds, and the everyday reads that used to pass.
    for s in [
        "ls",
        "ls -la",
        "cat README.md",
        "sort -t, -k2 f.csv",
        "date -d yesterday",
        "cut -c1-7 f",
        "row-fence status",
        "pwd",
        "echo done",
        "true",
        "",
        "python3 -c 1",
        "git push -q origin HEAD:main",
        "sleep 1; git push",
        "nohup git push &",
        "cat < /dev/tcp/127.0.0.1/80",
        "ls > x",
        "bash -lc ls",
    ] {
        shapes.push(s.to_string());
    }
    shapes
}

#[test]
fn no_shell_call_runs_in_quarantine_whatever_it_spells() {
    let shapes = shell_shapes();
    assert!(shapes.len() > 1000, "{} shapes", shapes.len());
    let tree = Path::new("/w");
    for command in &shapes {
        for background in [false, true] {
            let tool = Tool::Bash {
                command: command.clone(),
                background,
            };
            let verdict = permits(&tool, tree, Some(tree), Some(Path::new("/h")));
            assert!(verdict.is_err(), "{command:?} ran in quarantine");
        }
    }
}

/// A worktree with a `.git`, a fence home, a bare remote and every kind of link a lane
/// could have planted while it held its row.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    tree: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let tree = root.join("wt");
        let home = root.join("fence-home");
        for d in [
            tree.join(".git/info"),
            tree.join("src/deep"),
            tree.join(".claude"),
            home.join("sessions"),
            home.join("quarantine"),
            root.join("outside"),
            root.join("user/.codex"),
            root.join("remote.git/objects"),
            root.join("remote.git/refs/heads"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(root.join("remote.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(tree.join("src/a.rs"), "x").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, tree.join(name)).unwrap();
        };
        link(&home.join("sessions"), "qlink");
        link(&home, "hlink");
        link(&root.join("outside"), "olink");
        link(&root.join("outside/new.txt"), "dangling");
        link(&home.join("sessions/new.json"), "hdangling");
        link(&tree.join(".git"), "glink");
        link(&tree.join(".git/info/attributes"), "gdangling");
        link(&root.join("user"), "ulink");
        link(&tree.join("src/a.rs"), "alink");
        link(Path::new("src/deep/../../.git"), "relglink");
        World {
            _tmp: tmp,
            root,
            tree,
            home,
        }
    }
}

/// Every spelling of a path that lands outside the worktree, in `.git`, in the home or
/// in a harness's settings, with where it lands.
fn escaping_spellings(w: &World) -> Vec<(String, &'static str)> {
    let root = w.root.display().to_string();
    let home = w.home.display().to_string();
    vec![
        ("qlink/../sessions/s.json".into(), "home"),
        ("qlink/s.json".into(), "home"),
        ("hlink/quarantine/s.json".into(), "home"),
        ("hdangling".into(), "home"),
        ("src/../qlink/s.json".into(), "home"),
        (format!("{home}/sessions/s.json"), "home"),
        (format!("{root}/wt/../fence-home/sessions/s.json"), "home"),
        ("olink/x.txt".into(), "outside"),
        ("olink/../outside/x.txt".into(), "outside"),
        ("dangling".into(), "outside"),
        ("../outside/x.txt".into(), "outside"),
        ("src/../../outside/x.txt".into(), "outside"),
        ("ulink/.codex/config.toml".into(), "settings"),
        (format!("{root}/user/.codex/config.toml"), "settings"),
        ("../remote.git/refs/heads/main".into(), "git"),
        (".git/config".into(), "git"),
        (".GIT/config".into(), "git"),
        (".Git/info/attributes".into(), "git"),
        ("glink/config".into(), "git"),
        ("gdangling".into(), "git"),
        ("relglink/config".into(), "git"),
        ("src/deep/../../.git/config".into(), "git"),
        (".claude/settings.json".into(), "settings"),
        (".CLAUDE/settings.local.json".into(), "settings"),
        (".gemini/settings.json".into(), "settings"),
        (".cursor/hooks.json".into(), "settings"),
    ]
}

/// A tool's input naming one path.
type Naming = fn(&str) -> serde_json::Value;

#[test]
fn quarantined_readers_stay_inside_the_worktree_in_every_spelling() {
    let w = World::new();
    let read_tools: [(&str, Naming); 5] = [
        ("Read", |p| json!({"file_path": p})),
        ("Read", |p| json!({"path": p})),
        ("LS", |p| json!({"path": p})),
        ("Grep", |p| json!({"pattern": "x", "path": p})),
        ("Glob", |p| json!({"pattern": "*.rs", "path": p})),
    ];
    let mut checked = 0;
    for (name, input) in read_tools {
        for (path, lands) in escaping_spellings(&w) {
            let tool = Tool::Other {
                name: name.into(),
                input: input(&path),
            };
            // Settings inside the worktree may be read; everything else is denied.
            let expect_ok = lands == "settings" && !path.contains("codex");
            let verdict = permits(&tool, &w.tree, Some(&w.tree), Some(&w.home));
            assert_eq!(
                verdict.is_ok(),
                expect_ok,
                "{name} {path} ({lands}): {verdict:?}"
            );
            checked += 1;
        }
        // A link as the last part is refused even when it points inside.
        let through = Tool::Other {
            name: name.into(),
            input: input("alink"),
        };
        assert!(permits(&through, &w.tree, Some(&w.tree), Some(&w.home)).is_err());
        let plain = Tool::Other {
            name: name.into(),
            input: input("src/a.rs"),
        };
        assert!(permits(&plain, &w.tree, Some(&w.tree), Some(&w.home)).is_ok());
    }
    // No file tool writes in quarantine, whatever it names.
    for (name, input) in [
        ("Write", json!({"file_path": "src/new.rs", "content": "x"})),
        (
            "Edit",
            json!({"file_path": "src/a.rs", "old_string": "x", "new_string": "y"}),
        ),
        ("MultiEdit", json!({"file_path": "src/a.rs", "edits": []})),
        (
            "NotebookEdit",
            json!({"notebook_path": "n.ipynb", "new_source": "x"}),
        ),
        (
            "apply_patch",
            json!({"command": "*** Begin Patch\n*** Add File: src/new.rs\n+x\n*** End Patch"}),
        ),
    ] {
        let tool = Tool::Other {
            name: name.into(),
            input,
        };
        assert!(
            permits(&tool, &w.tree, Some(&w.tree), Some(&w.home)).is_err(),
            "{name}"
        );
        checked += 1;
    }
    assert!(checked > 130, "{checked}");
}

#[test]
fn no_write_spelling_reaches_the_home_and_an_unread_row_writes_no_git_or_settings() {
    let w = World::new();
    let writers: [(&str, Naming); 5] = [
        ("Write", |p| json!({"file_path": p, "content": "x"})),
        ("Write", |p| json!({"path": p, "contents": "x"})),
        (
            "Edit",
            |p| json!({"file_path": p, "old_string": "a", "new_string": "b"}),
        ),
        ("MultiEdit", |p| json!({"file_path": p, "edits": []})),
        (
            "apply_patch",
            |p| json!({"command": format!("*** Begin Patch\n*** Add File: {p}\n+x\n*** End Patch")}),
        ),
    ];
    for (name, input) in writers {
        for (path, lands) in escaping_spellings(&w) {
            for guard_git in [false, true] {
                let rules = Rules {
                    home: Some(&w.home),
                    guard_git,
                    unknown_base: None,
                };
                let verdict = file_writes::check(name, &input(&path), &w.tree, &rules);
                let expect_denied = lands == "home" || (guard_git && lands != "outside");
                assert_eq!(
                    verdict.is_err(),
                    expect_denied,
                    "{name} {path} ({lands}, guard_git {guard_git}): {verdict:?}"
                );
            }
        }
        let rules = Rules {
            home: Some(&w.home),
            guard_git: true,
            unknown_base: None,
        };
        assert!(file_writes::check(name, &input("src/new.rs"), &w.tree, &rules).is_ok());
    }
}
