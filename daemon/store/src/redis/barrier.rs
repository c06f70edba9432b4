//! The read barrier of a replicated Redis (ARCHITECTURE.md, "Acknowledged means durable"):
//! an ask answered from a primary is trusted only once something the primary sent down its
//! replication stream *after* the ask's read was acknowledged by enough of its replicas:
//! `PUBLISH` on the barrier channel, then `WAIT`. Outside a cluster, Redis propagates a
//! `PUBLISH` to its replicas (and not to its AOF), so the round moves the replication
//! offset `WAIT` waits for without a write to the data or an fsync.
//!
//! Why it is enough, and what it needs: a grant is acknowledged only once `min_replicas`
//! (M) replicas have it; the barrier waits for K replicas with K + M > N, N the replica
//! set. A primary that a failover deposed (a partition, a pause) while a newer primary
//! acknowledged a takeover cannot gather K replicas that still follow it, because with the
//! new primary M of them hold the takeover and follow the new primary: the two sets
//! overlap. So an ask on a deposed primary fails its barrier (COULD NOT READ) instead of
//! answering from its old history, for as long as the deposed primary still believes it is
//! one (up to `min-replicas-max-lag` with Redis's own guard).
//!
//! What it does not cover (Redis is not a consensus store): a failover that promotes a
//! replica outside the overlap (one that missed an acknowledged grant: the grant is then
//! lost, and `store_regressed` is what a home that saw it answers), a replica that acked
//! the barrier and then resynced from another primary, and replica sets that change size
//! under a URL that does not name them (`?replicas=N&min_replicas=M` pins both).
//!
//! `WAIT` blocks the connection it runs on, so barriers run on a connection of their own
//! beside the one asks use, and are batched: an ask waits for the first round that starts
//! after its read, and every ask waiting when a round starts shares it. One slow barrier
//! therefore holds up no read, and costs one round at a time however many asks are in
//! flight.

use redis::aio::MultiplexedConnection;
use redis::{RedisError, RedisResult};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How long one round waits for its replicas, in ms, at most (the store URL's `wait_ms`
/// when lower): a healthy replica acknowledges within a round trip (`WAIT` asks it at
/// once), and a barrier that cannot be met should say so well within an ask's default
/// 3 s deadline, so the ask answers why rather than `timeout`.
pub const MAX_ROUND_MS: u64 = 1_000;

/// The channel every barrier round publishes on (one per key prefix; no one listens).
pub fn channel(prefix: &str) -> String {
    format!("{prefix}:barrier")
}

/// What one round found: how many replicas acknowledged its write within its wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// Replicas that acknowledged the round's write.
    pub acked: u64,
    /// Replicas the barrier needs (K).
    pub wanted: u64,
    /// How long the round waited at most, in ms.
    pub wait_ms: u64,
}

impl Round {
    /// True when enough replicas acknowledged it.
    pub fn met(&self) -> bool {
        self.acked >= self.wanted
    }
}

/// The barrier of one link: its own connection to the same primary, and the asks waiting
/// for the next round.
pub struct Barrier {
    con: MultiplexedConnection,
    channel: String,
    wanted: u64,
    wait_ms: u64,
    rounds: Mutex<Rounds>,
}

#[derive(Default)]
struct Rounds {
    /// True while a driver runs rounds.
    running: bool,
    /// Asks that read before the next round starts.
    waiting: Vec<oneshot::Sender<RedisResult<Round>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Barrier {
    /// A barrier on `con` (a connection of its own to the primary the link reads from)
    /// that waits for `wanted` replicas, `wait_ms` at most per round.
    pub fn new(con: MultiplexedConnection, channel: String, wanted: u64, wait_ms: u64) -> Barrier {
        Barrier {
            con,
            channel,
            wanted,
            wait_ms: wait_ms.clamp(1, MAX_ROUND_MS),
            rounds: Mutex::new(Rounds::default()),
        }
    }

    /// Waits for a round that starts after this call (so after every read the caller
    /// finished before calling) and returns what it found.
    pub async fn after_now(self: &Arc<Self>) -> RedisResult<Round> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut rounds = lock(&self.rounds);
            rounds.waiting.push(tx);
            !std::mem::replace(&mut rounds.running, true)
        };
        if start {
            tokio::spawn(self.clone().drive());
        }
        rx.await.unwrap_or_else(|_| {
            Err(RedisError::from((
                redis::ErrorKind::Io,
                "the read barrier's round was abandoned",
            )))
        })
    }

    /// Runs rounds back to back while asks wait; each round serves the asks that were
    /// waiting when it started.
    async fn drive(self: Arc<Self>) {
        loop {
            let batch = {
                let mut rounds = lock(&self.rounds);
                if rounds.waiting.is_empty() {
                    rounds.running = false;
                    return;
                }
                std::mem::take(&mut rounds.waiting)
            };
            let answer: RedisResult<(u64,)> = redis::pipe()
                .cmd("PUBLISH")
                .arg(&self.channel)
                .arg("")
                .ignore()
                .cmd("WAIT")
                .arg(self.wanted)
                .arg(self.wait_ms)
                .query_async(&mut self.con.clone())
                .await;
            let round = answer.map(|(acked,)| Round {
                acked,
                wanted: self.wanted,
                wait_ms: self.wait_ms,
            });
            for waiter in batch {
                let _ = waiter.send(round.clone());
            }
        }
    }
}

/// K, the replicas a read barrier needs so that it overlaps every acknowledged grant:
/// K + M > N, with N the replica set and M the replicas a grant waits for. 0 (no barrier,
/// a pure-read ask) only for a store with no replica set and no replica to wait for.
pub fn replicas_needed(replica_set: u64, min_replicas: u64) -> u64 {
    if replica_set == 0 && min_replicas == 0 {
        return 0;
    }
    (replica_set + 1).saturating_sub(min_replicas).max(1)
}

#[cfg(test)]
mod tests {
    use super::replicas_needed;

    #[test]
    fn the_barrier_and_the_grants_together_outnumber_the_replica_set() {
        assert_eq!(
            replicas_needed(0, 0),
            0,
            "a lone durable server: pure reads"
        );
        for n in 1..=5 {
            for m in 1..=n {
                let k = replicas_needed(n, m);
                assert!(k + m > n, "n={n} m={m} k={k}");
                assert!(k <= n, "n={n} m={m} k={k}: reachable with every replica up");
                assert!(k >= 1);
            }
        }
        assert_eq!(replicas_needed(3, 2), 2);
        assert_eq!(replicas_needed(2, 2), 1);
        assert_eq!(replicas_needed(2, 1), 2);
    }
}
