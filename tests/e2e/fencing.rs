//! Fenced writes through `fencing::write` against real stores: a stale controller racing a
//! takeover, whole-section reads, lost updates under 16 concurrent writers, the capped
//! fence log, hash tags.

use crate::contract::{batch, put, runtime};
use crate::util::Redis;
use row_fence_store::controller;
use row_fence_store::fencing::{self, Controller, WriteError};
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{LOG_CAP, LeaseStore};
use serde_json::{Value, json};
use std::sync::Arc;

/// A fresh store of one kind, and a way to open more handles (each its own connection)
/// on the same data.
enum Kind {
    File(tempfile::TempDir),
    Redis(Redis),
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
        let result = fencing::write(
            store.as_ref(),
            "b",
            &["work"],
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
        let written = fencing::write(
            store.as_ref(),
            "b",
            &["s", "totals"],
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

/// What `writers` concurrent increments did.
struct Increments {
    /// Attempts of the committed writes (1 = no conflict retry).
    attempts: usize,
    /// Writes that gave up after `MAX_ATTEMPTS` conflicts ("kept changing; nothing was
    /// committed"), which their writer then ran again, as a controller's next pass does.
    gave_up: usize,
}

/// `writers` tasks, each with its own connection, each adding 1 to its record `times`
/// times through `fencing::write`.
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
                        let written = fencing::write(
                            store.as_ref(),
                            "b",
                            &["counts"],
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
    let done = increments(&kind, 16, 200, true);
    eprintln!(
        "16 writers x 200 on one record: {} attempts, {} gave up and ran again",
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
            json!(3200)
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

macro_rules! on_both_kinds {
    ($($name:ident),* $(,)?) => {
        mod file { $( #[test] fn $name() { super::$name(super::Kind::file()) } )* }
        mod redis { $( #[test] fn $name() { super::$name(super::Kind::redis()) } )* }
    };
}

on_both_kinds!(
    a_stale_controller_racing_a_takeover_is_refused_at_the_write,
    a_section_the_change_scanned_is_checked_whole,
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
