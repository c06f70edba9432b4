//! The home's floors (`revisions.json`) are keyed by which store it is, not how it is
//! spelled, and a floor that cannot be written fails closed (ARCHITECTURE.md, "The lease
//! store"). Real processes: the daemon, the CLI, the asker, a real redis-server, a real
//! tmpfs for a full home.
//!
//! - one store named two ways by one home (`redis://127.0.0.1:P` and
//!   `redis://localhost:P/?wait_ms=…`; `file` and `file:$HOME/store/`): a takeover made
//!   while the daemon was down, then lost by a restore, is `store_regressed`, never ALLOWED;
//! - two key prefixes on one Redis are two stores: a first acquire under one is not
//!   `store_regressed` because of the other's revisions;
//! - a full home: a takeover that committed but whose floor could not be written exits 1
//!   saying so (no descriptor), and a daemon that cannot write the expiry it found passed
//!   answers COULD NOT READ until it can.

use crate::util::{Home, Ran, Redis, bin, run, until};
use std::path::Path;

/// `row-fence ARGS` with `ROW_FENCE_STORE=store` (and extra environment).
fn cli_on(home: &Home, store: &str, envs: &[(&str, &str)], args: &[&str]) -> Ran {
    run(home
        .command(bin("row-fence"))
        .env("ROW_FENCE_STORE", store)
        .envs(envs.iter().copied())
        .args(args))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// lane-a holds the row (granted under `daemon_store`), lane-b takes it over under
/// `cli_store` with the daemon down, then `restore` puts the store back to before the
/// takeover: lane-a's ask through a daemon started again is `store_regressed`.
fn takeover_spelled_otherwise_then_restored(
    home: &Home,
    cli_store: &str,
    snapshot: impl FnOnce(),
    restore: impl FnOnce(),
) {
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    let mut daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    snapshot();
    assert_eq!(daemon.stop(), Some(0));
    let b = home.path("lane-b.json");
    let ran = cli_on(
        home,
        cli_store,
        &[],
        &[
            "acquire",
            "b",
            "r",
            "--lane",
            "lane-b",
            "--takeover",
            "--write-descriptor",
            b.to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    restore();
    let _daemon = home.daemon();
    let ran = home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    assert!(
        ran.stderr
            .contains(&format!("revision {g1} but revision {}", g1 + 1)),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_redis_store_spelled_two_ways_by_one_home_keeps_one_floor() {
    let mut redis = Redis::start_tcp(&[]);
    let port = redis.port.unwrap();
    let home = Home::with_store(redis.tcp_url());
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    let cli_store = format!("redis://LocalHost:{port}/0?wait_ms=1500");
    takeover_spelled_otherwise_then_restored(
        &home,
        &cli_store,
        || copy_dir(&aof, &before),
        || {
            redis.stop();
            std::fs::remove_dir_all(&aof).unwrap();
            copy_dir(&before, &aof);
            redis.restart();
        },
    );
}

#[test]
fn a_file_store_spelled_two_ways_by_one_home_keeps_one_floor() {
    let home = Home::file();
    let store = home.home.join("store");
    let before = home.path("store-before-takeover");
    let cli_store = format!("file:{}/", store.display());
    takeover_spelled_otherwise_then_restored(
        &home,
        &cli_store,
        || copy_dir(&store, &before),
        || {
            std::fs::remove_dir_all(&store).unwrap();
            copy_dir(&before, &store);
        },
    );
}

#[test]
fn two_key_prefixes_on_one_redis_are_two_stores() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    let url = redis.url();
    for row in ["r1", "r2", "r3", "r4", "r5"] {
        let ran = cli_on(
            &home,
            &url,
            &[("ROW_FENCE_KEY_PREFIX", "a")],
            &["acquire", "b", row, "--lane", "lane-a"],
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    let x = home.path("x.json");
    let ran = cli_on(
        &home,
        &url,
        &[("ROW_FENCE_KEY_PREFIX", "b")],
        &[
            "acquire",
            "b",
            "r1",
            "--lane",
            "lane-x",
            "--write-descriptor",
            x.to_str().unwrap(),
        ],
    );
    assert_eq!(
        ran.code, 0,
        "a first acquire under prefix b: {}",
        ran.stderr
    );
    cli_on(
        &home,
        &url,
        &[("ROW_FENCE_KEY_PREFIX", "b")],
        &["check", "--descriptor", x.to_str().unwrap()],
    )
    .expect(0, "row-fence: ALLOWED");
}

/// A tmpfs of a few pages mounted on a home, unmounted when dropped.
struct SmallFs {
    at: std::path::PathBuf,
}

impl SmallFs {
    fn mount(at: &Path) -> SmallFs {
        std::fs::create_dir_all(at).unwrap();
        let ran = run(std::process::Command::new("mount").args([
            "-t",
            "tmpfs",
            "-o",
            "size=256k,mode=700",
            "tmpfs",
            at.to_str().unwrap(),
        ]));
        assert_eq!(
            ran.code, 0,
            "mounting a tmpfs needs root (CI runs as root): {}",
            ran.stderr
        );
        SmallFs { at: at.into() }
    }

    /// Fills it up (what a full disk leaves).
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.at.join("filler")).unwrap();
        let page = [0u8; 4096];
        while filler.write_all(&page).is_ok() {}
        let _ = filler.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.at.join("filler")).unwrap();
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
    }
}

#[test]
fn a_floor_the_full_home_cannot_hold_fails_closed() {
    let mut home = Home::file();
    // The store is outside the home: only the home is full.
    home.store = format!("file:{}", home.path("store").display());
    let fs = SmallFs::mount(&home.home);
    let (g1, _a) = home.acquire("b", "r", "lane-a", &[]);
    let mut daemon = home.daemon();
    let (_, c) = home.acquire("b", "r2", "lane-c", &["--ttl", "1s"]);

    fs.fill();
    // The takeover commits in the store, but the home cannot record it: exit 1, said so,
    // no descriptor.
    let b = home.path("lane-b.json");
    let ran = home.cli(&[
        "acquire",
        "b",
        "r",
        "--lane",
        "lane-b",
        "--takeover",
        "--write-descriptor",
        b.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains(&format!("committed at revision {} in the store", g1 + 2))
            && ran.stderr.contains("floors could not be written"),
        "{}",
        ran.stderr
    );
    assert!(
        !b.exists(),
        "no descriptor for a write the home did not record"
    );

    // lane-c's lease expires; the daemon cannot write that it found it passed.
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    let ran = home.ask_with(&c, &[]);
    ran.expect(1, "row-fence: COULD NOT READ");
    assert!(ran.stderr.contains("could not be"), "{}", ran.stderr);

    fs.free();
    home.ask_with(&c, &[])
        .expect(3, "row-fence: REFUSED (lease_expired)");
    let floors = std::fs::read_to_string(home.home.join("revisions.json")).unwrap();
    assert!(floors.contains("expired_ms"), "{floors}");
    assert_eq!(daemon.stop(), Some(0));
}

/// The reproduction (store-3 01): one Redis reached over TCP, over its Unix socket
/// (`unix://`, `redis+unix://`) and through a sentinel that watches it carries one identity.
/// A takeover recorded by the home under the TCP spelling, then lost by a restore, is
/// `store_regressed` under every other spelling — the daemon's ask and a cold check — and a
/// grant under them hands out no generation again.
#[test]
fn one_redis_by_tcp_socket_or_sentinel_is_one_store_after_a_restore() {
    let mut redis = Redis::start_tcp(&[]);
    let sentinel = crate::util::Sentinel::watching(redis.port.unwrap());
    let home = Home::with_store(redis.tcp_url());
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    copy_dir(&aof, &before);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    redis.stop();
    std::fs::remove_dir_all(&aof).unwrap();
    copy_dir(&before, &aof);
    redis.restart();
    let socket = redis.socket.display().to_string();
    for spelling in [
        format!("unix://{socket}"),
        format!("redis+unix://{socket}?db=0"),
        format!(
            "redis+sentinel://127.0.0.1:{}/{}",
            sentinel.port,
            crate::util::SENTINEL_MASTER
        ),
    ] {
        cli_on(
            &home,
            &spelling,
            &[],
            &["check", "--descriptor", a.to_str().unwrap()],
        )
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        let daemon = home.daemon_with(&[], &[("ROW_FENCE_STORE", spelling.as_str())]);
        home.ask_with(&a, &[])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        drop(daemon);
        let granted = cli_on(
            &home,
            &spelling,
            &[],
            &["acquire", "b", "r2", "--lane", "lane-c"],
        );
        assert_eq!(granted.code, 1, "{spelling}: {}", granted.stderr);
        assert!(
            granted.stderr.contains("went back in time"),
            "{}",
            granted.stderr
        );
    }
}

/// A restore from a backup made before the store had an identity (an older version's, or
/// the key deleted by hand) brings back a server that carries none. A home that knew the
/// server under one spelling (its TCP address, or its Unix socket) finds it emptied or
/// replaced under every other one too — the server says which TCP address a socket or a
/// sentinel reached — so the daemon's ask and a cold check answer `store_regressed`, never
/// ALLOWED, and a grant hands out no generation again.
#[test]
fn a_redis_restored_from_before_its_identity_is_regressed_under_every_spelling() {
    for known_by_socket in [false, true] {
        let mut redis = Redis::start_tcp(&[]);
        let sentinel = crate::util::Sentinel::watching(redis.port.unwrap());
        let socket = redis.socket.display().to_string();
        let home = Home::with_store(if known_by_socket {
            format!("unix://{socket}")
        } else {
            redis.tcp_url()
        });
        let aof = redis.dir.path().join("appendonlydir");
        let before = redis.dir.path().join("aof-before-takeover");
        let (_, a) = home.acquire("b", "r", "lane-a", &[]);
        copy_dir(&aof, &before);
        home.acquire("b", "r", "lane-b", &["--takeover"]);
        redis.stop();
        std::fs::remove_dir_all(&aof).unwrap();
        copy_dir(&before, &aof);
        redis.restart();
        assert_eq!(redis.cli(&["DEL", "rowfence:store-id"]).trim(), "1");
        let others = if known_by_socket {
            vec![
                format!("redis://localhost:{}", redis.port.unwrap()),
                format!(
                    "redis+sentinel://127.0.0.1:{}/{}",
                    sentinel.port,
                    crate::util::SENTINEL_MASTER
                ),
            ]
        } else {
            vec![
                format!("unix://{socket}"),
                format!("redis+unix://{socket}?db=0"),
                format!(
                    "redis+sentinel://127.0.0.1:{}/{}",
                    sentinel.port,
                    crate::util::SENTINEL_MASTER
                ),
            ]
        };
        for spelling in others {
            cli_on(
                &home,
                &spelling,
                &[],
                &["check", "--descriptor", a.to_str().unwrap()],
            )
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
            let daemon = home.daemon_with(&[], &[("ROW_FENCE_STORE", spelling.as_str())]);
            home.ask_with(&a, &[])
                .expect(1, "row-fence: COULD NOT READ (store_regressed)");
            drop(daemon);
            let granted = cli_on(
                &home,
                &spelling,
                &[],
                &["acquire", "b", "r2", "--lane", "lane-c"],
            );
            assert_eq!(granted.code, 1, "{spelling}: {}", granted.stderr);
            assert!(
                granted.stderr.contains("carries no identity"),
                "{spelling}: {}",
                granted.stderr
            );
        }
    }
}

/// A Redis listening on loopback and on this machine's address, restored from before its
/// identity: a home that knew it as `127.0.0.1` answers `store_regressed` through a URL
/// naming this machine's address, and one that knew it by that address answers so through
/// its Unix socket.
#[test]
fn a_redis_at_this_machines_address_is_the_one_loopback_reaches() {
    let Some(ip) = crate::util::this_machines_address() else {
        eprintln!("this machine has no address but loopback: nothing to name the server by");
        return;
    };
    for by_address_first in [false, true] {
        let mut redis = Redis::start_tcp(&[
            "--bind",
            &format!("127.0.0.1 {ip}"),
            "--protected-mode",
            "no",
        ]);
        let port = redis.port.unwrap();
        let by_address = format!("redis://{ip}:{port}");
        let socket = format!("unix://{}", redis.socket.display());
        let (known, other) = if by_address_first {
            (by_address.clone(), socket)
        } else {
            (redis.tcp_url(), by_address.clone())
        };
        let home = Home::with_store(known);
        let aof = redis.dir.path().join("appendonlydir");
        let before = redis.dir.path().join("aof-before-takeover");
        let (_, a) = home.acquire("b", "r", "lane-a", &[]);
        copy_dir(&aof, &before);
        home.acquire("b", "r", "lane-b", &["--takeover"]);
        redis.stop();
        std::fs::remove_dir_all(&aof).unwrap();
        copy_dir(&before, &aof);
        redis.restart();
        assert_eq!(redis.cli(&["DEL", "rowfence:store-id"]).trim(), "1");
        cli_on(
            &home,
            &other,
            &[],
            &["check", "--descriptor", a.to_str().unwrap()],
        )
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        let granted = cli_on(
            &home,
            &other,
            &[],
            &["acquire", "b", "r2", "--lane", "lane-c"],
        );
        assert_eq!(granted.code, 1, "{other}: {}", granted.stderr);
    }
}

/// The reproduction (store-3 02, Redis): after a restore, a home that never saw the lost
/// takeover raises the board back to the floor with a grant of its own. The daemon's home
/// (which saw the takeover through an ask) and the controller's (which made it) go on
/// answering `store_regressed` for the replaced lane and for the lost grant, never ALLOWED
/// or `different_holder`.
#[test]
fn a_restored_redis_raised_back_to_the_floor_is_still_regressed_where_the_takeover_was_seen() {
    let mut redis = Redis::start();
    let daemon_home = Home::on(Some(&redis));
    let controller = Home::on(Some(&redis));
    let unaware = Home::on(Some(&redis));
    let _daemon = daemon_home.daemon();
    let (_, a) = controller.acquire("b", "r", "lane-a", &[]);
    daemon_home
        .ask_with(&a, &[])
        .expect(0, "row-fence: ALLOWED");
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    copy_dir(&aof, &before);
    let (g2, b) = controller.acquire("b", "r", "lane-b", &["--takeover"]);
    daemon_home
        .ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    redis.stop();
    std::fs::remove_dir_all(&aof).unwrap();
    copy_dir(&before, &aof);
    redis.restart();
    let (g3, _) = unaware.acquire("b", "r2", "lane-c", &[]);
    assert_eq!(
        g3, g2,
        "a home that never saw generation {g2} cannot know it"
    );
    for d in [&a, &b] {
        let asked = until(
            std::time::Duration::from_secs(5),
            || daemon_home.ask_with(d, &[]),
            |r| !r.verdict_line().contains("store_unreachable"),
        );
        asked.expect(1, "row-fence: COULD NOT READ (store_regressed)");
        controller
            .cli(&["check", "--descriptor", d.to_str().unwrap()])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    }
}

/// After a restore, a home that never saw the lost takeover takes the same row over: the
/// store hands the lost generation out again, to another lane. The homes that saw that
/// generation held by the lost lane (the daemon's, through an ask; the controller's, which
/// granted it) answer `store_regressed` for both lanes, never ALLOWED for the second holder
/// nor `different_holder` for the first.
#[test]
fn a_generation_handed_out_again_to_another_lane_is_regressed_where_the_first_was_seen() {
    let mut redis = Redis::start();
    let daemon_home = Home::on(Some(&redis));
    let controller = Home::on(Some(&redis));
    let unaware = Home::on(Some(&redis));
    let _daemon = daemon_home.daemon();
    let (_, a) = controller.acquire("b", "r", "lane-a", &[]);
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    copy_dir(&aof, &before);
    let (g2, b) = controller.acquire("b", "r", "lane-b", &["--takeover"]);
    daemon_home
        .ask_with(&b, &[])
        .expect(0, "row-fence: ALLOWED");
    redis.stop();
    std::fs::remove_dir_all(&aof).unwrap();
    copy_dir(&before, &aof);
    redis.restart();
    let (again, c) = unaware.acquire("b", "r", "lane-c", &["--takeover"]);
    assert_eq!(
        again, g2,
        "a home that never saw generation {g2} cannot know it"
    );
    for d in [&c, &b, &a] {
        let asked = until(
            std::time::Duration::from_secs(5),
            || daemon_home.ask_with(d, &[]),
            |r| !r.verdict_line().contains("store_unreachable"),
        );
        asked.expect(1, "row-fence: COULD NOT READ (store_regressed)");
        controller
            .cli(&["check", "--descriptor", d.to_str().unwrap()])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    }
}

/// The reproduction (store-3 03): a file store whose path is a symlink repointed at a
/// restored backup, and a store directory moved aside and replaced by a symlink to the
/// backup: the backup carries the store's identity, so the running daemon, a restarted
/// one and a cold check answer `store_regressed`, and no grant hands generation 2 out again.
#[test]
fn a_file_store_path_repointed_at_a_backup_is_regressed() {
    for repoint in [true, false] {
        let mut home = Home::file();
        let store = home.path("store");
        let first = home.path("store.v1");
        let backup = home.path("store.backup");
        if repoint {
            std::fs::create_dir(&first).unwrap();
            std::os::unix::fs::symlink(&first, &store).unwrap();
        }
        home.store = format!("file:{}", store.display());
        let mut daemon = home.daemon();
        let (_, a) = home.acquire("b", "r", "lane-a", &[]);
        copy_dir(&store, &backup);
        home.acquire("b", "r", "lane-b", &["--takeover"]);
        home.ask_with(&a, &[])
            .expect(3, "row-fence: REFUSED (different_holder)");
        if repoint {
            let next = home.path("store.next");
            std::os::unix::fs::symlink(&backup, &next).unwrap();
            std::fs::rename(&next, &store).unwrap();
        } else {
            std::fs::rename(&store, home.path("store.bad")).unwrap();
            std::os::unix::fs::symlink(&backup, &store).unwrap();
        }
        let shape = if repoint { "repointed" } else { "replaced" };
        let running = until(
            std::time::Duration::from_secs(3),
            || home.ask_with(&a, &[]),
            |r| r.code != 0,
        );
        assert_eq!(running.code, 1, "{shape}: {}", running.stderr);
        home.cli(&["check", "--descriptor", a.to_str().unwrap()])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        assert_eq!(daemon.stop(), Some(0));
        let _restarted = home.daemon();
        home.ask_with(&a, &[])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        let granted = home.cli(&["acquire", "b", "r2", "--lane", "lane-c"]);
        assert_eq!(granted.code, 1, "{shape}: {}", granted.stderr);
    }
}

/// A bind mount of a directory, unmounted when dropped.
struct BindMount {
    at: std::path::PathBuf,
}

impl BindMount {
    fn of(from: &Path, at: &Path) -> BindMount {
        std::fs::create_dir_all(at).unwrap();
        let ran = run(std::process::Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(at));
        assert_eq!(
            ran.code, 0,
            "a bind mount needs root (CI runs as root): {}",
            ran.stderr
        );
        BindMount { at: at.into() }
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = run(std::process::Command::new("umount").arg(&self.at));
    }
}

/// A file store restored from a backup made before it had an identity (its `.store-id`
/// gone), reached through a bind mount of its directory: the home knew the store at the
/// directory's place on its file system, so a cold check, the daemon and a grant through
/// the mount answer `store_regressed`, never ALLOWED from a fresh start.
#[test]
fn a_file_store_through_a_bind_mount_is_the_store_at_its_directory() {
    let home = Home::file();
    let store = home.home.join("store");
    let backup = home.path("store-before-takeover");
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    copy_dir(&store, &backup);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    std::fs::remove_dir_all(&store).unwrap();
    copy_dir(&backup, &store);
    std::fs::remove_file(store.join(".store-id")).unwrap();
    let mount = BindMount::of(&store, &home.path("mounted"));
    let through = format!("file:{}", mount.at.display());
    cli_on(
        &home,
        &through,
        &[],
        &["check", "--descriptor", a.to_str().unwrap()],
    )
    .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_STORE", through.as_str())]);
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    drop(daemon);
    let granted = cli_on(
        &home,
        &through,
        &[],
        &["acquire", "b", "r2", "--lane", "lane-c"],
    );
    assert_eq!(granted.code, 1, "{}", granted.stderr);
    assert!(
        granted.stderr.contains("carries no identity"),
        "{}",
        granted.stderr
    );
}

/// Two unrelated Sentinel deployments with one master name are two stores: a home that
/// wrote to the first (its floors high) finds the second a store of its own, not one that
/// went back in time.
#[test]
fn two_sentinel_deployments_with_one_master_name_are_two_stores() {
    let (first, second) = (Redis::start_tcp(&[]), Redis::start_tcp(&[]));
    let (s1, s2) = (
        crate::util::Sentinel::watching(first.port.unwrap()),
        crate::util::Sentinel::watching(second.port.unwrap()),
    );
    let home = Home::file();
    let url = |s: &crate::util::Sentinel| {
        format!(
            "redis+sentinel://127.0.0.1:{}/{}",
            s.port,
            crate::util::SENTINEL_MASTER
        )
    };
    for row in ["r1", "r2", "r3"] {
        let ran = cli_on(
            &home,
            &url(&s1),
            &[],
            &["acquire", "b", row, "--lane", "lane-a"],
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    let x = home.path("x.json");
    let ran = cli_on(
        &home,
        &url(&s2),
        &[],
        &[
            "acquire",
            "b",
            "r1",
            "--lane",
            "lane-x",
            "--write-descriptor",
            x.to_str().unwrap(),
        ],
    );
    assert_eq!(
        ran.code, 0,
        "a first acquire on the second deployment: {}",
        ran.stderr
    );
    cli_on(
        &home,
        &url(&s2),
        &[],
        &["check", "--descriptor", x.to_str().unwrap()],
    )
    .expect(0, "row-fence: ALLOWED");
}
