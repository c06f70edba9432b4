//! Moving a board from the whole-document layout onto per-record keys: on Redis, and from
//! the embedded file store into Redis; through the library and the real CLI and daemon.

use crate::contract::{batch, put, runtime};
use crate::util::{Home, Redis};
use row_fence_store::fencing;
use row_fence_store::lease::{self, Grant};
use row_fence_store::redis::RedisStore;
use row_fence_store::redis::migrate;
use row_fence_store::{AskCheck, controller};
use row_fence_store::{CLAIMS, Layout, LeaseStore, META};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Writes a document-layout board `b` on Redis: a controller lease, two row leases, and a
/// section of plain records. Returns lane-a's generation.
async fn document_board(store: &RedisStore) -> u64 {
    let doc = store.document();
    controller::acquire(doc, "b", "ctl", 3_600_000, false)
        .await
        .unwrap();
    let grant = |row, lane| Grant {
        board: "b",
        row,
        lane,
        ttl_ms: 3_600_000,
        takeover: false,
        tenant: None,
        token: &crate::util::TEST_TOKEN,
        reissue: false,
    };
    let (a, _) = lease::acquire(doc, &grant("row-1", "lane-a"), None)
        .await
        .unwrap();
    lease::acquire(doc, &grant("row-2", "lane-b"), None)
        .await
        .unwrap();
    doc.fenced_batch(
        "b",
        &batch(vec![
            put("notes", "x", 0, json!({"n": 1})),
            put("notes", "y", 0, json!([1, 2])),
        ]),
    )
    .await
    .unwrap();
    a.generation
}

/// Every record value of `b`, by section and key, as read through `store`.
async fn values(store: &dyn LeaseStore) -> BTreeMap<(String, String), Value> {
    let snapshot = store.sections("b", &[META, CLAIMS, "notes"]).await.unwrap();
    snapshot
        .sections
        .into_iter()
        .flat_map(|(s, records)| {
            records
                .into_iter()
                .map(move |(k, r)| ((s.clone(), k), r.value))
        })
        .filter(|((s, k), _)| !(s == META && k == "layout"))
        .collect()
}

#[test]
fn migration_copies_the_document_into_records_and_reads_back_the_same() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await;
        assert_eq!(store.layout("b").await.unwrap(), Layout::Document);
        let before = values(&store).await;
        assert_eq!(before.len(), 6, "{before:?}");
        let written = migrate::document_to_records(&store, "b").await.unwrap();
        assert_eq!(
            written,
            before.len() + 1,
            "every record and the layout marker"
        );
        assert_eq!(store.layout("b").await.unwrap(), Layout::Records);
        assert_eq!(
            values(&store).await,
            before,
            "the router reads the records back the same"
        );
        assert_eq!(values(store.records()).await, before);
        let revision = store.sections("b", &[]).await.unwrap().revision;
        assert_eq!(
            migrate::document_to_records(&store, "b").await.unwrap(),
            0,
            "a second move writes nothing"
        );
        assert_eq!(store.sections("b", &[]).await.unwrap().revision, revision);
    });
    let raw = redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
    assert!(raw.contains(r#""moved_to":"records""#), "{raw}");
    let stamp = redis.cli(&["HGET", "rowfence:state:fencing:current", "b:records"]);
    assert_eq!(
        stamp.trim(),
        redis
            .cli(&["GET", "rowfence:board:{b}:fence:revision"])
            .trim()
    );
}

#[test]
fn a_pass_on_a_migrated_board_leaves_the_document_byte_for_byte_unchanged() {
    let redis = Redis::start();
    let current = || redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
    let history = || redis.cli(&["LRANGE", "rowfence:state:fencing:history:b", "0", "-1"]);
    let (document, old_history) = runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await;
        migrate::document_to_records(&store, "b").await.unwrap();
        (current(), history())
    });
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        let held = row_fence_contract::Descriptor {
            board: "b".into(),
            row: "row-1".into(),
            lane: "lane-a".into(),
            generation: 0,
            tenant: None,
            token: Some(crate::util::TEST_TOKEN.clone()),
        };
        let generation = lease::list(&store, "b", Some("row-1")).await.unwrap().0[0]
            .lease
            .generation;
        let held = row_fence_contract::Descriptor { generation, ..held };
        lease::renew(&store, &held, 60_000, None).await.unwrap();
        controller::renew(&store, "b", "ctl", 60_000).await.unwrap();
        let grant = Grant {
            board: "b",
            row: "row-3",
            lane: "lane-c",
            ttl_ms: 60_000,
            takeover: false,
            tenant: None,
            token: &crate::util::TEST_TOKEN,
            reissue: false,
        };
        lease::acquire(
            &store,
            &grant,
            Some(&fencing::Controller {
                owner: "ctl".into(),
                epoch: 1,
            }),
        )
        .await
        .unwrap();
        let check = AskCheck {
            board: "b".into(),
            row: "row-1".into(),
            lane: "lane-a".into(),
            generation,
            token: Some(crate::util::TEST_TOKEN.clone()),
            ..Default::default()
        };
        assert_eq!(store.ask(&check).await.unwrap().refusal, None);
        values(&store).await;
    });
    assert_eq!(current(), document, "byte for byte");
    assert_eq!(history(), old_history);
}

#[test]
fn a_document_write_in_flight_across_the_move_retries_onto_the_records() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await;
        let mut runs = 0;
        let written = fencing::write(
            &store,
            "b",
            &["notes"],
            |view| {
                runs += 1;
                if runs == 1 {
                    // The move commits after this writer read the document.
                    std::thread::scope(|s| {
                        s.spawn(|| {
                            runtime().block_on(async {
                                let other = RedisStore::open(&redis.url(), "rowfence").unwrap();
                                assert!(
                                    migrate::document_to_records(&other, "b").await.unwrap() > 0
                                );
                            })
                        });
                    });
                }
                let n = view
                    .section("notes")
                    .get("x")
                    .and_then(|v| v["n"].as_i64())
                    .unwrap_or(0);
                view.section("notes").insert("x", json!({"n": n + 1}));
                Ok::<_, ()>(())
            },
            None,
        )
        .await
        .unwrap();
        assert_eq!(
            written.attempts, 2,
            "the first attempt was refused and retried"
        );
        assert_eq!(
            store
                .records()
                .record("b", "notes", "x")
                .await
                .unwrap()
                .unwrap()
                .value,
            json!({"n": 2})
        );
    });
    let raw = redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
    assert!(
        raw.contains(r#""x":{"r":"#) && raw.contains(r#"{"n":1}"#),
        "the document kept the old value: {raw}"
    );
}

#[test]
fn the_migrate_command_needs_the_writer_rollout_and_prints_what_it_wrote() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await;
    });
    let home = Home::on(Some(&redis));
    let before = redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
    let ran = home.cli(&["migrate", "b"]);
    assert_ne!(ran.code, 0);
    assert!(
        ran.stderr.contains(
            "upgrade every live fencing reader and writer before migrating to per record keys"
        ),
        "{}",
        ran.stderr
    );
    assert_eq!(
        redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]),
        before,
        "nothing written"
    );
    assert_eq!(
        redis
            .cli(&["EXISTS", "rowfence:board:{b}:fence:claims"])
            .trim(),
        "0"
    );
    let ran = home.cli(&["migrate", "b", "--writers-upgraded"]);
    assert_eq!((ran.code, ran.stdout.trim()), (0, "7"), "{}", ran.stderr);
    let ran = home.cli(&["migrate", "b", "--writers-upgraded", "--json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        ran.json(),
        serde_json::json!({"board": "b", "written": 0, "from": "document", "to": "records"})
    );
    // A file store has nothing to migrate in place.
    let file_home = Home::file();
    let ran = file_home.cli(&["migrate", "b", "--writers-upgraded"]);
    assert_ne!(ran.code, 0);
}

#[test]
fn a_document_board_on_redis_is_fenced_through_the_daemon_before_and_after_the_move() {
    let redis = Redis::start();
    let generation = runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await
    });
    // Every verdict recorded, so the stream shows each ask was judged and recorded once.
    let home = Home::with_store(format!("{}?asks=all", redis.url()));
    let d = home.path("a.json");
    std::fs::write(
        &d,
        json!({"board": "b", "row": "row-1", "lane": "lane-a", "generation": generation, "token": crate::util::TEST_TOKEN.expose()})
            .to_string(),
    )
    .unwrap();
    let _daemon = home.daemon();
    home.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    let other = home.path("b.json");
    std::fs::write(
        &other,
        json!({"board": "b", "row": "row-2", "lane": "lane-a", "generation": generation, "token": crate::util::TEST_TOKEN.expose()})
            .to_string(),
    )
    .unwrap();
    home.ask_with(&other, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    assert_eq!(home.cli(&["migrate", "b", "--writers-upgraded"]).code, 0);
    home.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    home.ask_with(&other, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    let asks = redis.cli(&["XLEN", "rowfence:board:{b}:fence:asks"]);
    assert_eq!(asks.trim(), "4", "every verdict is in the asks stream");
}

#[test]
fn a_board_grows_from_the_file_store_into_redis_and_the_file_refuses_afterwards() {
    let redis = Redis::start();
    let file_home = Home::file();
    let (generation, a) = file_home.acquire("b", "row-1", "lane-a", &[]);
    file_home.acquire("b", "row-2", "lane-b", &[]);
    let file_daemon = file_home.daemon();
    file_home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let url = redis.url();
    let ran = file_home.cli(&["migrate", "b", "--from", "file", "--to", &url]);
    assert_ne!(ran.code, 0, "needs --writers-upgraded");
    let ran = file_home.cli(&[
        "migrate",
        "b",
        "--from",
        "file",
        "--to",
        &url,
        "--writers-upgraded",
    ]);
    assert_eq!(
        (ran.code, ran.stdout.trim()),
        (0, "3"),
        "two leases and the layout marker: {}",
        ran.stderr
    );
    let ran = file_home.cli(&[
        "migrate",
        "b",
        "--from",
        "file",
        "--to",
        &url,
        "--writers-upgraded",
        "--json",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        ran.json(),
        serde_json::json!({"board": "b", "written": 0, "from": "file", "to": "records"})
    );
    // The daemon still on the file refuses with a clear message instead of stale leases.
    let ran = file_home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ");
    assert!(ran.stderr.contains("moved to"), "{}", ran.stderr);
    drop(file_daemon);
    // The same descriptor is allowed by a daemon on Redis: the generation moved with it.
    let redis_home = Home::on(Some(&redis));
    let _daemon = redis_home.daemon();
    redis_home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let shown = redis_home.cli(&["show", "b", "--json"]);
    let leases: Vec<Value> = serde_json::from_str(shown.stdout.trim()).unwrap();
    assert_eq!(leases.len(), 2);
    assert_eq!(leases[0]["generation"].as_u64(), Some(generation));
}

fn calls(redis: &Redis, command: &str) -> u64 {
    redis.command_calls(command)
}

fn ask_check(row: &str, lane: &str, generation: u64) -> AskCheck {
    AskCheck {
        board: "b".into(),
        row: row.into(),
        lane: lane.into(),
        generation,
        token: Some(crate::util::TEST_TOKEN.clone()),
        ..AskCheck::default()
    }
}

/// An ask is one call whatever the board's layout, and nothing about the layout is
/// remembered between asks: every ask is the records ask script, which judges the row's
/// record or, on a board that still has a document (checked in the same script), hands
/// the document back to be judged. A migration is seen by the very next ask.
#[test]
fn an_ask_is_one_call_whatever_the_boards_layout() {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        let generation = document_board(&store).await;
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        store.ping().await.unwrap();
        redis.cli(&["CONFIG", "RESETSTAT"]);
        for _ in 0..5 {
            let asked = store
                .ask(&ask_check("row-1", "lane-a", generation))
                .await
                .unwrap();
            assert_eq!(asked.refusal, None);
        }
        assert_eq!(
            (
                calls(&redis, "evalsha"),
                calls(&redis, "hget"),
                calls(&redis, "time")
            ),
            (5, 15, 5),
            "one script call per ask (its own TIME and HGETs: the claim, the document, the layout marker)"
        );
        assert_eq!(calls(&redis, "xadd"), 0, "an ALLOWED ask records nothing");
        // The script is declared writing: a primary short of replicas refuses it.
        redis.cli(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
        let deposed = store
            .ask(&ask_check("row-1", "lane-a", generation))
            .await
            .unwrap_err();
        assert!(deposed.to_string().contains("NOREPLICAS"), "{deposed}");
        redis.cli(&["CONFIG", "SET", "min-replicas-to-write", "0"]);

        migrate::document_to_records(&store, "b").await.unwrap();
        redis.cli(&["CONFIG", "RESETSTAT"]);
        for _ in 0..5 {
            let asked = store
                .ask(&ask_check("row-1", "lane-a", generation))
                .await
                .unwrap();
            assert_eq!(asked.refusal, None);
        }
        let total: u64 = ["evalsha", "hget", "time", "get", "xadd", "hexists"]
            .iter()
            .map(|c| calls(&redis, c))
            .sum();
        assert_eq!(
            (calls(&redis, "evalsha"), total - calls(&redis, "evalsha")),
            (5, 5 * 3),
            "a records board: the script alone (TIME, HGET, GET inside it)"
        );
    });
}

/// Fail closed: a migration while the daemon runs never leaves it answering from the
/// document. The daemon answers board b from its document; the board is migrated and
/// lane-b takes row-1 over on the records (the moved document still names lane-a): lane-a
/// is refused. Then the store is restored to the document (its revision below what this
/// home has seen: COULD NOT READ), and then to the records without any document: this
/// home, which found the board behind, stays COULD NOT READ until an operator accepts, and
/// a home that saw nothing is refused from the records.
#[test]
fn a_migration_while_the_daemon_runs_is_seen_by_its_next_ask_and_never_answered_from_the_document()
{
    let redis = Redis::start();
    let generation = runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        document_board(&store).await
    });
    let home = Home::on(Some(&redis));
    let a = home.path("a.json");
    std::fs::write(
        &a,
        json!({"board": "b", "row": "row-1", "lane": "lane-a", "generation": generation, "token": crate::util::TEST_TOKEN.expose()})
            .to_string(),
    )
    .unwrap();
    let _daemon = home.daemon();
    for _ in 0..3 {
        home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    }
    let ran = home.cli(&["migrate", "b", "--writers-upgraded"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let (_, b) = home.acquire("b", "row-1", "lane-b", &["--takeover"]);
    let moved = redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
    assert!(
        moved.contains("lane-a") && moved.contains("moved_to"),
        "the moved document still names lane-a: {moved}"
    );
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");

    // A store restored from a snapshot taken before the move: the old document, no
    // marker, no records. The ask script finds the document, whose revision is below what
    // this home has seen: never ALLOWED.
    let restored = moved.trim().replace(",\"moved_to\":\"records\"", "");
    assert!(!restored.contains("moved_to"), "{restored}");
    let marker = redis.cli(&["HGET", "rowfence:board:{b}:fence:meta", "layout"]);
    redis.cli(&["HDEL", "rowfence:board:{b}:fence:meta", "layout"]);
    redis.cli(&[
        "RENAME",
        "rowfence:board:{b}:fence:claims",
        "rowfence:board:{b}:fence:parked",
    ]);
    redis.cli(&["HSET", "rowfence:state:fencing:current", "b", &restored]);
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    // Restored again, to the records without any document: the records answer.
    redis.cli(&[
        "RENAME",
        "rowfence:board:{b}:fence:parked",
        "rowfence:board:{b}:fence:claims",
    ]);
    redis.cli(&[
        "HSET",
        "rowfence:board:{b}:fence:meta",
        "layout",
        marker.trim(),
    ]);
    redis.cli(&["HDEL", "rowfence:state:fencing:current", "b"]);
    // This home found the board behind what it had seen: it stays so until an operator
    // accepts, however the store looks now. A home that saw nothing is answered from the
    // records, never from the document.
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let fresh = Home::on(Some(&redis));
    let _fresh_daemon = fresh.daemon();
    fresh
        .ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    fresh.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
}
