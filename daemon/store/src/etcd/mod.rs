//! The etcd store (`etcd://host:port[,host:port…]`, ARCHITECTURE.md, "The etcd store"): the
//! lease store on a consensus cluster, for fences that must stay right across machines and
//! failovers. Every write is acknowledged by a majority of members and every read is
//! linearizable (a member cut off from the quorum answers nothing), so what was
//! acknowledged is never lost and never read back older.
//!
//! - Per-record keys under the key prefix, and a per-board head key ([`head`]) holding the
//!   board revision and a time floor.
//! - A fenced batch is one `Txn`: it compares the head's `mod_revision` with the one it read
//!   (so nothing on the board changed since: every batch rewrites the head), then puts the
//!   head, the records, the log entry and trims the log, all or nothing ([`batch`]).
//! - An ask is one `Txn` of two reads (the head and the row lease), judged by the shared
//!   [`crate::judge()`] with the etcd store's clock (the daemon's plus the skew bound).
//!   An ALLOWED ask writes nothing; a refusal is recorded in the asks ring afterwards.
//! - A fenced write's batch is judged on the read the write just made ([`seen`]) and
//!   commits if the head is unchanged since; a commit that finds it changed reads the
//!   board back in the same transaction: the commit adds one round trip to the write's
//!   reads, and a lost race costs no extra read.
//! - [`import`]: a copied board written in parts and made usable last (resumable).
//! - [`members`]: one client per member, tried in turn within a per-member timeout, so a
//!   minority of members dead, stopped or cut off costs a call at most one such timeout.
//! - [`url`]: the URL and its options; [`keys`]: the key layout; [`errors`]: etcd's errors
//!   as the port's.

pub mod batch;
pub mod errors;
pub mod head;
pub mod import;
pub mod keys;
pub mod members;
pub mod seen;
pub mod url;

use crate::document::parse_row_lease;
use crate::identity::StoreId;
use crate::{
    AskCheck, CLAIMS, FencedBatch, Judgement, Keys, LeaseStore, LogEntry, ReadSet, Record,
    Snapshot, StoreCheck, StoreError, meta,
};
use async_trait::async_trait;
use errors::Call;
use etcd_client::{
    Compare, CompareOp, GetOptions, KeyValue, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};
use head::Head;
use keys::{BoardKeys, prefix_end};
use row_fence_contract::Verdict;
use row_fence_contract::descriptor::validate_board;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use url::EtcdUrl;

/// etcd's default `--max-txn-ops`: the most operations one transaction may hold.
pub const MAX_TXN_OPS: usize = 128;

/// How often a batch that met a concurrent write on its board reads again and retries
/// before it reports the conflict (the caller's deadline usually ends it first).
const BATCH_ATTEMPTS: usize = 32;

/// The lease store on an etcd cluster. Cheap to share: one warm client per member,
/// connected on first use ([`members`]).
pub struct EtcdStore {
    url: EtcdUrl,
    /// The key prefix (`ROW_FENCE_KEY_PREFIX`), without a trailing `/`.
    prefix: String,
    /// The members, tried in turn.
    members: members::Members,
    /// The next slot of the asks ring a refusal is written to.
    next_ask: AtomicUsize,
    /// The last [`LeaseStore::check`].
    last_check: Mutex<Option<StoreCheck>>,
    /// Each board's last read, for the batch that follows it.
    kept: seen::Kept,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// What one read transaction found of a key: its value and `mod_revision` (0: absent).
type Found = Option<KeyValue>;

impl EtcdStore {
    /// Opens the store a URL names (keys under `prefix`). Never connects here, so a daemon
    /// starts while its store is down; a bad URL is `Invalid` and names what is wrong.
    pub fn open(url: &str, prefix: &str) -> Result<EtcdStore, StoreError> {
        let url = EtcdUrl::parse(url)
            .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return Err(StoreError::Invalid(crate::Detail::from(
                "the etcd store needs a key prefix",
            )));
        }
        // Another prefix's keys are `<prefix>/board/…`: a prefix with a `board` segment
        // could lie inside one of its boards (`rf/board/b/rec/s` under `rf`'s board b).
        if prefix
            .split('/')
            .any(|segment| segment == keys::BOARD_SEGMENT)
        {
            return Err(StoreError::Invalid(crate::Detail::from(format!(
                "etcd key prefix {prefix:?} has a `{}` segment, which could put its keys inside another prefix's boards; choose another",
                keys::BOARD_SEGMENT
            ))));
        }
        Ok(EtcdStore {
            members: members::Members::new(&url),
            url,
            prefix: prefix.to_string(),
            next_ask: AtomicUsize::new(rand::random::<u16>() as usize % crate::ASKS_CAP),
            last_check: Mutex::new(None),
            kept: seen::Kept::default(),
        })
    }

    /// Each member the URL names as `host:port` with the host resolved (any loopback
    /// address is `localhost`), sorted.
    fn members_resolved(&self) -> Vec<String> {
        let mut members: Vec<String> = self
            .url
            .endpoints
            .iter()
            .map(|endpoint| match endpoint.rsplit_once(':') {
                Some((host, port)) => match port.parse::<u16>() {
                    Ok(port) => format!(
                        "{}:{port}",
                        crate::redis::identity::host_identity(host, port)
                    ),
                    Err(_) => endpoint.to_ascii_lowercase(),
                },
                None => endpoint.to_ascii_lowercase(),
            })
            .collect();
        members.sort();
        members.dedup();
        members
    }

    /// The skew bound, in ms.
    pub fn max_skew_ms(&self) -> u64 {
        self.url.max_skew_ms
    }

    /// The etcd store's clock: this machine's plus the skew bound, ms since the Unix epoch
    /// ([`head`]).
    pub fn clock_ms(&self) -> u64 {
        crate::file::system_now_ms().saturating_add(self.url.max_skew_ms)
    }

    fn keys(&self, board: &str) -> BoardKeys {
        BoardKeys::new(&self.prefix, board)
    }

    /// Over TLS, says which setting to look at when no member could be reached: a members'
    /// certificate that does not verify names the CA; without a client certificate,
    /// members that require one close the connection after the handshake, which the
    /// client sees only as a closed connection or an alert.
    fn lost(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Unreachable(why)
                if self.url.tls && why.text().contains("invalid peer certificate") =>
            {
                let text = format!(
                    "{why} (the members' certificate does not verify against this URL's cacert=PATH)"
                );
                StoreError::Unreachable(why.reworded(text))
            }
            StoreError::Unreachable(why) if self.url.tls && self.url.identity.is_none() => {
                let text = format!(
                    "{why} (this etcds:// URL presents no client certificate; members started with --client-cert-auth close such connections: add cert=PATH&key=PATH; or the members do not serve TLS: use etcd://)"
                );
                StoreError::Unreachable(why.reworded(text))
            }
            e => e,
        }
    }

    /// Runs one transaction on the first member that answers ([`members`]).
    async fn txn(
        &self,
        txn: Txn,
        call: Call,
    ) -> Result<members::Answered<etcd_client::TxnResponse>, StoreError> {
        self.members
            .call(call, |mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await
            .map_err(|e| self.lost(e))
    }

    /// Reads `ops` (gets) in one linearizable transaction; one answer per op.
    async fn read(&self, ops: Vec<TxnOp>) -> Result<Vec<Vec<KeyValue>>, StoreError> {
        let response = self.txn(Txn::new().and_then(ops), Call::Read).await?.value;
        response
            .op_responses()
            .into_iter()
            .map(|r| match r {
                TxnOpResponse::Get(get) => Ok(get.kvs().to_vec()),
                other => Err(StoreError::Corrupt(crate::Detail::from(format!(
                    "etcd answered a read with {other:?}"
                )))),
            })
            .collect()
    }

    /// The head and the listed keys, read at once.
    async fn head_and(
        &self,
        board: &str,
        ops: Vec<TxnOp>,
    ) -> Result<(Head, Found, Vec<Vec<KeyValue>>), StoreError> {
        let keys = self.keys(board);
        let mut all = vec![TxnOp::get(keys.head(), None)];
        all.extend(ops);
        let mut answers = self.read(all).await?.into_iter();
        let head_kv = answers.next().and_then(|kvs| kvs.into_iter().next());
        let head = Head::parse(head_kv.as_ref().map(|kv| kv.value()))?;
        Ok((head, head_kv, answers.collect()))
    }

    /// The records of `kvs` into `section`.
    fn collect(
        &self,
        keys: &BoardKeys,
        kvs: &[KeyValue],
        into: &mut crate::Section,
    ) -> Result<(), StoreError> {
        for kv in kvs {
            let full = kv
                .key_str()
                .map_err(|e| StoreError::Corrupt(crate::Detail::caused_by(e.to_string(), e)))?;
            let Some((_, key)) = keys.parse_record(full) else {
                continue;
            };
            into.insert(key.to_string(), parse_record(kv)?);
        }
        Ok(())
    }

    /// Records a refusal in the board's asks ring (by the Redis stream's rule: refusals
    /// and could-not-read, the location fence's verdict when it fenced the ask, nothing for
    /// the probe). The ring holds [`crate::ASKS_CAP`] keys by construction.
    async fn record_ask(&self, check: &AskCheck, judgement: &Judgement) {
        if check.probe {
            return;
        }
        let lease = match judgement.refusal {
            None => (Verdict::Allowed.wire_name(), ""),
            Some(r) => (Verdict::Refused(r).wire_name(), r.as_str()),
        };
        let fenced = check.location.as_ref().and_then(|l| l.fenced);
        let (verdict, reason) =
            fenced.map_or(lease, |r| (Verdict::from_reason(r).wire_name(), r.as_str()));
        if verdict == Verdict::Allowed.wire_name() {
            return;
        }
        let mut entry = serde_json::json!({
            "at_ms": judgement.now_ms,
            "row": check.row,
            "lane": check.lane,
            "generation": check.generation,
            "verdict": verdict,
            "reason": reason,
            "action": check.action,
            "session": check.session,
        });
        if let Some(at) = &check.location {
            entry["location"] = at.location.clone().into();
            entry["epoch"] = at.epoch.into();
        }
        let slot = self.next_ask.fetch_add(1, Ordering::Relaxed) % crate::ASKS_CAP;
        let put = TxnOp::put(
            self.keys(&check.board).ask_slot(slot),
            entry.to_string(),
            None,
        );
        // The verdict stands whether or not its record is written.
        let _ = self.txn(Txn::new().and_then(vec![put]), Call::Write).await;
    }

    /// What the batch is judged on, read now: the head, then each of `wanted`'s records.
    async fn read_board(
        &self,
        board: &str,
        plan: &batch::Plan,
        fenced: &FencedBatch,
    ) -> Result<Board, StoreError> {
        let keys = self.keys(board);
        let answers = self.read(plan.reads(&keys, fenced)).await?;
        Ok(Board::from_answers(&keys, answers))
    }

    /// Judges the batch on `board` as read: the commit, or why it must not commit.
    fn judge(
        &self,
        name: &str,
        plan: &batch::Plan,
        fenced: &FencedBatch,
        board: &Board,
    ) -> Result<batch::Commit, StoreError> {
        let head = Head::parse(board.head.as_ref().map(|kv| kv.value()))?;
        let found: Vec<Option<Record>> = board
            .found
            .iter()
            .map(|kv| kv.as_ref().map(parse_record).transpose())
            .collect::<Result<_, _>>()?;
        let now = self.clock_ms();
        if fenced.min_revision.is_none() {
            head.check_clock(name, now, self.url.max_skew_ms)?;
        }
        let newest_log = board.newest_log.unwrap_or(0);
        plan.judge(name, fenced, (&head, newest_log), &found, now)
    }

    /// Commits a judged batch if the head is still the one `board` was read with; if it
    /// is not, what the board holds now (read in the same transaction). A commit whose
    /// answer was lost on one member and which another member then answered (or none did)
    /// is settled by reading whether the board logged it ([`EtcdStore::settle`]): the
    /// transaction is conditional on the head it read, so at most one try applied.
    async fn commit(
        &self,
        name: &str,
        plan: &batch::Plan,
        fenced: &FencedBatch,
        board: &Board,
        commit: &batch::Commit,
    ) -> Result<Result<u64, Board>, StoreError> {
        let keys = self.keys(name);
        let head_mod = board.head_mod_revision();
        let txn = commit.txn(&keys, head_mod, plan.reads(&keys, fenced));
        let answered = match self.txn(txn, Call::Write).await {
            Ok(answered) => answered,
            Err(StoreError::Indeterminate(why)) => {
                return match self.settle(&keys, commit, head_mod).await {
                    Ok(Some(true)) => Ok(Ok(commit.revision)),
                    Ok(Some(false)) => Ok(Err(self.read_board(name, plan, fenced).await?)),
                    _ => Err(StoreError::Indeterminate(why)),
                };
            }
            Err(e) => return Err(e),
        };
        let response = answered.value;
        if response.succeeded() {
            return Ok(Ok(commit.revision));
        }
        if answered.maybe_applied && self.settle(&keys, commit, head_mod).await? == Some(true) {
            return Ok(Ok(commit.revision));
        }
        let answers = response
            .op_responses()
            .into_iter()
            .map(|r| match r {
                TxnOpResponse::Get(get) => Ok(get.kvs().to_vec()),
                other => Err(StoreError::Corrupt(crate::Detail::from(format!(
                    "etcd answered a read with {other:?}"
                )))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Err(Board::from_answers(&keys, answers)))
    }

    /// Whether `commit` applied, read now: its log entry carries its batch's nonce.
    /// `Some(true)`: it committed; `Some(false)`: another batch took its revision or the
    /// head moved on, so it never will; `None`: neither yet (it may still be in flight).
    async fn settle(
        &self,
        keys: &BoardKeys,
        commit: &batch::Commit,
        head_mod: i64,
    ) -> Result<Option<bool>, StoreError> {
        let response = self
            .txn(
                Txn::new()
                    .when(vec![Compare::mod_revision(
                        keys.head(),
                        CompareOp::Equal,
                        head_mod,
                    )])
                    .and_then(vec![TxnOp::get(keys.log_entry(commit.revision), None)])
                    .or_else(vec![TxnOp::get(keys.log_entry(commit.revision), None)]),
                Call::Read,
            )
            .await?
            .value;
        let head_unchanged = response.succeeded();
        let logged = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        Ok(match logged {
            Some(value) => Some(batch::logged_nonce(&value) == Some(commit.nonce())),
            None if head_unchanged => None,
            None => Some(false),
        })
    }

    /// Keeps what `read_records` read of `board` for the batch that may follow it, when it
    /// is small enough ([`seen::MAX_KEPT_RECORDS`]).
    fn keep_read(
        &self,
        board: &str,
        keys: &BoardKeys,
        head: Found,
        covered: ReadSet,
        answers: &[Vec<KeyValue>],
    ) {
        let count: usize = answers.iter().map(Vec::len).sum();
        if count > seen::MAX_KEPT_RECORDS {
            return;
        }
        let mut records = std::collections::BTreeMap::new();
        for kv in answers.iter().flatten() {
            if let Some((section, key)) = kv.key_str().ok().and_then(|k| keys.parse_record(k)) {
                records.insert((section.to_string(), key.to_string()), kv.clone());
            }
        }
        self.kept
            .keep(board, seen::Seen::new(head, covered, records));
    }
}

/// A board as one read transaction found it: its head, its newest log entry's revision
/// (`None`: not read) and the records a batch is judged on ([`batch::Plan::wanted`], in
/// order).
#[derive(Debug)]
struct Board {
    head: Found,
    newest_log: Option<u64>,
    found: Vec<Found>,
}

impl Board {
    /// From the answers to [`batch::Plan::reads`].
    fn from_answers(keys: &BoardKeys, answers: Vec<Vec<KeyValue>>) -> Board {
        let mut answers = answers.into_iter().map(|kvs| kvs.into_iter().next());
        let head = answers.next().flatten();
        let newest_log = answers
            .next()
            .flatten()
            .map_or(Some(0), |kv| keys.parse_log_entry(kv.key()));
        Board {
            head,
            newest_log,
            found: answers.collect(),
        }
    }

    fn head_mod_revision(&self) -> i64 {
        self.head.as_ref().map_or(0, KeyValue::mod_revision)
    }
}

/// A record stored as JSON.
fn parse_record(kv: &KeyValue) -> Result<Record, StoreError> {
    serde_json::from_slice(kv.value()).map_err(|e| {
        StoreError::Corrupt(crate::Detail::caused_by(
            format!(
                "{} is not a row-fence record: {e}",
                String::from_utf8_lossy(kv.key())
            ),
            e,
        ))
    })
}

fn check_board(board: &str) -> Result<(), StoreError> {
    validate_board(board)
        .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))
}

#[async_trait]
impl LeaseStore for EtcdStore {
    async fn layout(&self, board: &str) -> Result<meta::Layout, StoreError> {
        check_board(board)?;
        Ok(meta::Layout::Records)
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        self.read_records(board, &ReadSet::whole(names))
            .await
            .map(|s| Snapshot {
                complete: true,
                ..s
            })
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        check_board(board)?;
        let keys = self.keys(board);
        // Keyed reads past one transaction's size read their sections whole.
        let keyed: usize = reads
            .sections
            .values()
            .map(|k| k.keys().map_or(1, BTreeSet::len))
            .sum();
        let whole = keyed + 1 > MAX_TXN_OPS;
        let mut ops = Vec::new();
        let mut shape = Vec::new();
        for (section, wanted) in &reads.sections {
            match (wanted.keys(), whole) {
                (Some(list), false) => {
                    for key in list {
                        ops.push(TxnOp::get(keys.record(section, key), None));
                    }
                    shape.push((section.clone(), list.len()));
                }
                _ => {
                    let start = keys.section(section);
                    let end = prefix_end(&start);
                    ops.push(TxnOp::get(start, Some(GetOptions::new().with_range(end))));
                    shape.push((section.clone(), 1));
                }
            }
        }
        let (head, head_kv, answers) = self.head_and(board, ops).await?;
        let covered = if whole {
            ReadSet {
                sections: reads
                    .sections
                    .keys()
                    .map(|s| (s.clone(), Keys::Whole))
                    .collect(),
            }
        } else {
            reads.clone()
        };
        self.keep_read(board, &keys, head_kv, covered, &answers);
        let mut answers = answers.into_iter();
        let mut snapshot = Snapshot {
            revision: head.revision,
            now_ms: self.clock_ms(),
            sections: Default::default(),
            complete: reads.sections.values().all(|k| matches!(k, Keys::Whole)) || whole,
        };
        for (section, count) in shape {
            let into = snapshot.sections.entry(section).or_default();
            for _ in 0..count {
                let kvs = answers.next().unwrap_or_default();
                self.collect(&keys, &kvs, into)?;
            }
        }
        Ok(snapshot)
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        check_board(board)?;
        let op = TxnOp::get(self.keys(board).record(section, key), None);
        let kvs = self
            .read(vec![op])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        kvs.first().map(parse_record).transpose()
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        check_board(board)?;
        let plan = batch::Plan::new(batch)?;
        // The read the caller just made, when it covered what the batch is judged on. An
        // older read is harmless: the commit lands only on the head it saw. What it says
        // against the batch is not trusted (a newer read may say otherwise): read again.
        let wanted = plan.wanted(batch);
        let mut read = self.kept.take(board).and_then(|seen| {
            Some(Board {
                found: seen.found(&wanted)?,
                head: seen.head,
                newest_log: None,
            })
        });
        for attempt in 0..BATCH_ATTEMPTS {
            let board_now = match read.take() {
                Some(kept) if self.judge(board, &plan, batch, &kept).is_ok() => kept,
                _ => self.read_board(board, &plan, batch).await?,
            };
            let commit = self.judge(board, &plan, batch, &board_now)?;
            match self
                .commit(board, &plan, batch, &board_now, &commit)
                .await?
            {
                Ok(revision) => return Ok(revision),
                Err(changed) => {
                    // Another batch on the board committed first. What the board holds
                    // now came back with the refusal: a batch it already refuses (its
                    // records changed) is refused at once.
                    self.judge(board, &plan, batch, &changed)?;
                    if changed.head_mod_revision() == board_now.head_mod_revision() {
                        // Nothing committed first: the head is behind a key the reads
                        // do not show (a record on a board without a head).
                        return Err(batch::head_behind(
                            board,
                            Head::parse(changed.head.as_ref().map(|kv| kv.value()))?.revision,
                            None,
                        ));
                    }
                    // The next attempt is judged on what came back: a lost race costs no
                    // read of its own.
                    read = Some(changed);
                }
            }
            // A short random pause before reading again, so racing writers do not all
            // propose again at once (every losing attempt is a proposal the cluster
            // agrees on).
            let ceiling = (1 + attempt as u64 * 2).min(20);
            tokio::time::sleep(Duration::from_millis(rand::random_range(0..=ceiling))).await;
        }
        Err(StoreError::RevisionConflict {
            key: "revision".into(),
        })
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        check_board(&check.board)?;
        let claim = TxnOp::get(self.keys(&check.board).record(CLAIMS, &check.row), None);
        let (head, _, answers) = self.head_and(&check.board, vec![claim]).await?;
        let now = head.check_clock(&check.board, self.clock_ms(), self.url.max_skew_ms)?;
        let lease = match answers.first().and_then(|kvs| kvs.first()) {
            None => None,
            Some(kv) => {
                let record = parse_record(kv)?;
                // A lease from a later revision than its head: the head was deleted or
                // lowered, and the next grant would repeat a generation.
                if record.revision > head.revision {
                    return Err(batch::head_behind(
                        &check.board,
                        head.revision,
                        Some(record.revision),
                    ));
                }
                Some(parse_row_lease(&record.value)?)
            }
        };
        let judgement = Judgement {
            refusal: crate::judge(lease.as_ref(), check, now),
            lease,
            now_ms: now,
            revision: head.revision,
        };
        self.record_ask(check, &judgement).await;
        Ok(judgement)
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        check_board(board)?;
        let keys = self.keys(board);
        let start = keys.records();
        let op = TxnOp::get(
            start.clone(),
            Some(
                GetOptions::new()
                    .with_range(prefix_end(&start))
                    .with_keys_only(),
            ),
        );
        let kvs = self
            .read(vec![op])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut names = BTreeSet::new();
        for kv in &kvs {
            if let Some((section, _)) = kv.key_str().ok().and_then(|k| keys.parse_record(k)) {
                names.insert(section.to_string());
            }
        }
        Ok(names.into_iter().collect())
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        check_board(board)?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let start = self.keys(board).log();
        let op = TxnOp::get(
            start.clone(),
            Some(
                GetOptions::new()
                    .with_range(prefix_end(&start))
                    .with_sort(SortTarget::Key, SortOrder::Descend)
                    .with_limit(count.min(crate::LOG_CAP) as i64),
            ),
        );
        let kvs = self
            .read(vec![op])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        kvs.iter()
            .map(|kv| {
                serde_json::from_slice(kv.value()).map_err(|e| {
                    StoreError::Corrupt(crate::Detail::caused_by(
                        format!("a fence log entry: {e}"),
                        e,
                    ))
                })
            })
            .collect()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // A linearizable read: answered only through a member that has the quorum.
        let op = TxnOp::get(
            format!("{}/ping", self.prefix),
            Some(GetOptions::new().with_count_only()),
        );
        self.read(vec![op]).await.map(|_| ())
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        Ok(self.clock_ms())
    }

    fn describe(&self) -> String {
        let scheme = if self.url.tls { "etcds" } else { "etcd" };
        format!("{scheme}://{}", self.url.endpoints.join(","))
    }

    /// The members' resolved addresses, sorted, and the key prefix: the key floors were kept
    /// under before the cluster carried an identity (ARCHITECTURE.md, "The lease store"),
    /// the same whichever order or host spelling names the cluster.
    fn address(&self) -> String {
        let scheme = if self.url.tls { "etcds" } else { "etcd" };
        format!(
            "{scheme} members={} prefix={}",
            self.members_resolved().join(","),
            self.prefix
        )
    }

    /// One address per member the URL names (its resolved host and port) with the key
    /// prefix: a URL naming one, two or three of the members shares its addresses with
    /// one naming all. A member named by an address of this machine is also known as
    /// `localhost` on its port, so a URL naming it by this machine's address and one
    /// naming it by loopback share it too.
    fn addresses(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .url
            .endpoints
            .iter()
            .flat_map(|endpoint| {
                let forms = endpoint.rsplit_once(':').and_then(|(host, port)| {
                    let port = port.parse::<u16>().ok()?;
                    Some(
                        crate::redis::identity::host_forms(host, port)
                            .into_iter()
                            .map(|h| format!("{h}:{port}"))
                            .collect::<Vec<String>>(),
                    )
                });
                forms.unwrap_or_else(|| vec![endpoint.to_ascii_lowercase()])
            })
            .map(|member| format!("etcd member={member} prefix={}", self.prefix))
            .collect();
        all.sort();
        all.dedup();
        all
    }

    async fn carried_identity(&self) -> Result<Option<StoreId>, StoreError> {
        let key = format!("{}/{}", self.prefix, crate::identity::KEY);
        let kvs = self
            .read(vec![TxnOp::get(key, None)])
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        kvs.first()
            .map(|kv| StoreId::parse(&String::from_utf8_lossy(kv.value())))
            .transpose()
    }

    /// One transaction that puts the identity only while the key does not exist, and reads
    /// it back either way; tried on the next member when an answer is lost (it cannot
    /// apply twice: the second finds the key).
    async fn create_identity(&self, fresh: &StoreId) -> Result<Option<StoreId>, StoreError> {
        let key = format!("{}/{}", self.prefix, crate::identity::KEY);
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                0,
            )])
            .and_then(vec![
                TxnOp::put(key.clone(), fresh.as_str(), None),
                TxnOp::get(key.clone(), None),
            ])
            .or_else(vec![TxnOp::get(key, None)]);
        let response = self.txn(txn, Call::Write).await?.value;
        let held = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        match held {
            Some(value) => StoreId::parse(&String::from_utf8_lossy(&value)).map(Some),
            None => Err(StoreError::Corrupt(crate::Detail::from(
                "etcd answered the identity's creation without it",
            ))),
        }
    }

    async fn import(
        &self,
        board: &str,
        records: &[crate::copy::CopiedRecord],
        revision: u64,
    ) -> Result<u64, crate::copy::ImportError> {
        import::import(self, board, records, revision).await
    }

    async fn drop_partial(&self, board: &str) -> Result<usize, StoreError> {
        check_board(board)?;
        import::drop_partial(self, board).await
    }

    fn connection_losses(&self) -> u64 {
        self.members.losses()
    }

    /// The members the cluster lists, the leader, and each member the URL names as it
    /// answers for itself; a member that does not answer is a note (the others serve
    /// while a quorum answers), not a problem. Fails only when no linearizable read is
    /// answered (no quorum).
    async fn check(&self) -> Result<StoreCheck, StoreError> {
        let listed = self
            .members
            .call(Call::Read, |mut client| async move {
                client.member_list().await
            })
            .await
            .map_err(|e| self.lost(e))?
            .value;
        let statuses = self.members.statuses().await;
        // The quorum proof: a linearizable read.
        self.ping().await?;
        let answering: Vec<&etcd_client::StatusResponse> = statuses
            .iter()
            .filter_map(|(_, s)| s.as_ref().ok())
            .collect();
        let leader = answering
            .iter()
            .map(|s| s.leader())
            .find(|l| *l != 0)
            .unwrap_or(0);
        let member_name = |m: &etcd_client::Member| {
            if m.name().is_empty() {
                "(unstarted)".to_string()
            } else {
                m.name().to_string()
            }
        };
        let leader_name = listed
            .members()
            .iter()
            .find(|m| m.id() == leader && leader != 0)
            .map(member_name);
        let members: Vec<String> = listed.members().iter().map(member_name).collect();
        let names: Vec<String> = listed
            .members()
            .iter()
            .map(|m| {
                if m.id() == leader {
                    format!("{} (leader)", member_name(m))
                } else {
                    member_name(m)
                }
            })
            .collect();
        let count = names.len() as u64;
        let mut problems: Vec<String> = answering
            .iter()
            .flat_map(|s| s.errors().iter())
            .map(|e| format!("a member reports: {e}"))
            .collect();
        problems.sort();
        problems.dedup();
        if leader == 0 {
            problems.push("the cluster has no leader: writes and reads wait for one".into());
        }
        let mut notes = vec![
            format!("members: {}", names.join(", ")),
            format!("quorum: {} of {count}", count / 2 + 1),
        ];
        if let Some(version) = answering.first().map(|s| s.version()) {
            notes.push(format!("etcd {version}"));
        }
        for (endpoint, status) in &statuses {
            if let Err(why) = status {
                notes.push(format!(
                    "member {endpoint} is not answering ({why}): the others serve while a quorum answers"
                ));
            }
        }
        notes.push(format!("key prefix: {}/", self.prefix));
        notes.push(format!(
            "clock: this machine's + max_skew_ms {}",
            self.url.max_skew_ms
        ));
        let check = StoreCheck {
            role: "etcd".into(),
            replicas: count.saturating_sub(1),
            // A write is acknowledged once a majority holds it: the leader and these.
            min_replicas: count / 2,
            durable: problems.is_empty(),
            problems,
            notes,
            checked_at_ms: row_fence_contract::ledger::now_ms(),
            identity: None,
            members,
            leader: leader_name,
        };
        *self.last_check.lock().unwrap_or_else(|p| p.into_inner()) = Some(check.clone());
        Ok(check)
    }

    fn last_check(&self) -> Option<StoreCheck> {
        self.last_check
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_prefix_never_nests_inside_another_prefixs_boards() {
        let open = |prefix: &str| EtcdStore::open("etcd://h:2379", prefix);
        for nested in ["rf/board/b/rec/s", "board", "rf/board", "/board/"] {
            let err = open(nested).unwrap_err();
            assert!(matches!(err, StoreError::Invalid(_)), "{nested}: {err}");
        }
        for fine in ["rowfence", "rowfence2", "rf/boards", "team/rf/"] {
            assert!(open(fine).is_ok(), "{fine}");
        }
        assert!(open("/").is_err());
    }
}
