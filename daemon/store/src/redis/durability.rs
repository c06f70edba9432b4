//! What a Redis server's role and settings say about keeping an acknowledged write
//! (ARCHITECTURE.md, "Acknowledged means durable"), checked at every connect, before a grant and
//! on the heartbeat's interval. One place decides it:
//!
//! - `ROLE` must be master (a writable replica too is refused: it holds an older history).
//! - No `allkeys-*` eviction: it would evict the board's keys (generations start again).
//! - fsync'd persistence (`appendonly yes` + `appendfsync always`), or writes that wait for
//!   at least one replica (`min_replicas ≥ 1`).
//! - With replicas to wait for, `min-replicas-to-write ≥ 1`: a primary that a failover
//!   deposed then refuses every script (they are declared writing) instead of answering
//!   from its old history until it is reconfigured.
//! - The store's user may run every command the scripts run (`redis.acl_check_cmd`).
//!
//! `?durability=volatile` opts out (reported, not refused). Where `CONFIG` is disabled the
//! settings cannot be read: said so, and not refused.

use crate::StoreCheck;
use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Role};
use std::collections::HashMap;

/// The store URL's durability options and the key prefix the permission probe uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// `min_replicas` from the URL, if given.
    pub min_replicas: Option<u64>,
    /// `replicas` from the URL (the replica set's size), if given.
    pub replicas: Option<u64>,
    /// `wait_ms` from the URL.
    pub wait_ms: u64,
    /// `durability=volatile`.
    pub volatile: bool,
    /// The key prefix `P`.
    pub prefix: String,
}

/// The commands the scripts run, with a key of the shape they run them on (a probe board),
/// as `redis.acl_check_cmd` wants them. Read-only: it only asks.
const PROBE_LUA: &str = r#"#!lua flags=no-writes
local denied = {}
local function check(...)
  if not redis.acl_check_cmd(...) then
    local args = {...}
    table.insert(denied, args[1] .. ' ' .. (args[2] or ''))
  end
end
check('TIME')
check('GET', KEYS[1])
check('INCR', KEYS[1])
check('HGET', KEYS[2], 'f')
check('HSET', KEYS[2], 'f', 'v')
check('HDEL', KEYS[2], 'f')
check('SADD', KEYS[3], 'm')
check('XADD', KEYS[4], 'MAXLEN', '1', '*', 'f', 'v')
check('XADD', KEYS[5], 'MAXLEN', '1', '*', 'f', 'v')
check('XINFO', 'STREAM', KEYS[4])
check('TYPE', KEYS[1])
check('PUBLISH', ARGV[1], '')
return denied
"#;

/// The settings [`judge_settings`] reads.
const SETTINGS: [&str; 4] = [
    "maxmemory-policy",
    "appendonly",
    "appendfsync",
    "min-replicas-to-write",
];

/// Inspects the server behind `con` in one round trip (`ROLE`, the settings, the user's
/// permissions, pipelined): its role, replicas, settings and permissions. A server that
/// is not a master comes back with `role` saying what it is; the caller refuses it.
pub async fn inspect(
    con: &mut MultiplexedConnection,
    options: &Options,
) -> RedisResult<StoreCheck> {
    let keys = crate::redis::keys::BoardKeys::new(&options.prefix, PROBE_BOARD);
    let mut pipe = redis::pipe();
    pipe.cmd("ROLE");
    for name in SETTINGS {
        pipe.cmd("CONFIG").arg("GET").arg(name);
    }
    pipe.cmd("EVAL")
        .arg(PROBE_LUA)
        .arg(5)
        .arg(keys.revision())
        .arg(keys.section(crate::CLAIMS))
        .arg(keys.sections())
        .arg(keys.log())
        .arg(keys.asks())
        .arg(super::barrier::channel(&options.prefix));
    let mut answers: Vec<RedisResult<redis::Value>> = pipe.ignore_errors().query_async(con).await?;
    if answers.len() != SETTINGS.len() + 2 {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "a short answer to the store check",
        )));
    }
    let probe = answers.pop().expect("checked the length");
    let role: Role = redis::from_redis_value(answers.remove(0)?)?;
    let settings: Vec<RedisResult<redis::Value>> = answers;
    let (role, replicas) = match role {
        Role::Primary { replicas, .. } => ("master".to_string(), replicas.len() as u64),
        Role::Replica {
            primary_ip,
            primary_port,
            ..
        } => (format!("replica of {primary_ip}:{primary_port}"), 0),
        Role::Sentinel { .. } => (
            "sentinel (name it in a redis+sentinel:// URL, not as the store)".to_string(),
            0,
        ),
        _ => ("unknown".to_string(), 0),
    };
    let min_replicas = options.min_replicas.unwrap_or(replicas);
    let replica_set = options.replicas.unwrap_or(replicas);
    let barrier = super::barrier::replicas_needed(replica_set, min_replicas);
    let mut check = StoreCheck {
        role,
        replicas,
        min_replicas,
        checked_at_ms: row_fence_contract::ledger::now_ms(),
        ..StoreCheck::default()
    };
    if check.role != "master" {
        check
            .problems
            .push(format!("the server is a {}", check.role));
        return Ok(check);
    }
    let read: RedisResult<HashMap<String, String>> = settings
        .into_iter()
        .map(|answer| {
            redis::from_redis_value::<HashMap<String, String>>(answer?).map_err(Into::into)
        })
        .collect::<RedisResult<Vec<_>>>()
        .map(|maps| maps.into_iter().flatten().collect());
    match read {
        Ok(settings) => judge_settings(&settings, &mut check),
        Err(e) => check.notes.push(format!(
            "CONFIG is disabled for this user or server ({}): eviction and persistence settings were not checked",
            e.code().unwrap_or("error")
        )),
    }
    let denied: RedisResult<Vec<String>> = probe
        .and_then(|v| redis::from_redis_value::<Vec<String>>(v).map_err(Into::into))
        // The barrier's PUBLISH is needed only where there is a barrier.
        .map(|denied| {
            denied
                .into_iter()
                .filter(|d| barrier > 0 || !d.starts_with("PUBLISH"))
                .collect()
        });
    if barrier > 0 {
        check.notes.push(format!(
            "an ask waits for a read barrier acknowledged by {barrier} of the {replica_set} replicas (with the {min_replicas} every write waits for, more than the replica set, so it overlaps every acknowledged grant)"
        ));
    }
    match denied {
        Ok(denied) if denied.is_empty() => {}
        Ok(denied) => check.problems.push(format!(
            "the store's user may not run {} on the board keys; grant it +@read +@write +@hash +@stream +@set +@string +@scripting +publish on ~{}:* &{}:*",
            denied.join(", "),
            options.prefix,
            options.prefix
        )),
        Err(e) if e.to_string().contains("near '#'") => check.problems.push(
            "the server is older than Redis 7.0 (or Valkey 7.2): row-fence's scripts need it".into(),
        ),
        Err(e) => check.problems.push(format!(
            "the store's user may not run scripts ({}); grant it +@scripting",
            e.code().unwrap_or("error")
        )),
    }
    if options.volatile {
        if !check.problems.is_empty() {
            check.notes.push(format!(
                "durability=volatile: writes go ahead although {}",
                check.problems.join("; ")
            ));
        } else {
            check
                .notes
                .push("durability=volatile: writes go ahead whatever the settings".into());
        }
        check.problems.clear();
    }
    check.durable = check.problems.is_empty();
    Ok(check)
}

/// The board the permission probe names (never written: the probe only asks).
pub const PROBE_BOARD: &str = "row-fence.probe";

/// Adds a problem for each setting that can lose an acknowledged write.
fn judge_settings(settings: &HashMap<String, String>, check: &mut StoreCheck) {
    let get = |name: &str| settings.get(name).map(String::as_str).unwrap_or("");
    let policy = get("maxmemory-policy");
    if policy.starts_with("allkeys-") {
        check.problems.push(format!(
            "maxmemory-policy is {policy}, which evicts the board's keys (generations and epochs would start again); set maxmemory-policy noeviction"
        ));
    }
    let fsynced = get("appendonly") == "yes" && get("appendfsync") == "always";
    if !fsynced && check.min_replicas == 0 {
        let persistence = if get("appendonly") == "yes" {
            format!("appendfsync is {}", get("appendfsync"))
        } else {
            "appendonly is no".to_string()
        };
        check.problems.push(format!(
            "{persistence} and writes wait for no replica, so a restart can lose an acknowledged grant; set appendonly yes and appendfsync always, or replicate and add ?min_replicas=1 to the store URL"
        ));
    }
    let guard: u64 = get("min-replicas-to-write").parse().unwrap_or(0);
    if check.min_replicas > 0 && guard == 0 {
        check.problems.push(
            "min-replicas-to-write is 0, so a primary deposed by a failover keeps answering from its old history until it is reconfigured; set min-replicas-to-write 1 (and min-replicas-max-lag 10) on every data node".into(),
        );
    }
    if check.min_replicas > check.replicas {
        check.notes.push(format!(
            "writes wait for {} replicas but {} are connected: they will not be acknowledged",
            check.min_replicas, check.replicas
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(settings: &[(&str, &str)], replicas: u64) -> StoreCheck {
        let settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut check = StoreCheck {
            role: "master".into(),
            replicas,
            min_replicas: replicas,
            ..StoreCheck::default()
        };
        judge_settings(&settings, &mut check);
        check
    }

    #[test]
    fn each_setting_that_can_lose_a_grant_is_a_problem_naming_its_fix() {
        let durable = [
            ("maxmemory-policy", "noeviction"),
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("min-replicas-to-write", "0"),
        ];
        assert!(check(&durable, 0).problems.is_empty());
        let everysec = check(&[("appendonly", "yes"), ("appendfsync", "everysec")], 0);
        assert!(everysec.problems[0].contains("appendfsync is everysec"));
        assert!(everysec.problems[0].contains("appendfsync always"));
        let lru = check(
            &[
                ("maxmemory-policy", "allkeys-lru"),
                ("appendonly", "yes"),
                ("appendfsync", "always"),
            ],
            0,
        );
        assert!(lru.problems[0].contains("allkeys-lru"));
        let replicated = check(&[("min-replicas-to-write", "1")], 1);
        assert!(replicated.problems.is_empty(), "{replicated:?}");
        let unguarded = check(&[("min-replicas-to-write", "0")], 1);
        assert!(unguarded.problems[0].contains("min-replicas-to-write 1"));
    }
}
