//! The floors on a real file store, with the interleavings that matter fixed: an ask that
//! paused after its read while other calls ran, a floor another process of the home wrote.

use super::*;
use crate::CLAIMS;
use crate::file::FileStore;
use crate::lease::{self, Grant};
use row_fence_contract::Reason;
use std::sync::Mutex;
use tokio::sync::{Notify, Semaphore};

/// A real file store whose next ask, once armed, stops after its read (it has read the
/// board and judged) until released: the moment another ask, read after a renew, records a
/// newer revision first.
#[derive(Debug)]
struct PausedAfterRead {
    store: FileStore,
    armed: Mutex<bool>,
    read: Notify,
    release: Semaphore,
}

impl PausedAfterRead {
    fn new(store: FileStore) -> PausedAfterRead {
        PausedAfterRead {
            store,
            armed: Mutex::new(false),
            read: Notify::new(),
            release: Semaphore::new(0),
        }
    }
}

#[async_trait]
impl LeaseStore for PausedAfterRead {
    async fn layout(&self, board: &str) -> Result<crate::meta::Layout, StoreError> {
        self.store.layout(board).await
    }
    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        self.store.sections(board, names).await
    }
    async fn record(&self, b: &str, s: &str, k: &str) -> Result<Option<Record>, StoreError> {
        self.store.record(b, s, k).await
    }
    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        self.store.fenced_batch(board, batch).await
    }
    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let judged = self.store.ask(check).await;
        let pause = std::mem::take(&mut *self.armed.lock().unwrap());
        if pause {
            self.read.notify_one();
            let _go = self.release.acquire().await.unwrap();
        }
        judged
    }
    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        self.store.section_names(board).await
    }
    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        self.store.log(board, count).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }
    async fn now_ms(&self) -> Result<u64, StoreError> {
        self.store.now_ms().await
    }
    fn describe(&self) -> String {
        self.store.describe()
    }
}

fn ask_for(lane: &str, generation: u64) -> AskCheck {
    AskCheck {
        board: "b".into(),
        row: "r".into(),
        lane: lane.into(),
        generation,
        token: Some(TOKEN.clone()),
        ..AskCheck::default()
    }
}

/// The one lease token these grants store and these asks present.
static TOKEN: std::sync::LazyLock<row_fence_contract::LeaseToken> =
    std::sync::LazyLock::new(|| row_fence_contract::LeaseToken::parse(&"5".repeat(64)).unwrap());

fn grant(lane: &str, ttl_ms: u64) -> Grant<'_> {
    Grant {
        board: "b",
        row: "r",
        lane,
        ttl_ms,
        takeover: true,
        tenant: None,
        token: &TOKEN,
        reissue: false,
    }
}

/// The race behind a false `store_regressed`: ask A reads revision N and pauses; a renew
/// commits N+1 and ask B reads it and records it; A then resumes. A's read is compared
/// with the floor known when A began (N), so both answer ALLOWED: a read is never judged
/// against a revision recorded after it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_judged_against_the_floor_known_when_it_began_not_one_recorded_during_it() {
    let dir = tempfile::tempdir().unwrap();
    let paused = Arc::new(PausedAfterRead::new(FileStore::new(
        dir.path().join("store"),
    )));
    let daemon = Arc::new(Monotonic::new(paused.clone(), None, false));
    let (held, _) = lease::acquire(daemon.as_ref(), &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    *paused.armed.lock().unwrap() = true;
    let a = {
        let daemon = daemon.clone();
        let check = ask_for("lane-a", held.generation);
        tokio::spawn(async move { daemon.ask(&check).await })
    };
    paused.read.notified().await;
    lease::renew(daemon.as_ref(), &held, 3_600_000, None)
        .await
        .unwrap();
    let b = daemon
        .ask(&ask_for("lane-a", held.generation))
        .await
        .unwrap();
    assert_eq!(b.refusal, None);
    assert_eq!(b.revision, held.generation + 1);
    paused.release.add_permits(1);
    let a = a
        .await
        .unwrap()
        .expect("the paused ask is not a regression");
    assert_eq!(a.refusal, None);
    assert_eq!(a.revision, held.generation);
}

/// A revision the CLI (another process of the home) recorded is a floor for the daemon's
/// very next ask, without a restart: the store restored to before it answers
/// `store_regressed`, not the old holder's ALLOWED.
#[tokio::test]
async fn a_revision_another_process_of_the_home_recorded_is_the_next_asks_floor() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let marks = Some(dir.path().join(MARKS_FILE));
    let daemon = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), false);
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks, true);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    assert_eq!(
        daemon
            .ask(&ask_for("lane-a", a.generation))
            .await
            .unwrap()
            .refusal,
        None
    );
    let document = store_dir.join("b.json");
    let before = std::fs::read(&document).unwrap();
    lease::acquire(&cli, &grant("lane-b", 3_600_000), None)
        .await
        .unwrap();
    std::fs::write(&document, before).unwrap();
    let e = daemon
        .ask(&ask_for("lane-a", a.generation))
        .await
        .unwrap_err();
    assert_eq!(e.ask_reason(), Reason::StoreRegressed, "{e}");
}

/// A lease found expired stays expired: its expiry is written to the home before the
/// answer leaves, so a judge that starts later with a clock below it (a restart, a cold
/// check, a renew) answers `clock_regressed` instead of reviving it. Here the later judge's
/// clock is the store's own, so the floor is raised above it by hand, as a clock 3 s behind
/// would see it.
#[tokio::test]
async fn an_expiry_found_passed_is_a_floor_for_every_later_judge_of_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let marks = Some(dir.path().join(MARKS_FILE));
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), true);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 1), None)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let daemon = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), false);
    let judged = daemon.ask(&ask_for("lane-a", a.generation)).await.unwrap();
    assert_eq!(judged.refusal, Some(Reason::LeaseExpired));
    let expiry = judged.lease.unwrap().expires_at_ms;
    // A new process of the home (a restarted daemon, a cold check) reads the floor.
    let restarted = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks, false);
    let key = restarted.store_key(Access::Read).await.unwrap();
    assert_eq!(restarted.floor(&key, "b").unwrap().expired_ms, expiry);
    let behind = Mark {
        expired_ms: expiry + 3_000,
        ..restarted.floor(&key, "b").unwrap()
    };
    restarted.marks.observe(&key, "b", behind);
    let e = restarted
        .ask(&ask_for("lane-a", a.generation))
        .await
        .unwrap_err();
    assert_eq!(e.ask_reason(), Reason::ClockRegressed, "{e}");
    assert!(e.to_string().contains("accept-clock b"), "{e}");
    let e = lease::renew(&restarted, &a, 3_600_000, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("clock went back"), "{e}");
    let accepted = accept_clock(&restarted, "b").await.unwrap();
    assert!(
        accepted.rows_dropped.is_empty(),
        "expired by the store's clock too"
    );
    assert_eq!(accepted.from_floor_ms, expiry + 3_000);
    let judged = restarted
        .ask(&ask_for("lane-a", a.generation))
        .await
        .unwrap();
    assert_eq!(judged.refusal, Some(Reason::LeaseExpired));
}

/// After a clock that ran ahead by 2 h found a 1 h lease expired and was corrected, the
/// accept drops that lease (live again under the corrected clock), keeps one that expires
/// after the old floor, and every process of the home judges with the accepted clock.
#[tokio::test]
async fn accepting_the_clock_drops_the_leases_it_would_revive_and_lowers_every_processs_floor() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let marks = Some(dir.path().join(MARKS_FILE));
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), true);
    let daemon = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks, false);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    let row_two = Grant {
        row: "r2",
        ..grant("lane-b", 3 * 3_600_000)
    };
    lease::acquire(&cli, &row_two, None).await.unwrap();
    let ahead = crate::file::system_now_ms() + 2 * 3_600_000;
    let key = daemon.store_key(Access::Read).await.unwrap();
    daemon.marks.observe(
        &key,
        "b",
        Mark {
            expired_ms: ahead,
            ..Mark::default()
        },
    );
    daemon.marks.persist(&key, "b").unwrap();
    let e = daemon
        .ask(&ask_for("lane-a", a.generation))
        .await
        .unwrap_err();
    assert_eq!(e.ask_reason(), Reason::ClockRegressed, "{e}");
    let accepted = accept_clock(&cli, "b").await.unwrap();
    assert_eq!(accepted.rows_dropped, vec!["r".to_string()]);
    assert_eq!(accepted.from_floor_ms, ahead);
    let judged = daemon.ask(&ask_for("lane-a", a.generation)).await.unwrap();
    assert_eq!(judged.refusal, Some(Reason::NotHeld));
    let b = AskCheck {
        row: "r2".into(),
        ..ask_for("lane-b", accepted.revision - 1)
    };
    assert_eq!(daemon.ask(&b).await.unwrap().refusal, None);
}

/// The store's identity file of a file store, as a restore or an emptied store leaves it.
fn identity_file(store_dir: &std::path::Path) -> std::path::PathBuf {
    crate::file_identity::path(store_dir)
}

/// A read never gives the store an identity; the first write does, and the floors a read
/// kept under the store's address are the identity's from then on.
#[tokio::test]
async fn a_read_never_writes_the_identity_and_the_first_write_adopts_what_reads_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let marks = Some(dir.path().join(MARKS_FILE));
    let daemon = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), false);
    daemon.sections("b", &[CLAIMS]).await.unwrap();
    assert!(!identity_file(&store_dir).exists(), "a read wrote it");
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks, true);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    let id = crate::file_identity::read(&store_dir).unwrap().unwrap();
    assert_eq!(cli.marks.get(id.as_str(), "b").revision, a.generation);
    // The daemon, still on the address, moves to the identity at its next call.
    let judged = daemon.ask(&ask_for("lane-a", a.generation)).await.unwrap();
    assert_eq!(judged.refusal, None);
    assert_eq!(daemon.marks.get(id.as_str(), "b").revision, a.generation);
}

/// A restored store whose board's revision was raised back to the floor by a home that
/// never saw the lost takeover: the homes that saw it answer `store_regressed` for the
/// replaced lane (its row's generation is below what they saw), never ALLOWED, and go on
/// answering so until an operator accepts.
#[tokio::test]
async fn a_row_seen_at_a_newer_generation_is_regressed_however_the_revision_got_back_up() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let home = Some(dir.path().join(MARKS_FILE));
    let other_home = Some(dir.path().join("other.json"));
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), home.clone(), true);
    let daemon = Monotonic::new(Arc::new(FileStore::new(&store_dir)), home, false);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    let document = store_dir.join("b.json");
    let before = std::fs::read(&document).unwrap();
    let (b, _) = lease::acquire(&cli, &grant("lane-b", 3_600_000), None)
        .await
        .unwrap();
    std::fs::write(&document, before).unwrap();
    // Another home raises the board back to the floor.
    let unaware = Monotonic::new(Arc::new(FileStore::new(&store_dir)), other_home, true);
    let other_row = Grant {
        row: "r2",
        ..grant("lane-c", 3_600_000)
    };
    let (c, _) = lease::acquire(&unaware, &other_row, None).await.unwrap();
    assert_eq!(
        c.generation, b.generation,
        "a home that never saw it cannot know"
    );
    let e = daemon
        .ask(&ask_for("lane-a", a.generation))
        .await
        .unwrap_err();
    assert_eq!(e.ask_reason(), Reason::StoreRegressed, "{e}");
    assert!(e.to_string().contains("row r of board b"), "{e}");
    let e = daemon
        .ask(&ask_for("lane-b", b.generation))
        .await
        .unwrap_err();
    assert_eq!(
        e.ask_reason(),
        Reason::StoreRegressed,
        "the lost grant: {e}"
    );
    // No grant from the home that saw it: the board stays regressed here.
    let e = lease::acquire(&cli, &grant("lane-d", 3_600_000), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("went back in time"), "{e}");
    let accepted = accept_regression(&cli, "b").await.unwrap();
    assert!(accepted.revision > b.generation);
    let (d, _) = lease::acquire(&cli, &grant("lane-d", 3_600_000), None)
        .await
        .unwrap();
    assert!(d.generation > b.generation);
    assert_eq!(
        daemon
            .ask(&ask_for("lane-d", d.generation))
            .await
            .unwrap()
            .refusal,
        None
    );
}

/// A store at an address this home knew that carries no identity (emptied, replaced by a
/// backup made before it had one) or another one is `store_regressed`, never a fresh
/// start; the operator's accept takes the store there as it is, above every generation
/// the one it replaces handed out.
#[tokio::test]
async fn a_store_at_a_known_address_without_its_identity_is_regressed_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let marks = Some(dir.path().join(MARKS_FILE));
    let cli = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), true);
    let (a, _) = lease::acquire(&cli, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    let first = crate::file_identity::read(&store_dir).unwrap().unwrap();
    for replaced in ["missing", "another"] {
        let _ = std::fs::remove_dir_all(&store_dir);
        if replaced == "another" {
            crate::file_identity::create(&store_dir, &crate::identity::StoreId::generate())
                .unwrap();
        }
        let fresh = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks.clone(), true);
        let e = fresh
            .ask(&ask_for("lane-a", a.generation))
            .await
            .unwrap_err();
        assert_eq!(e.ask_reason(), Reason::StoreRegressed, "{replaced}: {e}");
        let e = lease::acquire(&fresh, &grant("lane-b", 3_600_000), None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("this home knew"), "{replaced}: {e}");
        if replaced == "missing" {
            assert!(
                !identity_file(&store_dir).exists(),
                "a refused write wrote it"
            );
        }
    }
    let fresh = Monotonic::new(Arc::new(FileStore::new(&store_dir)), marks, true);
    let accepted = accept_regression(&fresh, "b").await.unwrap();
    assert_eq!(accepted.identity.replaced, vec![first.to_string()]);
    assert!(accepted.revision > a.generation, "{accepted:?}");
    let (b, _) = lease::acquire(&fresh, &grant("lane-b", 3_600_000), None)
        .await
        .unwrap();
    assert!(b.generation > a.generation);
}

/// After a restore, the first home's accept raises the board and drops its leases; a
/// second home that saw no more only records it, so the lanes that re-acquired meanwhile
/// keep their leases.
#[tokio::test]
async fn a_second_homes_accept_after_the_first_drops_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let first = Monotonic::new(
        Arc::new(FileStore::new(&store_dir)),
        Some(dir.path().join("first.json")),
        true,
    );
    let second = Monotonic::new(
        Arc::new(FileStore::new(&store_dir)),
        Some(dir.path().join("second.json")),
        true,
    );
    let (a, _) = lease::acquire(&first, &grant("lane-a", 3_600_000), None)
        .await
        .unwrap();
    let document = store_dir.join("b.json");
    let before = std::fs::read(&document).unwrap();
    lease::acquire(&first, &grant("lane-b", 3_600_000), None)
        .await
        .unwrap();
    second.sections("b", &[CLAIMS]).await.unwrap();
    std::fs::write(&document, before).unwrap();
    for home in [&first, &second] {
        let e = home
            .ask(&ask_for("lane-a", a.generation))
            .await
            .unwrap_err();
        assert_eq!(e.ask_reason(), Reason::StoreRegressed, "{e}");
    }
    let raised = accept_regression(&first, "b").await.unwrap();
    assert_eq!(raised.leases_dropped, 1);
    let (c, _) = lease::acquire(&first, &grant("lane-c", 3_600_000), None)
        .await
        .unwrap();
    let recorded = accept_regression(&second, "b").await.unwrap();
    assert_eq!(recorded.leases_dropped, 0, "{recorded:?}");
    assert_eq!(recorded.revision, c.generation);
    let judged = second.ask(&ask_for("lane-c", c.generation)).await.unwrap();
    assert_eq!(judged.refusal, None);
}
