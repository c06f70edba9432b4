//! The one store connection: a multiplexed, auto-reconnecting `ConnectionManager` on
//! standalone Redis/Valkey, or a cluster connection on Redis Cluster (`redis+cluster://`,
//! `rediss+cluster://`). Both are created lazily, so the daemon starts and listens while
//! the store is down, and both heal by themselves once it is back.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// Each connection attempt gives up after this long; asks are bounded by their own
/// deadline anyway, this only keeps a dead server from pinning the reconnect task.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection handle; clones share the one connection.
#[derive(Clone)]
pub enum Conn {
    /// Standalone Redis: the manager reconnects after a drop.
    Single(ConnectionManager),
    /// Redis Cluster: connected on first use, then it follows the cluster itself.
    Cluster(Arc<LazyCluster>),
}

/// A cluster connection made on first use (and retried on the next use after a failure).
pub struct LazyCluster {
    client: redis::cluster::ClusterClient,
    connection: tokio::sync::OnceCell<ClusterConnection>,
}

impl Conn {
    /// A lazy connection for `url`. `redis+cluster://` and `rediss+cluster://` name a
    /// cluster (any of its nodes); every other scheme a standalone server.
    pub fn open(url: &str) -> RedisResult<Conn> {
        if let Some(node) = cluster_node(url) {
            let client = redis::cluster::ClusterClient::builder(vec![node])
                .connection_timeout(CONNECT_TIMEOUT)
                .build()?;
            return Ok(Conn::Cluster(Arc::new(LazyCluster {
                client,
                connection: tokio::sync::OnceCell::new(),
            })));
        }
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        Ok(Conn::Single(ConnectionManager::new_lazy_with_config(
            client, config,
        )?))
    }

    /// True on Redis Cluster (no cross-slot work: the document layout is not served).
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    async fn cluster(lazy: &LazyCluster) -> RedisResult<ClusterConnection> {
        lazy.connection
            .get_or_try_init(|| lazy.client.get_async_connection())
            .await
            .cloned()
    }
}

/// `redis+cluster://h:p` → `redis://h:p`, `rediss+cluster://…` → `rediss://…`.
fn cluster_node(url: &str) -> Option<String> {
    url.strip_prefix("redis+cluster://")
        .map(|rest| format!("redis://{rest}"))
        .or_else(|| {
            url.strip_prefix("rediss+cluster://")
                .map(|rest| format!("rediss://{rest}"))
        })
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(lazy) => {
                let lazy = lazy.clone();
                Box::pin(async move { Conn::cluster(&lazy).await?.req_packed_command(cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(lazy) => {
                let lazy = lazy.clone();
                Box::pin(async move {
                    Conn::cluster(&lazy)
                        .await?
                        .req_packed_commands(pipeline, offset, count)
                        .await
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(_) => 0,
        }
    }
}
