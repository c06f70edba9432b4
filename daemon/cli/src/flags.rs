//! Durations and lease times as the command line's flags take them.

use std::time::Duration;

/// A flag's value that is not what the flag takes (clap prints it as a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlagError {
    /// Not a duration humantime reads.
    #[error("{text:?}: {why} (try 90s, 15m, 2h)")]
    Duration {
        /// The value given.
        text: String,
        /// humantime's reason.
        why: String,
    },
    /// A zero duration.
    #[error("{0:?} is zero")]
    Zero(String),
    /// A lease time over [`MAX_TTL`].
    #[error("{0:?} is longer than the longest lease, 366 days")]
    TooLong(String),
}

/// Parses a duration such as `90s`, `15m`, `2h` (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, FlagError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| FlagError::Duration {
        text: text.to_string(),
        why: e.to_string(),
    })?;
    if d.is_zero() {
        return Err(FlagError::Zero(text.to_string()));
    }
    Ok(d)
}

/// The longest lease time `--ttl` takes: 366 days. A lease is renewed, not granted for
/// ever; a longer one is a typo.
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a lease time (a duration of at most [`MAX_TTL`]).
pub fn parse_ttl(text: &str) -> Result<Duration, FlagError> {
    let d = parse_duration(text)?;
    if d > MAX_TTL {
        return Err(FlagError::TooLong(text.to_string()));
    }
    Ok(d)
}
