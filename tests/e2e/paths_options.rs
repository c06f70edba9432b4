//! Paths are absolute (ARCHITECTURE.md, "Invariants"): a relative `ROW_FENCE_HOME` or
//! `--home` is refused by every program (else each directory gets its own home and store,
//! and two worktrees are both granted the row); a leading `~/` is expanded, as git does.
//! The socket follows the same rule: a relative `ROW_FENCE_SOCKET` or `--socket` is
//! refused by the asker, the guard, the CLI and the daemon.

use crate::guard::run_with_stdin;
use crate::util::{Home, bin, git, ping, run};

#[test]
fn a_relative_home_is_refused_and_a_leading_tilde_is_expanded() {
    let home = Home::file();
    let worktree = home.path("wt");
    std::fs::create_dir(&worktree).unwrap();
    let relative = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .env("ROW_FENCE_HOME", ".rf")
        .args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
    assert_eq!(relative.code, 2, "{}", relative.stderr);
    assert!(relative.stderr.contains("relative"), "{}", relative.stderr);
    assert!(!worktree.join(".rf").exists(), "nothing was made");
    let flag = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .args(["--home", "rf", "show", "board-1"]));
    assert_eq!(flag.code, 2, "{}", flag.stderr);
    // The asker never answers ALLOWED or UNFENCED for a home it cannot place.
    let asked = run(home
        .command(bin("row-fence-ask"))
        .current_dir(&worktree)
        .env("ROW_FENCE_HOME", ".rf")
        .args(["--descriptor", "/nonexistent/d.json"]));
    assert_ne!(asked.code, 0, "{}", asked.stderr);
    assert!(!worktree.join(".rf").exists(), "the asker made nothing");
    // `~/rf` (quoted, so no shell expanded it) is $HOME/rf.
    let tilde = run(home.command(bin("row-fence")).current_dir(&worktree).args([
        "--home", "~/rf", "acquire", "board-1", "row-1", "--lane", "lane-a",
    ]));
    assert_eq!(tilde.code, 0, "{}", tilde.stderr);
    assert!(
        home.path("rf/store").exists(),
        "the store is under $HOME/rf"
    );
}

/// The other ways a relative path placed the home or the store under the working
/// directory: the default home from a relative `HOME`, and a `file:` store directory
/// given relative (in any spelling of the URL). Each is refused by the CLI (exit 2), the
/// daemon does not start, the asker is never ALLOWED, and nothing is made under the
/// working directory; a `file:~/DIR` is `$HOME/DIR`.
#[test]
fn a_relative_user_home_or_file_store_directory_is_refused_everywhere() {
    let home = Home::file();
    let worktree = home.path("wt");
    std::fs::create_dir(&worktree).unwrap();
    let cases: [(&str, &str, &str); 5] = [
        ("HOME", "rel", "HOME"),
        ("ROW_FENCE_STORE", "file:rel", "relative"),
        ("ROW_FENCE_STORE", "file:./x", "relative"),
        ("ROW_FENCE_STORE", "file://rel/x", "relative"),
        ("ROW_FENCE_STORE", "file:~user/x", "relative"),
    ];
    for (var, value, says) in cases {
        let mut cli = home.command(bin("row-fence"));
        cli.current_dir(&worktree).env(var, value);
        if var == "HOME" {
            cli.env_remove("ROW_FENCE_HOME");
        }
        let granted = run(cli.args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
        assert_eq!(granted.code, 2, "{var}={value}: {}", granted.stderr);
        assert!(
            granted.stderr.contains(says),
            "{var}={value}: {}",
            granted.stderr
        );
        let mut daemon = home.command(bin("row-fence-resident"));
        daemon.current_dir(&worktree).env(var, value);
        if var == "HOME" {
            daemon.env_remove("ROW_FENCE_HOME");
        }
        let started = run(&mut daemon);
        assert_ne!(started.code, 0, "{var}={value}: {}", started.stderr);
        if var == "HOME" {
            // The asker reads no store, but places the home (its socket) by the same rule.
            let descriptor = home.path("d.json");
            std::fs::write(
                &descriptor,
                r#"{"board":"board-1","row":"row-1","lane":"lane-a","generation":1}"#,
            )
            .unwrap();
            let asked = run(home
                .command(bin("row-fence-ask"))
                .current_dir(&worktree)
                .env(var, value)
                .env_remove("ROW_FENCE_HOME")
                .arg("--descriptor")
                .arg(&descriptor));
            assert_eq!(asked.code, 1, "{}", asked.stderr);
            assert!(asked.stderr.contains("absolute HOME"), "{}", asked.stderr);
        }
        assert_eq!(
            std::fs::read_dir(&worktree).unwrap().count(),
            0,
            "{var}={value}: nothing was made under the working directory"
        );
    }
    let tilde = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .env("ROW_FENCE_STORE", "file:~/fs")
        .args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
    assert_eq!(tilde.code, 0, "{}", tilde.stderr);
    assert!(
        home.path("fs/board-1.json").exists(),
        "the store is $HOME/fs"
    );
}

/// A store URL that cannot be read is a usage error (exit 2) whatever is wrong with it: an
/// unknown scheme, a port that is not a number, a bad option value, and a typo'd option
/// name, which is never silently ignored (`min_replica=1` would grant without replicas);
/// on etcd too (an empty host list, an empty host), and a password holding an unescaped
/// `?` or `/` is printed by no part of the message; a `#fragment` (`#insecure`) is no
/// option, and nothing is sent.
#[test]
fn every_store_url_mistake_exits_2_and_an_unknown_option_is_named() {
    let home = Home::file();
    for (url, says) in [
        ("redsi://localhost:6379", "is not one of"),
        ("redis://localhost:abc", "port"),
        (
            "redis://localhost:6379?durability=maybe",
            "volatile or durable",
        ),
        (
            "redis+unix:///tmp/r.sock?min_replica=1",
            "unknown store URL option \"min_replica\"",
        ),
        (
            "redis://localhost:6379?durabilty=volatile",
            "min_replicas, replicas",
        ),
        ("etcd://", "etcd endpoint \"\""),
        ("etcd://h1:2379,,h2", "etcd endpoint \"\""),
        ("etcd://h1:x", "\"h1:x\" is not host:port"),
        ("etcd://h1?max_skew=5", "an etcd URL option"),
        ("etcd://h1?cacert=/ca.pem", "use etcds://"),
        // A password with an unescaped `?`: none of it printed, here or by the URL.
        ("etcd://u:s3c?r3t@h1:2379", "etcd://***@h1:2379"),
        ("etcd://u:s3/c?r3t@h1:2379", "not shown"),
        // Given twice: which one counts would be a guess.
        (
            "redis+unix:///tmp/r.sock?min_replicas=1&min_replicas=0",
            "given twice",
        ),
        ("redis+unix:///tmp/r.sock?pass=a&password=b", "given twice"),
        (
            "etcd://localhost:2379?max_skew_ms=1&max_skew_ms=0",
            "given twice",
        ),
        // An etcd option typo is a usage error as a Redis one is.
        ("etcd://localhost:2379?max_skw_ms=1", "max_skew_ms"),
        // Options the Redis client does not read on this kind of URL: `?db=2` on a TCP URL
        // was database 0, a second store beside `redis://h/2`.
        ("redis://localhost:6379/?db=2", "the database is the path"),
        ("redis://localhost:6379/?pass=x", "userinfo"),
        ("redis+unix:///tmp/r.sock?password=x", "?pass="),
        // A fragment is no option: `#insecure` would skip certificate verification in the
        // Redis client; refused before anything connects, saying nothing was sent.
        (
            "rediss://127.0.0.1:6380/#insecure",
            "`#insecure` is not an option",
        ),
        (
            "rediss://127.0.0.1:6380#insecure",
            "`#insecure` is not an option",
        ),
        (
            "rediss://127.0.0.1:6380/?protocol=resp3#insecure",
            "nothing was sent",
        ),
        (
            "etcds://127.0.0.1:2379#insecure",
            "`#insecure` is not an option",
        ),
        ("redis://u:s3c#r3t@h:6379/0", "%23"),
    ] {
        let ran = run(home
            .command(bin("row-fence"))
            .env("ROW_FENCE_STORE", url)
            .args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
        assert_eq!(ran.code, 2, "{url}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{url}: {}", ran.stderr);
        for piece in ["s3c", "r3t"] {
            assert!(!ran.stderr.contains(piece), "{url}: {}", ran.stderr);
        }
    }
}

/// A relative socket would be bound by a daemon in its own working directory and asked by
/// each client in its own: refused everywhere, by the home's rule; `~/` is `$HOME/`.
#[test]
fn a_relative_socket_is_refused_by_every_program_and_a_leading_tilde_is_expanded() {
    let home = Home::file();
    let worktree = home.path("wt");
    std::fs::create_dir(&worktree).unwrap();
    git(&home, &worktree, &["init", "-q"]);
    let descriptor = worktree.join(".git/row-fence.json");
    let descriptor_text = descriptor.display().to_string();
    let granted = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--write-descriptor",
        &descriptor_text,
    ]);
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    let relative = "s/sock";
    // The daemon refuses to start, and binds nothing under its working directory.
    let mut daemon = home.command(bin("row-fence-resident"));
    daemon
        .current_dir(&worktree)
        .env("ROW_FENCE_SOCKET", relative);
    let resident = run(&mut daemon);
    assert_ne!(resident.code, 0, "{}", resident.stderr);
    assert!(resident.stderr.contains("relative"), "{}", resident.stderr);
    let flagged = run(home
        .command(bin("row-fence-resident"))
        .current_dir(&worktree)
        .args(["--socket", relative]));
    assert_ne!(flagged.code, 0, "{}", flagged.stderr);
    assert!(!worktree.join("s").exists(), "the daemon made nothing");
    // The CLI: a usage error, as for a relative home.
    let cli = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .env("ROW_FENCE_SOCKET", relative)
        .args(["status"]));
    assert_eq!(cli.code, 2, "{}", cli.stderr);
    assert!(cli.stderr.contains("relative"), "{}", cli.stderr);
    // The asker: COULD NOT READ, never ALLOWED, by the env and by the flag.
    for args in [vec![], vec!["--socket", relative]] {
        let asked = run(home
            .command(bin("row-fence-ask"))
            .current_dir(&worktree)
            .env("ROW_FENCE_SOCKET", relative)
            .args(&args));
        assert_eq!(asked.code, 1, "{args:?}: {}", asked.stderr);
        assert!(asked.stderr.contains("COULD NOT READ"), "{}", asked.stderr);
        assert!(asked.stderr.contains("relative"), "{}", asked.stderr);
    }
    // The guard: a row-bound push it cannot ask about is blocked (exit 2).
    let input = serde_json::json!({
        "session_id": "s-1",
        "cwd": worktree,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push origin HEAD"},
    })
    .to_string();
    for args in [vec![], vec!["--socket", relative]] {
        let guarded = run_with_stdin(
            home.command(bin("row-fence-guard"))
                .current_dir(&worktree)
                .env("ROW_FENCE_SOCKET", relative)
                .args(&args),
            &input,
        );
        assert_eq!(guarded.code, 2, "{args:?}: {}", guarded.stderr);
        assert!(guarded.stderr.contains("relative"), "{}", guarded.stderr);
    }
    // `~/s/sock` (quoted, so no shell expanded it) is $HOME/s/sock for the daemon and the
    // asker alike.
    let tilde = "~/s/sock";
    std::fs::create_dir(home.path("s")).unwrap();
    std::fs::set_permissions(
        home.path("s"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut daemon = home.spawn_daemon(&[], &[("ROW_FENCE_SOCKET", tilde)]);
    daemon.socket = home.path("s/sock");
    daemon.wait_ready();
    assert!(ping(&home.path("s/sock")).is_some());
    let asked = run(home
        .command(bin("row-fence-ask"))
        .current_dir(&worktree)
        .env("ROW_FENCE_SOCKET", tilde));
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(asked.stderr.contains("ALLOWED"), "{}", asked.stderr);
}
