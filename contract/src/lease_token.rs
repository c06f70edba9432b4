//! The lease token (ARCHITECTURE.md, "Lease token"): a random secret every grant creates,
//! that only the granting command sees and only the lane's descriptor keeps. The store keeps
//! its SHA-256 beside the claim, never the secret, so a descriptor written from a refusal's
//! words (board, row, lane and generation are all public) is refused `token_mismatch`.
//! The generation stays the fencing token; the lease token proves who may present it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::{self, Read};

/// A token is this many random bytes (256 bits), written as 64 lowercase hex digits.
pub const TOKEN_BYTES: usize = 32;

/// A lease token: 64 lowercase hex digits. Its `Debug` never shows the secret, so a
/// descriptor printed for a log line or a panic message carries no token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseToken(String);

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LeaseToken(<secret>)")
    }
}

impl LeaseToken {
    /// A new token from the operating system's random source (`/dev/urandom`). An error
    /// means no token, hence no grant: never a predictable one.
    pub fn generate() -> io::Result<LeaseToken> {
        let mut bytes = [0u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(LeaseToken(hex(&bytes)))
    }

    /// Wraps a token's text; `None` unless it is 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<LeaseToken> {
        let ok = text.len() == TOKEN_BYTES * 2
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| LeaseToken(text.to_string()))
    }

    /// True when the text is well formed (see [`LeaseToken::parse`]).
    pub fn is_well_formed(&self) -> bool {
        LeaseToken::parse(&self.0).is_some()
    }

    /// The secret itself, for the descriptor file only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 of the token, 64 lowercase hex digits: what the store keeps
    /// (`token_sha256` in the lease).
    pub fn sha256(&self) -> String {
        hex(&Sha256::digest(self.0.as_bytes()))
    }

    /// True when this token's hash is `stored` (compared in constant time, so the time an
    /// ask takes tells nothing about how much of a guessed hash was right).
    pub fn matches(&self, stored: &str) -> bool {
        constant_time_eq(self.sha256().as_bytes(), stored.as_bytes())
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_its_own_hash_and_never_prints() {
        let a = LeaseToken::generate().unwrap();
        let b = LeaseToken::generate().unwrap();
        assert!(a.is_well_formed());
        assert_ne!(a, b);
        assert!(a.matches(&a.sha256()));
        assert!(!b.matches(&a.sha256()));
        assert!(!a.matches(""));
        assert!(!format!("{a:?}").contains(a.expose()));
        assert!(LeaseToken::parse("abc").is_none());
        assert!(LeaseToken::parse(&"A".repeat(64)).is_none());
    }
}
