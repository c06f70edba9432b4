//! A Redis store URL: where the store is (one server, a Redis Cluster node, or the
//! sentinels that elect the primary) and row-fence's own query options, which are taken
//! off before the rest goes to redis-rs (ARCHITECTURE.md, "Acknowledged means durable"):
//!
//! - `min_replicas=N`: every write waits (`WAIT`) for N replicas; default: the replicas
//!   `ROLE` shows at connect (0 on a lone server).
//! - `replicas=N`: the replica set, the replicas a primary has with all of them up; an
//!   ALLOWED ask on a primary with replicas waits for a read barrier acknowledged by K of
//!   them, K + `min_replicas` > N ([`super::barrier`]). Default: the replicas `ROLE` shows
//!   at connect. Name both in the URL to fix the overlap whatever a primary shows.
//! - `wait_ms=M`: how long a write waits for them (default [`DEFAULT_WAIT_MS`]).
//! - `durability=volatile`: the explicit opt-out for a throwaway store: writes go ahead on
//!   a store whose settings can lose them (it is still reported).
//! - `asks=all`: the asks stream records every verdict; by default (`asks=refusals`) it
//!   records refusals and could-not-read only, so an ALLOWED ask writes nothing (no
//!   propagation, no AOF fsync).
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/<master-name>[?db=N&…]` names
//! the sentinels (port 26379 when omitted) and the master they watch; the user and
//! password are the data nodes'. A sentinel's own password (`requirepass` in its
//! sentinel.conf) is `?sentinel_password=` (with `sentinel_username=` for an ACL user), the
//! option names other Redis clients use (ioredis' and go-redis' `sentinelPassword`,
//! `SentinelUsername`); these are row-fence's, never passed to the data nodes, and never
//! printed.

use std::fmt;

/// How long a write waits for its replicas by default, in ms.
pub const DEFAULT_WAIT_MS: u64 = 2_000;

/// The longest `wait_ms` accepted, in ms (a write that waits longer is a hung write).
pub const MAX_WAIT_MS: u64 = 60_000;

/// The most replicas `min_replicas` may name.
pub const MAX_MIN_REPLICAS: u64 = 64;

/// The port sentinels listen on when the URL names none.
pub const SENTINEL_PORT: u16 = 26379;

/// What is wrong with a store URL (never its password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// One of row-fence's options (or `db`) has a value it does not take.
    #[error("{option}={value:?} is not {accepted}")]
    BadOption {
        /// The option's name.
        option: &'static str,
        /// Its value as written.
        value: String,
        /// What it takes.
        accepted: String,
    },
    /// An option no part of row-fence or its Redis client reads: a typo would otherwise
    /// be ignored silently (a `min_replica=1` granting without its replica requirement).
    #[error("unknown store URL option {0:?}; the options are {KNOWN_OPTIONS}")]
    UnknownOption(String),
    /// An option given twice (or under two of its names, `pass` and `password`): which one
    /// counts would be a guess, and a later `min_replicas=0` would undo an earlier one.
    #[error("store URL option {0:?} is given twice; give it once")]
    Repeated(String),
    /// A Redis client option this kind of URL does not read: ignored, it would give a
    /// second store (`redis://h/?db=2` is database 0 to the client, `redis://h/2` is 2) or
    /// no password at all.
    #[error("{option} is not read on a {kind} URL: {instead}")]
    NotOnThisUrl {
        /// The option's name.
        option: String,
        /// The URL's kind, e.g. `redis://`.
        kind: &'static str,
        /// Where this kind of URL takes it instead.
        instead: &'static str,
    },
    /// A `redis+sentinel://` URL without `/<master-name>`.
    #[error("a redis+sentinel:// URL ends in /<master-name>")]
    NoMasterName,
    /// A sentinel's port is not a number.
    #[error("sentinel {0:?}: the port is not a number")]
    SentinelPort(String),
    /// A sentinel without a host.
    #[error("sentinel {0:?} names no host")]
    SentinelHost(String),
    /// A sentinel option on a URL that names no sentinels.
    #[error("{0} is an option of redis+sentinel:// URLs only")]
    SentinelOnly(&'static str),
}

/// Every option a store URL may carry: row-fence's own, then the Redis client's.
pub const KNOWN_OPTIONS: &str = "min_replicas, replicas, wait_ms, durability, asks, sentinel_username, sentinel_password, db, user, pass, password, protocol";

/// The options row-fence reads itself and does not pass to the Redis client, nor name in
/// a store's description.
const OWN_OPTIONS: [&str; 7] = [
    "min_replicas",
    "replicas",
    "wait_ms",
    "durability",
    "asks",
    "sentinel_username",
    "sentinel_password",
];

fn bad(option: &'static str, value: &str, accepted: impl Into<String>) -> UrlError {
    UrlError::BadOption {
        option,
        value: value.to_string(),
        accepted: accepted.into(),
    }
}

/// Where the store is.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// One server (`redis://`, `rediss://`, `redis+unix://`, `unix://`): the URL for redis-rs.
    Server(String),
    /// A Redis Cluster node (`redis+cluster://`, `rediss+cluster://`), as `redis[s]://…`.
    Cluster(String),
    /// Sentinels and the master name they watch.
    Sentinel(SentinelTarget),
}

/// The sentinels of a `redis+sentinel://` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelTarget {
    /// `redis://host:port` of each sentinel, in the URL's order.
    pub sentinels: Vec<String>,
    /// The master name the sentinels watch.
    pub master: String,
    /// The data nodes' user, if any.
    pub username: Option<String>,
    /// The data nodes' password, if any (never printed).
    pub password: Option<String>,
    /// The database number on the data nodes.
    pub db: i64,
    /// The sentinels' own ACL user (`?sentinel_username=`), if any.
    pub sentinel_username: Option<String>,
    /// The sentinels' own password (`?sentinel_password=`), if any (never printed).
    pub sentinel_password: Option<String>,
}

/// A parsed store URL.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// Where the store is.
    pub location: Location,
    /// `min_replicas`, when the URL names it.
    pub min_replicas: Option<u64>,
    /// `replicas` (the replica set's size), when the URL names it.
    pub replicas: Option<u64>,
    /// `wait_ms`.
    pub wait_ms: u64,
    /// `durability=volatile`.
    pub volatile: bool,
    /// `asks=all|refusals`: which verdicts the asks stream records.
    pub asks: AsksLog,
}

/// Which verdicts an ask records in the board's asks stream (`?asks=` in the store URL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AsksLog {
    /// REFUSED and COULD NOT READ only (the default): an ALLOWED ask is a pure read.
    #[default]
    Refusals,
    /// Every verdict, ALLOWED included (every ask is then a write: with `appendfsync
    /// always` it waits for an fsync).
    All,
}

impl AsksLog {
    /// The spelling in the URL: `refusals` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            AsksLog::Refusals => "refusals",
            AsksLog::All => "all",
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreUrl")
            .field("min_replicas", &self.min_replicas)
            .field("replicas", &self.replicas)
            .field("wait_ms", &self.wait_ms)
            .field("volatile", &self.volatile)
            .field("asks", &self.asks)
            .finish_non_exhaustive()
    }
}

impl StoreUrl {
    /// Parses a Redis store URL; the error names what is wrong (never the password).
    pub fn parse(url: &str) -> Result<StoreUrl, UrlError> {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let mut kept = Vec::new();
        let mut parsed = StoreUrl {
            location: Location::Server(String::new()),
            min_replicas: None,
            replicas: None,
            wait_ms: DEFAULT_WAIT_MS,
            volatile: false,
            asks: AsksLog::default(),
        };
        let mut db = 0;
        let (mut sentinel_username, mut sentinel_password) = (None, None);
        let kind = UrlKind::of(base);
        let mut seen = std::collections::BTreeSet::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            // `pass` and `password` are one option under two names.
            let slot = if key == "password" { "pass" } else { key };
            if !seen.insert(slot) {
                return Err(UrlError::Repeated(key.to_string()));
            }
            kind.reads(key)?;
            match key {
                "min_replicas" => {
                    parsed.min_replicas = Some(
                        number(value)
                            .filter(|n| *n <= MAX_MIN_REPLICAS)
                            .ok_or_else(|| {
                                bad("min_replicas", value, format!("0-{MAX_MIN_REPLICAS}"))
                            })?,
                    )
                }
                "replicas" => {
                    parsed.replicas = Some(
                        number(value)
                            .filter(|n| *n <= MAX_MIN_REPLICAS)
                            .ok_or_else(|| {
                                bad("replicas", value, format!("0-{MAX_MIN_REPLICAS}"))
                            })?,
                    )
                }
                "wait_ms" => {
                    parsed.wait_ms = number(value)
                        .filter(|n| (1..=MAX_WAIT_MS).contains(n))
                        .ok_or_else(|| bad("wait_ms", value, format!("1-{MAX_WAIT_MS}")))?
                }
                "durability" => {
                    parsed.volatile = match value {
                        "volatile" => true,
                        "durable" => false,
                        _ => return Err(bad("durability", value, "volatile or durable")),
                    }
                }
                "asks" => {
                    parsed.asks = match value {
                        "all" => AsksLog::All,
                        "refusals" => AsksLog::Refusals,
                        _ => return Err(bad("asks", value, "all or refusals")),
                    }
                }
                "sentinel_username" => sentinel_username = Some(decode(value)),
                "sentinel_password" => sentinel_password = Some(decode(value)),
                "db" => {
                    db = value.parse().map_err(|_| bad("db", value, "a number"))?;
                    kept.push(pair);
                }
                // The Redis client's own options, passed on to it.
                "user" | "pass" | "password" | "protocol" => kept.push(pair),
                _ => return Err(UrlError::UnknownOption(key.to_string())),
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let is_sentinel = base.starts_with("redis+sentinel://");
        if !is_sentinel && sentinel_username.is_some() {
            return Err(UrlError::SentinelOnly("sentinel_username"));
        }
        if !is_sentinel && sentinel_password.is_some() {
            return Err(UrlError::SentinelOnly("sentinel_password"));
        }
        parsed.location = if let Some(node) = rest.strip_prefix("redis+cluster://") {
            Location::Cluster(format!("redis://{node}"))
        } else if let Some(node) = rest.strip_prefix("rediss+cluster://") {
            Location::Cluster(format!("rediss://{node}"))
        } else if let Some(target) = base.strip_prefix("redis+sentinel://") {
            Location::Sentinel(SentinelTarget {
                sentinel_username,
                sentinel_password,
                ..sentinel(target, db)?
            })
        } else {
            Location::Server(rest)
        };
        Ok(parsed)
    }
}

/// Which Redis client options a kind of URL is read with (redis-rs reads the database,
/// user and password of a TCP URL from its path and userinfo only, and of a socket URL from
/// `?db=`, `?user=` and `?pass=` only; row-fence reads a sentinel URL's `db` itself).
#[derive(Clone, Copy)]
enum UrlKind {
    /// `redis://`, `rediss://`, and a cluster node (`redis+cluster://`, `rediss+cluster://`).
    Tcp,
    /// `redis+unix://`, `unix://`.
    Socket,
    /// `redis+sentinel://`.
    Sentinel,
}

impl UrlKind {
    fn of(base: &str) -> UrlKind {
        if base.starts_with("redis+unix://") || base.starts_with("unix://") {
            UrlKind::Socket
        } else if base.starts_with("redis+sentinel://") {
            UrlKind::Sentinel
        } else {
            UrlKind::Tcp
        }
    }

    /// An error for a client option (`db`, `user`, `pass`, `password`, `protocol`) that
    /// this kind of URL is not read with; row-fence's own options and unknown ones pass
    /// (the caller names those).
    fn reads(self, option: &str) -> Result<(), UrlError> {
        let not = |kind, instead| {
            Err(UrlError::NotOnThisUrl {
                option: option.to_string(),
                kind,
                instead,
            })
        };
        match (self, option) {
            (UrlKind::Tcp, "db") => {
                not("redis://", "the database is the path (redis://host:port/N)")
            }
            (UrlKind::Tcp, "user" | "pass" | "password") => not(
                "redis://",
                "the user and password are the userinfo (redis://USER:PASSWORD@host:port)",
            ),
            (UrlKind::Socket, "password") => not("redis+unix://", "use ?pass="),
            (UrlKind::Sentinel, "user" | "pass" | "password") => not(
                "redis+sentinel://",
                "the data nodes' user and password are the userinfo, the sentinels' own ?sentinel_username= and ?sentinel_password=",
            ),
            (UrlKind::Sentinel, "protocol") => not(
                "redis+sentinel://",
                "row-fence does not pass it to the sentinel client",
            ),
            _ => Ok(()),
        }
    }
}

/// The URL without row-fence's own options: the same store whatever they say (for its
/// description, which names it in status, logs and the marks of revisions seen).
pub fn without_options(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !pair.is_empty() && !OWN_OPTIONS.contains(&key)
        })
        .collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

fn number(value: &str) -> Option<u64> {
    value.parse().ok()
}

/// `[user:password@]host:port[,host:port…]/<master-name>`.
fn sentinel(target: &str, db: i64) -> Result<SentinelTarget, UrlError> {
    let (authority, master) = target.split_once('/').ok_or(UrlError::NoMasterName)?;
    let master = master.trim_end_matches('/');
    if master.is_empty() || master.contains('/') {
        return Err(UrlError::NoMasterName);
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => match info.split_once(':') {
            Some((user, pass)) => ((!user.is_empty()).then(|| decode(user)), Some(decode(pass))),
            None => (None, Some(decode(info))),
        },
    };
    let sentinels = hosts
        .split(',')
        .map(|hostport| {
            let hostport = hostport.trim();
            let (host, port) = match hostport.rsplit_once(':') {
                Some((host, port)) => (
                    host,
                    port.parse::<u16>()
                        .map_err(|_| UrlError::SentinelPort(hostport.to_string()))?,
                ),
                None => (hostport, SENTINEL_PORT),
            };
            if host.is_empty() {
                return Err(UrlError::SentinelHost(hostport.to_string()));
            }
            Ok(format!("redis://{host}:{port}"))
        })
        .collect::<Result<Vec<_>, UrlError>>()?;
    Ok(SentinelTarget {
        sentinels,
        master: decode(master),
        username,
        password,
        db,
        sentinel_username: None,
        sentinel_password: None,
    })
}

/// Percent-decodes a URL part (`%40` → `@`); anything malformed is kept as written.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_in_an_option_is_an_error_naming_the_options() {
        for url in [
            "redis+unix:///tmp/r.sock?min_replica=1",
            "redis://h:6379?durabilty=volatile",
        ] {
            let err = StoreUrl::parse(url).unwrap_err();
            assert!(matches!(err, UrlError::UnknownOption(_)), "{url}");
            assert!(err.to_string().contains("min_replicas, replicas"), "{err}");
        }
    }

    /// An option given twice, or one the client does not read on this kind of URL, is an
    /// error: `redis://h/?db=2` beside `redis://h/2` would be two stores, and
    /// `min_replicas=1&min_replicas=0` a guess.
    #[test]
    fn a_repeated_or_unread_option_is_an_error() {
        for url in [
            "redis://h?min_replicas=1&min_replicas=0",
            "redis://h?durability=volatile&durability=durable",
            "redis+unix:///r.sock?pass=a&password=b",
            "redis+unix:///r.sock?db=1&db=2",
            "redis+sentinel://h/m?sentinel_password=a&sentinel_password=b",
            "redis://h?asks=all&asks=refusals",
        ] {
            assert!(
                matches!(StoreUrl::parse(url), Err(UrlError::Repeated(_))),
                "{url}"
            );
        }
        for url in [
            "redis://h?db=2",
            "rediss://h/?pass=x",
            "redis://h?user=u",
            "redis+cluster://h?password=x",
            "redis+unix:///r.sock?password=x",
            "redis+sentinel://h/m?pass=x",
            "redis+sentinel://h/m?protocol=resp3",
        ] {
            assert!(
                matches!(StoreUrl::parse(url), Err(UrlError::NotOnThisUrl { .. })),
                "{url}"
            );
        }
        for url in [
            "redis://h/2?protocol=resp3",
            "redis+unix:///r.sock?db=1&user=u&pass=x",
            "redis+sentinel://h/m?db=1",
        ] {
            assert!(StoreUrl::parse(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn row_fences_options_are_taken_off_and_the_rest_kept() {
        let url = StoreUrl::parse(
            "redis+unix:///tmp/r.sock?db=1&min_replicas=2&replicas=3&wait_ms=500&durability=volatile&asks=all&pass=x",
        )
        .unwrap();
        assert_eq!(url.min_replicas, Some(2));
        assert_eq!(url.replicas, Some(3));
        assert_eq!(url.asks, AsksLog::All);
        assert_eq!(url.wait_ms, 500);
        assert!(url.volatile);
        assert!(
            url.location == Location::Server("redis+unix:///tmp/r.sock?db=1&pass=x".into()),
            "{url:?}"
        );
        let plain = StoreUrl::parse("redis://h:1").unwrap();
        assert_eq!(plain.min_replicas, None);
        assert_eq!(plain.wait_ms, DEFAULT_WAIT_MS);
        assert!(!plain.volatile);
        assert_eq!(plain.asks, AsksLog::Refusals);
        assert_eq!(
            StoreUrl::parse("redis://h?asks=refusals").unwrap().asks,
            AsksLog::Refusals
        );
        assert_eq!(without_options("redis://h?asks=all&db=1"), "redis://h?db=1");
        assert_eq!(
            without_options("redis://h:1/0?min_replicas=1&db=2&durability=volatile"),
            "redis://h:1/0?db=2"
        );
        assert_eq!(without_options("redis://h?wait_ms=5"), "redis://h");
        assert_eq!(
            without_options("redis://h?replicas=3&min_replicas=2"),
            "redis://h",
            "the same store whatever its replica set is said to be (its marks are kept under this)"
        );
        for bad in [
            "redis://h?min_replicas=x",
            "redis://h?wait_ms=0",
            "redis://h?durability=maybe",
            "redis://h?min_replicas=1000",
            "redis://h?replicas=x",
            "redis://h?replicas=1000",
            "redis://h?asks=some",
            "redis://h?asks",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sentinel_url_names_its_sentinels_master_and_the_data_nodes_password() {
        let url =
            StoreUrl::parse("redis+sentinel://:p%40ss@10.0.0.1:26380,h2/mymaster?db=3&wait_ms=9")
                .unwrap();
        let Location::Sentinel(target) = url.location else {
            panic!("not a sentinel URL");
        };
        assert_eq!(
            target.sentinels,
            vec!["redis://10.0.0.1:26380", "redis://h2:26379"]
        );
        assert_eq!(target.master, "mymaster");
        assert_eq!(target.password.as_deref(), Some("p@ss"));
        assert_eq!(target.username, None);
        assert_eq!(target.db, 3);
        assert_eq!(url.wait_ms, 9);
        assert!(StoreUrl::parse("redis+sentinel://h1:1").is_err());
        // The sentinels' own password is the URL's too, kept apart from the data nodes'.
        let url = StoreUrl::parse(
            "redis+sentinel://:data@h1/m?sentinel_password=s%40nt&sentinel_username=watcher",
        )
        .unwrap();
        let Location::Sentinel(target) = url.location else {
            panic!("not a sentinel URL");
        };
        assert_eq!(target.password.as_deref(), Some("data"));
        assert_eq!(target.sentinel_password.as_deref(), Some("s@nt"));
        assert_eq!(target.sentinel_username.as_deref(), Some("watcher"));
        assert_eq!(
            without_options("redis+sentinel://h1/m?sentinel_password=x&db=1"),
            "redis+sentinel://h1/m?db=1"
        );
        assert!(StoreUrl::parse("redis://h?sentinel_password=x").is_err());
        assert!(StoreUrl::parse("redis+sentinel://h1:x/m").is_err());
    }
}
