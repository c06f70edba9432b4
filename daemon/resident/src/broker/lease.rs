//! A bound lane's renew and release through the daemon (ARCHITECTURE.md, "Key broker"):
//! in the broker's mode lanes hold no store credentials (a lane that can write the store
//! can grant itself a row), so they ask the daemon on the broker socket they already
//! reach, as an agent-protocol extension. The lane is the one bound to the peer's uid and
//! its lease token is the one in the descriptor the daemon reads itself: a request names
//! no lane, row or token, only the lease time asked for.
//!
//! Wire: `SSH_AGENTC_EXTENSION` named [`RENEW`] or [`RELEASE`] whose contents are a JSON
//! [`LeaseRequest`]; answered `SSH_AGENT_EXTENSION_RESPONSE` of the same name whose
//! contents are a JSON [`LeaseAnswer`] (a refusal included, so the lane learns why).

use serde::{Deserialize, Serialize};

/// Renews the bound lane's lease (keeps its generation).
pub const RENEW: &str = "renew@row-fence";

/// Releases the bound lane's lease.
pub const RELEASE: &str = "release@row-fence";

/// The longest lease time an operator may let lanes renew for (`--broker-renew-max`): 366
/// days, as `row-fence renew --ttl`.
pub const MAX_TTL_MS: u64 = 366 * 24 * 3600 * 1000;

/// The longest lease time a lane renews for through the daemon unless the operator says
/// otherwise: 12 hours. A lane renews as it works; a lease renewed for months would
/// outlive the lane that holds it, and only a takeover would free the row.
pub const DEFAULT_RENEW_MAX_MS: u64 = 12 * 3600 * 1000;

/// A duration in ms as a person reads it (`12h`, `1h 30m`).
pub fn spell_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

/// What a lane asks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The new lease time from now, in ms (renew only; from 1 to the daemon's
    /// `--broker-renew-max`, [`DEFAULT_RENEW_MAX_MS`] unless set).
    #[serde(default)]
    pub ttl_ms: u64,
}

/// What the daemon answers: the lease acted on, or why not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseAnswer {
    /// True when the lease was renewed or released.
    pub ok: bool,
    /// The board.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// The row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    /// The lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// The new expiry (renew), ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// True when the store said no (exit 3), false when it could not be asked (exit 1).
    #[serde(default)]
    pub refused: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl LeaseAnswer {
    /// A failure that is not the store's refusal.
    pub fn could_not(error: impl Into<String>) -> LeaseAnswer {
        LeaseAnswer {
            error: error.into(),
            ..LeaseAnswer::default()
        }
    }
}
