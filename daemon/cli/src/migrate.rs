//! `row-fence migrate BOARD --writers-upgraded [--from file --to URL]`.

use crate::open::{board_revision, no_board};
use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::{exit, paths};
use row_fence_resident::config::Settings;
use row_fence_store::StoreSpec;
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::redis::migrate::{self, NEEDS_UPGRADED_WRITERS};

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// Board slug
    board: String,
    /// Confirm that every live fencing reader and writer runs a release that follows moved_to
    #[arg(long)]
    writers_upgraded: bool,
    /// Copy from this store instead (only `file` or `file:DIR`: the embedded store)
    #[arg(long, requires = "to", value_name = "STORE")]
    from: Option<String>,
    /// …into this Redis (with --from)
    #[arg(long, requires = "from", value_name = "URL")]
    to: Option<String>,
    /// Print {"board","written","from":"document"|"file","to":"records"} as one JSON object instead of the bare count
    #[arg(long)]
    json: bool,
}

fn failure(e: row_fence_store::StoreError) -> Failure {
    match e {
        row_fence_store::StoreError::RevisionConflict { .. } => {
            Failure::could_not("the board's fencing state kept changing; nothing was committed")
        }
        other => Failure::could_not(other.to_string()),
    }
}

pub async fn run(args: MigrateArgs, settings: &Settings) -> Outcome {
    validate_board(&args.board).map_err(Failure::usage)?;
    if !args.writers_upgraded {
        return Err(Failure::could_not(NEEDS_UPGRADED_WRITERS));
    }
    let written = match (&args.from, &args.to) {
        (Some(from), Some(to)) => {
            let file = match StoreSpec::parse(from).map_err(Failure::could_not)? {
                StoreSpec::File(None) => FileStore::new(paths::file_store(&settings.home)),
                StoreSpec::File(Some(dir)) => FileStore::new(dir),
                StoreSpec::Redis(_) | StoreSpec::Etcd(_) => {
                    return Err(Failure::could_not(
                        "--from names the embedded store: file or file:DIR (`row-fence store copy` copies between any two stores)",
                    ));
                }
            };
            let redis = redis_store(to, settings)?;
            // A moved board reads as an error here; the migration itself says what it is.
            if matches!(board_revision(&file, &args.board).await, Ok(0)) {
                return Err(Failure::could_not(no_board(&args.board)));
            }
            migrate::file_to_records(&file, &redis, &args.board)
                .await
                .map_err(failure)?
        }
        _ => {
            let StoreSpec::Redis(url) = &settings.store else {
                return Err(Failure::could_not(
                    "per record fencing keys need a Redis store: set ROW_FENCE_STORE, or copy from the file store with --from file --to redis://…",
                ));
            };
            let redis = redis_store(url, settings)?;
            if matches!(board_revision(&redis, &args.board).await, Ok(0)) {
                return Err(Failure::could_not(no_board(&args.board)));
            }
            migrate::document_to_records(&redis, &args.board)
                .await
                .map_err(failure)?
        }
    };
    if args.json {
        // Layouts, never the URL: it may carry the store's password.
        let from = if args.from.is_some() {
            "file"
        } else {
            "document"
        };
        out(&serde_json::json!({"board": args.board, "written": written, "from": from, "to": "records"}).to_string());
    } else {
        out(&written.to_string());
    }
    Ok(exit::ALLOWED)
}

fn redis_store(url: &str, settings: &Settings) -> Result<RedisStore, Failure> {
    match StoreSpec::parse(url).map_err(Failure::could_not)? {
        StoreSpec::Redis(url) => RedisStore::open(&url, &settings.key_prefix)
            .map_err(|e| Failure::could_not(e.to_string())),
        StoreSpec::File(_) | StoreSpec::Etcd(_) => Err(Failure::could_not(
            "--to names a Redis: redis://…, rediss://…, redis+unix://…",
        )),
    }
}
