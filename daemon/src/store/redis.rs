//! The production store: Redis per-record keys (the `records` layout). Every key of a
//! board carries the hash tag `{<board>}`, so one script reads and writes all of them on
//! standalone Redis/Valkey and on Redis Cluster alike (DESIGN.md, key layout):
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `P:board:{B}:fence:meta` | hash | `lease`, `epoch`, `layout` as records |
//! | `P:board:{B}:fence:<section>` | hash | one field per record: `{"r":<revision>,"v":<value>}` |
//! | `P:board:{B}:fence:revision` | string | the board revision |
//! | `P:board:{B}:fence:log` | stream | one entry per committed batch, capped at `LOG_CAP` |
//! | `P:board:{B}:fence:asks` | stream | one entry per verdict, capped at `ASKS_CAP` |
//!
//! One connection: a multiplexed, auto-reconnecting `ConnectionManager`, created lazily so
//! the daemon starts and listens while Redis is down. The two scripts go through
//! `redis::Script` (EVALSHA with a fallback on NOSCRIPT), so a flushed script cache heals
//! on the next call.

use super::document::{parse_row_lease, validate_batch};
use super::{
    ASKS_CAP, AskCheck, FencedBatch, Judgement, LOG_CAP, LeaseStore, META, Record, Snapshot,
    StoreError, WriteKind,
};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script, Value};
use row_fence_ask::Reason;
use row_fence_ask::descriptor::validate_board;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default key prefix (`ROW_FENCE_KEY_PREFIX`).
pub const DEFAULT_KEY_PREFIX: &str = "rowfence";

const FENCED_BATCH_LUA: &str = include_str!("lua/fenced_batch.lua");
const ASK_LUA: &str = include_str!("lua/ask.lua");

/// Each connection attempt gives up after this long; asks are bounded by their own
/// deadline anyway, this only keeps a dead server from pinning the reconnect task.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis records adapter.
#[derive(Clone)]
pub struct RedisStore {
    /// The one multiplexed connection; clones share it.
    connection: ConnectionManager,
    /// The URL with any password redacted, for status and logs.
    redacted: String,
    /// The key prefix `P`.
    prefix: Arc<str>,
    /// The fenced batch script, hashed once.
    batch_script: Arc<Script>,
    /// The ask script, hashed once.
    ask_script: Arc<Script>,
    /// Calls that failed because the connection was lost or refused: each one makes the
    /// manager reconnect, so this counts reconnects.
    connection_losses: Arc<AtomicU64>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.redacted)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// The keys of one board.
#[derive(Clone, Debug)]
pub struct BoardKeys {
    /// `P:board:{B}:fence:`
    base: String,
}

impl BoardKeys {
    /// The keys of `board` under `prefix`.
    pub fn new(prefix: &str, board: &str) -> BoardKeys {
        BoardKeys {
            base: format!("{prefix}:board:{{{board}}}:fence:"),
        }
    }
    /// A section's hash (`meta` included).
    pub fn section(&self, name: &str) -> String {
        format!("{}{name}", self.base)
    }
    /// The board revision counter.
    pub fn revision(&self) -> String {
        self.section("revision")
    }
    /// The fence log stream.
    pub fn log(&self) -> String {
        self.section("log")
    }
    /// The asks stream.
    pub fn asks(&self) -> String {
        self.section("asks")
    }
}

impl RedisStore {
    /// Prepares a store for `url` without connecting (the first call connects).
    pub fn open(url: &str, prefix: &str) -> Result<RedisStore, StoreError> {
        let redacted = super::spec::redact(url);
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::Invalid(format!("store {redacted}: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| StoreError::Invalid(format!("store {redacted}: {e}")))?;
        Ok(RedisStore {
            connection,
            redacted,
            prefix: prefix.into(),
            batch_script: Arc::new(Script::new(FENCED_BATCH_LUA)),
            ask_script: Arc::new(Script::new(ASK_LUA)),
            connection_losses: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The keys of a board.
    pub fn keys(&self, board: &str) -> BoardKeys {
        BoardKeys::new(&self.prefix, board)
    }

    /// How many calls found the connection lost or refused (each makes the manager
    /// reconnect).
    pub fn connection_losses(&self) -> u64 {
        self.connection_losses.load(Ordering::Relaxed)
    }

    fn conn(&self) -> ConnectionManager {
        self.connection.clone()
    }

    fn map_err(&self, e: RedisError) -> StoreError {
        match e.code() {
            Some("FENCE_STALE") => StoreError::StaleLease(e.detail().unwrap_or("").to_string()),
            Some("FENCE_CONFLICT") => StoreError::RevisionConflict {
                key: e.detail().unwrap_or("").to_string(),
            },
            _ => {
                if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
                    self.connection_losses.fetch_add(1, Ordering::Relaxed);
                }
                StoreError::Unreachable(format!("{}: {e}", self.redacted))
            }
        }
    }
}

fn check_board(board: &str) -> Result<(), StoreError> {
    validate_board(board).map_err(|e| StoreError::Invalid(e.to_string()))
}

fn parse_record(raw: &str) -> Result<Record, StoreError> {
    serde_json::from_str(raw)
        .map_err(|e| StoreError::Corrupt(format!("a record is not {{\"r\",\"v\"}}: {e}")))
}

fn time_ms(time: &[String]) -> Result<u64, StoreError> {
    let parse = |i: usize| time.get(i).and_then(|t| t.parse::<u64>().ok());
    match (parse(0), parse(1)) {
        (Some(s), Some(us)) => Ok(s * 1000 + us / 1000),
        _ => Err(StoreError::Corrupt(format!("TIME answered {time:?}"))),
    }
}

fn decode<T: redis::FromRedisValue>(value: Value) -> Result<T, StoreError> {
    redis::from_redis_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[async_trait]
impl LeaseStore for RedisStore {
    async fn layout(&self, board: &str) -> Result<String, StoreError> {
        check_board(board)?;
        let raw: Option<String> = redis::cmd("HGET")
            .arg(self.keys(board).section(META))
            .arg("layout")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        match raw {
            None => Ok(String::new()),
            Some(raw) => Ok(parse_record(&raw)?
                .value
                .as_str()
                .unwrap_or_default()
                .to_string()),
        }
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        check_board(board)?;
        let keys = self.keys(board);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("TIME").cmd("GET").arg(keys.revision());
        for name in names {
            pipe.cmd("HGETALL").arg(keys.section(name));
        }
        let mut replies: Vec<Value> = pipe
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        if replies.len() != names.len() + 2 {
            return Err(StoreError::Corrupt("a short pipeline answer".into()));
        }
        let hashes = replies.split_off(2);
        let revision: Option<u64> = decode(replies.pop().unwrap_or(Value::Nil))?;
        let time: Vec<String> = decode(replies.pop().unwrap_or(Value::Nil))?;
        let mut sections = BTreeMap::new();
        for (name, hash) in names.iter().zip(hashes) {
            let fields: HashMap<String, String> = decode(hash)?;
            let section = fields
                .into_iter()
                .map(|(k, raw)| Ok((k, parse_record(&raw)?)))
                .collect::<Result<_, StoreError>>()?;
            sections.insert(name.to_string(), section);
        }
        Ok(Snapshot {
            revision: revision.unwrap_or(0),
            now_ms: time_ms(&time)?,
            sections,
        })
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        check_board(board)?;
        let raw: Option<String> = redis::cmd("HGET")
            .arg(self.keys(board).section(section))
            .arg(key)
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        raw.map(|r| parse_record(&r)).transpose()
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        check_board(board)?;
        validate_batch(batch)?;
        let keys = self.keys(board);
        let mut invocation = self.batch_script.prepare_invoke();
        invocation
            .key(keys.section(META))
            .key(keys.revision())
            .key(keys.log());
        let mut section_index: HashMap<&str, usize> = HashMap::new();
        for write in &batch.writes {
            let next = 4 + section_index.len();
            if let std::collections::hash_map::Entry::Vacant(slot) =
                section_index.entry(&write.section)
            {
                slot.insert(next);
                invocation.key(keys.section(&write.section));
            }
        }
        let header = serde_json::json!({
            "fence": batch.lease.as_ref().map(|f| serde_json::json!({
                "owner": f.owner, "epoch": f.epoch, "now_ms": f.now_ms,
            })),
            "expected_revision": batch.expected_revision,
            "owner": batch.lease.as_ref().map(|f| f.owner.as_str()).unwrap_or(""),
            "log_cap": LOG_CAP,
        });
        invocation.arg(header.to_string());
        for write in &batch.writes {
            let kind = match write.kind {
                WriteKind::Put => "put",
                WriteKind::Delete => "delete",
                WriteKind::Check => "check",
            };
            let value = match write.kind {
                WriteKind::Put => serde_json::to_string(&write.value)
                    .map_err(|e| StoreError::Invalid(e.to_string()))?,
                _ => String::new(),
            };
            invocation
                .arg(kind)
                .arg(section_index[write.section.as_str()])
                .arg(&write.key)
                .arg(write.expected)
                .arg(value);
        }
        invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        check_board(&check.board)?;
        let keys = self.keys(&check.board);
        let (outcome, now_ms, raw): (String, u64, String) = self
            .ask_script
            .key(keys.section(super::CLAIMS))
            .key(keys.asks())
            .arg(&check.row)
            .arg(&check.lane)
            .arg(check.generation)
            .arg(&check.action)
            .arg(&check.session)
            .arg(ASKS_CAP)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        if outcome == "malformed" {
            return Err(StoreError::Corrupt(format!(
                "the claims record of row {} is not a row lease",
                check.row
            )));
        }
        let refusal =
            match outcome.as_str() {
                "allowed" => None,
                other => Some(Reason::parse(other).filter(|r| r.is_refusal()).ok_or_else(
                    || StoreError::Corrupt(format!("the ask script answered {other:?}")),
                )?),
            };
        let lease = if raw.is_empty() {
            None
        } else {
            Some(parse_row_lease(&parse_record(&raw)?.value)?)
        };
        Ok(Judgement {
            refusal,
            lease,
            now_ms,
        })
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        Ok(())
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        let time: Vec<String> = redis::cmd("TIME")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        time_ms(&time)
    }

    fn describe(&self) -> String {
        self.redacted.clone()
    }
}
