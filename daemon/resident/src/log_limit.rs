//! At most one log line per key per interval, in bounded memory. The keys come from what
//! callers send (a board, an action, a tenant), so they are hashed and the table is capped:
//! a flood of distinct keys costs at most [`MAX_KEYS`] entries, and once the table is
//! full of keys logged within the interval, further lines are suppressed (and counted)
//! rather than remembered.

use crate::sync::lock;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Keys remembered at most (each 16 bytes plus the table's overhead: well under 1 MiB).
pub const MAX_KEYS: usize = 4096;

/// One log line per key per `every`.
pub struct LogLimit {
    /// The interval between two lines for one key.
    every: Duration,
    /// When each key (its hash) was last logged.
    last: Mutex<HashMap<u64, Instant>>,
    /// Lines suppressed because the table was full of live keys.
    suppressed: AtomicU64,
}

impl LogLimit {
    /// A limiter allowing one line per key per `every`.
    pub fn new(every: Duration) -> LogLimit {
        LogLimit {
            every,
            last: Mutex::new(HashMap::new()),
            suppressed: AtomicU64::new(0),
        }
    }

    /// True when a line for `key` may be logged now; remembers that it was.
    pub fn allow(&self, key: impl Hash) -> bool {
        self.allow_at(key, Instant::now())
    }

    fn allow_at(&self, key: impl Hash, now: Instant) -> bool {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let key = hasher.finish();
        let mut last = lock(&self.last);
        if last
            .get(&key)
            .is_some_and(|t| now.duration_since(*t) < self.every)
        {
            return false;
        }
        if last.len() >= MAX_KEYS && !last.contains_key(&key) {
            last.retain(|_, t| now.duration_since(*t) < self.every);
            if last.len() >= MAX_KEYS {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        last.insert(key, now);
        true
    }

    /// Lines suppressed because the table was full.
    pub fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        lock(&self.last).len()
    }

    /// True when no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval() {
        let limit = LogLimit::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(limit.allow_at(("b", "push", "not_held"), t0));
        assert!(!limit.allow_at(("b", "push", "not_held"), t0 + Duration::from_secs(59)));
        assert!(limit.allow_at(("b", "push", "not_held"), t0 + Duration::from_secs(60)));
        assert!(limit.allow_at(("b", "push", "lease_expired"), t0));
    }

    #[test]
    fn a_flood_of_distinct_keys_stays_bounded_and_old_keys_make_room() {
        let limit = LogLimit::new(Duration::from_secs(60));
        let t0 = Instant::now();
        for i in 0..MAX_KEYS + 500 {
            limit.allow_at(format!("action {i}"), t0);
        }
        assert_eq!(limit.len(), MAX_KEYS);
        assert_eq!(limit.suppressed(), 500);
        // A minute later the old keys are expired: a new key is logged and the table shrinks.
        assert!(limit.allow_at("a new action", t0 + Duration::from_secs(61)));
        assert_eq!(limit.len(), 1);
    }
}
