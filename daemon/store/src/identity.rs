//! The identity a store carries (ARCHITECTURE.md, "The lease store"): a random name written
//! in the store itself at its first write (Redis: a key under the key prefix, set with
//! `NX`; etcd: a key under the prefix, created in a transaction that lands only while it is
//! absent; the file store: a file beside the boards, linked into place so a second writer
//! finds the first one's). A home keys its floors by it, so every spelling of one store is
//! one store (a Unix socket and a TCP address of one Redis, a URL naming one etcd member or
//! three, a directory reached through a symlink), and two stores that share a spelling (two
//! Sentinel deployments named `mymaster`) are two.
//!
//! The identity says which history a store holds, not where it is: a restore from a backup
//! brings the backup's identity back with its boards (the home's floors then see that it
//! went back), and `row-fence store copy` gives the target its own.

use crate::StoreError;
use serde::{Deserialize, Serialize};

/// What every identity starts with, so one is never taken for an address in a home's
/// floors file.
pub const PREFIX: &str = "id:";

/// Hex digits after [`PREFIX`]: 128 random bits.
const DIGITS: usize = 32;

/// The file beside the file store's boards that holds its identity (a board is a slug,
/// which never starts with a dot).
pub const FILE_NAME: &str = ".store-id";

/// The key (after the key prefix and `:` on Redis, `/` on etcd) that holds a networked
/// store's identity.
pub const KEY: &str = "store-id";

/// One store's identity: `id:` and 32 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StoreId(String);

impl StoreId {
    /// A new random identity (128 bits from the thread's CSPRNG, seeded by the OS).
    pub fn generate() -> StoreId {
        StoreId(format!("{PREFIX}{:032x}", rand::random::<u128>()))
    }

    /// Reads an identity as a store holds it; anything else is `Corrupt` (a store that
    /// holds something else under the identity's key was written by hand).
    pub fn parse(text: &str) -> Result<StoreId, StoreError> {
        let text = text.trim();
        let valid = text.strip_prefix(PREFIX).is_some_and(|hex| {
            hex.len() == DIGITS
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if valid {
            Ok(StoreId(text.to_string()))
        } else {
            Err(StoreError::Corrupt(crate::Detail::from(format!(
                "the store's identity key holds {:?}, not an identity row-fence writes ({PREFIX} and {DIGITS} hex digits); it was written by hand",
                text.chars().take(80).collect::<String>()
            ))))
        }
    }

    /// `id:…`, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for StoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for StoreId {
    type Error = StoreError;
    fn try_from(text: String) -> Result<StoreId, StoreError> {
        StoreId::parse(&text)
    }
}

impl From<StoreId> for String {
    fn from(id: StoreId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_random_and_reads_back_and_nothing_else_reads() {
        let a = StoreId::generate();
        assert_ne!(a, StoreId::generate());
        assert_eq!(StoreId::parse(a.as_str()).unwrap(), a);
        assert_eq!(StoreId::parse(&format!("{a}\n")).unwrap(), a);
        for bad in [
            "",
            "id:",
            "id:XYZ",
            &format!("{}0", a),
            "redis host=x",
            &a.as_str()[3..],
        ] {
            assert!(
                matches!(StoreId::parse(bad), Err(StoreError::Corrupt(_))),
                "{bad:?}"
            );
        }
    }
}
