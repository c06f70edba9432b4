//! The daemon's status object, the answer to `{"v":1,"op":"status"}` (ARCHITECTURE.md, "Wire
//! protocol"): what `row-fence status` prints and `--json` shows. The daemon builds it
//! once and the CLI reads it back as these types, so a field has one spelling.
//! Every field is always written (zero, empty or null when so), but the location fence's
//! object, absent while it is off: a monitor reading `status --json` finds each field
//! docs/operations.md lists.

use crate::ledger::LedgerRecord;
use crate::verdict::Reason;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The status object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's process id.
    pub pid: u32,
    /// The package version.
    pub version: String,
    /// The daemon's code stamp.
    pub stamp: String,
    /// The socket it serves.
    pub socket: String,
    /// Its `ROW_FENCE_HOME`, for people: a home whose name is not UTF-8 shows each
    /// byte that is not as U+FFFD here, so compare homes with [`Status::serves`].
    pub home: String,
    /// The home's bytes when its name is not UTF-8 (`home` cannot carry them), null
    /// otherwise: what [`Status::serves`] compares.
    #[serde(default)]
    pub home_bytes: Option<Vec<u8>>,
    /// True when it runs `--supervised`: a service manager restarts it, so `row-fence
    /// stop` leaves it to that manager (its stop would only be followed by a restart).
    #[serde(default)]
    pub supervised: bool,
    /// The store it asks, without a password.
    pub store: String,
    /// The prefix of its Redis keys (`ROW_FENCE_KEY_PREFIX`); writes with another are refused.
    #[serde(default)]
    pub key_prefix: String,
    /// How often the store connection was lost and made again.
    pub store_reconnects: u64,
    /// When it started, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// ms since it started.
    pub uptime_ms: u64,
    /// ms since the heartbeat was last written; `None` before the first.
    pub heartbeat_age_ms: Option<u64>,
    /// Asks being judged now (also those waiting on the store).
    pub asks_in_flight: u64,
    /// Store calls still running on a thread of their own (the file store), also those
    /// whose asker already gave up.
    #[serde(default)]
    pub store_calls_in_flight: u64,
    /// The store's role and durability settings as last checked (at connect, at every
    /// reconnect and every heartbeat); `None` before the first check.
    #[serde(default)]
    pub store_check: Option<StoreCheck>,
    /// Connections accepted since start.
    pub connections: u64,
    /// Verdicts since start.
    pub counts: Counts,
    /// The newest refusals and COULD NOT READs it decided, oldest first (at most 100,
    /// within 24 KiB of JSON, each text field cut to 240 bytes: the ledger has them whole).
    pub recent_refusals: Vec<LedgerRecord>,
    /// Older recent refusals left out to keep the answer within one message (64 KiB).
    #[serde(default)]
    pub recent_refusals_omitted: u64,
    /// Refusals the ledger writer had no room for (its queue was full): not recorded.
    #[serde(default)]
    pub ledger_dropped: u64,
    /// The location fence's state, when it is on. Absent while the fence is off: an inert
    /// fence adds nothing (docs/git-layer.md, "Location fence").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_fence: Option<LocationStatus>,
    /// The key broker's state, when it is on (ARCHITECTURE.md, "Key broker").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<BrokerStatus>,
    /// The forge API endpoint's state, when it is on (ARCHITECTURE.md, "Forge API").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge_api: Option<ForgeApiStatus>,
}

/// The forge API endpoint's state: where lanes reach it and what it did since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeApiStatus {
    /// The socket a lane's gh `http_unix_socket` names.
    pub socket: String,
    /// The upstream host requests are re-originated to.
    pub host: String,
    /// True when a token is loaded (`row-fence token add`); without one every request
    /// is answered 503.
    pub token: bool,
    /// API requests passed to the forge since start (reads and allowed writes).
    pub passed: u64,
    /// API requests refused since start.
    pub refused: u64,
}

/// The key broker's state: where lanes reach it, what it holds, what it did since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerStatus {
    /// The agent socket.
    pub socket: String,
    /// Push keys held.
    pub keys: u64,
    /// Read keys held.
    #[serde(default)]
    pub read_keys: u64,
    /// Uids bound to lanes.
    pub lanes: u64,
    /// Connections accepted since start.
    pub connections: u64,
    /// Signatures made since start.
    pub signed: u64,
    /// Sign requests refused since start (not ALLOWED, no lane, or a key it does not hold).
    pub sign_refused: u64,
}

/// What a store's own state and settings say about keeping what it acknowledges
/// (ARCHITECTURE.md, "Acknowledged means durable"), as last checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreCheck {
    /// `master`, or what `ROLE` said instead; `file` for the file store.
    pub role: String,
    /// Replicas the primary showed connected when checked.
    pub replicas: u64,
    /// Replicas every write waits for (`WAIT`): the URL's `min_replicas`, else the
    /// replicas `ROLE` showed at connect.
    pub min_replicas: u64,
    /// True when grants and controller writes may go ahead: no problem below, or the
    /// URL opts out with `?durability=volatile`.
    pub durable: bool,
    /// What makes acknowledged writes losable, each naming the setting and the fix.
    #[serde(default)]
    pub problems: Vec<String>,
    /// What could not be checked (CONFIG disabled) and opt-outs in force.
    #[serde(default)]
    pub notes: Vec<String>,
    /// When checked, ms since the Unix epoch (this machine's clock).
    #[serde(default)]
    pub checked_at_ms: u64,
    /// The identity the store carries (ARCHITECTURE.md, "The generation never goes back"):
    /// the key this home's floors are kept under; `None` before the store's first write
    /// gave it one, or from a daemon older than identities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// etcd: each member the cluster lists, by name, as it lists them; empty for the
    /// other stores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// etcd: the member that leads, by name; `None` without a leader or for the other
    /// stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

/// Verdicts since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Asks answered.
    pub asks: u64,
    /// ALLOWED.
    pub allowed: u64,
    /// REFUSED.
    pub refused: u64,
    /// COULD NOT READ.
    pub could_not_read: u64,
    /// Denials by reason.
    pub by_reason: BTreeMap<Reason, u64>,
}

/// The location fence's state (ARCHITECTURE.md, "Location fence"). It never fetches to answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocationStatus {
    /// This daemon's location.
    pub location: String,
    /// `GET` this for the map; `None`: every ask is `map_missing`.
    pub map_url: Option<String>,
    /// ms since the last good fetch; `None` when none was ever good.
    pub map_age_ms: Option<u64>,
    /// The map's own `generatedAt` (an integer or a string), informational.
    pub map_generated_at: Option<serde_json::Value>,
    /// The rows of the held map, in its order, within 16 KiB of JSON.
    pub rows: Vec<TenantRow>,
    /// Rows left out to keep the answer within one message (64 KiB).
    #[serde(default)]
    pub rows_omitted: u64,
    /// Why the last fetch failed (HTTP status, refused, not JSON, …), if it did.
    pub last_fetch_error: Option<String>,
    /// Fetches started since start.
    pub fetches: u64,
    /// The newest location refusals, oldest first (at most 100, within 8 KiB of JSON).
    pub recent_refusals: Vec<LocationRefusal>,
    /// Older location refusals left out to keep the answer within one message.
    #[serde(default)]
    pub recent_refusals_omitted: u64,
}

/// One tenant row of the map, as the fence reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRow {
    /// The tenant id (the registry's `tenant`).
    pub id: String,
    /// The location id the tenant lives at.
    pub location: Option<String>,
    /// +1 on every move.
    pub epoch: i64,
    /// `active`, `draining`, `reconciling`, …
    pub state: Option<String>,
}

impl Status {
    /// `home_bytes` for a daemon serving `home`: its bytes when its name is not UTF-8.
    pub fn home_bytes_of(home: &Path) -> Option<Vec<u8>> {
        home.to_str()
            .is_none()
            .then(|| home.as_os_str().as_bytes().to_vec())
    }

    /// True when this daemon serves `home`, byte for byte: `home` alone would make a
    /// home whose name is not UTF-8 another home than the daemon's own (its `home` is
    /// lossy), so a caller could neither stop nor find the daemon it started.
    pub fn serves(&self, home: &Path) -> bool {
        match &self.home_bytes {
            Some(bytes) => Path::new(OsStr::from_bytes(bytes)) == home,
            None => Path::new(&self.home) == home,
        }
    }
}

/// One ask the location fence refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocationRefusal {
    /// When, ms since the Unix epoch.
    pub ts_ms: u64,
    /// The board's tenant ("" when the registry names none).
    pub tenant: String,
    /// The board asked about.
    pub board: String,
    /// The row asked about.
    pub row: String,
    /// The lane that asked.
    pub lane: String,
    /// The fenced action.
    pub action: String,
    /// Why.
    pub reason: Reason,
    /// The tenant's epoch in the held map, -1 when none.
    pub epoch: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status of a daemon serving `home`, as the daemon builds it.
    fn serving(home: &Path) -> Status {
        Status {
            pid: 1,
            version: String::new(),
            stamp: String::new(),
            socket: String::new(),
            home: home.display().to_string(),
            home_bytes: Status::home_bytes_of(home),
            supervised: false,
            store: String::new(),
            key_prefix: String::new(),
            store_reconnects: 0,
            started_at_ms: 0,
            uptime_ms: 0,
            heartbeat_age_ms: None,
            asks_in_flight: 0,
            store_calls_in_flight: 0,
            store_check: None,
            connections: 0,
            counts: Counts::default(),
            recent_refusals: Vec::new(),
            recent_refusals_omitted: 0,
            ledger_dropped: 0,
            location_fence: None,
            broker: None,
            forge_api: None,
        }
    }

    /// Read back as the CLI reads it: through the wire's JSON.
    fn on_the_wire(status: &Status) -> Status {
        let text = serde_json::to_string(status).expect("a status serializes");
        serde_json::from_str(&text).expect("a status reads back")
    }

    #[test]
    fn a_home_whose_name_is_not_utf8_is_served_by_its_own_daemon_only() {
        let home = Path::new(OsStr::from_bytes(b"/home/me/h\xe9"));
        let other = Path::new(OsStr::from_bytes(b"/home/me/h\xe8"));
        let status = on_the_wire(&serving(home));
        assert_eq!(status.home, "/home/me/h\u{FFFD}");
        assert_eq!(status.home_bytes.as_deref(), Some(&b"/home/me/h\xe9"[..]));
        assert!(status.serves(home));
        assert!(!status.serves(other));
        assert!(!status.serves(Path::new("/home/me/h\u{FFFD}")));
    }

    #[test]
    fn a_utf8_home_is_compared_as_a_path_and_written_without_bytes() {
        let status = on_the_wire(&serving(Path::new("/home/me/.row-fence")));
        assert_eq!(status.home_bytes, None);
        assert!(status.serves(Path::new("/home/me/.row-fence/")));
        assert!(!status.serves(Path::new("/home/me/.row-fence2")));
        let text = serde_json::to_value(&status).expect("a status serializes");
        assert_eq!(text["home_bytes"], serde_json::Value::Null);
    }
}
