//! The store a command opens: the one the daemon on this home fences with. A write to
//! another store (or, on Redis, under another key prefix) would leave the daemon judging
//! leases it never sees; a read from one only warns.

use row_fence_contract::client;
use row_fence_contract::exit::Failure;
use row_fence_contract::say;
use row_fence_contract::status::Status;
use row_fence_resident::config::Settings;
use row_fence_store::{LeaseStore, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// Opens the store for a write, refusing when the daemon on this home fences with
/// another store or, on Redis, under another key prefix: a takeover written where the
/// daemon does not read would leave the old lane ALLOWED. No daemon answering within
/// 500 ms: nothing to compare, go ahead.
pub fn store_for_write(settings: &Settings) -> Result<Arc<dyn LeaseStore>, Failure> {
    let store = settings.open_store().map_err(Failure::could_not)?;
    if let Some(mismatch) = daemon_mismatch(settings, store.as_ref()) {
        return Err(Failure::could_not(format!(
            "{mismatch}: nothing was written; set {} to the daemon's",
            mismatch.fix()
        )));
    }
    Ok(store)
}

/// Opens the store for a read, warning when the daemon on this home reads another one.
pub fn store_for_read(settings: &Settings) -> Result<Arc<dyn LeaseStore>, Failure> {
    let store = settings.open_store().map_err(Failure::could_not)?;
    if let Some(mismatch) = daemon_mismatch(settings, store.as_ref()) {
        say!(
            "row-fence: warning: {mismatch}: showing what that store holds; set {} to the daemon's",
            mismatch.fix()
        );
    }
    Ok(store)
}

/// [`store_for_read`] for an operator who looks at `board` (show, records, log): on a
/// store that went back in time, or a clock that did, it warns and reads the store as it
/// is now, unchecked, so the operator can look before `row-fence store accept-regression`
/// or `accept-clock`, as docs/stores.md tells them to. Nothing is written through it.
pub async fn store_to_look(
    settings: &Settings,
    board: &str,
) -> Result<Arc<dyn LeaseStore>, Failure> {
    let store = store_for_read(settings)?;
    match store.sections(board, &[]).await {
        Err(e @ (StoreError::Regressed(_) | StoreError::ClockRegressed(_))) => {
            let fix = match e {
                StoreError::Regressed(_) => "row-fence store accept-regression",
                _ => "row-fence store accept-clock",
            };
            say!(
                "row-fence: warning: {e}; showing {board} as the store holds it now, unchecked ({fix} {board} once you have looked)"
            );
            row_fence_store::open(&settings.store, &settings.home, &settings.key_prefix)
                .map_err(Failure::could_not)
        }
        _ => Ok(store),
    }
}

/// Where a board that does not exist was looked for, when the daemon on this home reads
/// another store: not "no board" and exit 0, but the mismatch and exit 1.
pub fn no_board_elsewhere(
    settings: &Settings,
    store: &dyn LeaseStore,
    board: &str,
) -> Option<Failure> {
    daemon_mismatch(settings, store).map(|_| {
        Failure::could_not(format!(
            "no board named {board} in the store this command read, which is not the daemon's (the warning above says which)"
        ))
    })
}

/// Where this command and the daemon on this home would not see the same leases.
pub enum Mismatch {
    /// Another store.
    Store {
        socket: String,
        theirs: String,
        ours: String,
    },
    /// The same Redis, another key prefix.
    KeyPrefix {
        socket: String,
        theirs: String,
        ours: String,
    },
}

impl Mismatch {
    /// The flag (and variable) that fixes it.
    fn fix(&self) -> &'static str {
        match self {
            Mismatch::Store { .. } => "--store (or ROW_FENCE_STORE)",
            Mismatch::KeyPrefix { .. } => "--key-prefix (or ROW_FENCE_KEY_PREFIX)",
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Store {
                socket,
                theirs,
                ours,
            } => write!(
                f,
                "the daemon on {socket} fences with the store {theirs}, not {ours}"
            ),
            Mismatch::KeyPrefix {
                socket,
                theirs,
                ours,
            } => write!(
                f,
                "the daemon on {socket} reads Redis keys under the prefix {theirs:?}, not {ours:?}"
            ),
        }
    }
}

/// Compares this command's store with the daemon's, if a daemon answers quickly.
fn daemon_mismatch(settings: &Settings, store: &dyn LeaseStore) -> Option<Mismatch> {
    mismatch(settings, store, daemon_status(settings)?)
}

/// Where this command's store and the one the daemon's status names differ, if they do
/// (`row-fence top` compares at every refresh with the status it already has).
pub fn mismatch(settings: &Settings, store: &dyn LeaseStore, theirs: Status) -> Option<Mismatch> {
    let socket = settings.socket.display().to_string();
    if theirs.store != store.describe() {
        return Some(Mismatch::Store {
            socket,
            theirs: theirs.store,
            ours: store.describe(),
        });
    }
    let redis = matches!(
        settings.store,
        row_fence_store::StoreSpec::Redis(_) | row_fence_store::StoreSpec::Etcd(_)
    );
    (redis && !theirs.key_prefix.is_empty() && theirs.key_prefix != settings.key_prefix).then(
        || Mismatch::KeyPrefix {
            socket,
            theirs: theirs.key_prefix,
            ours: settings.key_prefix.clone(),
        },
    )
}

/// The status of the daemon on `settings.socket`, if one answers within 500 ms.
fn daemon_status(settings: &Settings) -> Option<Status> {
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    client::status(&settings.socket, deadline).ok()
}

/// The board's revision: 0 when nothing was ever written to it (no such board).
pub async fn board_revision(store: &dyn LeaseStore, board: &str) -> Result<u64, Failure> {
    store
        .sections(board, &[])
        .await
        .map(|snapshot| snapshot.revision)
        .map_err(Failure::could_not)
}

/// The sentence for a board nothing was ever written to (a typo, most often).
pub fn no_board(board: &str) -> String {
    format!("no board named {board} (nothing was ever written to it)")
}
