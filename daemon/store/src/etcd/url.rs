//! An etcd store URL (ARCHITECTURE.md, "The etcd store"):
//! `etcd://[user:password@]host:port[,host:port…][/][?options]`, or `etcds://…` for TLS.
//!
//! Options, taken off before anything reaches the client:
//! - `max_skew_ms=N`: the most two machines' clocks may differ (default
//!   [`DEFAULT_MAX_SKEW_MS`]): the etcd store's clock is this machine's plus it, so a lease
//!   is judged expired while any clock within the bound still reads it as live, never after.
//! - `cacert=PATH`: the CA that signed the members' certificates (`etcds://` only; the
//!   system roots are not used).
//! - `cert=PATH&key=PATH`: this client's certificate and key, for members that require
//!   client certificates (`--client-cert-auth`).
//! - `timeout_ms=N`: the longest one call waits for its answer (default
//!   [`DEFAULT_TIMEOUT_MS`]); an ask's own deadline usually ends it first.
//! - `member_timeout_ms=N`: the longest one member is waited for before the call is
//!   tried on the next (default [`DEFAULT_MEMBER_TIMEOUT_MS`]): a member that accepts
//!   connections but answers nothing (stopped, partitioned) costs a call this, once.

use std::fmt;
use std::path::PathBuf;

/// The clock skew between machines the etcd store allows by default, in ms.
pub const DEFAULT_MAX_SKEW_MS: u64 = 1_000;

/// The largest `max_skew_ms` accepted (a bound past a minute is no bound).
pub const MAX_MAX_SKEW_MS: u64 = 60_000;

/// How long one call waits for its answer by default, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// How long one member is waited for by default, in ms: well under an ask's default
/// deadline (3 s), well over a loaded cluster's answer.
pub const DEFAULT_MEMBER_TIMEOUT_MS: u64 = 500;

/// The port an endpoint without one gets (etcd's client port).
pub const ETCD_PORT: u16 = 2379;

/// What is wrong with an etcd URL (never its password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdUrlError {
    /// Not `etcd://` or `etcds://`.
    #[error("an etcd store URL starts with etcd:// or etcds://")]
    Scheme,
    /// No endpoint, or one without a host or with a port that is not a number.
    #[error("etcd endpoint {0:?} is not host:port")]
    Endpoint(String),
    /// An option row-fence does not know, or a value it does not take.
    #[error("{option}={value:?} is not {accepted}")]
    BadOption {
        /// The option as written.
        option: String,
        /// Its value as written.
        value: String,
        /// What it takes.
        accepted: String,
    },
    /// A TLS option on a plain `etcd://` URL, or `cert` without `key`.
    #[error("{0}")]
    Tls(String),
    /// An option given twice: which one counts would be a guess.
    #[error("store URL option {0:?} is given twice; give it once")]
    Repeated(String),
}

impl EtcdUrlError {
    /// This error without a quoted part that may be a piece of `secret` (the text before
    /// the URL's last `@`): one inside it, or one running across its `@`.
    fn unquoted(self, secret: &str) -> EtcdUrlError {
        let hidden = |part: &str| secret.contains(part) || part.contains('@');
        const NOT_SHOWN: &str = "(not shown: it may hold part of the password)";
        match self {
            EtcdUrlError::Endpoint(part) if hidden(&part) => {
                EtcdUrlError::Endpoint(NOT_SHOWN.into())
            }
            EtcdUrlError::BadOption {
                option,
                value,
                accepted,
            } if hidden(&option) || hidden(&value) => EtcdUrlError::BadOption {
                option: NOT_SHOWN.into(),
                value: String::new(),
                accepted,
            },
            e => e,
        }
    }
}

/// A parsed etcd store URL. Its `Debug` shows no password.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUrl {
    /// `host:port` of each member the client may talk to, as written.
    pub endpoints: Vec<String>,
    /// True for `etcds://`.
    pub tls: bool,
    /// The user and password, for a cluster with authentication on.
    pub user: Option<(String, String)>,
    /// The clock skew bound, in ms.
    pub max_skew_ms: u64,
    /// The longest one call waits, in ms.
    pub timeout_ms: u64,
    /// The longest one member is waited for before the next is tried, in ms.
    pub member_timeout_ms: u64,
    /// The CA certificate (PEM) the members' certificates are checked against.
    pub cacert: Option<PathBuf>,
    /// The client certificate and key (PEM).
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl fmt::Debug for EtcdUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdUrl")
            .field("endpoints", &self.endpoints)
            .field("tls", &self.tls)
            .field("user", &self.user.as_ref().map(|(u, _)| (u, "***")))
            .field("max_skew_ms", &self.max_skew_ms)
            .field("timeout_ms", &self.timeout_ms)
            .field("member_timeout_ms", &self.member_timeout_ms)
            .finish_non_exhaustive()
    }
}

impl EtcdUrl {
    /// Parses `etcd://…` or `etcds://…`; the error names what is wrong, never a password:
    /// a part it would quote that could hold one (anything before the text's last `@`,
    /// which a password with an unescaped `?` or `/` spreads into the hosts or options)
    /// is not quoted.
    pub fn parse(text: &str) -> Result<EtcdUrl, EtcdUrlError> {
        EtcdUrl::parse_quoting(text).map_err(|e| match text.rfind('@') {
            Some(at) => e.unquoted(&text[..at]),
            None => e,
        })
    }

    fn parse_quoting(text: &str) -> Result<EtcdUrl, EtcdUrlError> {
        let (tls, rest) = if let Some(rest) = text.strip_prefix("etcds://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("etcd://") {
            (false, rest)
        } else {
            return Err(EtcdUrlError::Scheme);
        };
        let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
        let head = head.trim_end_matches('/');
        let (userinfo, hosts) = match head.rfind('@') {
            Some(at) => (Some(&head[..at]), &head[at + 1..]),
            None => (None, head),
        };
        let user = userinfo.map(|info| {
            let (u, p) = info.split_once(':').unwrap_or((info, ""));
            (decode(u), decode(p))
        });
        let mut endpoints = Vec::new();
        for host in hosts.split(',') {
            endpoints.push(endpoint(host)?);
        }
        let mut url = EtcdUrl {
            endpoints,
            tls,
            user,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            member_timeout_ms: DEFAULT_MEMBER_TIMEOUT_MS,
            cacert: None,
            identity: None,
        };
        let (mut cert, mut key) = (None, None);
        let mut seen = std::collections::BTreeSet::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (option, value) = pair.split_once('=').unwrap_or((pair, ""));
            // Twice, which one counts would be a guess (a later max_skew_ms=0 undoing one).
            if !seen.insert(option) {
                return Err(EtcdUrlError::Repeated(option.to_string()));
            }
            let bad = |accepted: &str| EtcdUrlError::BadOption {
                option: option.to_string(),
                value: value.to_string(),
                accepted: accepted.to_string(),
            };
            match option {
                "max_skew_ms" => {
                    url.max_skew_ms = value
                        .parse()
                        .ok()
                        .filter(|n| *n <= MAX_MAX_SKEW_MS)
                        .ok_or_else(|| bad(&format!("a number of ms, 0-{MAX_MAX_SKEW_MS}")))?;
                }
                "timeout_ms" => {
                    url.timeout_ms = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=600_000).contains(n))
                        .ok_or_else(|| bad("a number of ms, 1-600000"))?;
                }
                "member_timeout_ms" => {
                    url.member_timeout_ms = value
                        .parse()
                        .ok()
                        .filter(|n| (10..=600_000).contains(n))
                        .ok_or_else(|| bad("a number of ms, 10-600000"))?;
                }
                "cacert" => url.cacert = Some(PathBuf::from(decode(value))),
                "cert" => cert = Some(PathBuf::from(decode(value))),
                "key" => key = Some(PathBuf::from(decode(value))),
                _ => {
                    return Err(bad(
                        "one of max_skew_ms, timeout_ms, member_timeout_ms, cacert, cert, key (an etcd URL option)",
                    ));
                }
            }
        }
        url.identity = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => {
                return Err(EtcdUrlError::Tls(
                    "a client certificate needs both cert=PATH and key=PATH".into(),
                ));
            }
        };
        if !tls && (url.cacert.is_some() || url.identity.is_some()) {
            return Err(EtcdUrlError::Tls(
                "cacert, cert and key are TLS options: use etcds://".into(),
            ));
        }
        Ok(url)
    }

    /// The endpoints as URIs for the client (`http://` or `https://`).
    pub fn uris(&self) -> Vec<String> {
        let scheme = if self.tls { "https" } else { "http" };
        self.endpoints
            .iter()
            .map(|e| format!("{scheme}://{e}"))
            .collect()
    }
}

/// `host[:port]` checked and completed with [`ETCD_PORT`].
fn endpoint(host: &str) -> Result<String, EtcdUrlError> {
    let bad = || EtcdUrlError::Endpoint(host.to_string());
    if host.is_empty() || host.contains(['/', ' ']) {
        return Err(bad());
    }
    // An IPv6 literal keeps its brackets: `[::1]:2379`.
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && (!name.contains(':') || name.ends_with(']')) => {
            (name, Some(port))
        }
        _ => (host, None),
    };
    if name.is_empty() {
        return Err(bad());
    }
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| bad())?,
        None => ETCD_PORT,
    };
    Ok(format!("{name}:{port}"))
}

/// Percent-decoding of a URL part (a password may hold `@` or `:` written as `%40`, `%3A`).
fn decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let url = EtcdUrl::parse("etcd://127.0.0.1:2379,h2,[::1]:3000/?max_skew_ms=250").unwrap();
        assert_eq!(url.endpoints, ["127.0.0.1:2379", "h2:2379", "[::1]:3000"]);
        assert_eq!(url.max_skew_ms, 250);
        assert!(!url.tls);
        assert_eq!(url.uris()[0], "http://127.0.0.1:2379");
        let url =
            EtcdUrl::parse("etcds://u:p%40ss@h:1?cacert=/ca.pem&cert=/c.pem&key=/k.pem").unwrap();
        assert_eq!(url.user, Some(("u".into(), "p@ss".into())));
        assert_eq!(url.uris(), ["https://h:1"]);
        assert!(url.identity.is_some());
        assert!(!format!("{url:?}").contains("p@ss"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (bad, says) in [
            ("redis://h", "etcd://"),
            ("etcd://", "endpoint"),
            ("etcd://h:x", "endpoint"),
            ("etcd://h,,i", "endpoint"),
            ("etcd://h?max_skew_ms=-1", "max_skew_ms"),
            ("etcd://h?max_skew_ms=600000", "max_skew_ms"),
            ("etcd://h?db=1", "one of"),
            ("etcd://h?max_skew_ms=1&max_skew_ms=0", "given twice"),
            ("etcd://h?cacert=/x", "etcds://"),
            ("etcds://h?cert=/x", "key=PATH"),
            ("etcd://u:pw@h:x", "\"h:x\""),
        ] {
            let err = EtcdUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        // A password with an unescaped `?` or `,` runs into the hosts and the options.
        for bad in [
            "etcd://u:se?cret@h:1",
            "etcd://u:s/e?cret@h:1",
            "etcd://u:se?cr=et@h:1",
        ] {
            let err = EtcdUrl::parse(bad).unwrap_err().to_string();
            for piece in ["se", "cret", "cr", "et@"] {
                assert!(!err.contains(&format!("\"{piece}")), "{bad}: {err}");
            }
            assert!(err.contains("not shown"), "{bad}: {err}");
        }
    }
}
