//! `row-fence store check | accept-regression`: the store itself (ARCHITECTURE.md,
//! "Acknowledged means durable"). `check` shows what the store's role and settings say
//! about keeping an acknowledged grant; `accept-regression` is the operator's way past a
//! store that went back in time (`store_regressed`).

use crate::open::store_for_write;
use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use row_fence_store::monotonic;

#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Check the store's role, replicas and durability settings now (exit 0 when grants may go ahead, 1 when not)
    Check(CheckArgs),
    /// After a store went back in time (store_regressed): raise BOARD's revision above every generation ever seen and drop its row leases and controller lease, so lanes re-acquire and no generation is handed out twice
    AcceptRegression(AcceptArgs),
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Print the check as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct AcceptArgs {
    /// Board slug
    board: String,
    /// Print what was done as JSON
    #[arg(long)]
    json: bool,
}

pub async fn run(args: StoreArgs, settings: &Settings) -> Outcome {
    match args.action {
        Action::Check(a) => check(a, settings).await,
        Action::AcceptRegression(a) => accept(a, settings).await,
    }
}

async fn check(args: CheckArgs, settings: &Settings) -> Outcome {
    let store = settings.open_store().map_err(Failure::could_not)?;
    let check = store
        .check()
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?;
    if args.json {
        out(&serde_json::to_string(&check).expect("a check serializes"));
    } else {
        out(&format!("store         {}", store.describe()));
        out(&format!(
            "role          {} ({} replicas connected; writes wait for {})",
            check.role, check.replicas, check.min_replicas
        ));
        out(&format!(
            "durable       {}",
            if check.durable {
                "yes: grants and controller writes go ahead"
            } else {
                "NO: grants and controller writes are refused"
            }
        ));
        for problem in &check.problems {
            out(&format!("problem       {problem}"));
        }
        for note in &check.notes {
            out(&format!("note          {note}"));
        }
    }
    Ok(if check.durable {
        exit::ALLOWED
    } else {
        exit::COULD_NOT_READ
    })
}

async fn accept(args: AcceptArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(|e| Failure {
        code: exit::USAGE,
        message: e.to_string(),
    })?;
    drop(store_for_write(settings)?);
    let store = settings.open_monotonic(true).map_err(Failure::could_not)?;
    let accepted = monotonic::accept_regression(&store, &args.board)
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?;
    if args.json {
        out(&serde_json::to_string(&accepted).expect("serializes"));
    }
    say!(
        "row-fence: board {} raised from revision {} to {}; {} row leases and the controller lease dropped (epochs continue above {}); lanes re-acquire",
        args.board,
        accepted.from_revision,
        accepted.revision,
        accepted.leases_dropped,
        accepted.epoch
    );
    Ok(exit::ALLOWED)
}
