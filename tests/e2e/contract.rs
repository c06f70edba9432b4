//! The records port's contract, run against every adapter: Redis per-record keys, the
//! Redis whole document, the embedded file document (and the Redis router). Each
//! scenario is one test per adapter.

use crate::util::Redis;
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{
    BLIND, ControllerLease, FencedBatch, LeaseFence, LeaseStore, META, RecordWrite, StoreError,
    WriteKind,
};
use serde_json::{Value, json};

/// Runs `scenario(store)` on a fresh board store of each adapter.
macro_rules! on_every_adapter {
    ($($name:ident),* $(,)?) => {
        mod file { $( #[test] fn $name() { crate::contract::with_file(|s| Box::pin(super::$name(s))) } )* }
        mod redis_records { $( #[test] fn $name() { crate::contract::with_redis(|r| r.records(), |s| Box::pin(super::$name(s))) } )* }
        mod redis_document { $( #[test] fn $name() { crate::contract::with_redis(|r| r.document(), |s| Box::pin(super::$name(s))) } )* }
        mod redis_routed { $( #[test] fn $name() { crate::contract::with_redis(|r| r, |s| Box::pin(super::$name(s))) } )* }

        /// Every scenario by name, for an adapter that runs them all on one server (etcd:
        /// one cluster, a key prefix per scenario).
        pub fn scenarios() -> Vec<(&'static str, Scenario)> {
            vec![$((stringify!($name), (|s| Box::pin($name(s))) as Scenario)),*]
        }
    };
}

pub type Scenario =
    for<'a> fn(&'a dyn LeaseStore) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>>;

/// A current-thread runtime for one test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn with_file(scenario: Scenario) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("store"));
    runtime().block_on(scenario(&store));
}

pub fn with_redis(pick: for<'a> fn(&'a RedisStore) -> &'a dyn LeaseStore, scenario: Scenario) {
    let redis = Redis::start();
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        scenario(pick(&store)).await;
    });
}

pub fn put(section: &str, key: &str, expected: i64, value: Value) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Put,
        section: section.into(),
        key: key.into(),
        expected,
        value,
    }
}

pub fn delete(section: &str, key: &str, expected: i64) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Delete,
        section: section.into(),
        key: key.into(),
        expected,
        value: Value::Null,
    }
}

pub fn check(section: &str, key: &str, expected: i64) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Check,
        section: section.into(),
        key: key.into(),
        expected,
        value: Value::Null,
    }
}

pub fn batch(writes: Vec<RecordWrite>) -> FencedBatch {
    FencedBatch {
        writes,
        lease: None,
        ..FencedBatch::default()
    }
}

/// Every record of the sections `names`, with the board revision.
async fn state(store: &dyn LeaseStore, names: &[&str]) -> (u64, Vec<(String, String, u64, Value)>) {
    let snapshot = store.sections("b", names).await.unwrap();
    let records = snapshot
        .sections
        .iter()
        .flat_map(|(s, records)| {
            records
                .iter()
                .map(move |(k, r)| (s.clone(), k.clone(), r.revision, r.value.clone()))
        })
        .collect();
    (snapshot.revision, records)
}

on_every_adapter!(
    puts_deletes_and_checks_commit_at_one_revision_each,
    expected_zero_means_absent_and_blind_skips_the_check,
    a_conflict_names_the_first_mismatching_key_and_writes_nothing,
    a_stale_lease_writes_nothing,
    a_current_lease_fence_commits,
    an_absent_board_reads_empty_at_revision_zero,
);

async fn puts_deletes_and_checks_commit_at_one_revision_each(store: &dyn LeaseStore) {
    assert_eq!(
        store
            .fenced_batch(
                "b",
                &batch(vec![
                    put("s", "a", 0, json!({"n": 1})),
                    put("s", "b", 0, json!("x"))
                ])
            )
            .await,
        Ok(1)
    );
    assert_eq!(
        state(store, &["s"]).await,
        (
            1,
            vec![
                ("s".into(), "a".into(), 1, json!({"n": 1})),
                ("s".into(), "b".into(), 1, json!("x"))
            ]
        )
    );
    assert_eq!(
        store
            .fenced_batch("b", &batch(vec![check("s", "b", 1), delete("s", "a", 1)]))
            .await,
        Ok(2)
    );
    assert_eq!(
        state(store, &["s"]).await,
        (2, vec![("s".into(), "b".into(), 1, json!("x"))])
    );
    assert_eq!(
        store
            .fenced_batch("b", &batch(vec![put("s", "b", 1, json!("y"))]))
            .await,
        Ok(3)
    );
    let record = store.record("b", "s", "b").await.unwrap().unwrap();
    assert_eq!((record.revision, record.value), (3, json!("y")));
    assert_eq!(store.record("b", "s", "a").await.unwrap(), None);
    assert_eq!(
        store
            .log("b", 10)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.revision, e.records))
            .collect::<Vec<_>>(),
        vec![(3, 1), (2, 2), (1, 2)]
    );
    assert_eq!(
        store.section_names("b").await.unwrap(),
        vec!["s".to_string()]
    );
}

async fn expected_zero_means_absent_and_blind_skips_the_check(store: &dyn LeaseStore) {
    assert_eq!(
        store
            .fenced_batch("b", &batch(vec![put("s", "k", 0, json!(1))]))
            .await,
        Ok(1)
    );
    // Absent is 0: expecting 0 on a present record conflicts.
    assert!(
        store
            .fenced_batch("b", &batch(vec![put("s", "k", 0, json!(2))]))
            .await
            .unwrap_err()
            .is_conflict()
    );
    // Blind writes whatever the revision.
    assert_eq!(
        store
            .fenced_batch("b", &batch(vec![put("s", "k", BLIND, json!(3))]))
            .await,
        Ok(2)
    );
    assert_eq!(
        store
            .fenced_batch(
                "b",
                &batch(vec![check("s", "never", 0), delete("s", "k", BLIND)])
            )
            .await,
        Ok(3)
    );
    assert_eq!(state(store, &["s"]).await, (3, vec![]));
}

async fn a_conflict_names_the_first_mismatching_key_and_writes_nothing(store: &dyn LeaseStore) {
    store
        .fenced_batch(
            "b",
            &batch(vec![put("s", "a", 0, json!(1)), put("t", "x", 0, json!(1))]),
        )
        .await
        .unwrap();
    let before = state(store, &["s", "t"]).await;
    let bad = batch(vec![
        put("s", "new", 0, json!(9)),
        check("s", "a", 1),
        put("t", "x", 7, json!(9)),
        delete("s", "a", 5),
    ]);
    assert_eq!(
        store.fenced_batch("b", &bad).await,
        Err(StoreError::RevisionConflict { key: "t/x".into() })
    );
    assert_eq!(state(store, &["s", "t"]).await, before);
    let mut pinned = batch(vec![put("s", "new", 0, json!(9))]);
    pinned.expected_revision = Some(0);
    assert_eq!(
        store.fenced_batch("b", &pinned).await,
        Err(StoreError::RevisionConflict {
            key: "revision".into()
        })
    );
    assert_eq!(state(store, &["s", "t"]).await, before);
}

fn fenced(writes: Vec<RecordWrite>, owner: &str, epoch: u64, now_ms: u64) -> FencedBatch {
    FencedBatch {
        writes,
        lease: Some(LeaseFence {
            owner: owner.into(),
            epoch,
            now_ms,
        }),
        ..FencedBatch::default()
    }
}

async fn a_stale_lease_writes_nothing(store: &dyn LeaseStore) {
    // No lease at all.
    let err = store
        .fenced_batch(
            "b",
            &fenced(vec![put("s", "k", BLIND, json!(1))], "c1", 1, 10),
        )
        .await
        .unwrap_err();
    assert!(err.is_stale_lease(), "{err:?}");
    let lease = ControllerLease {
        owner: "c1".into(),
        epoch: 4,
        expires_at_ms: 1_000,
    };
    store
        .fenced_batch("b", &batch(vec![put(META, "lease", 0, json!(lease))]))
        .await
        .unwrap();
    let before = state(store, &["s", META]).await;
    for (owner, epoch, now, why) in [
        ("c2", 4, 10, "wrong owner"),
        ("c1", 3, 10, "wrong epoch"),
        ("", 5, 10, "wrong epoch, no owner"),
        ("c1", 4, 1_000, "expired at now"),
        ("c1", 4, 2_000, "expired before now"),
    ] {
        let err = store
            .fenced_batch(
                "b",
                &fenced(vec![put("s", "k", BLIND, json!(1))], owner, epoch, now),
            )
            .await
            .unwrap_err();
        assert!(err.is_stale_lease(), "{why}: {err:?}");
        assert_eq!(state(store, &["s", META]).await, before, "{why}");
    }
}

async fn a_current_lease_fence_commits(store: &dyn LeaseStore) {
    let lease = ControllerLease {
        owner: "c1".into(),
        epoch: 4,
        expires_at_ms: 1_000,
    };
    store
        .fenced_batch("b", &batch(vec![put(META, "lease", 0, json!(lease))]))
        .await
        .unwrap();
    assert_eq!(
        store
            .fenced_batch("b", &fenced(vec![put("s", "k", 0, json!(1))], "c1", 4, 999))
            .await,
        Ok(2)
    );
    assert_eq!(
        store
            .fenced_batch("b", &fenced(vec![put("s", "k", 2, json!(2))], "", 4, 999))
            .await,
        Ok(3)
    );
    assert_eq!(store.log("b", 1).await.unwrap()[0].owner, "");
    assert_eq!(store.log("b", 2).await.unwrap()[1].owner, "c1");
}

async fn an_absent_board_reads_empty_at_revision_zero(store: &dyn LeaseStore) {
    let snapshot = store.sections("b", &["claims", META]).await.unwrap();
    assert_eq!(snapshot.revision, 0);
    assert!(snapshot.sections.values().all(|s| s.is_empty()));
    assert!(
        snapshot.now_ms > 1_700_000_000_000,
        "the store's clock in ms"
    );
    assert_eq!(store.record("b", "claims", "r").await.unwrap(), None);
    assert!(store.log("b", 5).await.unwrap().is_empty());
    let bad = store
        .fenced_batch("b", &batch(vec![put("revision", "k", 0, json!(1))]))
        .await
        .unwrap_err();
    assert!(matches!(bad, StoreError::Invalid(_)), "{bad:?}");
    let bad = store.sections("Not A Board", &["s"]).await.unwrap_err();
    assert!(matches!(bad, StoreError::Invalid(_)), "{bad:?}");
}
