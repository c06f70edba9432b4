//! `row-fence store check | copy | accept-regression | accept-clock`: the store itself
//! (ARCHITECTURE.md, "Acknowledged means durable"). `check` shows what the store's role and
//! settings say about keeping an acknowledged grant; `accept-regression` is the operator's
//! way past a store that went back in time (`store_regressed`), `accept-clock` past a clock
//! that ran ahead and was corrected (`clock_regressed`); `copy` moves boards between any two
//! stores with their revisions carried (ARCHITECTURE.md, "The etcd store").

use crate::open::store_for_write;
use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use row_fence_store::StoreSpec;
use row_fence_store::copy::{copy_board, same_identity};
use row_fence_store::judge::rfc3339;
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
    /// Copy boards from one store to another (file, Redis, etcd), each board's revision carried so the target hands out no generation twice; the target must not hold them yet. Stop the writers of the source first. All or nothing on the file store and Redis; on etcd a copy that fails partway leaves a partial board that answers store_regressed until the same copy is run again (it resumes) or --drop-partial drops it
    #[command(
        after_help = "Example:\n  row-fence store copy --from redis://127.0.0.1:6379 --to etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379 board-1\n  row-fence store copy --drop-partial --to etcd://10.0.0.1:2379 board-1\n\nThen point ROW_FENCE_STORE at the target and restart the daemons. The target gets an identity of its own."
    )]
    Copy(CopyArgs),
    /// After a store went back in time (store_regressed): raise BOARD's revision above every generation ever seen and drop its row leases and controller lease, so lanes re-acquire and no generation is handed out twice
    AcceptRegression(AcceptArgs),
    /// After a clock that ran ahead was corrected (clock_regressed): accept BOARD's clock as it is now. Leases found expired under the clock that ran ahead and live again under the corrected one are dropped (their lanes re-acquire); gives up: leases granted or renewed while it ran ahead keep the later expiry it gave them
    #[command(
        after_help = "Example:\n  row-fence store accept-clock board-1\n\nRun it only once the clock is right again (NTP synced): the clock as it reads now becomes the board's floor."
    )]
    AcceptClock(AcceptArgs),
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Also report BOARD's row and lane spellings that break "one spelling": names stored before the allowlist, look-alike rows, look-alike holders of live leases (repeatable)
    #[arg(long = "board", value_name = "BOARD")]
    boards: Vec<String>,
    /// Print the check as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct CopyArgs {
    /// The store to copy from (file, file:DIR, redis://…, etcd://…)
    #[arg(long, value_name = "STORE", required_unless_present = "drop_partial")]
    from: Option<String>,
    /// The store to copy into
    #[arg(long, value_name = "STORE")]
    to: String,
    /// Board slugs to copy
    #[arg(required = true)]
    boards: Vec<String>,
    /// Print what was copied as JSON lines
    #[arg(long)]
    json: bool,
    /// Drop the partial copy of each board from the --to store (a copy that failed partway; never a board in use) instead of copying
    #[arg(long, conflicts_with = "from")]
    drop_partial: bool,
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
        Action::Copy(a) => copy(a, settings).await,
        Action::AcceptRegression(a) => accept(a, settings).await,
        Action::AcceptClock(a) => accept_clock(a, settings).await,
    }
}

async fn check(args: CheckArgs, settings: &Settings) -> Outcome {
    let store = settings.open_store().map_err(Failure::could_not)?;
    let mut check = store
        .check()
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?;
    for board in &args.boards {
        validate_board(board).map_err(Failure::usage)?;
        let found = row_fence_store::lease::spellings(store.as_ref(), board)
            .await
            .map_err(|e| Failure::could_not(e.to_string()))?;
        check.problems.extend(found);
    }
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

async fn copy(args: CopyArgs, settings: &Settings) -> Outcome {
    for board in &args.boards {
        validate_board(board).map_err(|e| Failure {
            code: exit::USAGE,
            message: e.to_string(),
        })?;
    }
    let open = |text: &str| -> Result<_, Failure> {
        let spec = StoreSpec::parse(text).map_err(|e| Failure {
            code: exit::USAGE,
            message: e.to_string(),
        })?;
        row_fence_store::open(&spec, &settings.home, &settings.key_prefix)
            .map_err(|e| Failure::could_not(e.to_string()))
    };
    let to = open(&args.to)?;
    if args.drop_partial {
        return drop_partial(&args, to.as_ref()).await;
    }
    let from = open(args.from.as_deref().unwrap_or_default())?;
    if from.describe() == to.describe() {
        return Err(Failure {
            code: exit::USAGE,
            message: format!("--from and --to are the same store ({})", to.describe()),
        });
    }
    if let Some(id) = same_identity(from.as_ref(), to.as_ref())
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?
    {
        return Err(Failure {
            code: exit::USAGE,
            message: format!(
                "--from and --to carry one identity ({id}): they are one store, or one is a copy of the other's files; a copy gives the target an identity of its own, never the source's"
            ),
        });
    }
    for board in &args.boards {
        let copied = copy_board(from.as_ref(), to.as_ref(), board)
            .await
            .map_err(|e| Failure::could_not(format!("board {board}: {e}")))?;
        if args.json {
            out(&serde_json::to_string(&copied).expect("serializes"));
        }
        say!(
            "row-fence: board {board} copied to {}: {} records, revision {} there (was {} on {})",
            to.describe(),
            copied.records,
            copied.revision,
            copied.from_revision,
            from.describe()
        );
    }
    Ok(exit::ALLOWED)
}

/// `store copy --drop-partial`: each board's partial copy dropped from the target.
async fn drop_partial(args: &CopyArgs, to: &dyn row_fence_store::LeaseStore) -> Outcome {
    for board in &args.boards {
        let dropped = to
            .drop_partial(board)
            .await
            .map_err(|e| Failure::could_not(format!("board {board}: {e}")))?;
        if args.json {
            out(&serde_json::json!({"board": board, "dropped_keys": dropped}).to_string());
        }
        say!(
            "row-fence: the partial copy of board {board} dropped from {}: {dropped} keys",
            to.describe()
        );
    }
    Ok(exit::ALLOWED)
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
    if let Some(id) = &accepted.identity.identity {
        let how = if accepted.identity.created {
            "written now: it carried none"
        } else {
            "the one it carries"
        };
        let replaced = if accepted.identity.replaced.is_empty() {
            String::new()
        } else {
            format!(
                "; it replaces {} this home knew there, whose floors carry over",
                accepted.identity.replaced.join(", ")
            )
        };
        say!("row-fence: accepted the store at these addresses as identity {id} ({how}){replaced}");
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

async fn accept_clock(args: AcceptArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(|e| Failure {
        code: exit::USAGE,
        message: e.to_string(),
    })?;
    drop(store_for_write(settings)?);
    let store = settings.open_monotonic(true).map_err(Failure::could_not)?;
    let accepted = monotonic::accept_clock(&store, &args.board)
        .await
        .map_err(|e| Failure::could_not(e.to_string()))?;
    if args.json {
        out(&serde_json::to_string(&accepted).expect("serializes"));
    }
    let dropped = if accepted.rows_dropped.is_empty() {
        "no lease dropped".to_string()
    } else {
        format!(
            "leases dropped on row(s) {} (found expired under the clock that ran ahead; their lanes re-acquire)",
            accepted.rows_dropped.join(", ")
        )
    };
    say!(
        "row-fence: board {} accepts the clock as it is ({}; the floor was {}) at revision {}; {}{}",
        args.board,
        rfc3339(accepted.clock_ms),
        if accepted.from_floor_ms == 0 {
            "none".to_string()
        } else {
            rfc3339(accepted.from_floor_ms)
        },
        accepted.revision,
        dropped,
        if accepted.controller_dropped {
            "; the controller lease dropped too"
        } else {
            ""
        }
    );
    Ok(exit::ALLOWED)
}
