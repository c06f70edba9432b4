//! `row-fence acquire | renew | release | show`.

use crate::flags::parse_ttl;
use crate::open::{board_revision, no_board, no_board_elsewhere, store_for_write, store_to_look};
use row_fence_contract::descriptor::{
    self, DESCRIPTOR_FILE, validate_board, validate_lane, validate_row, validate_tenant,
};
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::scope::Scope;
use row_fence_contract::{Descriptor, LeaseToken, exit, say};
use row_fence_resident::config::Settings;
use row_fence_resident::registry::Registry;
use row_fence_store::atomic_file::stage;
use row_fence_store::fencing::Controller;
use row_fence_store::judge::rfc3339;
use row_fence_store::lease::{self, Grant, LeaseError};
use row_fence_store::{RowLease, StoreError};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

/// Default row lease time.
pub const DEFAULT_TTL: &str = "2h";

/// Fences a write on the board's controller lease: both flags or neither.
#[derive(clap::Args, Debug, Clone)]
pub struct FenceArgs {
    /// Fence the write on this controller (with --epoch; "" compares only the epoch and expiry)
    #[arg(long, requires = "epoch", value_name = "O")]
    owner: Option<String>,
    /// Fence the write on this controller lease epoch (with --owner)
    #[arg(long, requires = "owner", value_name = "E")]
    epoch: Option<u64>,
}

impl FenceArgs {
    /// The controller lease the write is fenced on, if any.
    pub fn controller(&self) -> Option<Controller> {
        self.epoch.map(|epoch| Controller {
            owner: self.owner.clone().unwrap_or_default(),
            epoch,
        })
    }
}

#[derive(clap::Args, Debug)]
pub struct AcquireArgs {
    /// Board slug
    board: String,
    /// Row id
    row: String,
    /// The lane to grant the row to
    #[arg(long)]
    lane: String,
    /// Lease time, e.g. 90s, 15m, 2h
    #[arg(long, default_value = DEFAULT_TTL, value_parser = parse_ttl)]
    ttl: Duration,
    /// Take the row even when another lane's lease is live
    #[arg(long)]
    takeover: bool,
    /// The board's tenant (recorded in the lease and the descriptor)
    #[arg(long)]
    tenant: Option<String>,
    /// Write the descriptor, with its lease token (0600, atomically, staged before the grant: nothing is granted if it cannot be written) here; without a path, to this worktree's <git dir>/row-fence.json. Without this flag the descriptor, token included, is printed on stdout only
    #[arg(long, value_name = "PATH", num_args = 0..=1)]
    write_descriptor: Option<Option<PathBuf>>,
    /// A lease granted before lease tokens: give the lane's live lease a token, keeping its generation and expiry (a lease with a token is never reissued: a lost descriptor is a new grant by acquire)
    #[arg(long, conflicts_with = "takeover")]
    reissue: bool,
    /// Print the grant as JSON (the descriptor plus expires_at_ms and descriptor_path)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    fence: FenceArgs,
}

#[derive(clap::Args, Debug)]
pub struct RenewArgs {
    /// Board slug
    #[arg(required_unless_present = "via_daemon")]
    board: Option<String>,
    /// Row id
    #[arg(required_unless_present = "via_daemon")]
    row: Option<String>,
    /// The lane holding the row
    #[arg(long, required_unless_present = "via_daemon")]
    lane: Option<String>,
    /// The generation it holds
    #[arg(long, required_unless_present = "via_daemon")]
    generation: Option<u64>,
    /// The holder's descriptor, whose lease token proves it is the holder [default: this worktree's <git dir>/row-fence.json]
    #[arg(long, value_name = "PATH")]
    descriptor: Option<PathBuf>,
    /// New lease time from now, e.g. 90s, 15m, 2h
    #[arg(long, default_value = DEFAULT_TTL, value_parser = parse_ttl)]
    ttl: Duration,
    /// Print the lease as JSON
    #[arg(long)]
    json: bool,
    /// Ask the daemon to renew this uid's bound lane's lease, with the token of the descriptor the daemon reads itself (a lane with no store credentials; docs/hard-mode.md, "Key broker")
    #[arg(long, conflicts_with_all = ["board", "row", "lane", "generation", "descriptor", "owner", "epoch"])]
    via_daemon: bool,
    /// The key broker's socket (with --via-daemon) [default: $SSH_AUTH_SOCK]
    #[arg(long, requires = "via_daemon", value_name = "PATH")]
    agent: Option<PathBuf>,
    #[command(flatten)]
    fence: FenceArgs,
}

#[derive(clap::Args, Debug)]
pub struct ReleaseArgs {
    /// Board slug
    #[arg(required_unless_present = "via_daemon")]
    board: Option<String>,
    /// Row id
    #[arg(required_unless_present = "via_daemon")]
    row: Option<String>,
    /// The lane holding the row
    #[arg(long, required_unless_present = "via_daemon")]
    lane: Option<String>,
    /// The generation it holds
    #[arg(long, required_unless_present = "via_daemon")]
    generation: Option<u64>,
    /// The holder's descriptor, whose lease token proves it is the holder [default: this worktree's <git dir>/row-fence.json]
    #[arg(long, value_name = "PATH")]
    descriptor: Option<PathBuf>,
    /// Print {"board","row","lane","generation","released":true} as one JSON object
    #[arg(long)]
    json: bool,
    /// ROW and --lane name a lease stored before the spelling rule, written as `store check --board` prints them (each non-ASCII or invisible character as \u{HEX}); released by holder and generation without a lease token, as a takeover would end it
    #[arg(long, conflicts_with = "descriptor")]
    stored_name: bool,
    /// Ask the daemon to release this uid's bound lane's lease, with the token of the descriptor the daemon reads itself (a lane with no store credentials; docs/hard-mode.md, "Key broker")
    #[arg(long, conflicts_with_all = ["board", "row", "lane", "generation", "descriptor", "owner", "epoch"])]
    via_daemon: bool,
    /// The key broker's socket (with --via-daemon) [default: $SSH_AUTH_SOCK]
    #[arg(long, requires = "via_daemon", value_name = "PATH")]
    agent: Option<PathBuf>,
    #[command(flatten)]
    fence: FenceArgs,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Board slug
    board: String,
    /// Only this row
    row: Option<String>,
    /// Print a JSON array
    #[arg(long)]
    json: bool,
}

fn lease_failure(e: LeaseError) -> Failure {
    if e.is_refusal() {
        Failure::refused(e.to_string())
    } else {
        Failure::could_not(e.to_string())
    }
}

/// A grant that did not reach its replicas, or whose connection broke in flight, was not
/// handed out: no descriptor, exit 1, and the sentence says it may exist on the primary.
fn grant_failure(e: LeaseError) -> Failure {
    match e {
        LeaseError::Store(StoreError::Unacknowledged {
            revision,
            acked,
            wanted,
            wait_ms,
        }) => Failure::could_not(format!(
            "the grant reached {acked} of {wanted} replicas within {wait_ms} ms; not handed out (it committed on the primary at generation {revision}, which a failover may lose; no descriptor was written)"
        )),
        LeaseError::Store(StoreError::Indeterminate(why)) => Failure::could_not(format!(
            "the grant may have committed but was not acknowledged; not handed out (row-fence show tells; no descriptor was written): {why}"
        )),
        other => lease_failure(other),
    }
}

fn ttl_ms(ttl: Duration) -> u64 {
    ttl.as_millis().min(u64::MAX as u128) as u64
}

/// The lease renew or release acts on, with the holder's lease token: from `--descriptor`,
/// else from this worktree's descriptor when it names the same lease. A descriptor naming
/// another lease is an error; none leaves no token, and the store refuses `token_mismatch`.
fn held(
    board: &str,
    row: &str,
    lane: &str,
    generation: u64,
    descriptor: Option<&PathBuf>,
) -> Result<Descriptor, Failure> {
    let mut d = Descriptor {
        board: board.into(),
        row: row.into(),
        lane: lane.into(),
        generation,
        tenant: None,
        token: None,
    };
    d.validate().map_err(Failure::usage)?;
    let path = match descriptor {
        Some(path) => Some(path.clone()),
        None => worktree_descriptor().ok().filter(|p| p.exists()),
    };
    if let Some(path) = path {
        let found = descriptor::read(&path)
            .map_err(|e| Failure::could_not(format!("{} {e}", path.display())))?
            .ok_or_else(|| Failure::could_not(format!("{} does not exist", path.display())))?;
        let same = found.board == d.board
            && found.row == d.row
            && found.lane == d.lane
            && found.generation == d.generation;
        if same {
            d.token = found.token;
        } else if descriptor.is_some() {
            return Err(Failure::usage(format!(
                "{} holds {}/{} for {} at generation {}, not the lease named",
                path.display(),
                found.board,
                found.row,
                found.lane,
                found.generation
            )));
        }
    }
    Ok(d)
}

/// The descriptor as printed: without its lease token when the token went into a file.
fn printable(d: &Descriptor, keep_token: bool) -> Descriptor {
    Descriptor {
        token: if keep_token { d.token.clone() } else { None },
        ..d.clone()
    }
}

pub async fn acquire(args: AcquireArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    validate_row(&args.row).map_err(Failure::usage)?;
    validate_lane(&args.lane).map_err(Failure::usage)?;
    if let Some(tenant) = &args.tenant {
        validate_tenant(tenant).map_err(Failure::usage)?;
    }
    let target = match &args.write_descriptor {
        None => None,
        Some(None) => Some(worktree_descriptor()?),
        Some(Some(path)) => Some(path.clone()),
    };
    let store = store_for_write(settings)?;
    let token = LeaseToken::generate()
        .map_err(|e| Failure::could_not(format!("cannot create a lease token: {e}")))?;
    // The descriptor is staged beside its target before the grant (ARCHITECTURE.md, "Lease
    // token"): a directory that does not exist or cannot be written fails here, with
    // nothing granted, so no token exists that was never saved.
    let staged = match &target {
        None => None,
        Some(path) => Some(stage(path, token.expose().as_bytes(), 0o600).map_err(|e| {
            Failure::could_not(format!(
                "cannot write the descriptor {}: {e}; nothing was granted",
                path.display()
            ))
        })?),
    };
    let grant = Grant {
        board: &args.board,
        row: &args.row,
        lane: &args.lane,
        ttl_ms: ttl_ms(args.ttl),
        takeover: args.takeover,
        tenant: args.tenant.as_deref(),
        token: &token,
        reissue: args.reissue,
    };
    let (descriptor, lease) =
        lease::acquire(store.as_ref(), &grant, args.fence.controller().as_ref())
            .await
            .map_err(grant_failure)?;
    // The grant is committed and acknowledged: the staged descriptor is renamed into place
    // before anything is printed, so a closed stdout or stderr cannot leave a granted lane
    // without it; a failed write names the lease it holds (never its token).
    let public = serde_json::to_string(&printable(&descriptor, false)).expect("serializes");
    if let (Some(path), Some(staged)) = (&target, staged) {
        let body = serde_json::to_string(&descriptor).expect("a descriptor serializes");
        staged.commit(format!("{body}\n").as_bytes()).map_err(|e| {
            Failure::could_not(format!(
                "granted {public}, but cannot write the descriptor {}: {e} (the row is granted to the lane: row-fence acquire again makes a new generation and token, and fences this one)",
                path.display()
            ))
        })?;
    }
    // Without a descriptor file, stdout is the only place the token is saved.
    let descriptor = printable(&descriptor, target.is_none());
    let body = serde_json::to_string(&descriptor).expect("a descriptor serializes");
    if args.json {
        let mut object = serde_json::to_value(&descriptor).expect("a descriptor serializes");
        object["expires_at_ms"] = json!(lease.expires_at_ms);
        object["descriptor_path"] = json!(target.as_ref().map(|p| p.display().to_string()));
        out(&object.to_string());
    } else {
        out(&body);
    }
    say!(
        "row-fence: {} {}/{} to {} at generation {} until {}",
        if args.reissue { "reissued" } else { "granted" },
        descriptor.board,
        descriptor.row,
        descriptor.lane,
        descriptor.generation,
        rfc3339(lease.expires_at_ms),
    );
    if let Some(path) = &target {
        say!("row-fence: descriptor written to {}", path.display());
    }
    Ok(exit::ALLOWED)
}

/// `<git dir>/row-fence.json` of the worktree around the current directory.
fn worktree_descriptor() -> Result<PathBuf, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::could_not(format!("cannot read the working directory: {e}")))?;
    match descriptor::find_git_dir(&cwd) {
        Ok(Some(git_dir)) => Ok(git_dir.join(DESCRIPTOR_FILE)),
        Ok(None) => Err(Failure::could_not(format!(
            "--write-descriptor without a path needs a git worktree; none above {}",
            cwd.display()
        ))),
        Err(broken) => Err(Failure::could_not(broken)),
    }
}

/// The named lease's parts; clap makes them present without `--via-daemon`.
fn named(
    board: &Option<String>,
    row: &Option<String>,
    lane: &Option<String>,
    generation: Option<u64>,
) -> Result<(String, String, String, u64), Failure> {
    match (board, row, lane, generation) {
        (Some(board), Some(row), Some(lane), Some(generation)) => {
            Ok((board.clone(), row.clone(), lane.clone(), generation))
        }
        _ => Err(Failure::usage(
            "BOARD, ROW, --lane and --generation are needed (or --via-daemon)",
        )),
    }
}

pub async fn renew(args: RenewArgs, settings: &Settings) -> Outcome {
    if args.via_daemon {
        return crate::via_daemon::renew(args.agent, ttl_ms(args.ttl), args.json).await;
    }
    let (board, row, lane, generation) =
        named(&args.board, &args.row, &args.lane, args.generation)?;
    let d = held(&board, &row, &lane, generation, args.descriptor.as_ref())?;
    let store = store_for_write(settings)?;
    let lease = lease::renew(
        store.as_ref(),
        &d,
        ttl_ms(args.ttl),
        args.fence.controller().as_ref(),
    )
    .await
    .map_err(lease_failure)?;
    print_lease(&d, &lease, args.json, "renewed");
    Ok(exit::ALLOWED)
}

pub async fn release(args: ReleaseArgs, settings: &Settings) -> Outcome {
    if args.via_daemon {
        return crate::via_daemon::release(args.agent, args.json).await;
    }
    let (board, row, lane, generation) =
        named(&args.board, &args.row, &args.lane, args.generation)?;
    if args.stored_name {
        return release_stored(&board, &row, &lane, generation, &args, settings).await;
    }
    let d = release_held(
        &board,
        &row,
        &lane,
        generation,
        args.descriptor.as_ref(),
        args.fence.controller().as_ref(),
        settings,
    )
    .await?;
    if args.json {
        out(&json!({
            "board": d.board, "row": d.row, "lane": d.lane,
            "generation": d.generation, "released": true,
        })
        .to_string());
    }
    say!(
        "row-fence: released {}/{} (generation {}) by {}",
        d.board,
        d.row,
        d.generation,
        d.lane
    );
    Ok(exit::ALLOWED)
}

/// Releases the named lease in the store this home's daemon reads, with the holder's
/// token from `descriptor` (else this worktree's, when it names the same lease): the one
/// release path, `row-fence release`'s and `row-fence top --allow-writes`'s. Without the
/// token only an expired lease is released (giving up a row nobody holds any more is always
/// safe); a live one is the holder's to give up, `token_mismatch`, exit 3.
pub async fn release_held(
    board: &str,
    row: &str,
    lane: &str,
    generation: u64,
    descriptor: Option<&PathBuf>,
    fence: Option<&Controller>,
    settings: &Settings,
) -> Result<Descriptor, Failure> {
    let d = held(board, row, lane, generation, descriptor)?;
    let store = store_for_write(settings)?;
    lease::release(store.as_ref(), &d, fence)
        .await
        .map_err(lease_failure)?;
    Ok(d)
}

/// `release --stored-name`: the lease under a spelling from before the rule, named in the
/// escaped form `store check` prints (ARCHITECTURE.md, "One spelling").
async fn release_stored(
    board: &str,
    row: &str,
    lane: &str,
    generation: u64,
    args: &ReleaseArgs,
    settings: &Settings,
) -> Outcome {
    use row_fence_contract::spelling::{escape, unescape};
    validate_board(board).map_err(Failure::usage)?;
    let row = unescape(row).map_err(|e| Failure::usage(format!("row {e}")))?;
    let lane = unescape(lane).map_err(|e| Failure::usage(format!("lane {e}")))?;
    if !lease::stored_only(&row, &lane) {
        return Err(Failure::usage(format!(
            "{}/{} held by {} is spelled by the rule: its holder releases it with its descriptor, without --stored-name",
            board, row, lane
        )));
    }
    let d = Descriptor {
        board: board.to_string(),
        row,
        lane,
        generation,
        tenant: None,
        token: None,
    };
    let store = store_for_write(settings)?;
    lease::release_stored(store.as_ref(), &d, args.fence.controller().as_ref())
        .await
        .map_err(lease_failure)?;
    let (row, lane) = (escape(&d.row), escape(&d.lane));
    if args.json {
        out(&json!({
            "board": d.board, "row": row, "lane": lane,
            "generation": d.generation, "released": true,
        })
        .to_string());
    }
    say!(
        "row-fence: released {}/{row} (generation {}) held by {lane}, stored before the spelling rule",
        d.board,
        d.generation,
    );
    Ok(exit::ALLOWED)
}

fn print_lease(d: &Descriptor, lease: &RowLease, json: bool, verb: &str) {
    if json {
        out(&json!({
            "board": d.board, "row": d.row, "lane": lease.holder,
            "generation": lease.generation, "expires_at_ms": lease.expires_at_ms,
        })
        .to_string());
    } else {
        say!(
            "row-fence: {verb} {}/{} for {} at generation {} until {}",
            d.board,
            d.row,
            lease.holder,
            lease.generation,
            rfc3339(lease.expires_at_ms)
        );
    }
}

pub async fn show(args: ShowArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    let store = store_to_look(settings, &args.board).await?;
    let (leases, now) = lease::list(store.as_ref(), &args.board, args.row.as_deref())
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?;
    let scope = board_scope(settings, &args.board);
    if args.json {
        let mut listed = serde_json::to_value(&leases).expect("leases serialize");
        if let (Some(scope), Some(items)) = (&scope, listed.as_array_mut()) {
            for item in items {
                let row = item["row"].as_str().unwrap_or_default().to_string();
                item["scope"] = scope_json(scope, &row);
            }
        }
        out(&listed.to_string());
        return Ok(exit::ALLOWED);
    }
    if leases.is_empty() {
        let exists = board_revision(store.as_ref(), &args.board).await? > 0;
        if !exists && let Some(failure) = no_board_elsewhere(settings, store.as_ref(), &args.board)
        {
            return Err(failure);
        }
        let said = match (&args.row, exists) {
            (_, false) => no_board(&args.board),
            (Some(row), true) => format!("no lease on {}/{row}", args.board),
            (None, true) => format!("no row leases on {}", args.board),
        };
        out(&said);
        return Ok(exit::ALLOWED);
    }
    out(&format!(
        "{:<32} {:<24} {:>10}  {:<20} {}",
        "ROW", "HOLDER", "GENERATION", "EXPIRES", "LIVE"
    ));
    for l in &leases {
        let left = if l.live {
            format!(
                "yes ({} left)",
                row_fence_store::judge::span(l.lease.expires_at_ms - now)
            )
        } else {
            "no".to_string()
        };
        out(&format!(
            "{:<32} {:<24} {:>10}  {:<20} {}",
            l.row,
            l.lease.holder,
            l.lease.generation,
            rfc3339(l.lease.expires_at_ms),
            left
        ));
    }
    match &scope {
        Some(scope) => {
            for l in &leases {
                out(&format!("scope of {}: {}", l.row, scope.summary(&l.row)));
            }
        }
        None => out(&format!(
            "scope: none for board {} (its rows' holders may push any ref; docs/forge.md)",
            args.board
        )),
    }
    Ok(exit::ALLOWED)
}

/// The board's scope from the registry (`[boards.B.scope]`); a registry that does not
/// load shows no scope and says why on stderr (the daemon refuses to start on it).
fn board_scope(settings: &Settings, board: &str) -> Option<Scope> {
    match Registry::load(&settings.home) {
        Ok(registry) => registry.scope(board).cloned(),
        Err(e) => {
            say!("row-fence: {e}");
            None
        }
    }
}

/// A row's scope in `show --json` and `status`: its refs with `{row}` put in, the
/// repositories and the three allowances.
pub fn scope_json(scope: &Scope, row: &str) -> serde_json::Value {
    json!({
        "refs": scope.refs_for(row),
        "repositories": scope.repositories,
        "allow_delete": scope.allow_delete,
        "allow_force": scope.allow_force,
        "allow_tags": scope.allow_tags,
    })
}
