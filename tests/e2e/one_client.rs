//! One client: the asker and the agent guard turn the same answers, and the same failures
//! to get one, into the same verdict line. A stand-in daemon on a socket of the test's own
//! answers each program's one ask with the bytes of a table row (a real daemon cannot be
//! made to answer a wrong echo, another protocol version or half a line); then
//! `row-fence-ask --descriptor D` and `row-fence-guard` with `ROW_FENCE_DESCRIPTOR=D` (a
//! bound session pushing) must print the same `row-fence:` line, exit with their own codes
//! for it (asker 0/1/3, guard 0/2), and record in the ledger exactly what they decided
//! themselves (the daemon records what it decides).

use crate::util::{Home, Ran, bin};
use row_fence_contract::ledger::{self, DecidedBy};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const DESCRIPTOR: &str = r#"{"board":"board-1","row":"row-1","lane":"lane-a","generation":4}"#;
const ECHO: &str = r#""board":"board-1","row":"row-1","lane":"lane-a","generation":4"#;

/// What the stand-in daemon does once it has read a request line.
#[derive(Clone)]
enum Daemon {
    /// Writes these bytes, then closes.
    Answers(Vec<u8>),
    /// Holds the connection, answering nothing, for this long.
    Silent(Duration),
    /// No daemon: nothing listens on the socket path.
    Absent,
}

struct Row {
    name: &'static str,
    daemon: Daemon,
    /// The whole verdict line both programs print, `{socket}` standing for the socket.
    line: &'static str,
    /// The asker's exit code (the guard's is 0 for ALLOWED, else 2).
    asker_exit: i32,
    /// The client decided (and recorded) it, not the daemon.
    by_client: bool,
}

fn answers(line: &str) -> Daemon {
    Daemon::Answers(format!("{line}\n").into_bytes())
}

fn table() -> Vec<Row> {
    vec![
        Row {
            name: "allowed, echoing what was asked",
            daemon: answers(&format!(
                r#"{{"v":1,"verdict":"allowed","detail":"lane-a holds board-1/row-1 at generation 4",{ECHO}}}"#
            )),
            line: "row-fence: ALLOWED lane-a holds board-1/row-1 at generation 4",
            asker_exit: 0,
            by_client: false,
        },
        Row {
            name: "refused, echoing what was asked",
            daemon: answers(&format!(
                r#"{{"v":1,"verdict":"refused","reason":"different_holder","detail":"board-1/row-1 is held by lane-b\nat generation 5",{ECHO}}}"#
            )),
            line: "row-fence: REFUSED (different_holder) board-1/row-1 is held by lane-b at generation 5",
            asker_exit: 3,
            by_client: false,
        },
        Row {
            name: "could not read, without an echo",
            daemon: answers(
                r#"{"v":1,"verdict":"could_not_read","reason":"busy","detail":"the daemon is busy"}"#,
            ),
            line: "row-fence: COULD NOT READ (busy) the daemon is busy",
            asker_exit: 1,
            by_client: false,
        },
        Row {
            name: "allowed for another generation",
            daemon: answers(
                r#"{"v":1,"verdict":"allowed","board":"board-1","row":"row-1","lane":"lane-a","generation":5}"#,
            ),
            line: "row-fence: COULD NOT READ (protocol_error) the daemon judged board-1/row-1 as lane-a at generation 5, not what was asked",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "allowed without an echo",
            daemon: answers(r#"{"v":1,"verdict":"allowed"}"#),
            line: "row-fence: COULD NOT READ (protocol_error) the daemon judged ?/? as ? at generation ?, not what was asked",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "a verdict that is not one",
            daemon: answers(&format!(r#"{{"v":1,"verdict":"maybe",{ECHO}}}"#)),
            line: "row-fence: COULD NOT READ (protocol_error) the daemon's answer is not a verdict (verdict Some(\"maybe\"), reason None)",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "another protocol version",
            daemon: answers(&format!(r#"{{"v":2,"verdict":"allowed",{ECHO}}}"#)),
            line: "row-fence: COULD NOT READ (protocol_error) the daemon's answer is not a verdict (verdict Some(\"allowed\"), reason None)",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "a line that is not JSON",
            daemon: answers("ALLOWED"),
            line: "row-fence: COULD NOT READ (protocol_error) the answer is not valid JSON: expected value at line 1 column 1",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "an answer over the message limit",
            daemon: Daemon::Answers(vec![b'x'; 70 * 1024]),
            line: "row-fence: COULD NOT READ (protocol_error) the answer is over 65536 bytes",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "closed without answering",
            daemon: Daemon::Answers(Vec::new()),
            line: "row-fence: COULD NOT READ (fence_unreadable) the daemon closed the connection without answering",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "closed mid-answer",
            daemon: Daemon::Answers(br#"{"v":1,"verdict":"all"#.to_vec()),
            line: "row-fence: COULD NOT READ (fence_unreadable) the daemon closed the connection mid-answer",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "no answer within the deadline",
            daemon: Daemon::Silent(Duration::from_millis(1500)),
            line: "row-fence: COULD NOT READ (timeout) no verdict from {socket} within 600 ms",
            asker_exit: 1,
            by_client: true,
        },
        Row {
            name: "no daemon",
            daemon: Daemon::Absent,
            line: concat!(
                "row-fence: COULD NOT READ (fence_unreadable) cannot connect to {socket}: No such file or directory (os error 2)",
                ": the daemon is not running; start it with row-fence-resident --detach (same --home/--socket; where no service manager runs it), or load its launchd/systemd job (README, \"Install\")"
            ),
            asker_exit: 1,
            by_client: true,
        },
    ]
}

/// Serves `count` connections on `socket` the way `daemon` says, on a thread.
fn serve(socket: &Path, daemon: Daemon, count: usize) -> Option<std::thread::JoinHandle<()>> {
    if matches!(daemon, Daemon::Absent) {
        return None;
    }
    let listener = UnixListener::bind(socket).unwrap();
    Some(std::thread::spawn(move || {
        for _ in 0..count {
            let (mut stream, _) = listener.accept().unwrap();
            read_line(&mut stream);
            match &daemon {
                Daemon::Answers(bytes) => {
                    let _ = stream.write_all(bytes);
                }
                Daemon::Silent(hold) => std::thread::sleep(*hold),
                Daemon::Absent => unreachable!(),
            }
        }
    }))
}

fn read_line(stream: &mut UnixStream) {
    let mut byte = [0u8; 1];
    while stream.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {}
}

/// The deadline both programs get: short where the stand-in never answers.
fn timeout_ms(row: &Row) -> &'static str {
    match row.daemon {
        Daemon::Silent(_) => "600",
        _ => "5000",
    }
}

fn asker(home: &Home, socket: &Path, descriptor: &Path, row: &Row) -> Ran {
    crate::util::run(
        home.command(bin("row-fence-ask"))
            .arg("--descriptor")
            .arg(descriptor)
            .arg("--socket")
            .arg(socket)
            .args(["--timeout-ms", timeout_ms(row), "--action", "git push"])
            .current_dir(home.dir.path()),
    )
}

fn guard(home: &Home, socket: &Path, descriptor: &Path, row: &Row) -> Ran {
    let cwd = home.dir.path();
    let input = serde_json::json!({
        "cwd": cwd,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git push origin main"},
    })
    .to_string();
    let started = std::time::Instant::now();
    let mut child = home
        .command(bin("row-fence-guard"))
        .arg("--socket")
        .arg(socket)
        .args(["--timeout-ms", timeout_ms(row)])
        .env("ROW_FENCE_DESCRIPTOR", descriptor)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// The ledger records the programs decided themselves, by program.
fn decided(home: &Home) -> (usize, usize) {
    let records = ledger::read(&home.home.join("refusals.jsonl")).unwrap_or_default();
    let by = |who: DecidedBy| records.iter().filter(|r| r.decided_by == who).count();
    (by(DecidedBy::Asker), by(DecidedBy::Guard))
}

#[test]
fn the_asker_and_the_guard_print_the_same_verdict_line_for_every_answer_and_failure() {
    for row in table() {
        let home = Home::file();
        std::fs::create_dir_all(&home.home).unwrap();
        let descriptor = home.path("row-fence.json");
        std::fs::write(&descriptor, DESCRIPTOR).unwrap();
        let socket = home.home.join("sock");
        let served = serve(&socket, row.daemon.clone(), 2);
        let by_asker = asker(&home, &socket, &descriptor, &row);
        let by_guard = guard(&home, &socket, &descriptor, &row);
        if let Some(served) = served {
            served.join().unwrap();
        }
        let line = row.line.replace("{socket}", &socket.display().to_string());
        assert_eq!(
            by_asker.verdict_line(),
            line,
            "{}: the asker said\n{}",
            row.name,
            by_asker.stderr
        );
        assert_eq!(
            by_guard.verdict_line(),
            line,
            "{}: the guard said\n{}",
            row.name,
            by_guard.stderr
        );
        assert_eq!(by_asker.code, row.asker_exit, "{}", row.name);
        let guard_exit = if row.asker_exit == 0 { 0 } else { 2 };
        assert_eq!(
            by_guard.code, guard_exit,
            "{}: {}",
            row.name, by_guard.stderr
        );
        let recorded = usize::from(row.by_client && row.asker_exit != 0);
        assert_eq!(decided(&home), (recorded, recorded), "{}", row.name);
    }
}

#[test]
fn a_socket_directory_others_can_write_is_refused_alike_before_connecting() {
    let home = Home::file();
    let open_dir = home.path("open");
    std::fs::create_dir_all(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let descriptor = home.path("row-fence.json");
    std::fs::write(&descriptor, DESCRIPTOR).unwrap();
    let socket: PathBuf = open_dir.join("sock");
    // A listener nobody should reach: the clients refuse the directory first.
    let _listener = UnixListener::bind(&socket).unwrap();
    let row = Row {
        name: "an untrusted socket directory",
        daemon: Daemon::Absent,
        line: "",
        asker_exit: 1,
        by_client: true,
    };
    let by_asker = asker(&home, &socket, &descriptor, &row);
    let by_guard = guard(&home, &socket, &descriptor, &row);
    assert!(
        by_asker
            .verdict_line()
            .starts_with("row-fence: COULD NOT READ (fence_unreadable) refusing to ask: "),
        "{}",
        by_asker.stderr
    );
    assert!(
        by_asker
            .verdict_line()
            .contains(&open_dir.display().to_string()),
        "{}",
        by_asker.stderr
    );
    assert_eq!(by_guard.verdict_line(), by_asker.verdict_line());
    assert_eq!((by_asker.code, by_guard.code), (1, 2));
    assert_eq!(decided(&home), (1, 1));
}
