//! The guard's POSIX shim (`hooks/guard-bash.sh`) decides NEVER RAN by the descriptor a
//! parent can see from the hook's cwd, walking the way the asker walks
//! (`row_fence_contract::descriptor::resolve`): one table of trees, built with real git
//! where git builds them, and for each the shim (run as Claude Code's fallback runs it,
//! the guard missing) and the Rust walk must name the same descriptor, or both none. A
//! clone without a descriptor inside a lane's worktree is the lane's: the shim once
//! stopped at the first `.git` and let it run UNFENCED.

use crate::util::{Home, git, run};
use row_fence_contract::descriptor::{self, Lookup, Resolution};
use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DESCRIPTOR: &str = r#"{"board":"b","row":"r","lane":"lane-a","generation":1}"#;

/// One tree: how to build it under a root, the directory the agent is in, and the
/// descriptor (relative to the root) the lane is bound to, if any.
struct Tree {
    name: &'static str,
    build: fn(&Home, &Path),
    cwd: &'static str,
    bound_to: Option<&'static str>,
}

fn init(home: &Home, dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    git(home, dir, &["init", "-q", "-b", "main"]);
}

fn bind(git_dir: &Path) {
    fs::write(git_dir.join("row-fence.json"), DESCRIPTOR).unwrap();
}

fn mkdirs(root: &Path, dirs: &[&str]) {
    for dir in dirs {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
}

fn trees() -> Vec<Tree> {
    vec![
        Tree {
            name: "no repository at all",
            build: |_, r| mkdirs(r, &["plain/deep"]),
            cwd: "plain/deep",
            bound_to: None,
        },
        Tree {
            name: "a repository without a descriptor",
            build: |h, r| init(h, &r.join("repo")),
            cwd: "repo",
            bound_to: None,
        },
        Tree {
            name: "a lane's worktree, deep inside",
            build: |h, r| {
                init(h, &r.join("lane"));
                bind(&r.join("lane/.git"));
                mkdirs(r, &["lane/src/a/b"]);
            },
            cwd: "lane/src/a/b",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "a clone without a descriptor inside a lane's worktree",
            build: |h, r| {
                init(h, &r.join("lane"));
                bind(&r.join("lane/.git"));
                init(h, &r.join("lane/vendor/other"));
                mkdirs(r, &["lane/vendor/other/sub"]);
            },
            cwd: "lane/vendor/other/sub",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "a lane nested in a repository without a descriptor",
            build: |h, r| {
                init(h, &r.join("outer"));
                init(h, &r.join("outer/lane"));
                bind(&r.join("outer/lane/.git"));
            },
            cwd: "outer/lane",
            bound_to: Some("outer/lane/.git/row-fence.json"),
        },
        Tree {
            name: "beside a nested lane, in the repository around it",
            build: |h, r| {
                init(h, &r.join("outer"));
                init(h, &r.join("outer/lane"));
                bind(&r.join("outer/lane/.git"));
                mkdirs(r, &["outer/elsewhere"]);
            },
            cwd: "outer/elsewhere",
            bound_to: None,
        },
        Tree {
            name: "a linked worktree with its descriptor in its own git dir",
            build: |h, r| {
                init(h, &r.join("main"));
                git(
                    h,
                    &r.join("main"),
                    &["commit", "-q", "--allow-empty", "-m", "c"],
                );
                git(h, &r.join("main"), &["worktree", "add", "-q", "../wt"]);
                bind(&r.join("main/.git/worktrees/wt"));
            },
            cwd: "wt",
            bound_to: Some("main/.git/worktrees/wt/row-fence.json"),
        },
        Tree {
            name: "a linked worktree whose gitdir: is relative",
            build: |_, r| {
                mkdirs(r, &["store/gd", "wt2/x"]);
                fs::write(r.join("store/gd/HEAD"), "ref: refs/heads/main\n").unwrap();
                fs::write(r.join("store/gd/commondir"), "../..\n").unwrap();
                bind(&r.join("store/gd"));
                fs::write(r.join("wt2/.git"), "gitdir:  ../store/gd \r\n").unwrap();
            },
            cwd: "wt2/x",
            bound_to: Some("wt2/../store/gd/row-fence.json"),
        },
        Tree {
            name: "a .git file without a gitdir: line",
            build: |_, r| {
                mkdirs(r, &["odd"]);
                fs::write(r.join("odd/.git"), "not a worktree\n").unwrap();
            },
            cwd: "odd",
            bound_to: Some("odd/.git"),
        },
        Tree {
            name: "a .git file naming a git dir that is gone",
            build: |_, r| {
                mkdirs(r, &["broken"]);
                fs::write(r.join("broken/.git"), "gitdir: /nonexistent/rf/gd\n").unwrap();
            },
            cwd: "broken",
            bound_to: Some("broken/.git"),
        },
        Tree {
            name: "a .git that is a FIFO",
            build: |_, r| {
                mkdirs(r, &["fifo"]);
                nix::unistd::mkfifo(
                    &r.join("fifo/.git"),
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                )
                .unwrap();
            },
            cwd: "fifo",
            bound_to: Some("fifo/.git"),
        },
        Tree {
            name: "a dangling .git symlink inside a lane's worktree",
            build: |h, r| {
                init(h, &r.join("lane"));
                bind(&r.join("lane/.git"));
                mkdirs(r, &["lane/d"]);
                symlink("/nonexistent/rf", r.join("lane/d/.git")).unwrap();
            },
            cwd: "lane/d",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "a submodule whose superproject holds the descriptor",
            build: |h, r| {
                init(h, &r.join("super"));
                bind(&r.join("super/.git"));
                mkdirs(r, &["super/.git/modules/libs", "super/libs"]);
                let gd = r.join("super/.git/modules/libs/sub");
                git(
                    h,
                    r,
                    &[
                        "init",
                        "-q",
                        "--separate-git-dir",
                        &gd.display().to_string(),
                        "super/libs/sub",
                    ],
                );
                mkdirs(r, &["super/libs/sub/src"]);
            },
            cwd: "super/libs/sub/src",
            bound_to: Some("super/.git/row-fence.json"),
        },
        Tree {
            name: "inside a bare repository with a descriptor",
            build: |h, r| {
                git(h, r, &["init", "-q", "--bare", "bare.git"]);
                bind(&r.join("bare.git"));
            },
            cwd: "bare.git/refs/heads",
            bound_to: Some("bare.git/row-fence.json"),
        },
        Tree {
            name: "a bare repository without one inside a lane's worktree",
            build: |h, r| {
                init(h, &r.join("lane"));
                bind(&r.join("lane/.git"));
                git(h, &r.join("lane"), &["init", "-q", "--bare", "mirror.git"]);
            },
            cwd: "lane/mirror.git",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "inside a lane's .git directory",
            build: |h, r| {
                init(h, &r.join("lane"));
                bind(&r.join("lane/.git"));
            },
            cwd: "lane/.git/hooks",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "a descriptor that is a dangling symlink",
            build: |h, r| {
                init(h, &r.join("lane"));
                symlink("/nonexistent/rf.json", r.join("lane/.git/row-fence.json")).unwrap();
            },
            cwd: "lane",
            bound_to: Some("lane/.git/row-fence.json"),
        },
        Tree {
            name: "a descriptor that is a directory",
            build: |h, r| {
                init(h, &r.join("lane"));
                mkdirs(r, &["lane/.git/row-fence.json"]);
            },
            cwd: "lane",
            bound_to: Some("lane/.git/row-fence.json"),
        },
    ]
}

/// The Rust walk's answer: the descriptor path it found or could not read, else none.
fn rust_walk(cwd: &Path) -> Option<PathBuf> {
    match descriptor::resolve(&Lookup {
        explicit: None,
        descriptor_env: None,
        git_dir_env: None,
        cwd,
    }) {
        Resolution::Found(path, _) | Resolution::Unreadable(path, _) => Some(path),
        Resolution::Unbound(_) => None,
        Resolution::Missing(path) => panic!("nothing was named, yet {} is missing", path.display()),
    }
}

/// The shim's answer, run by `shell` as Claude Code's fallback runs it with the guard
/// missing (`--guard-exit 127`), the hook input naming `cwd`, under `env -i`.
fn shim_walk(shell: &str, home: &Home, cwd: &Path) -> Option<PathBuf> {
    let shim = crate::util::repo_root().join("hooks/guard-bash.sh");
    let mut child = Command::new(shell)
        .arg(&shim)
        .args(["--guard-exit", "127"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("ROW_FENCE_HOME", &home.home)
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::json!({"session_id": "s-1", "cwd": cwd}).to_string();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(2) => {
            let path = said
                .split_once("this lane is row-bound (")
                .and_then(|(_, rest)| rest.split_once("): denied"))
                .map(|(path, _)| PathBuf::from(path))
                .unwrap_or_else(|| panic!("{shell}: exit 2 without a descriptor: {said}"));
            Some(path)
        }
        Some(0) => {
            assert!(said.contains("runs UNFENCED"), "{shell}: {said}");
            None
        }
        other => panic!("{shell}: exit {other:?}: {said}"),
    }
}

#[test]
fn the_shim_finds_the_descriptor_the_asker_finds_on_every_tree() {
    let shells: Vec<&str> = ["sh", "bash"]
        .into_iter()
        .filter(|s| run(Command::new(s).args(["-c", "true"])).code == 0)
        .collect();
    assert!(shells.contains(&"sh"), "no sh to run the shim");
    for tree in trees() {
        let home = Home::file();
        // Physical, so the Rust walk and `pwd -P` in the shim spell paths alike.
        let root = fs::canonicalize(home.dir.path()).unwrap().join("t");
        fs::create_dir_all(&root).unwrap();
        (tree.build)(&home, &root);
        let cwd = root.join(tree.cwd);
        let expected = tree.bound_to.map(|p| root.join(p));
        assert_eq!(rust_walk(&cwd), expected, "the asker's walk: {}", tree.name);
        for shell in &shells {
            assert_eq!(
                shim_walk(shell, &home, &cwd),
                expected,
                "{shell} running the shim: {}",
                tree.name
            );
        }
    }
}
