//! Settings shared by `row-fence-resident` and `row-fence`: the home directory, the store,
//! the socket and the key prefix, each a flag with an environment variable behind it.
//!
//! The variables are read here, not by clap: clap counts a value from the environment as
//! given, and then prints it in every usage line (`--home <DIR> --store <URL>`) as if the
//! flags were required. A flag wins over its variable; an empty variable is unset.

use row_fence_contract::paths;
use row_fence_store::monotonic::{self, Monotonic};
use row_fence_store::{self as store, LeaseStore, StoreSpec};
use std::path::PathBuf;
use std::sync::Arc;

/// The flags every program takes (same environment variables as the daemon).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CommonArgs {
    /// Home directory for the socket, heartbeat, ledger, registry and file store [env: ROW_FENCE_HOME] [default: ~/.row-fence]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Lease store: file, file:DIR, redis://…, rediss://…, redis+unix://…, redis+cluster://…, redis+sentinel://…, etcd://…, etcds://… (options: docs/operations.md, "Configuration") [env: ROW_FENCE_STORE] [default: file]
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// The daemon's socket [env: ROW_FENCE_SOCKET] [default: $ROW_FENCE_HOME/sock]
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Prefix of every Redis or etcd key [env: ROW_FENCE_KEY_PREFIX] [default: rowfence]
    #[arg(long, global = true, value_name = "P")]
    pub key_prefix: Option<String>,
    /// The least time a lease must have left for an ALLOWED, e.g. 5s, 30s, 2m; less is REFUSED lease_expiring [env: ROW_FENCE_MARGIN] [default: 5s]
    #[arg(long, global = true, value_name = "DURATION")]
    pub margin: Option<String>,
}

/// The margin when neither `--margin` nor `ROW_FENCE_MARGIN` sets one (ARCHITECTURE.md,
/// "Margin"): the write an ALLOWED lets through happens after the verdict.
pub const DEFAULT_MARGIN_MS: u64 = 5_000;

/// The largest margin accepted (1 h): a margin past every lease's time refuses everything.
pub const MAX_MARGIN_MS: u64 = 3_600_000;

/// Parses a margin (`5s`, `1500ms`, `2m`) into ms.
///
/// # Errors
///
/// [`MarginError`], naming the value and the limit.
pub fn parse_margin(text: &str) -> Result<u64, MarginError> {
    let d = humantime::parse_duration(text.trim()).map_err(|source| MarginError::NotDuration {
        text: text.to_string(),
        source,
    })?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms > MAX_MARGIN_MS {
        return Err(MarginError::OverLimit {
            text: text.to_string(),
        });
    }
    Ok(ms)
}

/// Why a margin is not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MarginError {
    /// Not a duration.
    #[error("margin {text:?} is not a duration such as 5s or 2m: {source}")]
    NotDuration {
        /// The text given.
        text: String,
        /// humantime's reason.
        #[source]
        source: humantime::DurationError,
    },
    /// Over [`MAX_MARGIN_MS`].
    #[error("margin {text:?} is over the 1h limit")]
    OverLimit {
        /// The text given.
        text: String,
    },
}

/// A flag's value, else its environment variable's when set and not empty.
pub fn flag_or_env<T: Clone + From<String>>(flag: &Option<T>, var: &str) -> Option<T> {
    flag.clone().or_else(|| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(T::from)
    })
}

/// The location fence's flags (each also an environment variable, read by
/// [`LocationArgs::settings`]). Prefer the environment for the access secret: a flag
/// shows in `ps`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LocationArgs {
    /// This daemon's location id; set (non-blank) turns the location fence on [env: ROW_FENCE_LOCATION]
    #[arg(long, value_name = "ID")]
    pub location: Option<String>,
    /// Base URL of the tenant map (GET {url}/api/tenants) [env: ROW_FENCE_TENANT_MAP_URL]
    #[arg(long, value_name = "URL")]
    pub tenant_map_url: Option<String>,
    /// Sent as CF-Access-Client-Id [env: ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_ID]
    #[arg(long, value_name = "ID")]
    pub tenant_map_access_client_id: Option<String>,
    /// Sent as CF-Access-Client-Secret, never printed [env: ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_SECRET]
    #[arg(long, value_name = "SECRET")]
    pub tenant_map_access_client_secret: Option<String>,
    /// Origins (scheme://host[:port], comma-separated) other than the map URL's whose answer to a redirect is trusted; they are never sent the access headers [env: ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS]
    #[arg(long, value_name = "ORIGINS")]
    pub tenant_map_allowed_origins: Option<String>,
    /// How long a fetched map is served from memory, in ms (tests shorten it)
    #[arg(long, env = "ROW_FENCE_TENANT_MAP_REFRESH_MS", default_value_t = crate::location::REFRESH_MS, hide = true)]
    pub tenant_map_refresh_ms: u64,
}

impl LocationArgs {
    /// The fence's settings, or `None` when `ROW_FENCE_LOCATION` is unset or blank (inert).
    pub fn settings(&self) -> Option<crate::location::Settings> {
        let nonblank = |flag: &Option<String>, var: &str| {
            flag_or_env(flag, var).filter(|v| !v.trim().is_empty())
        };
        let location = nonblank(&self.location, "ROW_FENCE_LOCATION")?;
        Some(crate::location::Settings {
            location: location.trim().to_string(),
            source: nonblank(&self.tenant_map_url, "ROW_FENCE_TENANT_MAP_URL").map(|url| {
                crate::location::fetch::Source {
                    url,
                    client_id: nonblank(
                        &self.tenant_map_access_client_id,
                        "ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_ID",
                    ),
                    client_secret: nonblank(
                        &self.tenant_map_access_client_secret,
                        "ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_SECRET",
                    ),
                    allowed_origins: nonblank(
                        &self.tenant_map_allowed_origins,
                        "ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS",
                    )
                    .map(|list| {
                        list.split(',')
                            .map(str::trim)
                            .filter(|o| !o.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                }
            }),
            refresh_ms: self.tenant_map_refresh_ms,
        })
    }
}

/// Why the settings do not resolve, or the store does not open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither `--home`, `ROW_FENCE_HOME` nor `HOME` names a home, or the home or the
    /// socket was given relative.
    #[error("{0}")]
    Home(row_fence_contract::paths::HomeError),
    /// A path cannot be made absolute.
    #[error("{path}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--margin` / `ROW_FENCE_MARGIN` is not a duration up to 1 h.
    #[error(transparent)]
    Margin(#[from] MarginError),
    /// `--store` / `ROW_FENCE_STORE` is not a store.
    #[error(transparent)]
    Store(#[from] row_fence_store::spec::SpecError),
    /// The store would not open (a bad URL, a TLS setup failure).
    #[error(transparent)]
    Open(#[from] row_fence_store::StoreError),
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
    /// The least time in ms a lease must have left to be ALLOWED (`--margin`,
    /// `ROW_FENCE_MARGIN`, else [`DEFAULT_MARGIN_MS`]).
    pub margin_ms: u64,
}

impl Settings {
    /// Resolves flags and environment into settings; the error says what is wrong.
    pub fn resolve(args: &CommonArgs) -> Result<Settings, ConfigError> {
        // The home and socket variables are read by the contract crate, as the asker reads them.
        let home = paths::home(args.home.as_deref()).map_err(ConfigError::Home)?;
        let home = absolute(home)?;
        let socket =
            absolute(paths::socket(args.socket.as_deref(), &home).map_err(ConfigError::Home)?)?;
        let store = flag_or_env(&args.store, "ROW_FENCE_STORE");
        let store =
            StoreSpec::parse(store.as_deref().unwrap_or("file")).map_err(ConfigError::Store)?;
        let key_prefix = flag_or_env(&args.key_prefix, "ROW_FENCE_KEY_PREFIX")
            .unwrap_or_else(|| store::redis::DEFAULT_KEY_PREFIX.to_string());
        let margin_ms = match flag_or_env(&args.margin, "ROW_FENCE_MARGIN") {
            Some(text) => parse_margin(&text).map_err(ConfigError::Margin)?,
            None => DEFAULT_MARGIN_MS,
        };
        Ok(Settings {
            home,
            socket,
            store,
            key_prefix,
            margin_ms,
        })
    }

    /// Opens the store (lazily for Redis) for a command: guarded so it never answers
    /// from an older history than this home has seen, and every write it acknowledges is
    /// recorded in the home's marks at once.
    pub fn open_store(&self) -> Result<Arc<dyn LeaseStore>, ConfigError> {
        Ok(self.open_monotonic(true)?)
    }

    /// Opens the store guarded by this home's marks ([`Monotonic`]); `eager` writes each
    /// acknowledged revision to the marks file at once (the CLI), otherwise the caller
    /// flushes them (the daemon).
    pub fn open_monotonic(&self, eager: bool) -> Result<Arc<Monotonic>, ConfigError> {
        row_fence_store::tls::install_crypto_provider();
        let inner = store::open(&self.store, &self.home, &self.key_prefix)?;
        Ok(Arc::new(Monotonic::new(
            inner,
            Some(monotonic::marks_path(&self.home)),
            eager,
        )))
    }
}

fn absolute(path: PathBuf) -> Result<PathBuf, ConfigError> {
    std::path::absolute(&path).map_err(|source| ConfigError::Path { path, source })
}
