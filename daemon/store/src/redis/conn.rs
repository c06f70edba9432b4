//! The one store connection: a multiplexed connection to the primary, made lazily (so the
//! daemon starts and listens while the store is down) and remade after it breaks.
//!
//! Every connect checks the server before anything is sent on it ([`durability::inspect`]:
//! `ROLE`, settings, permissions): a server that is not the master is refused
//! (`store_not_primary`), and with `redis+sentinel://` the primary is asked of the
//! sentinels again, so the daemon and the CLI follow the elected primary. A call that
//! finds the connection broken, or the server demoted (`READONLY`, `NOREPLICAS`,
//! `MASTERDOWN`), drops it; the next call reconnects and checks again. A connect that
//! failed is not retried for [`RECONNECT_BACKOFF`], so a dead store costs asks nothing.
//!
//! No response timeout of its own: every call is bounded by its caller's deadline (an ask's
//! own deadline, a command's `--timeout`), never by a fixed cap below it. A connection on
//! which a call outlived its caller's deadline is not trusted again: the call's future,
//! dropped by that deadline, drops the link ([`Abandoned`]), every call still in flight on
//! it fails at once (it could not be answered in time either), and the next call connects
//! again, asking the sentinels again with `redis+sentinel://`. So a server that stalled
//! (a pause, a partition) never answers later what was queued for it, and calls go to a
//! newly elected primary as soon as there is one. A connect attempt (with its check) gives
//! up after [`CONNECT_TIMEOUT`], so a stalled server the sentinels still name does not hold
//! up the next attempt.
//!
//! A replicated primary is read through a read barrier ([`super::barrier`]): a link made
//! to one carries the barrier of that very server, so an ask's read and its barrier are on
//! one primary ([`Pinned`]).
//!
//! On Redis Cluster (`redis+cluster://`) the cluster client follows the cluster itself;
//! MOVED/ASK are followed and TRYAGAIN retried briefly ([`CLUSTER_RETRIES`]), then the call
//! fails "slot migrating, retry".

use super::barrier::{self, Barrier, Round};
use super::durability::{self, Options};
use super::url::{Location, SentinelTarget};
use crate::StoreCheck;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    AsyncConnectionConfig, Cmd, IntoConnectionInfo, Pipeline, RedisConnectionInfo, RedisError,
    RedisFuture, RedisResult, Value,
};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Each connection attempt (the connect and the server's check) gives up after this long;
/// callers' deadlines bound it too.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// After a failed connect, calls fail at once with the same error for this long instead
/// of each reconnecting (a dead or demoted store would otherwise cost every ask a connect).
pub const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);

/// Asking the sentinels again when the server they named is not (yet) the master: during a
/// failover they may lag the promotion by a moment.
const SENTINEL_ATTEMPTS: usize = 5;

/// Between those attempts.
const SENTINEL_RETRY: Duration = Duration::from_millis(100);

/// How often the cluster client retries a redirected or TRYAGAIN call before it gives up
/// (the library's default, 16 with exponential waits, ran a takeover 12.5 minutes).
pub const CLUSTER_RETRIES: u32 = 4;

/// The code of the error a connect to a server that is not the master fails with.
pub const NOT_PRIMARY: &str = "ROWFENCE_NOT_PRIMARY";

/// A connection handle; clones share the one connection.
#[derive(Clone)]
pub enum Conn {
    /// One server or the primary the sentinels elect.
    Single(Arc<Managed>),
    /// Redis Cluster: connected on first use, then it follows the cluster itself.
    Cluster(Arc<LazyCluster>),
}

/// A cluster connection made on first use (and retried on the next use after a failure).
pub struct LazyCluster {
    client: redis::cluster::ClusterClient,
    connection: tokio::sync::OnceCell<ClusterConnection>,
}

/// Where a standalone connection goes.
enum Source {
    /// Always this server.
    Server(redis::Client),
    /// Whichever server the sentinels name as the master.
    Sentinel {
        sentinel: tokio::sync::Mutex<Sentinel>,
        master: String,
        node: SentinelNodeConnectionInfo,
    },
}

/// The standalone connection, remade and re-checked after it breaks.
pub struct Managed {
    source: Source,
    /// The URL's durability options and the key prefix.
    options: Options,
    /// The live connection, if any; a call takes a clone (cheap: it is multiplexed).
    link: Mutex<Option<Link>>,
    /// One connect at a time; the others wait for its result.
    connecting: tokio::sync::Mutex<()>,
    /// The last failed connect, answered again until [`RECONNECT_BACKOFF`] passed.
    failed: Mutex<Option<(Instant, RedisError)>>,
    /// Numbers links, so a failed call drops only the link it used.
    ids: AtomicU64,
    /// Connections found broken (each one makes the next call reconnect).
    losses: AtomicU64,
    /// The check made at the last connect or recheck.
    check: Mutex<Option<StoreCheck>>,
}

/// One connection to one primary, trusted until it is dropped.
#[derive(Clone)]
struct Link {
    con: MultiplexedConnection,
    id: u64,
    /// Cancelled when the link is dropped: calls still in flight on it fail at once.
    dropped: CancellationToken,
    /// The client that made it: the barrier's own connection goes to the same server.
    client: redis::Client,
    /// Replicas the read barrier needs on this primary (0: asks are pure reads).
    barrier_replicas: u64,
    /// The barrier, connected on first use.
    barrier: Arc<tokio::sync::OnceCell<Arc<Barrier>>>,
}

impl Conn {
    /// A lazy connection for `location`.
    pub fn open(location: &Location, options: Options) -> RedisResult<Conn> {
        let source = match location {
            Location::Cluster(node) => {
                let client = redis::cluster::ClusterClient::builder(vec![node.as_str()])
                    .connection_timeout(CONNECT_TIMEOUT)
                    .retries(CLUSTER_RETRIES)
                    .min_retry_wait(20)
                    .max_retry_wait(250)
                    .build()?;
                return Ok(Conn::Cluster(Arc::new(LazyCluster {
                    client,
                    connection: tokio::sync::OnceCell::new(),
                })));
            }
            Location::Server(url) => Source::Server(redis::Client::open(url.as_str())?),
            Location::Sentinel(target) => sentinel_source(target)?,
        };
        Ok(Conn::Single(Arc::new(Managed {
            source,
            options,
            link: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            failed: Mutex::new(None),
            ids: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            check: Mutex::new(None),
        })))
    }

    /// The TCP address the live link was made to (for Sentinel, the master the sentinels
    /// named), if there is one and it is TCP.
    pub fn dialed(&self) -> Option<(String, u16)> {
        let Conn::Single(m) = self else {
            return None;
        };
        let link = m.current()?;
        match link.client.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => Some((host.clone(), *port)),
            _ => None,
        }
    }

    /// True on Redis Cluster (no cross-slot work: the document layout is not served).
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Connections found broken so far.
    pub fn losses(&self) -> u64 {
        match self {
            Conn::Single(m) => m.losses.load(Ordering::Relaxed),
            Conn::Cluster(_) => 0,
        }
    }

    /// The check made at the last connect or recheck.
    pub fn last_check(&self) -> Option<StoreCheck> {
        match self {
            Conn::Single(m) => lock(&m.check).clone(),
            Conn::Cluster(_) => Some(cluster_check()),
        }
    }

    /// Checks the server now on the live connection (connecting if needed); a server
    /// that is no longer the master drops the connection and fails `NOT_PRIMARY`.
    pub async fn recheck(&self) -> RedisResult<StoreCheck> {
        let m = match self {
            Conn::Single(m) => m,
            Conn::Cluster(_) => return Ok(cluster_check()),
        };
        let link = m.link().await?;
        let mut con = link.con.clone();
        let result = guarded(m, &link, durability::inspect(&mut con, &m.options)).await;
        let check = match result {
            Ok(check) => check,
            Err(e) => {
                m.observe(link.id, &e);
                return Err(e);
            }
        };
        *lock(&m.check) = Some(check.clone());
        if check.role != "master" {
            m.drop_link(link.id);
            return Err(not_primary(&check));
        }
        Ok(check)
    }

    /// The check, made again when older than `max_age_ms` (connecting if needed: a
    /// connect checks too).
    pub async fn fresh_check(&self, max_age_ms: u64) -> RedisResult<StoreCheck> {
        let m = match self {
            Conn::Single(m) => m,
            Conn::Cluster(_) => return Ok(cluster_check()),
        };
        m.link().await?;
        let now = row_fence_contract::ledger::now_ms();
        let cached = lock(&m.check).clone();
        match cached {
            Some(check)
                if check.role == "master"
                    && now.saturating_sub(check.checked_at_ms) < max_age_ms =>
            {
                Ok(check)
            }
            _ => self.recheck().await,
        }
    }

    /// A connection of the caller's own to the checked primary (WATCH/MULTI/EXEC must not
    /// share the multiplexed one).
    pub async fn dedicated(&self) -> RedisResult<MultiplexedConnection> {
        match self {
            Conn::Single(m) => Ok(m.connect().await?.0),
            Conn::Cluster(_) => Err(RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a dedicated connection needs a standalone Redis, not a cluster",
            ))),
        }
    }

    async fn cluster(lazy: &LazyCluster) -> RedisResult<ClusterConnection> {
        lazy.connection
            .get_or_try_init(|| lazy.client.get_async_connection())
            .await
            .cloned()
    }
}

fn sentinel_source(target: &SentinelTarget) -> RedisResult<Source> {
    // A sentinel's own password (`requirepass` in sentinel.conf) is not the data nodes'.
    let mut auth = RedisConnectionInfo::default();
    if let Some(user) = &target.sentinel_username {
        auth = auth.set_username(user);
    }
    if let Some(password) = &target.sentinel_password {
        auth = auth.set_password(password);
    }
    let sentinels = target
        .sentinels
        .iter()
        .map(|url| {
            url.as_str()
                .into_connection_info()
                .map(|info| info.set_redis_settings(auth.clone()))
        })
        .collect::<RedisResult<Vec<_>>>()?;
    let sentinel = Sentinel::build(sentinels)?;
    let mut info = RedisConnectionInfo::default().set_db(target.db);
    if let Some(user) = &target.username {
        info = info.set_username(user);
    }
    if let Some(password) = &target.password {
        info = info.set_password(password);
    }
    Ok(Source::Sentinel {
        sentinel: tokio::sync::Mutex::new(sentinel),
        master: target.master.clone(),
        node: SentinelNodeConnectionInfo::default().set_redis_connection_info(info),
    })
}

/// What a cluster store reports: its settings are per node and not checked here.
fn cluster_check() -> StoreCheck {
    StoreCheck {
        role: "cluster".into(),
        durable: true,
        notes: vec![
            "a Redis Cluster's settings are not checked (and writes do not wait for replicas): give every node appendonly yes and appendfsync always".into(),
        ],
        checked_at_ms: row_fence_contract::ledger::now_ms(),
        ..StoreCheck::default()
    }
}

fn not_primary(check: &StoreCheck) -> RedisError {
    redis::make_extension_error(
        NOT_PRIMARY.into(),
        Some(format!(
            "the server is a {}; row-fence reads and writes only the primary",
            check.role
        )),
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True when `e` means the connection is gone or its server no longer the primary
/// (so the next call reconnects and checks again).
pub fn breaks_link(e: &RedisError) -> bool {
    if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
        return true;
    }
    match e.clone().into_server_errors() {
        Some(items) => items.iter().any(|(_, s)| demoted(s.code())),
        None => e.code().is_some_and(demoted),
    }
}

/// An error reply that says the server is no longer the primary row-fence checked at
/// connect (or is restarting): the next call must reconnect and check again.
fn demoted(code: &str) -> bool {
    matches!(
        code,
        "READONLY" | "NOREPLICAS" | "MASTERDOWN" | "LOADING" | "NOAUTH" | NOT_PRIMARY
    )
}

/// True when an answer (an error reply, or one inside a pipeline's answers) says so.
fn answer_breaks_link(value: &Value) -> bool {
    match value {
        Value::ServerError(e) => demoted(e.code()),
        _ => false,
    }
}

impl Managed {
    fn asks_sentinels(&self) -> bool {
        matches!(self.source, Source::Sentinel { .. })
    }

    fn current(&self) -> Option<Link> {
        lock(&self.link).clone()
    }

    /// Stops trusting link `id` (if it is still the live one): the next call connects
    /// again, and every call still in flight on it fails at once.
    fn drop_link(&self, id: u64) {
        let mut link = lock(&self.link);
        if link.as_ref().is_some_and(|l| l.id == id) {
            if let Some(old) = link.take() {
                old.dropped.cancel();
            }
            self.losses.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn observe(&self, id: u64, e: &RedisError) {
        if breaks_link(e) {
            self.drop_link(id);
        }
    }

    async fn link(&self) -> RedisResult<Link> {
        if let Some(link) = self.current() {
            return Ok(link);
        }
        let _one = self.connecting.lock().await;
        if let Some(link) = self.current() {
            return Ok(link);
        }
        if let Some((at, e)) = lock(&self.failed).clone()
            && at.elapsed() < RECONNECT_BACKOFF
        {
            return Err(e);
        }
        match self.connect().await {
            Ok((con, check, client)) => {
                let link = Link {
                    con,
                    id: self.ids.fetch_add(1, Ordering::Relaxed),
                    dropped: CancellationToken::new(),
                    client,
                    barrier_replicas: barrier::replicas_needed(
                        self.options.replicas.unwrap_or(check.replicas),
                        check.min_replicas,
                    ),
                    barrier: Arc::default(),
                };
                *lock(&self.check) = Some(check);
                *lock(&self.link) = Some(link.clone());
                *lock(&self.failed) = None;
                Ok(link)
            }
            Err(e) => {
                *lock(&self.failed) = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    /// Connects to the primary and checks it: the server itself, or the one the sentinels
    /// name (asked again while what they name is not the master, or does not answer within
    /// [`CONNECT_TIMEOUT`]).
    async fn connect(&self) -> RedisResult<(MultiplexedConnection, StoreCheck, redis::Client)> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(None);
        let attempts = match self.source {
            Source::Server(_) => 1,
            Source::Sentinel { .. } => SENTINEL_ATTEMPTS,
        };
        let mut last = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(SENTINEL_RETRY).await;
            }
            let client = match &self.source {
                Source::Server(client) => client.clone(),
                Source::Sentinel {
                    sentinel,
                    master,
                    node,
                } => match sentinel
                    .lock()
                    .await
                    .async_master_for(master, Some(node))
                    .await
                {
                    Ok(client) => client,
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                },
            };
            let checked = tokio::time::timeout(CONNECT_TIMEOUT, async {
                let mut con = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                let check = durability::inspect(&mut con, &self.options).await?;
                Ok::<_, RedisError>((con, check))
            })
            .await
            .unwrap_or_else(|_| Err(connect_timed_out()));
            let (con, check) = match checked {
                Ok(checked) => checked,
                Err(e) if self.asks_sentinels() && e.is_io_error() => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if check.role == "master" {
                return Ok((con, check, client));
            }
            *lock(&self.check) = Some(check.clone());
            last = Some(not_primary(&check));
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((redis::ErrorKind::Io, "no connection attempt was made"))
        }))
    }
}

/// A call's future, armed while the call is in flight on a link: dropped before the call
/// finished (its caller's deadline passed), it drops the link, which is then not trusted
/// again.
struct Abandoned {
    managed: Option<Arc<Managed>>,
    id: u64,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(m) = self.managed.take() {
            m.drop_link(self.id);
        }
    }
}

/// Runs `call` on `link`: it fails at once if the link is dropped meanwhile, and drops the
/// link if its caller stops waiting for it.
async fn guarded<T>(
    m: &Arc<Managed>,
    link: &Link,
    call: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    let mut abandoned = Abandoned {
        managed: Some(m.clone()),
        id: link.id,
    };
    let result = tokio::select! {
        biased;
        () = link.dropped.cancelled() => Err(replaced()),
        answer = call => answer,
    };
    abandoned.managed = None;
    result
}

/// What a call in flight on a dropped link answers.
fn replaced() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "the store connection was dropped while this call waited on it (a call on it outlived its deadline, or the server stopped being the primary); it is not answered from that connection",
    ))
}

fn connect_timed_out() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "the server did not answer its connect and check within 2 s",
    ))
}

async fn single_command(m: &Arc<Managed>, link: &Link, cmd: &Cmd) -> RedisResult<Value> {
    let mut con = link.con.clone();
    let result = guarded(m, link, con.req_packed_command(cmd)).await;
    match &result {
        Err(e) => m.observe(link.id, e),
        Ok(answer) if answer_breaks_link(answer) => m.drop_link(link.id),
        Ok(_) => {}
    }
    result
}

async fn single_pipeline(
    m: &Arc<Managed>,
    link: &Link,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let mut con = link.con.clone();
    let result = guarded(m, link, con.req_packed_commands(pipeline, offset, count)).await;
    match &result {
        Err(e) => m.observe(link.id, e),
        Ok(answers) if answers.iter().any(answer_breaks_link) => m.drop_link(link.id),
        Ok(_) => {}
    }
    result
}

/// One link held for a read and its barrier, so both are on the same primary: calls on it
/// never reconnect (a dropped link fails them), and [`Pinned::barrier`] waits on that
/// primary's replicas. On a cluster, calls go to the cluster as usual and there is no
/// barrier.
pub struct Pinned(PinnedTo);

enum PinnedTo {
    /// A standalone or Sentinel-elected primary.
    Single(Arc<Managed>, Box<Link>),
    /// Redis Cluster.
    Cluster(Conn),
}

impl Conn {
    /// The live link (connecting if needed), held for a read and its barrier.
    pub async fn pin(&self) -> RedisResult<Pinned> {
        match self {
            Conn::Single(m) => Ok(Pinned(PinnedTo::Single(
                m.clone(),
                Box::new(m.link().await?),
            ))),
            Conn::Cluster(_) => Ok(Pinned(PinnedTo::Cluster(self.clone()))),
        }
    }
}

impl Pinned {
    /// The read barrier after every read already answered on this link: `None` when the
    /// primary needs none (no replica set, or a cluster). A barrier its replicas did not
    /// meet drops the link, so the next call connects again (and asks the sentinels).
    pub async fn barrier(&self) -> RedisResult<Option<Round>> {
        let Pinned(PinnedTo::Single(m, link)) = self else {
            return Ok(None);
        };
        if link.barrier_replicas == 0 {
            return Ok(None);
        }
        let round = guarded(m, link, async {
            let barrier = link
                .barrier
                .get_or_try_init(|| async {
                    let config = AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(CONNECT_TIMEOUT))
                        .set_response_timeout(None);
                    let con = link
                        .client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?;
                    Ok::<_, RedisError>(Arc::new(Barrier::new(
                        con,
                        barrier::channel(&m.options.prefix),
                        link.barrier_replicas,
                        m.options.wait_ms,
                    )))
                })
                .await?
                .clone();
            barrier.after_now().await
        })
        .await;
        match &round {
            Err(e) => m.observe(link.id, e),
            Ok(round) if !round.met() => m.drop_link(link.id),
            Ok(_) => {}
        }
        round.map(Some)
    }
}

impl ConnectionLike for Pinned {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.0 {
            PinnedTo::Single(m, link) => Box::pin(single_command(m, link, cmd)),
            PinnedTo::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.0 {
            PinnedTo::Single(m, link) => {
                Box::pin(single_pipeline(m, link, pipeline, offset, count))
            }
            PinnedTo::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(m) => {
                let m = m.clone();
                Box::pin(async move {
                    let link = m.link().await?;
                    single_command(&m, &link, cmd).await
                })
            }
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
            Conn::Single(m) => {
                let m = m.clone();
                Box::pin(async move {
                    let link = m.link().await?;
                    single_pipeline(&m, &link, pipeline, offset, count).await
                })
            }
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
        0
    }
}
