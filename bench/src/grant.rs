//! The row lease a store's asks check in the in-process cases ([`crate::stores`],
//! [`crate::floors`]): granted on the store under test before the first ask.

use row_fence_store::lease::{self, Grant};
use row_fence_store::{AskCheck, LeaseStore};
use std::time::{Duration, Instant};

/// Grants the lease the asks check, retrying while the store comes up (≤ 20 s).
pub async fn grant(store: &dyn LeaseStore) -> Result<AskCheck, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let token = row_fence_contract::LeaseToken::generate().map_err(|e| e.to_string())?;
    let grant = Grant {
        board: "bench",
        row: "row-1",
        lane: "lane-a",
        ttl_ms: 3_600_000,
        takeover: true,
        tenant: None,
        token: &token,
        reissue: false,
    };
    loop {
        match lease::acquire(store, &grant, None).await {
            Ok((d, _)) => {
                return Ok(AskCheck {
                    board: d.board,
                    row: d.row,
                    lane: d.lane,
                    generation: d.generation,
                    action: "bench".into(),
                    session: "bench".into(),
                    probe: true,
                    token: d.token,
                    ..AskCheck::default()
                });
            }
            Err(e) if Instant::now() > deadline => return Err(format!("grant: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
