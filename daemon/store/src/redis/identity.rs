//! Which Redis store a URL and key prefix name, whatever their spelling: the key of this
//! home's history floors (ARCHITECTURE.md, "The lease store"). `redis://localhost:P` and
//! `redis://127.0.0.1:P/0?wait_ms=500` are one store; prefixes `a` and `b` on one server
//! are two. A floor keyed by spelling would let one process record a revision another
//! never sees (a restore then answered ALLOWED), and one keyed without the prefix would
//! make one store's boards look regressed in another.
//!
//! - one server or a Cluster seed node: the addresses its host resolves to (any loopback
//!   address is `localhost`: one machine), the port, the database number;
//! - a Unix socket: its canonical path and the database number;
//! - Sentinel: the master (service) name and the database number (the sentinels that
//!   elect it may be named in any order or set);
//!
//! each with the key prefix. Options, their order, user, password, scheme case and
//! trailing slashes do not matter.

use super::url::{Location, StoreUrl};
use redis::{ConnectionAddr, IntoConnectionInfo};
use std::net::{IpAddr, ToSocketAddrs};

/// The identity of the store `url` names under `prefix` (no password in it). A URL that
/// does not parse keeps its spelling (it connects nowhere, so it judges nothing).
pub fn identity(url: &str, prefix: &str) -> String {
    let Ok(parsed) = StoreUrl::parse(url) else {
        return format!("redis {} prefix={prefix}", super::super::spec::redact(url));
    };
    let place = match &parsed.location {
        Location::Server(server) => server_identity(server, "redis"),
        Location::Cluster(node) => server_identity(node, "redis-cluster"),
        Location::Sentinel(target) => {
            format!("redis-sentinel master={} db={}", target.master, target.db)
        }
    };
    format!("{place} prefix={prefix}")
}

/// Every address the store `url` names under `prefix`, each a key a home remembers the
/// store's carried identity under (ARCHITECTURE.md, "The lease store"): one per sentinel for
/// `redis+sentinel://` (a URL naming some of them shares its keys with one naming all, and
/// two deployments that share a master name but not their sentinels share none); else the
/// one address [`identity`] gives.
pub fn addresses(url: &str, prefix: &str) -> Vec<String> {
    let Ok(parsed) = StoreUrl::parse(url) else {
        return vec![identity(url, prefix)];
    };
    let Location::Sentinel(target) = &parsed.location else {
        return vec![identity(url, prefix)];
    };
    let mut all: Vec<String> = target
        .sentinels
        .iter()
        .map(|sentinel| {
            let at = match sentinel
                .as_str()
                .into_connection_info()
                .map(|i| i.addr().clone())
            {
                Ok(ConnectionAddr::Tcp(host, port))
                | Ok(ConnectionAddr::TcpTls { host, port, .. }) => {
                    format!("{}:{port}", host_identity(&host, port))
                }
                _ => super::super::spec::redact(sentinel),
            };
            format!(
                "redis-sentinel sentinel={at} master={} db={} prefix={prefix}",
                target.master, target.db
            )
        })
        .collect();
    all.sort();
    all.dedup();
    all
}

/// The addresses a connection reached the server at, spelled as [`identity`] spells a
/// `redis://` URL of it, so a store reached over its socket, through Sentinel or at another
/// of this machine's addresses is also known at the TCP address a home may have reached it
/// at (ARCHITECTURE.md, "The lease store"):
///
/// - `dialed`, the TCP address the connection was made to (the master a sentinel named),
///   and `localhost` on its port when it is an address of this machine ([`host_forms`]);
/// - over a Unix socket (`laddr=/…` in the `CLIENT INFO` line), `localhost` and the port
///   the server listens on (`tcp_port`, from `INFO server`; none when it is 0): a socket
///   reaches a server on this machine;
/// - `localhost` on the server's own port (`laddr=`) when that address is this machine's.
///
/// The server's own address is used only where it is this machine's: behind a NAT or a
/// container bridge, two servers elsewhere may share one. The database is the one the line
/// says (`db=`); a line without it gives none.
pub fn served_addresses(
    client_info: &str,
    tcp_port: Option<u16>,
    dialed: Option<(&str, u16)>,
    prefix: &str,
) -> Vec<String> {
    let field = |name: &str| {
        client_info
            .split_ascii_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
    };
    let Some(db) = field("db").and_then(|d| d.parse::<i64>().ok()) else {
        return Vec::new();
    };
    let mut places: Vec<(String, u16)> = Vec::new();
    if let Some((host, port)) = dialed {
        places.extend(host_forms(host, port).into_iter().map(|h| (h, port)));
    }
    match field("laddr") {
        Some(laddr) if laddr.starts_with('/') => {
            if let Some(port) = tcp_port.filter(|p| *p != 0) {
                places.push(("localhost".to_string(), port));
            }
        }
        Some(laddr) => {
            if let Some((host, port)) = laddr.rsplit_once(':')
                && let Ok(port) = port.parse::<u16>()
                && this_machine(host)
            {
                places.push(("localhost".to_string(), port));
            }
        }
        None => {}
    }
    let mut all: Vec<String> = places
        .into_iter()
        .map(|(host, port)| format!("redis host={host} port={port} db={db} prefix={prefix}"))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// True when `host` is an IP address of this machine: loopback, or one a socket can be
/// bound to here.
fn this_machine(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().is_ok_and(|ip| {
        ip.is_loopback()
            || ip.to_canonical().is_loopback()
            || (!ip.is_unspecified() && std::net::UdpSocket::bind((ip, 0)).is_ok())
    })
}

/// `host` as [`host_identity`] spells it and, when it is an address of this machine that
/// is not loopback, also `localhost`: a server reached at this machine's own address is
/// the one `localhost` reaches on that port.
pub(crate) fn host_forms(host: &str, port: u16) -> Vec<String> {
    let named = host_identity(host, port);
    if named != "localhost" && this_machine(host) {
        vec![named, "localhost".to_string()]
    } else {
        vec![named]
    }
}

/// The `tcp_port` an `INFO server` answer names.
pub fn tcp_port(info: &str) -> Option<u16> {
    info.lines()
        .find_map(|line| line.trim().strip_prefix("tcp_port:"))?
        .trim()
        .parse()
        .ok()
}

fn server_identity(server: &str, kind: &str) -> String {
    let Ok(info) = server.into_connection_info() else {
        return format!("{kind} {}", super::super::spec::redact(server));
    };
    let db = info.redis_settings().db();
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!(
                "{kind} host={} port={port} db={db}",
                host_identity(host, *port)
            )
        }
        ConnectionAddr::Unix(path) => format!("{kind} unix={} db={db}", canonical(path)),
        _ => format!("{kind} {}", super::super::spec::redact(server)),
    }
}

/// The addresses `host` resolves to, sorted, loopback ones as `localhost`; the host name
/// in lower case when it does not resolve now (a store whose name does not resolve
/// answers nothing until it does).
pub(crate) fn host_identity(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let resolved: Result<Vec<IpAddr>, _> = match host.parse::<IpAddr>() {
        Ok(ip) => Ok(vec![ip]),
        Err(_) => (host, port)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect()),
    };
    let mut names: Vec<String> = match resolved {
        Ok(ips) if !ips.is_empty() => ips
            .into_iter()
            .map(|ip| {
                if ip.is_loopback() || ip.to_canonical().is_loopback() {
                    "localhost".to_string()
                } else {
                    ip.to_canonical().to_string()
                }
            })
            .collect(),
        _ => vec![host.trim_end_matches('.').to_ascii_lowercase()],
    };
    names.sort();
    names.dedup();
    names.join(",")
}

/// `path` with symlinks, `.` and `..` resolved, as far as it exists.
pub(crate) fn canonical(path: &std::path::Path) -> String {
    crate::spec::canonical_path(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::identity;

    #[test]
    fn one_store_spelled_many_ways_is_one_identity() {
        let a = identity("redis://127.0.0.1:6390", "rowfence");
        for spelling in [
            "redis://localhost:6390",
            "redis://LOCALHOST:6390/",
            "redis://127.0.0.1:6390/0",
            "redis://user:secret@127.0.0.1:6390/?wait_ms=500&min_replicas=0",
            "redis://127.0.0.1:6390?min_replicas=0&wait_ms=500",
            "redis://[::1]:6390",
        ] {
            assert_eq!(identity(spelling, "rowfence"), a, "{spelling}");
        }
        assert!(!a.contains("secret"));
    }

    #[test]
    fn another_prefix_db_or_port_is_another_store() {
        let a = identity("redis://127.0.0.1:6390", "a");
        assert_ne!(identity("redis://127.0.0.1:6390", "b"), a);
        assert_ne!(identity("redis://127.0.0.1:6390/1", "a"), a);
        assert_ne!(identity("redis://127.0.0.1:6391", "a"), a);
    }

    #[test]
    fn each_sentinel_is_an_address_and_another_deployments_sentinels_are_others() {
        let all = super::addresses("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster", "p");
        assert_eq!(all.len(), 2, "{all:?}");
        let one = super::addresses("redis+sentinel://localhost:2/mymaster?wait_ms=9", "p");
        assert!(all.contains(&one[0]), "{one:?} in {all:?}");
        let other = super::addresses("redis+sentinel://127.0.0.1:3/mymaster", "p");
        assert!(!all.contains(&other[0]));
        assert_eq!(
            super::addresses("redis://127.0.0.1:6390", "p"),
            vec![identity("redis://localhost:6390/0", "p")]
        );
    }

    #[test]
    fn the_address_a_server_says_is_the_one_its_tcp_url_gives() {
        let served = |info: &str, port: Option<u16>, dialed: Option<(&str, u16)>| {
            super::served_addresses(info, port, dialed, "p")
        };
        let tcp = vec![identity("redis://127.0.0.1:6390/2", "p")];
        let over_tcp = "id=3 addr=127.0.0.1:38566 laddr=127.0.0.1:6390 fd=9 name= db=2 sub=0";
        assert_eq!(served(over_tcp, None, None), tcp);
        assert_eq!(served(over_tcp, None, Some(("localhost", 6390))), tcp);
        let over_v6 = "id=4 addr=[::1]:59268 laddr=[::1]:6390 fd=9 db=2";
        assert_eq!(served(over_v6, None, None), tcp);
        let over_socket = "id=5 addr=/run/r.sock:0 laddr=/run/r.sock:0 fd=9 flags=U db=2";
        let port = super::tcp_port("# Server\r\nredis_version:7.2.4\r\ntcp_port:6390\r\n");
        assert_eq!(port, Some(6390));
        assert_eq!(served(over_socket, port, None), tcp);
        assert!(served(over_socket, Some(0), None).is_empty());
        assert!(served(over_socket, None, None).is_empty());
        assert_ne!(super::served_addresses(over_tcp, None, None, "q"), tcp);
        assert!(served("ERR unknown", None, None).is_empty());
        // Another machine's own address (behind a NAT, a container bridge) says nothing;
        // the address a sentinel named, dialed, is the one a URL naming it gives.
        let remote = "id=6 laddr=192.0.2.77:6379 db=2";
        assert!(served(remote, None, None).is_empty());
        assert_eq!(
            served(remote, None, Some(("192.0.2.77", 6390))),
            vec![identity("redis://192.0.2.77:6390/2", "p")]
        );
    }

    #[test]
    fn sentinels_in_any_order_name_one_master() {
        let a = identity("redis+sentinel://h1:1,h2:2/mymaster", "p");
        assert_eq!(
            identity("redis+sentinel://h2:2,h1:1/mymaster/?wait_ms=9", "p"),
            a
        );
        assert_ne!(identity("redis+sentinel://h1:1,h2:2/other", "p"), a);
        assert_ne!(identity("redis+sentinel://h1:1,h2:2/mymaster?db=2", "p"), a);
    }
}
