//! The four verdicts, their reasons and their exit codes: the product's contract
//! (ARCHITECTURE.md, "Verdicts and exit codes"). Every reason string is spelled once,
//! here, and used everywhere (asker, daemon, ledger, JSON).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Exit codes of `row-fence-ask` and `row-fence check`, mapped in one place.
pub mod exit {
    /// ALLOWED or UNFENCED: the write may go ahead.
    pub const ALLOWED: i32 = 0;
    /// COULD NOT READ: the descriptor, the daemon or the store could not be read in time.
    pub const COULD_NOT_READ: i32 = 1;
    /// Bad flags (a usage error); never a verdict, and never permission.
    pub const USAGE: i32 = 2;
    /// REFUSED: the store said no.
    pub const REFUSED: i32 = 3;

    /// A command's failure: its exit code and what to print (after the program's name).
    /// The CLI and the installers return it; their `main` prints it and exits with it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Failure {
        /// [`COULD_NOT_READ`], [`USAGE`] or [`REFUSED`].
        pub code: i32,
        /// The sentence, e.g. `no board named b1 (nothing was ever written to it)`.
        pub message: String,
    }

    impl Failure {
        /// The store said no: exit 3.
        pub fn refused(message: impl std::fmt::Display) -> Failure {
            Failure {
                code: REFUSED,
                message: message.to_string(),
            }
        }

        /// Bad input the flag parser could not see (a malformed board, batch file or
        /// flag combination): exit 2, and nothing was done.
        pub fn usage(message: impl std::fmt::Display) -> Failure {
            Failure {
                code: USAGE,
                message: message.to_string(),
            }
        }

        /// Could not find out or could not do it: exit 1.
        pub fn could_not(message: impl std::fmt::Display) -> Failure {
            Failure {
                code: COULD_NOT_READ,
                message: message.to_string(),
            }
        }
    }

    /// The result of a command: its exit code when it ran (0, or a verdict's code), or
    /// its [`Failure`].
    pub type Outcome = Result<i32, Failure>;
}

/// Why a verdict is not ALLOWED. Refusal reasons mean "the store said no"; the others
/// mean "we could not find out", which is never "yes" (ARCHITECTURE.md, "Fail closed").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    // REFUSED (exit 3)
    /// No lease for the row.
    NotHeld,
    /// The row is leased to another lane.
    DifferentHolder,
    /// The lane holds the row, but at another generation (an older or newer grant).
    StaleGeneration,
    /// The lease's `expires_at_ms` is at or before the store's clock.
    LeaseExpired,
    /// The lane holds the row at this generation, but the descriptor does not carry the
    /// lease token the grant created (a descriptor forged from a refusal's words, or one
    /// written before lease tokens: `row-fence acquire … --reissue`).
    TokenMismatch,
    /// The lease is live but has less than the margin left: the write the verdict allows
    /// happens after the verdict, and could land after the lease ended.
    LeaseExpiring,
    /// Location fence: the board has no tenant in the registry.
    TenantUnknown,
    /// Location fence: the map has no row for the tenant.
    TenantNotInMap,
    /// Location fence: the map has more than one row for the tenant.
    TenantAmbiguous,
    /// Location fence: the tenant's row names another location.
    MappedElsewhere,
    /// Location fence: the tenant's row is here but not `active`.
    TenantNotActive,
    /// Key broker: the request is not a login to an allowed forge (not a publickey
    /// userauth request, no verified `session-bind@openssh.com` to a host key on the
    /// daemon's allowlist, another session or user): signed for no one, ALLOWED or not.
    DestinationRefused,
    /// Forge API: a write that is no listed route or mutation, or is out of the row's
    /// repository or scope: passed for no lane, ALLOWED or not (docs/forge-api.md,
    /// "Design").
    ForgeWriteRefused,
    /// A push's ref, repository or kind of update is outside the scope of the row its
    /// lane holds (ARCHITECTURE.md, "Forge hook"): the detail names the ref and the rule.
    OutsideScope,

    // COULD NOT READ (exit 1)
    /// The descriptor exists but cannot be read, parsed or validated.
    DescriptorUnreadable,
    /// An explicitly named descriptor does not exist.
    DescriptorMissing,
    /// No daemon, a refused or reset connection, an answer that is not a verdict, or a
    /// socket directory we do not trust.
    FenceUnreadable,
    /// No verdict before the asker's deadline.
    Timeout,
    /// The daemon could not start the ask before its deadline.
    Busy,
    /// The daemon runs other code than the asker.
    StaleCode,
    /// The daemon could not connect to the lease store (connection refused, reset or
    /// timed out while connecting): a connection failure, never an error the store sent.
    StoreUnreachable,
    /// The store answered with an error (OOM, BUSY, NOPERM, WRONGTYPE, a script error,
    /// MOVED/TRYAGAIN after retries, ENOSPC, EIO, a missing password…).
    StoreError,
    /// The store server is a replica (`ROLE` is not master, a writable replica too) or a
    /// primary that lost the replicas it must write to: it may hold an older history.
    StoreNotPrimary,
    /// The store holds an older history than one already seen: a descriptor's generation
    /// above the board revision, or a board revision below the highest one seen.
    StoreRegressed,
    /// The judging clock is behind a time already used (the file store's highest written
    /// time, or a time this daemon already judged with).
    ClockRegressed,
    /// The daemon does not serve this uid.
    PeerRefused,
    /// A malformed request or answer.
    ProtocolError,
    /// Location fence: no tenant map is configured or none was ever fetched.
    MapMissing,
    /// Location fence: the map could not be fetched and none is held.
    MapUnreachable,
    /// Location fence: the last good map is older than 60 s.
    MapStale,
    /// Location fence: the check itself failed.
    FenceError,
    /// Agent guard: a write runs in a directory (or git dir) the command text does not
    /// name, or that does not exist yet, so whether it is row-bound cannot be told.
    DirectoryUnknown,
    /// Agent guard: the hook input or the command could not be read or parsed.
    CommandUnreadable,
    /// Agent guard: a row-bound session's command writes from more places than the
    /// guard asks about at once.
    TooManyDirectories,
    /// Agent guard: the session's binding exists but cannot be read.
    BindingUnreadable,
    /// Agent guard: a row-bound session's fenced write or opaque command would run after
    /// the call returns (`&`, `nohup`, `at`, a background tool call, after a `sleep`): the
    /// fence judges now and the write would land later, when the row may be gone.
    DeferredWrite,
}

impl Reason {
    /// Every reason, in table order (for tests and docs).
    pub const ALL: &'static [Reason] = &[
        Reason::NotHeld,
        Reason::DifferentHolder,
        Reason::StaleGeneration,
        Reason::LeaseExpired,
        Reason::TokenMismatch,
        Reason::LeaseExpiring,
        Reason::TenantUnknown,
        Reason::TenantNotInMap,
        Reason::TenantAmbiguous,
        Reason::MappedElsewhere,
        Reason::TenantNotActive,
        Reason::DestinationRefused,
        Reason::ForgeWriteRefused,
        Reason::OutsideScope,
        Reason::DescriptorUnreadable,
        Reason::DescriptorMissing,
        Reason::FenceUnreadable,
        Reason::Timeout,
        Reason::Busy,
        Reason::StaleCode,
        Reason::StoreUnreachable,
        Reason::StoreError,
        Reason::StoreNotPrimary,
        Reason::StoreRegressed,
        Reason::ClockRegressed,
        Reason::PeerRefused,
        Reason::ProtocolError,
        Reason::MapMissing,
        Reason::MapUnreachable,
        Reason::MapStale,
        Reason::FenceError,
        Reason::DirectoryUnknown,
        Reason::CommandUnreadable,
        Reason::TooManyDirectories,
        Reason::BindingUnreadable,
        Reason::DeferredWrite,
    ];

    /// The reason's one spelling: in verdict lines, JSON, the ledger and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NotHeld => "not_held",
            Reason::DifferentHolder => "different_holder",
            Reason::StaleGeneration => "stale_generation",
            Reason::LeaseExpired => "lease_expired",
            Reason::TokenMismatch => "token_mismatch",
            Reason::LeaseExpiring => "lease_expiring",
            Reason::TenantUnknown => "tenant_unknown",
            Reason::TenantNotInMap => "tenant_not_in_map",
            Reason::TenantAmbiguous => "tenant_ambiguous",
            Reason::MappedElsewhere => "mapped_elsewhere",
            Reason::TenantNotActive => "tenant_not_active",
            Reason::DestinationRefused => "destination_refused",
            Reason::ForgeWriteRefused => "forge_write_refused",
            Reason::OutsideScope => "outside_scope",
            Reason::DescriptorUnreadable => "descriptor_unreadable",
            Reason::DescriptorMissing => "descriptor_missing",
            Reason::FenceUnreadable => "fence_unreadable",
            Reason::Timeout => "timeout",
            Reason::Busy => "busy",
            Reason::StaleCode => "stale_code",
            Reason::StoreUnreachable => "store_unreachable",
            Reason::StoreError => "store_error",
            Reason::StoreNotPrimary => "store_not_primary",
            Reason::StoreRegressed => "store_regressed",
            Reason::ClockRegressed => "clock_regressed",
            Reason::PeerRefused => "peer_refused",
            Reason::ProtocolError => "protocol_error",
            Reason::MapMissing => "map_missing",
            Reason::MapUnreachable => "map_unreachable",
            Reason::MapStale => "map_stale",
            Reason::FenceError => "fence_error",
            Reason::DirectoryUnknown => "directory_unknown",
            Reason::CommandUnreadable => "command_unreadable",
            Reason::TooManyDirectories => "too_many_directories",
            Reason::BindingUnreadable => "binding_unreadable",
            Reason::DeferredWrite => "deferred_write",
        }
    }

    /// Parses a reason's spelling; `None` for anything unknown.
    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.as_str() == text)
    }

    /// True when this reason means "the store said no" (REFUSED, exit 3); false when it
    /// means "we could not find out" (COULD NOT READ, exit 1).
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Reason::NotHeld
                | Reason::DifferentHolder
                | Reason::StaleGeneration
                | Reason::LeaseExpired
                | Reason::TokenMismatch
                | Reason::LeaseExpiring
                | Reason::TenantUnknown
                | Reason::TenantNotInMap
                | Reason::TenantAmbiguous
                | Reason::MappedElsewhere
                | Reason::TenantNotActive
                | Reason::DestinationRefused
                | Reason::ForgeWriteRefused
                | Reason::OutsideScope
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict. `Refused` and `CouldNotRead` always carry their reason, so a verdict
/// without one cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No descriptor resolves: the lane is not row-bound (exit 0).
    Unfenced,
    /// The store says this lane holds the row at this generation, unexpired (exit 0).
    Allowed,
    /// The store said no (exit 3).
    Refused(Reason),
    /// We could not find out (exit 1).
    CouldNotRead(Reason),
}

impl Verdict {
    /// Builds the verdict a reason implies: a refusal reason gives REFUSED, any other
    /// COULD NOT READ.
    pub fn from_reason(reason: Reason) -> Verdict {
        if reason.is_refusal() {
            Verdict::Refused(reason)
        } else {
            Verdict::CouldNotRead(reason)
        }
    }

    /// The process exit code for this verdict (ARCHITECTURE.md, "Verdicts and exit codes").
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Unfenced | Verdict::Allowed => exit::ALLOWED,
            Verdict::Refused(_) => exit::REFUSED,
            Verdict::CouldNotRead(_) => exit::COULD_NOT_READ,
        }
    }

    /// The reason, if any.
    pub fn reason(self) -> Option<Reason> {
        match self {
            Verdict::Unfenced | Verdict::Allowed => None,
            Verdict::Refused(r) | Verdict::CouldNotRead(r) => Some(r),
        }
    }

    /// The spelling in JSON and on the wire: `unfenced`, `allowed`, `refused`,
    /// `could_not_read`.
    pub fn wire_name(self) -> &'static str {
        match self {
            Verdict::Unfenced => "unfenced",
            Verdict::Allowed => "allowed",
            Verdict::Refused(_) => "refused",
            Verdict::CouldNotRead(_) => "could_not_read",
        }
    }

    /// The start of the verdict line: `UNFENCED`, `ALLOWED`, `REFUSED (reason)`,
    /// `COULD NOT READ (reason)`.
    pub fn headline(self) -> String {
        match self {
            Verdict::Unfenced => "UNFENCED".to_string(),
            Verdict::Allowed => "ALLOWED".to_string(),
            Verdict::Refused(r) => format!("REFUSED ({r})"),
            Verdict::CouldNotRead(r) => format!("COULD NOT READ ({r})"),
        }
    }

    /// True for the verdicts the ledger records (REFUSED and COULD NOT READ).
    pub fn is_denial(self) -> bool {
        matches!(self, Verdict::Refused(_) | Verdict::CouldNotRead(_))
    }

    /// Rebuilds a verdict from its wire spelling and reason. Any pair that is not in the
    /// table of ARCHITECTURE.md, "Verdicts and exit codes" (an `allowed` with a reason, a
    /// `refused` with a could-not-read reason, an unknown spelling) is `None`, which
    /// callers treat as `protocol_error`.
    pub fn from_wire(name: &str, reason: Option<&str>) -> Option<Verdict> {
        let reason = match reason {
            Some(text) => Some(Reason::parse(text)?),
            None => None,
        };
        match (name, reason) {
            ("allowed", None) => Some(Verdict::Allowed),
            ("refused", Some(r)) if r.is_refusal() => Some(Verdict::Refused(r)),
            ("could_not_read", Some(r)) if !r.is_refusal() => Some(Verdict::CouldNotRead(r)),
            _ => None,
        }
    }
}

/// A verdict as a record carries it: `"verdict"` (its wire name) and, for a denial,
/// `"reason"`. Ledger lines and status objects embed it with `#[serde(flatten)]`, so
/// every record spells a verdict the way the wire does.
#[derive(Serialize, Deserialize)]
struct VerdictFields {
    verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<Reason>,
}

impl Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        VerdictFields {
            verdict: self.wire_name().to_string(),
            reason: self.reason(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Verdict {
    /// Accepts the four verdicts of ARCHITECTURE.md, "Verdicts and exit codes" (a record
    /// may hold `unfenced`); any other pair is an error, so a record never reads back as a
    /// verdict it did not hold.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = VerdictFields::deserialize(deserializer)?;
        match (fields.verdict.as_str(), fields.reason) {
            ("unfenced", None) => Ok(Verdict::Unfenced),
            (name, reason) => {
                Verdict::from_wire(name, reason.map(Reason::as_str)).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{name:?} with reason {reason:?} is not a verdict"
                    ))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_spelling() {
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(*r));
            let json = serde_json::to_string(r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
        }
    }

    #[test]
    fn exit_codes_follow_the_table() {
        assert_eq!(Verdict::Unfenced.exit_code(), 0);
        assert_eq!(Verdict::Allowed.exit_code(), 0);
        assert_eq!(Verdict::Refused(Reason::NotHeld).exit_code(), 3);
        assert_eq!(Verdict::CouldNotRead(Reason::Timeout).exit_code(), 1);
        assert_eq!(Verdict::from_reason(Reason::MapStale).exit_code(), 1);
        assert_eq!(Verdict::from_reason(Reason::MappedElsewhere).exit_code(), 3);
    }

    #[test]
    fn a_wire_pair_outside_the_table_is_not_a_verdict() {
        assert_eq!(Verdict::from_wire("allowed", Some("not_held")), None);
        assert_eq!(Verdict::from_wire("refused", Some("timeout")), None);
        assert_eq!(Verdict::from_wire("refused", None), None);
        assert_eq!(
            Verdict::from_wire("could_not_read", Some("lease_expired")),
            None
        );
        assert_eq!(Verdict::from_wire("unfenced", None), None);
        assert_eq!(Verdict::from_wire("ALLOWED", None), None);
        assert_eq!(Verdict::from_wire("refused", Some("bogus")), None);
        assert_eq!(
            Verdict::from_wire("refused", Some("stale_generation")),
            Some(Verdict::Refused(Reason::StaleGeneration))
        );
    }

    #[test]
    fn a_verdict_serializes_as_its_wire_name_and_reason_and_reads_back() {
        for v in [
            Verdict::Unfenced,
            Verdict::Allowed,
            Verdict::Refused(Reason::DifferentHolder),
            Verdict::CouldNotRead(Reason::Busy),
        ] {
            let json = serde_json::to_value(v).unwrap();
            assert_eq!(json["verdict"], v.wire_name());
            assert_eq!(
                json.get("reason").and_then(|r| r.as_str()),
                v.reason().map(Reason::as_str)
            );
            assert_eq!(serde_json::from_value::<Verdict>(json).unwrap(), v);
        }
        for bad in [
            r#"{"verdict":"refused"}"#,
            r#"{"verdict":"allowed","reason":"not_held"}"#,
            r#"{"verdict":"could_not_read","reason":"lease_expired"}"#,
            r#"{"verdict":"refused","reason":"bogus"}"#,
        ] {
            assert!(serde_json::from_str::<Verdict>(bad).is_err(), "{bad}");
        }
    }
}
