//! `row-fence batch | records | log`: raw fenced batches and what they left behind.

use crate::flags::MAX_TTL;
use crate::leases::FenceArgs;
use crate::open::{board_revision, no_board, store_for_write, store_to_look};
use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use row_fence_store::{CLAIMS, LeaseFence, META, RecordWrite, StoreError, WriteKind};
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct BatchArgs {
    /// Board slug
    board: String,
    /// The batch: a JSON array of {"kind":"put|delete|check","section","key","expected":<int, -1 = blind>,"value"}; - for stdin
    #[arg(long, value_name = "BATCH.json")]
    file: PathBuf,
    /// Print {"board","revision","writes"} as one JSON object instead of the bare revision
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    fence: FenceArgs,
}

#[derive(clap::Args, Debug)]
pub struct RecordsArgs {
    /// Board slug
    board: String,
    /// Only this section
    section: Option<String>,
    /// Print {"revision", "sections": {section: {key: {"r","v"}}}}
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct LogArgs {
    /// Board slug
    board: String,
    /// How many of the newest entries
    #[arg(long, default_value_t = 20)]
    count: usize,
    /// Print a JSON array, newest first
    #[arg(long)]
    json: bool,
}

fn store_failure(e: StoreError) -> Failure {
    match e {
        StoreError::RevisionConflict { key } => {
            Failure::refused(format!("revision conflict on {key}; nothing was written"))
        }
        StoreError::StaleLease(why) => Failure::refused(format!(
            "the controller lease is stale ({why}); nothing was written"
        )),
        StoreError::Invalid(why) => Failure::usage(why.to_string()),
        other => Failure::could_not(other.to_string()),
    }
}

fn read_batch(path: &PathBuf) -> Result<Vec<RecordWrite>, Failure> {
    let mut text = String::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    read.map_err(|e| Failure::could_not(format!("cannot read {}: {e}", path.display())))?;
    let raw: Vec<RawWrite> = serde_json::from_str(&text).map_err(|e| {
        // serde's "invalid type: map, expected a sequence" for an object, said plainly.
        let why = match serde_json::from_str::<serde_json::Value>(&text) {
            Err(syntax) => format!("not JSON: {syntax}"),
            Ok(v) if !v.is_array() => "it is JSON but not an array".to_string(),
            Ok(_) => e.to_string(),
        };
        Failure::usage(format!(
            "{} is not a batch (a JSON array of {{\"kind\",\"section\",\"key\",\"expected\",\"value\"}}): {why}",
            path.display()
        ))
    })?;
    if raw.is_empty() {
        return Err(Failure::usage(format!(
            "{} is an empty batch: it would write nothing",
            path.display()
        )));
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, w)| w.checked(i))
        .collect()
}

/// One write as the batch file spells it: `value` is required for a put (a missing value
/// is a mistake, not a null).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWrite {
    kind: WriteKind,
    section: String,
    key: String,
    expected: i64,
    value: Option<serde_json::Value>,
}

/// Records only `row-fence controller` and `row-fence migrate` may write: a raw batch
/// that deleted the lease and the epoch counter could hand out an epoch twice.
const RESERVED: [&str; 3] = row_fence_store::meta::ALL;

impl RawWrite {
    fn checked(self, i: usize) -> Result<RecordWrite, Failure> {
        let at = format!("write {} ({}/{})", i + 1, self.section, self.key);
        if self.kind != WriteKind::Check
            && self.section == META
            && RESERVED.contains(&self.key.as_str())
        {
            return Err(Failure::usage(format!(
                "{at}: meta/lease, meta/epoch and meta/layout are written only by `row-fence controller` and `row-fence migrate`; a raw batch may check them"
            )));
        }
        let value = match (self.kind, self.value) {
            (WriteKind::Put, None) => {
                return Err(Failure::usage(format!("{at}: a put needs a \"value\"")));
            }
            (_, value) => value.unwrap_or_default(),
        };
        Ok(RecordWrite {
            kind: self.kind,
            section: self.section,
            key: self.key,
            expected: self.expected,
            value,
        })
    }
}

/// A row lease as a raw batch may put it: exactly what `acquire` writes, no more.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    holder: String,
    #[allow(dead_code)]
    generation: u64,
    expires_at_ms: u64,
    tenant: Option<String>,
}

/// Refuses a put into `claims` that is not a row lease `acquire` could have written: a
/// holder that is not a lane, an expiry that is not a number of ms, or one beyond the
/// longest lease (366 days from the store's now).
fn check_claims(writes: &[RecordWrite], now_ms: u64) -> Result<(), Failure> {
    let latest = now_ms.saturating_add(MAX_TTL.as_millis() as u64);
    for (i, write) in writes.iter().enumerate() {
        if write.kind != WriteKind::Put || write.section != CLAIMS {
            continue;
        }
        let at = format!("write {} (claims/{})", i + 1, write.key);
        let claim: Claim = serde_json::from_value(write.value.clone()).map_err(|e| {
            Failure::usage(format!(
                "{at}: a claim is {{\"holder\", \"generation\", \"expires_at_ms\", \"tenant\"?}} with whole, non-negative numbers: {e}"
            ))
        })?;
        row_fence_contract::descriptor::validate_row(&write.key)
            .map_err(|e| Failure::usage(format!("{at}: {e}")))?;
        row_fence_contract::descriptor::validate_lane(&claim.holder)
            .map_err(|e| Failure::usage(format!("{at}: {e}")))?;
        if let Some(tenant) = &claim.tenant {
            row_fence_contract::descriptor::validate_tenant(tenant)
                .map_err(|e| Failure::usage(format!("{at}: {e}")))?;
        }
        if claim.expires_at_ms > latest {
            return Err(Failure::usage(format!(
                "{at}: expires_at_ms {} is beyond the longest lease, 366 days from the store's now",
                claim.expires_at_ms
            )));
        }
    }
    Ok(())
}

/// Refuses a put into `claims` whose generation is not the revision the batch commits at
/// (`revision` + 1, the board read at `revision`), as `acquire` gives it (ARCHITECTURE.md,
/// "The generation never goes back"): every generation up to the board's revision may
/// have been handed out already, to this row or another, and one given again would fence
/// nothing. True when the batch puts a lease (it then commits only at that revision).
fn check_generations(writes: &[RecordWrite], revision: u64) -> Result<bool, Failure> {
    let next = revision + 1;
    let mut grants = false;
    for (i, write) in writes.iter().enumerate() {
        if write.kind != WriteKind::Put || write.section != CLAIMS {
            continue;
        }
        grants = true;
        let generation = write.value.get("generation").and_then(|g| g.as_u64());
        if generation != Some(next) {
            return Err(Failure::usage(format!(
                "write {} (claims/{}): generation {} is not the revision this batch commits at ({next}: the board is at revision {revision}, and every generation up to it may have been handed out already); a lease's generation is the revision that grants it",
                i + 1,
                write.key,
                generation.map_or_else(|| "?".to_string(), |g| g.to_string()),
            )));
        }
    }
    Ok(grants)
}

/// Refuses a batch whose claims would put a row beside a look-alike row of the board, or a
/// holder beside a look-alike holder of another live lease (ARCHITECTURE.md, "One
/// spelling"): the rule `acquire` applies, on the claims as they would stand after the
/// batch. Read before the batch is sent; the store cannot arm such a lease anyway, since a
/// raw batch writes no lease token and `acquire --reissue` applies the same rule in its own
/// fenced write.
async fn check_look_alikes(
    board: &str,
    writes: &[RecordWrite],
    store: &dyn row_fence_store::LeaseStore,
    now_ms: u64,
) -> Result<(), Failure> {
    use row_fence_contract::spelling::skeleton;
    use std::collections::BTreeMap;
    let puts: Vec<&RecordWrite> = writes
        .iter()
        .filter(|w| w.kind == WriteKind::Put && w.section == CLAIMS)
        .collect();
    if puts.is_empty() {
        return Ok(());
    }
    let snapshot = store
        .sections(board, &[CLAIMS])
        .await
        .map_err(store_failure)?;
    // Row → (holder, expiry) as the claims would stand after the batch.
    let lease_of = |value: &serde_json::Value| {
        let holder = value.get("holder").and_then(|h| h.as_str()).unwrap_or("");
        let expires = value
            .get("expires_at_ms")
            .and_then(|e| e.as_u64())
            .unwrap_or(0);
        (holder.to_string(), expires)
    };
    let mut claims: BTreeMap<String, (String, u64)> = snapshot
        .sections
        .get(CLAIMS)
        .into_iter()
        .flatten()
        .map(|(k, r)| (k.clone(), lease_of(&r.value)))
        .collect();
    for w in writes.iter().filter(|w| w.section == CLAIMS) {
        match w.kind {
            WriteKind::Put => {
                claims.insert(w.key.clone(), lease_of(&w.value));
            }
            WriteKind::Delete => {
                claims.remove(&w.key);
            }
            WriteKind::Check => {}
        }
    }
    for put in puts {
        let (holder, _) = lease_of(&put.value);
        let (row_sk, lane_sk) = (skeleton(&put.key), skeleton(&holder));
        for (row, (other, expires)) in &claims {
            if *row != put.key && skeleton(row) == row_sk {
                return Err(Failure::usage(format!(
                    "claims/{}: looks like row {row} on board {board} (same letters up to case and look-alikes such as 0/o, 1/l); one row has one spelling",
                    put.key
                )));
            }
            if *expires > now_ms && *other != holder && skeleton(other) == lane_sk {
                return Err(Failure::usage(format!(
                    "claims/{}: lane {holder} looks like lane {other}, which holds {board}/{row}; one lane has one spelling",
                    put.key
                )));
            }
        }
    }
    Ok(())
}

pub async fn batch(args: BatchArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    let writes = read_batch(&args.file)?;
    let store = store_for_write(settings)?;
    // One read first: a board whose store went back in time (store_regressed) or whose
    // clock did is refused before anything is sent, and the fence's now is the store's.
    let read = store
        .sections(&args.board, &[])
        .await
        .map_err(store_failure)?;
    let now_ms = read.now_ms;
    check_claims(&writes, now_ms)?;
    check_look_alikes(&args.board, &writes, store.as_ref(), now_ms).await?;
    let grants = check_generations(&writes, read.revision)?;
    let lease = args.fence.controller().map(|c| LeaseFence {
        owner: c.owner,
        epoch: c.epoch,
        now_ms,
    });
    let count = writes.len();
    let batch = row_fence_store::FencedBatch {
        writes,
        lease,
        // A batch that puts a lease commits at exactly the generation it gives it.
        expected_revision: grants.then_some(read.revision),
        ..Default::default()
    };
    let revision = store
        .fenced_batch(&args.board, &batch)
        .await
        .map_err(store_failure)?;
    if args.json {
        out(
            &serde_json::json!({"board": args.board, "revision": revision, "writes": count})
                .to_string(),
        );
    } else {
        out(&revision.to_string());
    }
    Ok(exit::ALLOWED)
}

pub async fn records(args: RecordsArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    let store = store_to_look(settings, &args.board).await?;
    let names = match &args.section {
        Some(section) => vec![section.clone()],
        None => store
            .section_names(&args.board)
            .await
            .map_err(store_failure)?,
    };
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut snapshot = store
        .sections(&args.board, &refs)
        .await
        .map_err(store_failure)?;
    // A lease's token hash is never printed (ARCHITECTURE.md, "Lease token").
    for record in snapshot
        .sections
        .get_mut(CLAIMS)
        .into_iter()
        .flat_map(|s| s.values_mut())
    {
        if let Some(object) = record.value.as_object_mut() {
            object.remove("token_sha256");
        }
    }
    if snapshot.revision == 0 {
        say!("row-fence: {}", no_board(&args.board));
    }
    if args.json {
        out(&json!({"revision": snapshot.revision, "sections": snapshot.sections}).to_string());
        return Ok(exit::ALLOWED);
    }
    out(&format!(
        "board {} at revision {}",
        args.board, snapshot.revision
    ));
    for (section, records) in &snapshot.sections {
        for (key, record) in records {
            out(&format!(
                "{section:<16} {key:<32} r{:<8} {}",
                record.revision, record.value
            ));
        }
    }
    Ok(exit::ALLOWED)
}

pub async fn log(args: LogArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    let store = store_to_look(settings, &args.board).await?;
    let entries = store
        .log(&args.board, args.count)
        .await
        .map_err(store_failure)?;
    if entries.is_empty() && board_revision(store.as_ref(), &args.board).await? == 0 {
        say!("row-fence: {}", no_board(&args.board));
    }
    if args.json {
        out(&serde_json::to_string(&entries).expect("serializes"));
        return Ok(exit::ALLOWED);
    }
    out(&format!(
        "{:>10}  {:<24} {:>7}",
        "REVISION", "OWNER", "RECORDS"
    ));
    for e in entries {
        let owner = if e.owner.is_empty() {
            "(unfenced)"
        } else {
            e.owner.as_str()
        };
        out(&format!(
            "{:>10}  {:<24} {:>7}",
            e.revision, owner, e.records
        ));
    }
    Ok(exit::ALLOWED)
}
