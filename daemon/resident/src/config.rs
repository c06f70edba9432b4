//! Settings shared by `row-fence-resident` and `row-fence`: the home directory, the store,
//! the socket and the key prefix, each a flag with an environment variable behind it.

use row_fence_ask::paths;
use row_fence_store::monotonic::{self, Monotonic};
use row_fence_store::{self as store, LeaseStore, StoreSpec};
use std::path::PathBuf;
use std::sync::Arc;

/// The flags every program takes (same environment variables as the daemon).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CommonArgs {
    /// Home directory for the socket, heartbeat, ledger, registry and file store [default: ~/.row-fence]
    #[arg(long, global = true, env = "ROW_FENCE_HOME", value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Lease store: file (embedded, the default), file:DIR, redis://…, rediss://…, redis+unix://…, redis+cluster://…, redis+sentinel://h:p[,h:p…]/MASTER; Redis URLs take ?min_replicas=N&wait_ms=M&durability=volatile
    #[arg(
        long,
        global = true,
        env = "ROW_FENCE_STORE",
        value_name = "URL",
        hide_env_values = true
    )]
    pub store: Option<String>,
    /// The daemon's socket [default: $ROW_FENCE_HOME/sock]
    #[arg(long, global = true, env = "ROW_FENCE_SOCKET", value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Prefix of every Redis key
    #[arg(long, global = true, env = "ROW_FENCE_KEY_PREFIX", value_name = "P")]
    pub key_prefix: Option<String>,
}

/// The location fence's flags (each also an environment variable). Prefer the
/// environment for the access secret: a flag shows in `ps`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LocationArgs {
    /// This daemon's location id; set (non-blank) turns the location fence on
    #[arg(long, env = "ROW_FENCE_LOCATION", value_name = "ID")]
    pub location: Option<String>,
    /// Base URL of the tenant map (GET {url}/api/tenants)
    #[arg(long, env = "ROW_FENCE_TENANT_MAP_URL", value_name = "URL")]
    pub tenant_map_url: Option<String>,
    /// Sent as CF-Access-Client-Id
    #[arg(
        long,
        env = "ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_ID",
        value_name = "ID",
        hide_env_values = true
    )]
    pub tenant_map_access_client_id: Option<String>,
    /// Sent as CF-Access-Client-Secret (never printed)
    #[arg(
        long,
        env = "ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub tenant_map_access_client_secret: Option<String>,
    /// How long a fetched map is served from memory, in ms (tests shorten it)
    #[arg(long, env = "ROW_FENCE_TENANT_MAP_REFRESH_MS", default_value_t = crate::location::REFRESH_MS, hide = true)]
    pub tenant_map_refresh_ms: u64,
}

impl LocationArgs {
    /// The fence's settings, or `None` when `ROW_FENCE_LOCATION` is unset or blank (inert).
    pub fn settings(&self) -> Option<crate::location::Settings> {
        let location = self
            .location
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())?;
        let nonblank = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        Some(crate::location::Settings {
            location: location.to_string(),
            source: nonblank(&self.tenant_map_url).map(|url| crate::location::fetch::Source {
                url,
                client_id: nonblank(&self.tenant_map_access_client_id),
                client_secret: nonblank(&self.tenant_map_access_client_secret),
            }),
            refresh_ms: self.tenant_map_refresh_ms,
        })
    }
}

/// Resolved settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `$ROW_FENCE_HOME`.
    pub home: PathBuf,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// Which store.
    pub store: StoreSpec,
    /// The Redis key prefix.
    pub key_prefix: String,
}

impl Settings {
    /// Resolves flags and environment into settings; the error says what is wrong.
    pub fn resolve(args: &CommonArgs) -> Result<Settings, String> {
        let home = paths::home(args.home.as_deref())?;
        let home = absolute(home)?;
        let socket = absolute(paths::socket(args.socket.as_deref(), &home))?;
        let store = StoreSpec::parse(args.store.as_deref().unwrap_or("file"))?;
        let key_prefix = args
            .key_prefix
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| store::redis::DEFAULT_KEY_PREFIX.to_string());
        Ok(Settings {
            home,
            socket,
            store,
            key_prefix,
        })
    }

    /// Opens the store (lazily for Redis) for a command: guarded so it never answers
    /// from an older history than this home has seen, and every write it acknowledges is
    /// recorded in the home's marks at once.
    pub fn open_store(&self) -> Result<Arc<dyn LeaseStore>, String> {
        Ok(self.open_monotonic(true)?)
    }

    /// Opens the store guarded by this home's marks ([`Monotonic`]); `eager` writes each
    /// acknowledged revision to the marks file at once (the CLI), otherwise the caller
    /// flushes them (the daemon).
    pub fn open_monotonic(&self, eager: bool) -> Result<Arc<Monotonic>, String> {
        row_fence_store::tls::install_crypto_provider();
        let inner =
            store::open(&self.store, &self.home, &self.key_prefix).map_err(|e| e.to_string())?;
        Ok(Arc::new(Monotonic::new(
            inner,
            Some(monotonic::marks_path(&self.home)),
            eager,
        )))
    }
}

fn absolute(path: PathBuf) -> Result<PathBuf, String> {
    std::path::absolute(&path).map_err(|e| format!("{}: {e}", path.display()))
}
