//! The `records` layout: per-record keys, written only by the fenced batch script and
//! judged by the ask script (ARCHITECTURE.md, "The lease store"; the fencing-records
//! source). On standalone Redis every script also guards the layout, atomically: a board
//! that still has a document to be migrated is never read or written as records.

use super::keys::StateKeys;
use super::url::AsksLog;
use super::{Shared, check_board, decode, parse_record, time_ms};
use crate::document::{parse_row_lease, validate_batch};
use crate::meta::Layout;
use crate::{
    ASKS_CAP, AskCheck, CLAIMS, FencedBatch, Judgement, Keys, LOG_CAP, LeaseStore, LogEntry, META,
    ReadSet, Record, Snapshot, StoreError, WriteKind,
};
use async_trait::async_trait;
use redis::Value;
use row_fence_contract::{Reason, Verdict};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The records adapter: the one [`super::RedisStore`] serves every board from (and hands
/// a board that still has a document to its document adapter).
#[derive(Clone)]
pub struct RedisRecords {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for RedisRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRecords")
            .field("url", &self.shared.redacted)
            .finish()
    }
}

/// What the ask script found.
pub(super) enum Asked {
    /// Judged from the row's record (or its absence on a board marked as records).
    Judged(Judgement),
    /// No record for the row, the board is not marked as migrated and has a document (only
    /// when the script checks the layout): the ask is judged from it and not recorded yet.
    Document {
        /// The server's clock when the script ran.
        now_ms: u64,
        /// The board's document, verbatim, read by the same script.
        document: String,
    },
}

/// What an ask script's outcome means: `None` for ALLOWED, else the reason it judged
/// ([`super::names::ASK_REASONS`]); anything else is `Corrupt` (a script and its caller
/// disagree).
pub(super) fn outcome_of(outcome: &str) -> Result<Option<Reason>, StoreError> {
    if outcome == Verdict::Allowed.wire_name() {
        return Ok(None);
    }
    super::names::ASK_REASONS
        .into_iter()
        .find(|r| r.as_str() == outcome)
        .map(Some)
        .ok_or_else(|| {
            StoreError::Corrupt(crate::Detail::from(format!(
                "the ask script answered {outcome:?}"
            )))
        })
}

/// A board revision as stored (`''` for a board never written).
fn parse_revision(raw: &str) -> Result<u64, StoreError> {
    if raw.is_empty() {
        return Ok(0);
    }
    raw.parse().map_err(|_| {
        StoreError::Corrupt(crate::Detail::from(format!(
            "the board revision is {raw:?}"
        )))
    })
}

/// True when a stored `{"r","v"}` layout marker names `want`.
pub(super) fn record_value_is(raw: &str, want: Layout) -> bool {
    parse_record(raw).is_ok_and(|r| r.value.as_str() == Some(want.as_str()))
}

impl RedisRecords {
    /// True when the scripts check, atomically, for a document still to be migrated: on
    /// standalone Redis (a cluster serves records only; its document hash would be in
    /// another slot).
    fn guards_layout(&self) -> bool {
        !self.shared.conn.is_cluster()
    }

    /// Runs the ask script once.
    pub(super) async fn ask_records(&self, check: &AskCheck) -> Result<Asked, StoreError> {
        check_board(&check.board)?;
        let s = &self.shared;
        let keys = s.keys(&check.board);
        let mut invocation = s.ask.prepare_invoke();
        invocation
            .key(keys.section(CLAIMS))
            .key(keys.asks())
            .key(keys.section(META))
            .key(keys.revision());
        let route_board = if self.guards_layout() {
            invocation.key(s.state().current());
            check.board.as_str()
        } else {
            ""
        };
        invocation
            .arg(&check.row)
            .arg(&check.lane)
            .arg(check.generation)
            .arg(&check.action)
            .arg(&check.session)
            .arg(if check.probe { 0 } else { ASKS_CAP })
            .arg(route_board)
            .arg(if s.asks == AsksLog::All { "1" } else { "0" });
        if let Some(at) = &check.location {
            let fenced = at
                .fenced
                .map(|r| (Verdict::from_reason(r).wire_name(), r.as_str()));
            let (verdict, reason) = fenced.unwrap_or(("", ""));
            invocation
                .arg(&at.location)
                .arg(at.epoch)
                .arg(verdict)
                .arg(reason);
        }
        let mut pinned = s.pinned().await?;
        let (outcome, now_ms, raw, revision, document): (String, u64, String, String, String) =
            invocation
                .invoke_async(&mut pinned)
                .await
                .map_err(|e| s.map_err(e))?;
        s.barrier(&pinned).await?;
        if outcome == Layout::Document.as_str() {
            return Ok(Asked::Document { now_ms, document });
        }
        let revision = parse_revision(&revision)?;
        let refusal = match outcome_of(&outcome)? {
            None => None,
            Some(Reason::ProtocolError) => {
                return Err(StoreError::Corrupt(crate::Detail::from(format!(
                    "the claims record of row {} is not a row lease",
                    check.row
                ))));
            }
            Some(reason) => Some(reason),
        };
        let lease = if raw.is_empty() {
            None
        } else {
            Some(parse_row_lease(&parse_record(&raw)?.value)?)
        };
        let mut judgement = Judgement {
            refusal,
            lease,
            now_ms,
            revision,
        };
        if judgement.refusal.is_none() {
            // The script judged holder, generation and expiry; the lease token and the
            // margin are judged by the shared rule, on the lease the script returned, and
            // this ask's final verdict is recorded here (the script records none it would
            // allow: an ALLOWED entry followed by a token_mismatch would say a forged
            // descriptor was allowed). A location refusal the script recorded itself.
            judgement.refusal = crate::judge::judge(judgement.lease.as_ref(), check, now_ms);
            let recorded = check.location.as_ref().is_some_and(|l| l.fenced.is_some());
            if !recorded {
                s.record_ask(check, &judgement).await?;
            }
        }
        Ok(Asked::Judged(judgement))
    }

    /// The fenced batch script's keys and arguments for `batch` on `board` (used as an
    /// EVALSHA invocation, and as a plain EVAL inside the migration's transaction).
    pub(super) fn batch_call(
        &self,
        board: &str,
        batch: &FencedBatch,
        moved_document: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>), StoreError> {
        check_board(board)?;
        validate_batch(batch)?;
        let s = &self.shared;
        let keys = s.keys(board);
        let mut call_keys = vec![
            keys.section(META),
            keys.revision(),
            keys.log(),
            keys.sections(),
        ];
        // On standalone Redis the batch stamps the document layout's hash, so a watcher of
        // it (a migration, a document writer) sees records writes too. On a cluster that
        // hash lives in another slot, and the scripts must run unchanged: no stamp.
        let stamp = if s.conn.is_cluster() {
            None
        } else {
            call_keys.push(s.state().current());
            Some(
                serde_json::json!({"key": call_keys.len(), "field": StateKeys::records_field(board)}),
            )
        };
        let mut section_index: HashMap<&str, usize> = HashMap::new();
        for write in &batch.writes {
            if !section_index.contains_key(write.section.as_str()) {
                call_keys.push(keys.section(&write.section));
                section_index.insert(&write.section, call_keys.len());
            }
        }
        let header = serde_json::json!({
            "fence": batch.lease.as_ref().map(|f| serde_json::json!({
                "owner": f.owner, "epoch": f.epoch, "now_ms": f.now_ms,
            })),
            "expected_revision": batch.expected_revision,
            "min_revision": batch.min_revision,
            "document": moved_document.map(|value| serde_json::json!({"field": board, "value": value})),
            "owner": batch.lease.as_ref().map(|f| f.owner.as_str()).unwrap_or(""),
            "log_cap": LOG_CAP,
            "stamp": stamp,
            // The move itself (the migration's batch, which writes the moved document) is the
            // one records write a board with a document takes.
            "route": (self.guards_layout() && moved_document.is_none()).then_some(board),
        });
        let mut args = vec![header.to_string()];
        for write in &batch.writes {
            let (kind, value) = match write.kind {
                WriteKind::Put => (
                    "put",
                    serde_json::to_string(&write.value).map_err(|e| {
                        StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e))
                    })?,
                ),
                WriteKind::Delete => ("delete", String::new()),
                WriteKind::Check => ("check", String::new()),
            };
            args.extend([
                kind.to_string(),
                section_index[write.section.as_str()].to_string(),
                write.key.clone(),
                write.expected.to_string(),
                value,
            ]);
        }
        Ok((call_keys, args))
    }
}

#[async_trait]
impl LeaseStore for RedisRecords {
    /// Records, once the read script (which guards the layout) reads the board as
    /// records: marked as migrated, or never a document.
    async fn layout(&self, board: &str) -> Result<Layout, StoreError> {
        self.read_records(board, &ReadSet::default()).await?;
        Ok(Layout::Records)
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        self.read_records(board, &ReadSet::whole(names)).await
    }

    /// One script: `HGETALL` for a whole section, `HMGET` of its keys for a keyed one, so
    /// a change reads what it touches and not the board.
    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        check_board(board)?;
        let s = &self.shared;
        let keys = s.keys(board);
        let mut invocation = s.read.prepare_invoke();
        invocation.key(keys.revision()).key(keys.section(META));
        for name in reads.sections.keys() {
            invocation.key(keys.section(name));
        }
        if self.guards_layout() {
            invocation.key(s.state().current()).arg(board);
        } else {
            invocation.arg("");
        }
        let spec: Vec<serde_json::Value> = reads
            .sections
            .values()
            .map(|k| match k.keys() {
                None => serde_json::json!("*"),
                Some(keys) => serde_json::json!(keys),
            })
            .collect();
        invocation.arg(serde_json::Value::from(spec).to_string());
        let mut replies: Vec<Value> = invocation
            .invoke_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        if replies.len() == 1 {
            return Err(StoreError::Moved(crate::Moved::other_layout(format!(
                "board {board} has a document still to be migrated"
            ))));
        }
        if replies.len() != reads.sections.len() + 3 {
            return Err(StoreError::Corrupt(crate::Detail::from(
                "a short read answer",
            )));
        }
        let hashes = replies.split_off(3);
        let revision: String = decode(replies.pop().unwrap_or(Value::Nil))?;
        let micros: String = decode(replies.pop().unwrap_or(Value::Nil))?;
        let seconds: String = decode(replies.pop().unwrap_or(Value::Nil))?;
        let mut sections = BTreeMap::new();
        for ((name, wanted), hash) in reads.sections.iter().zip(hashes) {
            let fields: Vec<(String, String)> = match wanted.keys() {
                None => decode::<HashMap<String, String>>(hash)?
                    .into_iter()
                    .collect(),
                Some(keys) => {
                    let values: Vec<Option<String>> = decode(hash)?;
                    if values.len() != keys.len() {
                        return Err(StoreError::Corrupt(crate::Detail::from(
                            "a short keyed read answer",
                        )));
                    }
                    keys.iter()
                        .zip(values)
                        .filter_map(|(k, v)| v.map(|raw| (k.clone(), raw)))
                        .collect()
                }
            };
            let section = fields
                .into_iter()
                .map(|(k, raw)| Ok((k, parse_record(&raw)?)))
                .collect::<Result<_, StoreError>>()?;
            sections.insert(name.clone(), section);
        }
        let revision = parse_revision(&revision)?;
        Ok(Snapshot {
            revision,
            now_ms: time_ms(&seconds, &micros)?,
            sections,
            complete: reads.sections.values().all(|k| *k == Keys::Whole),
        })
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        check_board(board)?;
        let s = &self.shared;
        let raw: Option<String> = redis::cmd("HGET")
            .arg(s.keys(board).section(section))
            .arg(key)
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        raw.map(|r| parse_record(&r)).transpose()
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        let (keys, args) = self.batch_call(board, batch, None)?;
        let s = &self.shared;
        let mut invocation = s.batch.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        s.commit(&s.batch, &invocation).await?.revision(s.wait_ms)
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        match self.ask_records(check).await? {
            Asked::Judged(judgement) => Ok(judgement),
            // Only a script that checks the layout answers "document"; this one does not.
            Asked::Document { .. } => Err(StoreError::Corrupt(crate::Detail::from(
                "the ask script answered document unasked",
            ))),
        }
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        check_board(board)?;
        let s = &self.shared;
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(s.keys(board).sections())
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        names.sort();
        Ok(names)
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        check_board(board)?;
        let s = &self.shared;
        let entries: Vec<(String, HashMap<String, String>)> = redis::cmd("XREVRANGE")
            .arg(s.keys(board).log())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        entries
            .into_iter()
            .map(|(id, fields)| {
                let number = |k: &str| fields.get(k).and_then(|v| v.parse().ok());
                match (number("revision"), number("records")) {
                    (Some(revision), Some(records)) => Ok(LogEntry {
                        revision,
                        owner: fields.get("owner").cloned().unwrap_or_default(),
                        records: records as usize,
                    }),
                    _ => Err(StoreError::Corrupt(crate::Detail::from(format!(
                        "fence log entry {id} is malformed"
                    )))),
                }
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.shared.ping().await
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        self.shared.now_ms().await
    }

    fn describe(&self) -> String {
        self.shared.redacted.clone()
    }

    fn address(&self) -> String {
        self.shared.identity.clone()
    }
}
