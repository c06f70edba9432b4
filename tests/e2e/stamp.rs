//! The code stamp's lifecycle with real processes: new binaries installed over the old
//! ones while the daemon runs (it exits for its supervisor and comes back on the new
//! code), an old asker against a current daemon (refused, the daemon stays), a registry
//! that changes while the daemon loads (it never binds), and `--print-stamp`.
//!
//! A different build, honestly: both binaries carry the build digest as a 64-hex string
//! (`row_fence_stamp::BUILD_DIGEST`, set by `stamp/build.rs`). Another build of the
//! same workspace differs from this one in exactly that string as far as the stamp goes,
//! so "the next release" here is this build's binaries with every copy of the digest
//! replaced by another 64-hex digest, installed the way `install(1)` or a package
//! manager does: a new file renamed over the old path (new inode and mtime). Each test
//! checks the result with `--print-stamp` before relying on it.

use crate::util::{Home, Ran, bin, ping, run};
use row_fence_stamp::BUILD_DIGEST;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first 12 hex digits of a stamp, as the daemon's messages show it.
fn short(stamp: &str) -> &str {
    &stamp[..12]
}

/// Another valid 64-hex digest: every hex digit moved one step on.
pub(crate) fn next_digest(digest: &str) -> String {
    digest
        .chars()
        .map(|c| {
            let d = c.to_digit(16).expect("a hex digit");
            std::char::from_digit((d + 1) % 16, 16).unwrap()
        })
        .collect()
}

/// Installs `bytes` as `dir/name` like `install(1)`: a temp file, 0755, renamed over.
fn install_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.new"));
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755)).unwrap();
    fs::rename(&tmp, &path).unwrap();
    path
}

/// This build's `name`, copied into `dir` (a hard link when the filesystem allows).
pub(crate) fn install_this_build(dir: &Path, name: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    if fs::hard_link(bin(name), &path).is_err() {
        install_bytes(dir, name, &fs::read(bin(name)).unwrap());
    }
    path
}

/// This build's `name` with its build digest replaced by `digest`, installed into `dir`.
pub(crate) fn install_build(dir: &Path, name: &str, digest: &str) -> PathBuf {
    let mut bytes = fs::read(bin(name)).unwrap();
    let (old, new) = (BUILD_DIGEST.as_bytes(), digest.as_bytes());
    assert_eq!(old.len(), new.len());
    let mut replaced = 0;
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|b| *b == old[0]) {
        let at = i + at;
        if bytes[at..].starts_with(old) {
            bytes[at..at + old.len()].copy_from_slice(new);
            replaced += 1;
            i = at + old.len();
        } else {
            i = at + 1;
        }
    }
    assert!(
        replaced > 0,
        "{} does not carry the build digest {BUILD_DIGEST}: rebuild with `cargo build --workspace --bins`",
        bin(name).display()
    );
    install_bytes(dir, name, &bytes)
}

/// `<program> --print-stamp` with the home's registry.
fn print_stamp(home: &Home, program: &Path) -> String {
    let ran = run(home.command(program).arg("--print-stamp"));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let stamp = ran.stdout.trim().to_string();
    assert_eq!(stamp.len(), 64, "{stamp:?}");
    stamp
}

fn ask(home: &Home, asker: &Path, descriptor: &Path) -> Ran {
    run(home.command(asker).arg("--descriptor").arg(descriptor))
}

/// Between an exit and the next start (launchd's ThrottleInterval, scaled down).
const THROTTLE: Duration = Duration::from_millis(200);

/// Stands in for launchd's KeepAlive and systemd's Restart=always: runs the daemon from
/// `exe` and, whenever it exits, records the exit code and starts the same path again
/// after [`THROTTLE`], until dropped.
pub(crate) struct Supervisor {
    stop: Arc<AtomicBool>,
    exits: Arc<Mutex<Vec<i32>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    socket: PathBuf,
}

impl Supervisor {
    pub(crate) fn start(home: &Home, exe: PathBuf) -> Supervisor {
        let stop = Arc::new(AtomicBool::new(false));
        let exits = Arc::new(Mutex::new(Vec::new()));
        // The environment every child of this home gets, for the thread to start with.
        let envs: Vec<(OsString, OsString)> = home
            .command(&exe)
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let log = home.path("supervised.log");
        let thread = {
            let (stop, exits) = (stop.clone(), exits.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // As the launchd and systemd jobs run it: the manager restarts it.
                    let mut child: Child = Command::new(&exe)
                        .arg("--supervised")
                        .env_clear()
                        .envs(envs.iter().map(|(k, v)| (k, v)))
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(
                            fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(&log)
                                .unwrap(),
                        )
                        .spawn()
                        .expect("spawn the daemon");
                    let code = loop {
                        if stop.load(Ordering::SeqCst) {
                            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                            let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGTERM);
                            let _ = child.wait();
                            return;
                        }
                        if let Ok(Some(status)) = child.try_wait() {
                            break status.code().unwrap_or(-1);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    };
                    exits.lock().unwrap().push(code);
                    std::thread::sleep(THROTTLE);
                }
            })
        };
        Supervisor {
            stop,
            exits,
            thread: Some(thread),
            socket: home.socket(),
        }
    }

    /// Waits (≤ 15 s) for a daemon other than `not` to answer; returns its pid and stamp.
    pub(crate) fn serving(&self, not: Option<u32>) -> (u32, String) {
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            if let Some(pong) = ping(&self.socket).and_then(|a| a.pong)
                && Some(pong.pid) != not
            {
                return (pong.pid, pong.stamp);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "no daemon answered on {} within 15 s",
            self.socket.display()
        );
    }

    pub(crate) fn exits(&self) -> Vec<i32> {
        self.exits.lock().unwrap().clone()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn new_binaries_installed_over_the_old_ones_restart_the_daemon_through_its_supervisor() {
    let home = Home::file();
    let (_, lane) = home.acquire("b", "r", "lane-a", &[]);
    // The operator's bin dir, as installed last week: this build.
    let bin_dir = home.path("bin");
    let asker = install_this_build(&bin_dir, "row-fence-ask");
    let resident = install_this_build(&bin_dir, "row-fence-resident");
    let supervisor = Supervisor::start(&home, resident.clone());
    let (first, old_stamp) = supervisor.serving(None);
    ask(&home, &asker, &lane).expect(0, "row-fence: ALLOWED");

    // This week's release, installed over it in the README's order (asker first).
    let next = next_digest(BUILD_DIGEST);
    install_build(&bin_dir, "row-fence-ask", &next);
    install_build(&bin_dir, "row-fence-resident", &next);
    let new_stamp = print_stamp(&home, &asker);
    assert_eq!(
        print_stamp(&home, &resident),
        new_stamp,
        "one build, one stamp"
    );
    assert_ne!(new_stamp, old_stamp);

    let ran = ask(&home, &asker, &lane);
    ran.expect(1, "row-fence: COULD NOT READ (stale_code)");
    assert!(ran.stderr.contains("restarting"), "{}", ran.stderr);
    let (second, stamp) = supervisor.serving(Some(first));
    assert_eq!(
        supervisor.exits(),
        vec![75],
        "one code-stamp exit, non-zero"
    );
    assert_ne!(second, first);
    assert_eq!(
        short(&stamp),
        short(&new_stamp),
        "the new daemon runs the new code"
    );
    ask(&home, &asker, &lane).expect(0, "row-fence: ALLOWED");
}

#[test]
fn a_registry_change_restarts_the_daemon_through_its_supervisor() {
    let home = Home::file();
    let (_, lane) = home.acquire("b", "r", "lane-a", &[]);
    let supervisor = Supervisor::start(&home, bin("row-fence-resident"));
    let (first, _) = supervisor.serving(None);
    fs::create_dir_all(home.home.join("registry")).unwrap();
    fs::write(home.home.join("registry/boards.toml"), "[boards.b]\n").unwrap();
    home.ask_with(&lane, &[])
        .expect(1, "row-fence: COULD NOT READ (stale_code)");
    let (second, stamp) = supervisor.serving(Some(first));
    assert_eq!(supervisor.exits(), vec![75]);
    assert_ne!(second, first);
    assert_eq!(stamp, print_stamp(&home, &bin("row-fence-ask")));
    home.ask_with(&lane, &[]).expect(0, "row-fence: ALLOWED");
}

#[test]
fn an_old_asker_against_a_current_daemon_is_stale_code_every_time_and_the_daemon_stays() {
    let home = Home::file();
    let (_, lane) = home.acquire("b", "r", "lane-a", &[]);
    let mut daemon = home.daemon();
    let pid = daemon.pid() as u32;
    // A lane still running last week's asker from its own install.
    let old = install_build(
        &home.path("old-bin"),
        "row-fence-ask",
        &next_digest(BUILD_DIGEST),
    );
    assert_ne!(
        print_stamp(&home, &old),
        print_stamp(&home, &bin("row-fence-ask"))
    );
    for _ in 0..20 {
        let ran = ask(&home, &old, &lane);
        ran.expect(1, "row-fence: COULD NOT READ (stale_code)");
        // It names the foreign binary and the matching one beside the daemon.
        assert!(
            ran.stderr
                .contains(&format!("the caller {} runs other code", old.display())),
            "{}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains(&format!(
                "run the row-fence-ask installed beside the daemon, {}",
                bin("row-fence-ask").display()
            )),
            "{}",
            ran.stderr
        );
        assert_eq!(
            ping(&home.socket()).and_then(|a| a.pong).map(|p| p.pid),
            Some(pid),
            "the same daemon answers"
        );
    }
    assert_eq!(
        daemon.wait_exit(Duration::from_millis(100)),
        None,
        "the daemon stays up"
    );
    assert_eq!(
        ping(&home.socket()).and_then(|a| a.pong).map(|p| p.pid),
        Some(pid)
    );
    home.ask_with(&lane, &[]).expect(0, "row-fence: ALLOWED");
}

#[test]
fn a_registry_changing_while_the_daemon_loads_makes_it_exit_before_binding() {
    let home = Home::file();
    let registry = home.home.join("registry");
    fs::create_dir_all(&registry).unwrap();
    fs::set_permissions(&home.home, fs::Permissions::from_mode(0o700)).unwrap();
    // Two FIFOs make "the registry changed while it was read" happen on cue: the daemon
    // reads a, then b, once to capture its code and once to check it did not change.
    // Each round is paired with one read, since a FIFO opens for writing only while a
    // reader has it open and b is opened only after a is closed.
    for name in ["a.toml", "b.toml"] {
        nix::unistd::mkfifo(
            &registry.join(name),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
    }
    let mut daemon = home.spawn_daemon(&[], &[]);
    for (name, text) in [
        ("a.toml", "same"),
        ("b.toml", "one"),
        ("a.toml", "same"),
        ("b.toml", "two"),
    ] {
        feed_fifo(&registry.join(name), text);
    }
    assert_eq!(daemon.wait_exit(Duration::from_secs(10)), Some(1));
    let log = daemon.log_text();
    assert!(
        log.contains("changed while the daemon was loading"),
        "{log}"
    );
    assert!(!home.socket().exists(), "it never bound its socket");
}

/// Writes `text` into a FIFO once a reader has it open (≤ 10 s), then closes it.
fn feed_fifo(path: &Path, text: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
        {
            Ok(mut fifo) => {
                std::io::Write::write_all(&mut fifo, text.as_bytes()).unwrap();
                return;
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => panic!("nobody read {}: {e}", path.display()),
        }
    }
}

#[test]
fn both_binaries_print_one_stamp_that_follows_the_registry() {
    let home = Home::file();
    let before = print_stamp(&home, &bin("row-fence-ask"));
    assert_eq!(print_stamp(&home, &bin("row-fence-resident")), before);
    fs::create_dir_all(home.home.join("registry")).unwrap();
    fs::write(home.home.join("registry/boards.toml"), "[boards]\n").unwrap();
    let after = print_stamp(&home, &bin("row-fence-ask"));
    assert_ne!(after, before);
    assert_eq!(print_stamp(&home, &bin("row-fence-resident")), after);
}
