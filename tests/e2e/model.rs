//! A model-based property test (proptest state machine): random sequences of fenced
//! batches against each adapter and against a deliberately simple in-memory model agree
//! on every result and on the state after every step. On etcd every case runs under its
//! own key prefix of one 3-member cluster (a cluster per case would cost seconds each).

use crate::contract::runtime;
use crate::util::Redis;
use proptest::prelude::*;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{FencedBatch, LeaseFence, LeaseStore, RecordWrite, StoreError, WriteKind};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const SECTIONS: &[&str] = &["s", "t", "meta"];
const KEYS: &[&str] = &["a", "b", "lease"];

/// The model: a revision and a map, with the rules written out plainly.
#[derive(Clone, Debug, Default)]
pub struct Model {
    revision: u64,
    records: BTreeMap<(String, String), (u64, Value)>,
    /// What the last batch should have returned.
    last: Option<Outcome>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Committed(u64),
    Conflict(String),
    Stale,
}

impl Model {
    fn apply(&mut self, batch: &FencedBatch) -> Outcome {
        if let Some(fence) = &batch.lease {
            let lease = self
                .records
                .get(&("meta".into(), "lease".into()))
                .map(|(_, v)| v.clone());
            let ok = lease.is_some_and(|l| {
                (fence.owner.is_empty() || l["owner"] == fence.owner)
                    && l["epoch"].as_u64() == Some(fence.epoch)
                    && l["expires_at_ms"]
                        .as_u64()
                        .is_some_and(|e| e > fence.now_ms)
            });
            if !ok {
                return Outcome::Stale;
            }
        }
        for w in &batch.writes {
            if w.expected == -1 {
                continue;
            }
            let have = self
                .records
                .get(&(w.section.clone(), w.key.clone()))
                .map_or(0, |(r, _)| *r as i64);
            if have != w.expected {
                return Outcome::Conflict(format!("{}/{}", w.section, w.key));
            }
        }
        self.revision += 1;
        for w in &batch.writes {
            let key = (w.section.clone(), w.key.clone());
            match w.kind {
                WriteKind::Put => {
                    self.records.insert(key, (self.revision, w.value.clone()));
                }
                WriteKind::Delete => {
                    self.records.remove(&key);
                }
                WriteKind::Check => {}
            }
        }
        Outcome::Committed(self.revision)
    }
}

fn write_strategy(model: &Model) -> impl Strategy<Value = RecordWrite> + use<> {
    let revisions: Vec<i64> = model.records.values().map(|(r, _)| *r as i64).collect();
    let revision = model.revision as i64;
    (
        prop_oneof![
            Just(WriteKind::Put),
            Just(WriteKind::Delete),
            Just(WriteKind::Check)
        ],
        prop::sample::select(SECTIONS),
        prop::sample::select(KEYS),
        prop_oneof![
            Just(-1i64),
            Just(0i64),
            prop::sample::select(if revisions.is_empty() {
                vec![0]
            } else {
                revisions
            }),
            0..=revision + 1,
        ],
        prop_oneof![
            (0i64..5).prop_map(|n| json!(n)),
            ("[a-z]{0,3}", 1u64..4, 900u64..1100)
                .prop_map(|(o, e, x)| json!({"owner": o, "epoch": e, "expires_at_ms": x})),
        ],
    )
        .prop_map(|(kind, section, key, expected, value)| RecordWrite {
            kind,
            section: section.to_string(),
            key: key.to_string(),
            expected,
            value: if kind == WriteKind::Put {
                value
            } else {
                Value::Null
            },
        })
}

pub struct BatchMachine;

impl ReferenceStateMachine for BatchMachine {
    type State = Model;
    type Transition = FencedBatch;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<FencedBatch> {
        let fence = prop::option::of(("[a-z]{0,1}", 1u64..4, 900u64..1100).prop_map(
            |(owner, epoch, now_ms)| LeaseFence {
                owner,
                epoch,
                now_ms,
            },
        ));
        (prop::collection::vec(write_strategy(state), 1..5), fence)
            .prop_map(|(writes, lease)| FencedBatch {
                writes,
                lease,
                ..FencedBatch::default()
            })
            .boxed()
    }

    fn apply(mut state: Model, batch: &FencedBatch) -> Model {
        state.last = Some(state.apply(batch));
        state
    }
}

/// Which adapter a model test drives.
pub trait Adapter: 'static {
    fn open() -> Sut;
}

/// The system under test: an adapter on a fresh store, with its runtime.
pub struct Sut {
    rt: tokio::runtime::Runtime,
    store: Box<dyn LeaseStore>,
    _keep: Box<dyn std::any::Any>,
}

pub struct File;
pub struct RedisRecordsAdapter;
pub struct RedisDocumentAdapter;

impl Adapter for File {
    fn open() -> Sut {
        let dir = tempfile::tempdir().unwrap();
        let store = Box::new(FileStore::new(dir.path().join("store")));
        Sut {
            rt: runtime(),
            store,
            _keep: Box::new(dir),
        }
    }
}

fn redis_sut(document: bool) -> Sut {
    let redis = Redis::start();
    let rt = runtime();
    let store = rt.block_on(async { RedisStore::open(&redis.url(), "rowfence").unwrap() });
    let store: Box<dyn LeaseStore> = if document {
        Box::new(store.document().clone())
    } else {
        Box::new(store.records().clone())
    };
    Sut {
        rt,
        store,
        _keep: Box::new(redis),
    }
}

impl Adapter for RedisRecordsAdapter {
    fn open() -> Sut {
        redis_sut(false)
    }
}

impl Adapter for RedisDocumentAdapter {
    fn open() -> Sut {
        redis_sut(true)
    }
}

/// The etcd cluster's URL while [`etcd_agrees_with_the_model`] runs.
static ETCD_URL: Mutex<Option<String>> = Mutex::new(None);

/// The next case's key prefix on etcd.
static ETCD_CASE: AtomicUsize = AtomicUsize::new(0);

pub struct EtcdAdapter;

impl Adapter for EtcdAdapter {
    fn open() -> Sut {
        let url = ETCD_URL
            .lock()
            .unwrap()
            .clone()
            .expect("the etcd cluster is up");
        let prefix = format!("model{}", ETCD_CASE.fetch_add(1, Ordering::Relaxed));
        let store = row_fence_store::etcd::EtcdStore::open(&url, &prefix).unwrap();
        Sut {
            rt: runtime(),
            store: Box::new(store),
            _keep: Box::new(()),
        }
    }
}

pub struct AgreesWithTheModel<A>(PhantomData<A>);

impl<A: Adapter> StateMachineTest for AgreesWithTheModel<A> {
    type SystemUnderTest = Sut;
    type Reference = BatchMachine;

    fn init_test(_: &Model) -> Sut {
        A::open()
    }

    fn apply(sut: Sut, model: &Model, batch: FencedBatch) -> Sut {
        let got = sut.rt.block_on(sut.store.fenced_batch("m", &batch));
        let got = match got {
            Ok(revision) => Outcome::Committed(revision),
            Err(StoreError::RevisionConflict { key }) => Outcome::Conflict(key),
            Err(StoreError::StaleLease(_)) => Outcome::Stale,
            Err(other) => panic!("unexpected store error {other:?} for {batch:?}"),
        };
        assert_eq!(Some(&got), model.last.as_ref(), "{batch:?}");
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        let snapshot = sut.rt.block_on(sut.store.sections("m", SECTIONS)).unwrap();
        let stored: BTreeMap<(String, String), (u64, Value)> = snapshot
            .sections
            .into_iter()
            .flat_map(|(s, records)| {
                records
                    .into_iter()
                    .map(move |(k, r)| ((s.clone(), k), (r.revision, r.value)))
            })
            .collect();
        assert_eq!(snapshot.revision, model.revision);
        assert_eq!(stored, model.records);
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn the_file_store_agrees_with_the_model(sequential 1..24 => AgreesWithTheModel<File>);

    #[test]
    fn redis_records_agree_with_the_model(sequential 1..24 => AgreesWithTheModel<RedisRecordsAdapter>);

    #[test]
    fn the_redis_document_agrees_with_the_model(sequential 1..24 => AgreesWithTheModel<RedisDocumentAdapter>);
}

/// The model test on a real 3-member etcd cluster, one cluster for every case (16 cases of
/// up to 24 batches: a few seconds).
#[test]
fn etcd_agrees_with_the_model() {
    let cluster = crate::etcd_cluster::EtcdCluster::start_direct();
    *ETCD_URL.lock().unwrap() = Some(cluster.url());
    let config = ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config.clone());
    let result = runner.run(
        &BatchMachine::sequential_strategy(1..24),
        |(initial, transitions, seen)| {
            AgreesWithTheModel::<EtcdAdapter>::test_sequential(
                config.clone(),
                initial,
                transitions,
                seen,
            );
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("etcd disagrees with the model: {e}");
    }
    let cases = ETCD_CASE.load(Ordering::Relaxed);
    eprintln!("etcd: {cases} cases agreed with the model");
    assert!(cases >= 16, "{cases} cases ran");
}
