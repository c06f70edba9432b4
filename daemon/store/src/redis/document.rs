//! The `document` layout on Redis, for boards not yet migrated: the whole board as one
//! JSON document in the hash `P:state:fencing:current` (field = board), the previous two
//! copies in `P:state:fencing:history:<board>`. A batch is checked and applied in memory
//! (the same rules as the file store) and written back with a compare-and-set script, so
//! a concurrent document write surfaces as `RevisionConflict`. Standalone Redis only: on a
//! cluster the shared hash is in another slot than the board's keys.

use super::keys::HISTORY;
use super::{Shared, check_board, decode, time_ms};
use crate::document::BoardDocument;
use crate::meta::Layout;
use crate::{
    AskCheck, FencedBatch, Judgement, LeaseStore, LogEntry, ReadSet, Record, Snapshot, StoreError,
};
use async_trait::async_trait;
use redis::Value;
use std::sync::Arc;

/// The Redis document adapter ([`super::RedisStore`] serves a board the records refuse as
/// a document from it).
#[derive(Clone)]
pub struct RedisDocument {
    pub(super) shared: Arc<Shared>,
    /// True for the store's adapter of existing documents: a board whose document is gone
    /// or moved is answered with the routing signal (`Moved::other_layout`: the records
    /// serve it then), never judged as an empty board.
    pub(super) routed: bool,
}

impl std::fmt::Debug for RedisDocument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDocument")
            .field("url", &self.shared.redacted)
            .finish()
    }
}

/// Parses a board's stored document.
pub(super) fn parse(board: &str, raw: &str) -> Result<BoardDocument, StoreError> {
    let document: BoardDocument = serde_json::from_str(raw).map_err(|e| {
        StoreError::Corrupt(crate::Detail::caused_by(
            format!("the document of board {board} is not valid: {e}"),
            e,
        ))
    })?;
    if document.board != board {
        return Err(StoreError::Corrupt(crate::Detail::from(format!(
            "the document under {board} is board {:?}",
            document.board
        ))));
    }
    Ok(document)
}

fn sha1_hex(raw: &str) -> String {
    sha1_smol::Sha1::from(raw).digest().to_string()
}

impl RedisDocument {
    fn standalone(&self) -> Result<(), StoreError> {
        if self.shared.conn.is_cluster() {
            Err(StoreError::Invalid(crate::Detail::from(
                "the document layout needs a standalone Redis, not a cluster",
            )))
        } else {
            Ok(())
        }
    }

    /// The board's stored document, verbatim (`None` when the board has none).
    pub async fn load_raw(&self, board: &str) -> Result<Option<String>, StoreError> {
        check_board(board)?;
        self.standalone()?;
        let s = &self.shared;
        redis::cmd("HGET")
            .arg(s.state().current())
            .arg(board)
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))
    }

    /// The document (an empty board when absent), verbatim, and the server's clock.
    async fn load(&self, board: &str) -> Result<(Option<String>, BoardDocument, u64), StoreError> {
        check_board(board)?;
        self.standalone()?;
        let s = &self.shared;
        let (raw, time): (Option<String>, Vec<String>) = redis::pipe()
            .cmd("HGET")
            .arg(s.state().current())
            .arg(board)
            .cmd("TIME")
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        let now_ms = match time.as_slice() {
            [seconds, micros] => time_ms(seconds, micros)?,
            _ => {
                return Err(StoreError::Corrupt(crate::Detail::from(format!(
                    "TIME answered {time:?}"
                ))));
            }
        };
        let document = self.stored(board, raw.as_deref())?;
        Ok((raw, document, now_ms))
    }

    /// The board's document as stored (`None`: absent, an empty board), or, for existing
    /// documents only, the routing signal (`Moved::other_layout`) for one that is gone or
    /// moved (the records serve it then).
    fn stored(&self, board: &str, raw: Option<&str>) -> Result<BoardDocument, StoreError> {
        let document = match raw {
            Some(raw) => parse(board, raw)?,
            None if self.routed => {
                return Err(StoreError::Moved(crate::Moved::other_layout(format!(
                    "board {board} has no document"
                ))));
            }
            None => BoardDocument::new(board),
        };
        if self.routed && document.moved_to.is_some() {
            return Err(StoreError::Moved(crate::Moved::other_layout(format!(
                "the document of board {board} moved"
            ))));
        }
        Ok(document)
    }

    /// Writes `document` if the stored one is still `read` (`None`: still absent), and
    /// waits for the store's replicas like every write.
    pub async fn compare_and_set(
        &self,
        board: &str,
        read: Option<&str>,
        document: &BoardDocument,
    ) -> Result<(), StoreError> {
        let s = &self.shared;
        let body = serde_json::to_string(document)
            .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
        let mut invocation = s.cas.prepare_invoke();
        invocation
            .key(s.state().current())
            .key(s.state().history(board))
            .arg(board)
            .arg(read.map(sha1_hex).unwrap_or_default())
            .arg(body)
            .arg(HISTORY);
        let committed = s.commit(&s.cas, &invocation).await?;
        if committed.acked < committed.wanted {
            return Err(StoreError::Unacknowledged {
                revision: document.revision,
                acked: committed.acked,
                wanted: committed.wanted,
                wait_ms: s.wait_ms,
            });
        }
        Ok(())
    }

    /// The board's previous documents, newest first (at most 2).
    pub async fn history(&self, board: &str) -> Result<Vec<String>, StoreError> {
        let s = &self.shared;
        let value: Value = redis::cmd("LRANGE")
            .arg(s.state().history(board))
            .arg(0)
            .arg(-1)
            .query_async(&mut s.conn())
            .await
            .map_err(|e| s.map_err(e))?;
        decode(value)
    }
}

#[async_trait]
impl LeaseStore for RedisDocument {
    async fn layout(&self, board: &str) -> Result<Layout, StoreError> {
        let (_, document, _) = self.load(board).await?;
        match document.moved_to.as_deref() {
            None => Ok(Layout::Document),
            Some(to) => Layout::parse(to).ok_or_else(|| {
                StoreError::Corrupt(crate::Detail::from(format!(
                    "the document of board {board} moved to {to:?}, which is no layout"
                )))
            }),
        }
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        let (_, document, now_ms) = self.load(board).await?;
        document.ensure_here()?;
        Ok(document.snapshot(names, now_ms))
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        let (_, document, now_ms) = self.load(board).await?;
        document.ensure_here()?;
        let names: Vec<&str> = reads.sections.keys().map(String::as_str).collect();
        Ok(document.snapshot(&names, now_ms))
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let (_, document, _) = self.load(board).await?;
        document.ensure_here()?;
        Ok(document.record(section, key).cloned())
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        let (raw, mut document, _) = self.load(board).await?;
        document.ensure_here()?;
        let revision = document.apply(batch)?;
        self.compare_and_set(board, raw.as_deref(), &document)
            .await?;
        Ok(revision)
    }

    /// One script call (`document_ask.lua`, declared writing so a replica or a primary
    /// short of replicas refuses it), judged here.
    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let board = check.board.as_str();
        check_board(board)?;
        self.standalone()?;
        let s = &self.shared;
        let mut pinned = s.pinned().await?;
        let (seconds, micros, raw): (String, String, String) = s
            .document_ask
            .key(s.state().current())
            .arg(board)
            .invoke_async(&mut pinned)
            .await
            .map_err(|e| s.map_err(e))?;
        s.barrier(&pinned).await?;
        let now_ms = time_ms(&seconds, &micros)?;
        let document = self.stored(board, (!raw.is_empty()).then_some(raw.as_str()))?;
        document.ensure_here()?;
        let judgement = document.judge_ask(check, now_ms)?;
        self.shared.record_ask(check, &judgement).await?;
        Ok(judgement)
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.load(board).await?.1.section_names())
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        Ok(self.load(board).await?.1.newest_log(count))
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
