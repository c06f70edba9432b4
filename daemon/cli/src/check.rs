//! `row-fence check`: the cold path. Resolves the descriptor exactly as the asker does and
//! runs the same gate in this process against the store, printing the same lines and
//! returning the same exit codes. It pays a store connect on every run — what the daemon
//! exists to avoid — and serves as the benchmark's cold baseline and a fallback for
//! operators.

use row_fence_contract::client::{DEFAULT_TIMEOUT_MS, SESSION_ENV, TIMEOUT_ENV};
use row_fence_contract::descriptor::{self, Descriptor, Resolution};
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::report::Shown;
use row_fence_contract::{Reason, Verdict, paths};
use row_fence_resident::config::Settings;
use row_fence_resident::config::{LocationArgs, flag_or_env};
use row_fence_resident::gate::{self, Gated, Located};
use row_fence_resident::location::{LocationFence, SystemClock};
use row_fence_resident::registry::Registry;
use row_fence_store::{AskCheck, AskLocation};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The lane's descriptor (else $ROW_FENCE_DESCRIPTOR, else <git dir>/row-fence.json)
    #[arg(long, value_name = "PATH")]
    descriptor: Option<PathBuf>,
    /// The fenced action, e.g. "git push origin"
    #[arg(long, default_value = "")]
    action: String,
    /// One deadline for the whole check, in ms [env: ROW_FENCE_TIMEOUT_MS] [default: 3000]
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// Also print the verdict as one JSON object on stdout
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    location: LocationArgs,
}

/// How long past the command's `--timeout` the check may take to print its verdict line:
/// its deadline is never later than `--timeout`, so a store that does not answer still
/// ends in `COULD NOT READ (timeout)`, not in the command's own timeout sentence.
pub const VERDICT_SLACK: Duration = Duration::from_millis(500);

/// Runs the check within `--timeout-ms` and the command's `limit` (`--timeout`), whichever
/// ends first.
pub async fn run(args: CheckArgs, settings: &Settings, limit: Duration) -> Outcome {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(timeout_ms(&args)?).min(limit);
    let ((gated, located), descriptor) = match descriptor::resolve_here(args.descriptor.as_deref())
    {
        Resolution::Unbound(detail) => (
            (
                Gated {
                    verdict: Verdict::Unfenced,
                    detail: format!("(not row-bound: {detail})"),
                },
                None,
            ),
            None,
        ),
        Resolution::Missing(path) => (
            (
                cnr(
                    Reason::DescriptorMissing,
                    format!("the named descriptor {} does not exist", path.display()),
                ),
                None,
            ),
            None,
        ),
        Resolution::Unreadable(path, detail) => (
            (
                cnr(
                    Reason::DescriptorUnreadable,
                    format!("{}: {detail}", path.display()),
                ),
                None,
            ),
            None,
        ),
        Resolution::Found(_, d) => (ask_store(&d, &args, settings, deadline).await, Some(d)),
    };
    if gated.verdict.is_denial() {
        record(
            settings,
            &gated,
            descriptor.as_ref(),
            &args.action,
            located.as_ref(),
        );
    }
    let shown = Shown {
        verdict: gated.verdict,
        detail: gated.detail,
        descriptor,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    shown.print(args.json);
    Ok(gated.verdict.exit_code())
}

/// `--timeout-ms`, else `ROW_FENCE_TIMEOUT_MS` (as the asker reads it), else 3000.
fn timeout_ms(args: &CheckArgs) -> Result<u64, Failure> {
    let Some(text) = flag_or_env(&args.timeout_ms.map(|ms| ms.to_string()), TIMEOUT_ENV) else {
        return Ok(DEFAULT_TIMEOUT_MS);
    };
    text.trim()
        .parse()
        .ok()
        .filter(|ms| *ms > 0)
        .ok_or_else(|| {
            Failure::usage(format!(
                "{TIMEOUT_ENV} must be a whole number of milliseconds above 0, got {text:?}"
            ))
        })
}

async fn ask_store(
    d: &Descriptor,
    args: &CheckArgs,
    settings: &Settings,
    deadline: Instant,
) -> (Gated, Option<AskLocation>) {
    let store = match settings.open_store() {
        Ok(store) => store,
        Err(e) => return (cnr(Reason::StoreUnreachable, e), None),
    };
    let action = args.action.as_str();
    // The registry names the board's margin (and its tenant), as it does for the daemon.
    let registry = match Registry::load(&settings.home) {
        Ok(registry) => registry,
        Err(e) => return (cnr(Reason::FenceError, e), None),
    };
    let check = AskCheck {
        board: d.board.clone(),
        row: d.row.clone(),
        lane: d.lane.clone(),
        generation: d.generation,
        token: d.token.clone(),
        margin_ms: registry.margin_ms(&d.board, settings.margin_ms),
        action: action.to_string(),
        session: std::env::var(SESSION_ENV).unwrap_or_default(),
        ..AskCheck::default()
    };
    let Some(location) = args.location.settings() else {
        return (gate::gate(store.as_ref(), &check, deadline).await, None);
    };
    // The same location fence as the daemon's, fetched once for this one check.
    let fence = match LocationFence::new(location, Arc::new(SystemClock)) {
        Ok(fence) => fence,
        Err(e) => return (cnr(Reason::FenceError, e), None),
    };
    let located = Located {
        fence: &fence,
        tenant: registry.tenant(&d.board),
    };
    gate::gate_located(store.as_ref(), &check, Some(located), deadline).await
}

fn cnr(reason: Reason, detail: impl std::fmt::Display) -> Gated {
    Gated {
        verdict: Verdict::CouldNotRead(reason),
        detail: detail.to_string(),
    }
}

fn record(
    settings: &Settings,
    gated: &Gated,
    d: Option<&Descriptor>,
    action: &str,
    located: Option<&AskLocation>,
) {
    let session = std::env::var(SESSION_ENV).ok();
    let cwd = std::env::current_dir()
        .ok()
        .map(|c| c.display().to_string());
    let record = LedgerRecord::new(DecidedBy::Check, gated.verdict, gated.detail.clone())
        .with_descriptor(d)
        .with_caller(session.as_deref(), cwd.as_deref(), action)
        .with_location(located.map(|l| (l.location.as_str(), l.epoch)));
    let _ = ledger::append(&paths::ledger(&settings.home), &record);
}
