//! `row-fence top` for real: the console on a real terminal (a private tmux server, read
//! back with `capture-pane`) while a daemon serves two lanes, one lane's row is taken over
//! and its push is refused; then the daemon goes away. And `--once --json`, parsed back.
//! Every wait is a poll up to a generous deadline, never a timed assertion.

use crate::util::{Home, Repo, bin, run};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Long enough for a loaded 2-core box; the console refreshes every 250 ms.
const DEADLINE: Duration = Duration::from_secs(30);

/// A tmux server of the test's own (its socket in the test's temp dir), killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts `command` (run by `sh -c`) in a detached 120×30 session named `top`.
    fn start(home: &Home, command: &str) -> Tmux {
        // A server of its own per console: one quitting may still be on its way out when
        // the next starts.
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: home.path(&format!("tmux-{n}.sock")),
        };
        let ran = run(tmux.cmd(home).args([
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "120",
            "-y",
            "30",
            command,
        ]));
        assert_eq!(ran.code, 0, "tmux new-session: {}", ran.stderr);
        tmux
    }

    fn cmd(&self, home: &Home) -> Command {
        let mut cmd = home.command("tmux");
        cmd.env("TERM", "xterm-256color")
            .arg("-f")
            .arg("/dev/null")
            .arg("-S")
            .arg(&self.socket);
        cmd
    }

    /// The screen as text.
    fn screen(&self, home: &Home) -> String {
        run(self.cmd(home).args(["capture-pane", "-p", "-t", "top"])).stdout
    }

    /// Polls the screen until `done` holds; the last screen either way, and how long it
    /// took to appear.
    fn until(&self, home: &Home, done: impl Fn(&str) -> bool) -> (String, Duration) {
        let started = Instant::now();
        loop {
            let screen = self.screen(home);
            if done(&screen) || started.elapsed() > DEADLINE {
                return (screen, started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, home: &Home, keys: &str) {
        run(self.cmd(home).args(["send-keys", "-t", "top", keys]));
    }

    fn alive(&self, home: &Home) -> bool {
        run(self.cmd(home).args(["has-session", "-t", "top"])).code == 0
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The line of the screen that names `row`.
fn line_of<'a>(screen: &'a str, row: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(row))
        .unwrap_or("")
}

fn console_command(home: &Home, extra: &str) -> String {
    format!(
        "ROW_FENCE_HOME='{}' ROW_FENCE_STORE='{}' exec '{}' top --board b1 --refresh-ms 250 {extra}",
        home.home.display(),
        home.store,
        bin("row-fence").display()
    )
}

#[test]
fn the_console_shows_a_takeover_and_a_refused_push_as_they_happen_and_a_daemon_gone() {
    let home = Home::file();
    let mut daemon = home.daemon();
    let repo = Repo::new(&home, "app");
    let descriptor = repo.descriptor();
    let ran = home.cli(&[
        "acquire",
        "b1",
        "row-1",
        "--lane",
        "lane-a",
        "--write-descriptor",
        descriptor.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    home.acquire("b1", "row-2", "lane-b", &[]);

    let tmux = Tmux::start(&home, &console_command(&home, ""));
    let (screen, _) = tmux.until(&home, |s| {
        line_of(s, "row-1").contains("lane-a") && line_of(s, "row-2").contains("lane-b")
    });
    assert!(line_of(&screen, "row-1").contains("lane-a"), "{screen}");
    assert!(screen.contains("daemon pid"), "{screen}");

    // A takeover: row-1 is lane-c's now, at a new generation.
    home.acquire("b1", "row-1", "lane-c", &["--takeover"]);
    let (screen, takeover_ms) = tmux.until(&home, |s| line_of(s, "row-1").contains("lane-c"));
    assert!(line_of(&screen, "row-1").contains("lane-c"), "{screen}");

    // lane-a's push is refused by its pre-push hook, and the refusal shows with its route.
    let pushed = repo.commit_and_push(&home, "after the takeover");
    assert_ne!(pushed.code, 0, "the push went through: {}", pushed.stderr);
    assert_eq!(repo.remote_head(&home), "", "the remote moved");
    let refused = |s: &str| {
        s.lines().any(|l| {
            l.contains("lane-a") && l.contains("pre-push") && l.contains("different_holder")
        })
    };
    let (screen, refusal_ms) = tmux.until(&home, refused);
    assert!(refused(&screen), "{screen}");
    eprintln!(
        "event to screen: takeover {} ms, refusal {} ms (polled every 50 ms)",
        takeover_ms.as_millis(),
        refusal_ms.as_millis()
    );

    // Keys: the refusals view, the help, back.
    tmux.keys(&home, "2");
    let (screen, _) = tmux.until(&home, |s| s.contains("ACTION: DETAIL"));
    assert!(screen.contains("git push origin"), "{screen}");
    tmux.keys(&home, "?");
    let (screen, _) = tmux.until(&home, |s| s.contains("Keys"));
    assert!(screen.contains("q            quit"), "{screen}");
    tmux.keys(&home, "1");

    // The daemon goes away: shown gone at the next refresh, not as its last answer.
    daemon.stop();
    let (screen, _) = tmux.until(&home, |s| s.contains("daemon GONE"));
    assert!(screen.contains("daemon GONE"), "{screen}");
    assert!(!screen.contains("daemon pid"), "{screen}");

    tmux.keys(&home, "q");
    let started = Instant::now();
    while tmux.alive(&home) && started.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!tmux.alive(&home), "q did not quit");
}

#[test]
fn allow_writes_releases_an_expired_row_after_a_y_and_read_only_writes_nothing() {
    let home = Home::file();
    let _daemon = home.daemon();
    home.acquire("b1", "row-1", "lane-a", &["--ttl", "1s"]);
    std::thread::sleep(Duration::from_millis(1_100));

    // Read-only: x writes nothing and says how to allow it.
    let tmux = Tmux::start(&home, &console_command(&home, ""));
    tmux.until(&home, |s| line_of(s, "row-1").contains("expired"));
    tmux.keys(&home, "x");
    let (screen, _) = tmux.until(&home, |s| s.contains("--allow-writes"));
    assert!(
        screen.contains("read-only: start row-fence top --allow-writes"),
        "{screen}"
    );
    tmux.keys(&home, "q");
    drop(tmux);
    assert!(home.cli(&["show", "b1"]).stdout.contains("lane-a"));

    let tmux = Tmux::start(
        &home,
        &format!(
            "{} 2>{}",
            console_command(&home, "--allow-writes"),
            home.path("top.err").display()
        ),
    );
    tmux.until(&home, |s| line_of(s, "row-1").contains("expired"));
    tmux.keys(&home, "x");
    let (screen, _) = tmux.until(&home, |s| s.contains("y to release"));
    assert!(
        screen.contains("Release b1/row-1 held by lane-a"),
        "{screen}"
    );
    tmux.keys(&home, "y");
    let (screen, _) = tmux.until(&home, |s| s.contains("released b1/row-1"));
    assert!(
        screen.contains("released b1/row-1 (generation 1) by lane-a"),
        "{screen}"
    );
    assert!(line_of(&screen, "row-1").is_empty(), "{screen}");
    tmux.keys(&home, "q");
    let started = Instant::now();
    while tmux.alive(&home) && started.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Recorded as the CLI records a release: the store's fence log, and the same line.
    let said = std::fs::read_to_string(home.path("top.err")).unwrap();
    assert!(
        said.contains("row-fence: released b1/row-1 (generation 1) by lane-a"),
        "{said}"
    );
    let show = home.cli(&["show", "b1", "--json"]);
    assert_eq!(show.stdout.trim(), "[]", "{}", show.stderr);
}

#[test]
fn once_json_is_the_snapshot_parsed_back_and_a_gone_daemon_exits_1() {
    let home = Home::file();
    let mut daemon = home.daemon();
    let (_, lane_a) = home.acquire("b1", "row-1", "lane-a", &[]);
    home.acquire("b1", "row-1", "lane-b", &["--takeover"]);
    home.acquire("b2", "row-5", "lane-c", &[]);
    let asked = home.ask_with(&lane_a, &["--action", "git push origin"]);
    assert_eq!(asked.code, 3, "{}", asked.stderr);

    let ran = home.cli(&["top", "--once", "--json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    assert_eq!(v["daemon"]["up"], true);
    assert_eq!(v["daemon"]["pid"], daemon.pid());
    assert_eq!(v["daemon"]["store_kind"], "file");
    assert!(
        v["daemon"]["store_identity"].is_null(),
        "absent until reported"
    );
    // Every board the file store holds, without --board.
    let boards: Vec<&str> = v["boards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["board"].as_str().unwrap())
        .collect();
    assert_eq!(boards, ["b1", "b2"]);
    let row = &v["boards"][0]["rows"][0];
    assert_eq!(
        (row["row"].as_str(), row["holder"].as_str()),
        (Some("row-1"), Some("lane-b"))
    );
    assert_eq!(row["generation"], 2);
    assert!(row["left_ms"].as_i64().unwrap() > 0);
    assert!(row["scope"].is_null());
    let refusal = &v["refusals"][0];
    assert_eq!(refusal["lane"], "lane-a");
    assert_eq!(refusal["reason"], "different_holder");
    assert_eq!(refusal["route"], "pre_push");
    assert_eq!(v["quarantine"]["denials_total"], 0);

    // --board narrows; a board name that is not one is a usage error.
    let ran = home.cli(&["top", "--once", "--json", "--board", "b2"]);
    assert_eq!(ran.json()["boards"].as_array().unwrap().len(), 1);
    // A board named twice is read and shown once.
    let ran = home.cli(&["top", "--once", "--json", "--board", "b2", "--board", "b2"]);
    assert_eq!(ran.json()["boards"].as_array().unwrap().len(), 1);
    assert_eq!(home.cli(&["top", "--once", "--board", "B 2"]).code, 2);
    // Without a terminal the console says what to use instead.
    let ran = home.cli(&["top"]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("--once --json"), "{}", ran.stderr);

    daemon.stop();
    let ran = home.cli(&["top", "--once", "--json"]);
    assert_eq!(ran.code, 1, "a gone daemon is not a healthy snapshot");
    let v = ran.json();
    assert_eq!(v["daemon"]["up"], false);
    assert!(
        v["daemon"]["error"]
            .as_str()
            .unwrap()
            .contains("not running"),
        "{v}"
    );
    assert_eq!(
        v["boards"][0]["rows"][0]["holder"], "lane-b",
        "the store is read all the same"
    );
}

/// The docs' capture of the console (docs/operations.md, "The console: `row-fence top`") is
/// the overview the snapshot test draws.
#[test]
fn the_docs_capture_is_the_console_as_drawn() {
    let root = crate::util::repo_root();
    let drawn =
        std::fs::read_to_string(root.join("daemon/cli/src/top/snapshots/overview.txt")).unwrap();
    assert!(
        crate::util::doc_blocks("text")
            .iter()
            .any(|block| format!("{block}\n") == drawn),
        "the docs' capture of row-fence top differs from daemon/cli/src/top/snapshots/overview.txt"
    );
}

/// Sends SIGCONT to a stopped daemon when dropped, so a failed assertion leaves no
/// stopped process behind (the daemon itself is stopped by its own guard after this).
struct Continue(i32);

impl Drop for Continue {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGCONT,
        );
    }
}

#[test]
fn a_daemon_that_listens_but_does_not_answer_is_gone_and_not_told_to_be_started() {
    let home = Home::file();
    let daemon = home.daemon();
    daemon.signal(nix::sys::signal::Signal::SIGSTOP);
    let _resume = Continue(daemon.pid());
    let ran = home.cli(&["top", "--once", "--json"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    let v = ran.json();
    assert_eq!(v["daemon"]["up"], false, "{v}");
    let what = v["daemon"]["what_to_do"].as_str().unwrap_or_default();
    assert!(
        what.starts_with("a daemon listens but does not answer"),
        "{v}"
    );
    assert!(!what.starts_with("start it"), "{v}");
}
