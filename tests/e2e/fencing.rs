//! Fenced writes through `fencing::write` against real stores: a stale controller racing a
//! takeover, whole-section reads, lost updates under 16 concurrent writers, the capped
//! fence log, hash tags.

use crate::contract::{batch, put, runtime};
use crate::util::Redis;
use row_fence_store::controller;
use row_fence_store::fencing::{self, Controller, WriteError};
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{BLIND, LOG_CAP, LeaseStore, ReadSet, RecordWrite, WriteKind};
use serde_json::{Value, json};
use std::sync::Arc;

/// A fresh store of one kind, and a way to open more handles (each its own connection)
/// on the same data.
enum Kind {
    File(tempfile::TempDir),
    Redis(Redis),
    Etcd(crate::etcd_cluster::EtcdCluster),
}

impl Kind {
    fn file() -> Kind {
        Kind::File(tempfile::tempdir().unwrap())
    }
    fn redis() -> Kind {
        Kind::Redis(Redis::start())
    }
    /// A new handle with its own connection (call inside a runtime).
    fn open(&self) -> Arc<dyn LeaseStore> {
        match self {
            Kind::File(dir) => Arc::new(FileStore::new(dir.path().join("store"))),
            Kind::Redis(r) => Arc::new(RedisStore::open(&r.url(), "rowfence").unwrap()),
            Kind::Etcd(c) => {
                Arc::new(row_fence_store::etcd::EtcdStore::open(&c.url(), "rowfence").unwrap())
            }
        }
    }
}

/// Takes the controller lease over from a separate thread with its own runtime and its
/// own connection, as another controller process would.
fn takeover_elsewhere(kind: &Kind, owner: &str) -> u64 {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                runtime().block_on(async {
                    let store = kind.open();
                    controller::acquire(store.as_ref(), "b", owner, 60_000, true)
                        .await
                        .unwrap()
                        .epoch
                })
            })
            .join()
            .unwrap()
    })
}

fn a_stale_controller_racing_a_takeover_is_refused_at_the_write(kind: Kind) {
    runtime().block_on(async {
        let store = kind.open();
        let first = controller::acquire(store.as_ref(), "b", "c1", 60_000, false)
            .await
            .unwrap();
        assert_eq!(first.epoch, 1);
        let stale = Controller {
            owner: "c1".into(),
            epoch: 1,
        };
        let mut took_over = None;
        // The record is named up front, so the change runs once on the first read and the
        // takeover lands between that read and the batch (loaded on demand, the change
        // would run again on a read that already shows the takeover).
        let mut reads = ReadSet::default();
        reads.add_key("work", "item");
        let result = fencing::write_reading(
            store.as_ref(),
            "b",
            reads,
            |view| {
                // The takeover commits while the stale controller's change runs.
                took_over.get_or_insert_with(|| takeover_elsewhere(&kind, "c2"));
                view.section("work").insert("item", json!("from c1"));
                Ok::<_, ()>(())
            },
            Some(&stale),
        )
        .await;
        assert!(
            matches!(result, Err(WriteError::StaleLease(_))),
            "{result:?}"
        );
        assert_eq!(took_over, Some(2));
        assert_eq!(
            store.record("b", "work", "item").await.unwrap(),
            None,
            "the stale write is absent"
        );
        let fresh = Controller {
            owner: "c2".into(),
            epoch: 2,
        };
        let written = fencing::write(
            store.as_ref(),
            "b",
            &["work"],
            |view| {
                view.section("work").insert("item", json!("from c2"));
                Ok::<_, ()>(())
            },
            Some(&fresh),
        )
        .await
        .unwrap();
        assert!(written.revision.is_some());
        assert_eq!(
            store
                .record("b", "work", "item")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!("from c2")
        );
        assert_eq!(store.log("b", 1).await.unwrap()[0].owner, "c2");
    });
}

fn a_takeover_while_a_change_loads_what_it_touches_is_refused(kind: Kind) {
    runtime().block_on(async {
        let store = kind.open();
        controller::acquire(store.as_ref(), "b", "c1", 60_000, false)
            .await
            .unwrap();
        let stale = Controller {
            owner: "c1".into(),
            epoch: 1,
        };
        let mut took_over = None;
        let result = fencing::write(
            store.as_ref(),
            "b",
            &["work"],
            |view| {
                took_over.get_or_insert_with(|| takeover_elsewhere(&kind, "c2"));
                view.section("work").insert("item", json!("from c1"));
                Ok::<_, ()>(())
            },
            Some(&stale),
        )
        .await;
        assert!(
            matches!(result, Err(WriteError::StaleLease(_))),
            "{result:?}"
        );
        assert_eq!(store.record("b", "work", "item").await.unwrap(), None);
    });
}

fn a_section_the_change_scanned_is_checked_whole(kind: Kind) {
    runtime().block_on(async {
        let store = kind.open();
        store
            .fenced_batch(
                "b",
                &batch(vec![put("s", "a", 0, json!(1)), put("s", "b", 0, json!(2))]),
            )
            .await
            .unwrap();
        let mut runs = 0;
        // "s" is read whole from the first read, so the concurrent put below lands between
        // the change's read and its batch (loaded on demand, it would land before the read
        // the batch is built from).
        let mut reads = ReadSet::whole(&["s"]);
        reads.add_key("totals", "sum");
        let written = fencing::write_reading(
            store.as_ref(),
            "b",
            reads,
            |view| {
                runs += 1;
                let sum: i64 = view
                    .section("s")
                    .iter()
                    .filter_map(|(_, v)| v.as_i64())
                    .sum();
                if runs == 1 {
                    // A concurrent put into the scanned section, from another writer.
                    std::thread::scope(|scope| {
                        scope.spawn(|| {
                            runtime().block_on(async {
                                let other = kind.open();
                                let b = other.record("b", "s", "b").await.unwrap().unwrap();
                                other
                                    .fenced_batch(
                                        "b",
                                        &batch(vec![put("s", "b", b.revision as i64, json!(40))]),
                                    )
                                    .await
                                    .unwrap();
                            })
                        });
                    });
                }
                view.section("totals").insert("sum", json!(sum));
                Ok::<_, ()>(sum)
            },
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            written.attempts, 2,
            "the scan's checks caught the concurrent put"
        );
        assert_eq!(written.value, 41);
        assert_eq!(
            store
                .record("b", "totals", "sum")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!(41)
        );
    });
}

fn a_section_the_change_iterates_is_loaded_whole_on_demand(kind: Kind) {
    runtime().block_on(async {
        let store = kind.open();
        store
            .fenced_batch(
                "b",
                &batch(vec![put("s", "a", 0, json!(1)), put("s", "b", 0, json!(2))]),
            )
            .await
            .unwrap();
        let written = fencing::write(
            store.as_ref(),
            "b",
            &["s", "totals"],
            |view| {
                let sum: i64 = view
                    .section("s")
                    .iter()
                    .filter_map(|(_, v)| v.as_i64())
                    .sum();
                view.section("totals").insert("sum", json!(sum));
                Ok::<_, ()>(sum)
            },
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            written.value, 3,
            "the sum is over every record, not a partial load"
        );
        let reads = match kind {
            // Meta only, then s whole with the key "sum" of totals.
            Kind::Redis(_) | Kind::Etcd(_) => 2,
            // One document: read whole anyway, so the change ran on it at once.
            Kind::File(_) => 1,
        };
        assert_eq!((written.attempts, written.reads), (1, reads));
        assert_eq!(
            store
                .record("b", "totals", "sum")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!(3)
        );
    });
}

/// Fills section `items` of board `b` with `count` records, 500 a batch.
async fn fill(store: &dyn LeaseStore, count: usize) {
    let writes: Vec<RecordWrite> = (0..count)
        .map(|i| RecordWrite {
            kind: WriteKind::Put,
            section: "items".into(),
            key: format!("item-{i}"),
            expected: BLIND,
            value: json!({"n": i, "title": format!("row {i} of the board"), "notes": "x".repeat(64)}),
        })
        .collect();
    for chunk in writes.chunks(500) {
        store
            .fenced_batch("b", &batch(chunk.to_vec()))
            .await
            .unwrap();
    }
}

/// One change of one record of `items` that reads another: the bench's single-record
/// change, plus a read-but-not-written record.
async fn change_one(store: &dyn LeaseStore, n: u64) -> fencing::Written<()> {
    fencing::write(
        store,
        "b",
        &["items"],
        |view| {
            let items = view.section("items");
            let _ = items.get("item-3");
            items.insert("item-17", json!({"n": n, "title": "changed"}));
            Ok::<_, ()>(())
        },
        None,
    )
    .await
    .unwrap()
}

fn a_single_record_change_loads_only_the_keys_it_touches(kind: Kind) {
    runtime().block_on(async {
        let store = kind.open();
        fill(store.as_ref(), 2_000).await;
        let written = change_one(store.as_ref(), 1).await;
        match kind {
            // Per-record keys: item-3 and item-17, not 2,000 records; the first read found
            // the change touching them, the second loaded them.
            Kind::Redis(_) | Kind::Etcd(_) => {
                assert_eq!((written.records_loaded, written.reads), (2, 2))
            }
            // One document: read whole anyway, so the change ran on it at once.
            Kind::File(_) => assert_eq!((written.records_loaded, written.reads), (2_000, 1)),
        }
        assert_eq!(written.attempts, 1);
        let revision = written.revision.unwrap();
        let log = store.log("b", 1).await.unwrap();
        assert_eq!(
            (log[0].revision, log[0].records),
            (revision, 2),
            "one put and one check for the record read"
        );
        assert_eq!(
            store
                .record("b", "items", "item-17")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!({"n": 1, "title": "changed"})
        );
    });
}

/// Bytes the redis-server received from and sent to its clients so far
/// (`total_net_input_bytes`, `total_net_output_bytes`).
fn net_bytes(redis: &Redis) -> (u64, u64) {
    let info = redis.cli(&["INFO", "stats"]);
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|n| n.trim().parse().ok())
            .expect("INFO stats names its net counters")
    };
    (
        field("total_net_input_bytes"),
        field("total_net_output_bytes"),
    )
}

/// What one single-record change cost on a board of `records` records, counted by the
/// server itself (as the bench does: the INFO calls' own bytes taken off).
struct ChangeBytes {
    /// Sent to the store by the change.
    sent: u64,
    /// Received from the store by the change.
    received: u64,
    /// Received by one whole read of the section, for comparison.
    whole: u64,
    /// The records the change's last read loaded.
    records_loaded: usize,
}

fn bytes_of_one_change(records: usize) -> ChangeBytes {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        fill(&store, records).await;
        change_one(&store, 0).await; // scripts loaded, connection up
        let (a_in, a_out) = net_bytes(&redis);
        let (b_in, b_out) = net_bytes(&redis);
        let (info_in, info_out) = (b_in - a_in, b_out - a_out);
        let (before_in, before_out) = net_bytes(&redis);
        let written = change_one(&store, 1).await;
        let (after_in, after_out) = net_bytes(&redis);
        let whole_before = net_bytes(&redis).1;
        let whole = store.sections("b", &["items"]).await.unwrap();
        assert_eq!(whole.sections["items"].len(), records);
        let whole_after = net_bytes(&redis).1;
        ChangeBytes {
            sent: (after_in - before_in).saturating_sub(info_in),
            received: (after_out - before_out).saturating_sub(info_out),
            whole: (whole_after - whole_before).saturating_sub(info_out),
            records_loaded: written.records_loaded,
        }
    })
}

/// The bytes-per-change bound, counted by the real redis-server: a one-record change on a board
/// of 20,000 records receives under 4 KB (a whole read of the section is over 2 MB).
#[test]
fn a_single_record_change_on_a_large_board_does_not_read_the_whole_section() {
    let bytes = bytes_of_one_change(20_000);
    assert_eq!(bytes.records_loaded, 2, "item-3 and item-17");
    assert!(
        bytes.received < 4096,
        "a one-record change received {} bytes from the store",
        bytes.received
    );
    assert!(
        bytes.whole > 100 * bytes.received,
        "{} vs {}",
        bytes.whole,
        bytes.received
    );
}

/// The bytes-per-change figures at 100, 5,000 and 100,000 records (printed; run by hand with
/// `--run-ignored only`, the bench measures its own).
#[test]
#[ignore = "prints the figures; slow to fill 100,000 records"]
fn bytes_of_a_single_record_change_at_three_board_sizes() {
    for records in [100, 5_000, 100_000] {
        let bytes = bytes_of_one_change(records);
        eprintln!(
            "board of {records} records: one change sent {} B, received {} B, loaded {} records (a whole read of the section: {} B)",
            bytes.sent, bytes.received, bytes.records_loaded, bytes.whole
        );
        assert!(bytes.received < 4096);
    }
}

/// What `writers` concurrent increments did.
struct Increments {
    /// Attempts of the committed writes (1 = no conflict retry).
    attempts: usize,
    /// Writes that gave up after `MAX_ATTEMPTS` conflicts ("kept changing; nothing was
    /// committed"), which their writer then ran again, as a controller's next pass does.
    gave_up: usize,
}

/// `writers` tasks, each with its own connection, each adding 1 to its record `times`
/// times through `fencing::write_reading`, the key read at once.
fn increments(kind: &Kind, writers: usize, times: usize, same_record: bool) -> Increments {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let store = kind.open();
                let key = if same_record {
                    "counter".to_string()
                } else {
                    format!("counter-{w}")
                };
                tokio::spawn(async move {
                    let mut done = Increments {
                        attempts: 0,
                        gave_up: 0,
                    };
                    let mut committed = 0;
                    while committed < times {
                        // The key is known: one read, not a read of the section's
                        // names and then one of the key.
                        let mut reads = ReadSet::default();
                        reads.add_key("counts", &key);
                        let written = fencing::write_reading(
                            store.as_ref(),
                            "b",
                            reads,
                            |view| {
                                let counts = view.section("counts");
                                let n = counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
                                counts.insert(&key, json!(n + 1));
                                Ok::<_, ()>(())
                            },
                            None,
                        )
                        .await;
                        match written {
                            Ok(w) => {
                                done.attempts += w.attempts;
                                committed += 1;
                            }
                            Err(WriteError::Contention) => done.gave_up += 1,
                            Err(e) => panic!("writer {w}: {e:?}"),
                        }
                    }
                    done
                })
            })
            .collect();
        let mut total = Increments {
            attempts: 0,
            gave_up: 0,
        };
        for task in tasks {
            let done = task.await.unwrap();
            total.attempts += done.attempts;
            total.gave_up += done.gave_up;
        }
        total
    })
}

fn sixteen_writers_lose_no_update(kind: Kind) {
    writers_lose_no_update(&kind, 16, 200);
}

/// `writers` × `times` increments of one record end at exactly their product.
fn writers_lose_no_update(kind: &Kind, writers: usize, times: usize) {
    let done = increments(kind, writers, times, true);
    eprintln!(
        "{writers} writers x {times} on one record: {} attempts, {} gave up and ran again",
        done.attempts, done.gave_up
    );
    runtime().block_on(async {
        let store = kind.open();
        assert_eq!(
            store
                .record("b", "counts", "counter")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!(writers * times)
        );
    });
}

fn sixteen_writers_on_sixteen_records_never_retry(kind: Kind) {
    let done = increments(&kind, 16, 50, false);
    assert_eq!(
        (done.attempts, done.gave_up),
        (16 * 50, 0),
        "not a single conflict retry"
    );
    runtime().block_on(async {
        let store = kind.open();
        for w in 0..16 {
            let value = store
                .record("b", "counts", &format!("counter-{w}"))
                .await
                .unwrap()
                .unwrap()
                .value;
            assert_eq!(value, json!(50));
        }
    });
}

/// The lost-update test on a 3-member etcd cluster: 3,200 increments of one record by 4
/// writers, none lost. Every attempt that loses a race is a raft proposal on etcd (its
/// commit reads the board back in the same transaction), so 4 writers, not 16: the
/// conflicts (over a thousand per run) are what the proof needs, and 16 writers only add
/// losing proposals. The peers talk directly: this test cuts no member off.
mod etcd {
    #[test]
    fn four_writers_lose_no_update() {
        let kind = super::Kind::Etcd(crate::etcd_cluster::EtcdCluster::start_direct());
        super::writers_lose_no_update(&kind, 4, 800);
    }
}

macro_rules! on_both_kinds {
    ($($name:ident),* $(,)?) => {
        mod file { $( #[test] fn $name() { super::$name(super::Kind::file()) } )* }
        mod redis { $( #[test] fn $name() { super::$name(super::Kind::redis()) } )* }
    };
}

on_both_kinds!(
    a_stale_controller_racing_a_takeover_is_refused_at_the_write,
    a_takeover_while_a_change_loads_what_it_touches_is_refused,
    a_section_the_change_scanned_is_checked_whole,
    a_section_the_change_iterates_is_loaded_whole_on_demand,
    a_single_record_change_loads_only_the_keys_it_touches,
    sixteen_writers_lose_no_update,
    sixteen_writers_on_sixteen_records_never_retry,
);

#[test]
fn the_fence_log_never_exceeds_its_cap() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        for i in 0..LOG_CAP + 25 {
            store
                .fenced_batch("b", &batch(vec![put("s", "k", -1, json!(i))]))
                .await
                .unwrap();
        }
    });
    assert_eq!(
        redis.cli(&["XLEN", "rowfence:board:{b}:fence:log"]).trim(),
        LOG_CAP.to_string()
    );
    let newest = redis.cli(&[
        "XREVRANGE",
        "rowfence:board:{b}:fence:log",
        "+",
        "-",
        "COUNT",
        "1",
    ]);
    assert!(newest.contains(&(LOG_CAP + 25).to_string()), "{newest}");
}

#[test]
fn every_key_of_a_board_shares_its_hash_tag() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        controller::acquire(&store, "b", "c1", 60_000, false)
            .await
            .unwrap();
        store
            .fenced_batch(
                "b",
                &batch(vec![
                    put(
                        "claims",
                        "r",
                        0,
                        json!({"holder":"l","generation":2,"expires_at_ms":1}),
                    ),
                    put("other", "k", 0, json!(1)),
                ]),
            )
            .await
            .unwrap();
        let check = row_fence_store::AskCheck {
            board: "b".into(),
            row: "r".into(),
            lane: "l".into(),
            generation: 2,
            ..Default::default()
        };
        store.ask(&check).await.unwrap();
    });
    let keys: Vec<String> = redis
        .cli(&["--raw", "KEYS", "rowfence:board:*"])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(keys.len() >= 7, "{keys:?}");
    let slot = |k: &str| redis.cli(&["CLUSTER", "KEYSLOT", k]).trim().to_string();
    for key in &keys {
        assert!(key.contains(":{b}:"), "{key} lacks the hash tag");
    }
    // Standalone Redis still computes slots: every key lands in the board's one slot.
    let first = slot(&keys[0]);
    if !first.contains("ERR") {
        assert!(keys.iter().all(|k| slot(k) == first), "{keys:?}");
    }
}
