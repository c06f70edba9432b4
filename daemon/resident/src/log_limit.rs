//! At most one log line per key per interval, in bounded memory. The keys come from what
//! callers send (a board, an action, a tenant), so they are hashed and the table is capped:
//! a flood of distinct keys costs at most [`MAX_KEYS`] entries, and once the table is
//! full of keys logged within the interval, further lines are suppressed (and counted)
//! rather than remembered.
//!
//! [`LineQuota`] bounds what distinct keys cannot: a lane whose every refusal is another
//! (board, action, reason) gets past [`LogLimit`] with each one, so lines are also
//! counted per lane and in all within each interval, and what is over either quota is
//! suppressed and reported as one summary line.

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

/// At most `per_key` lines per key and `total` lines in all per interval, in bounded
/// memory (keys hashed, at most [`MAX_KEYS`] a window; a key past that counts against
/// `total` only). A window starts with the first line after the previous one ended.
pub struct LineQuota {
    every: Duration,
    per_key: u32,
    total: u32,
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    started: Option<Instant>,
    per_key: HashMap<u64, u32>,
    logged: u32,
    /// Lines suppressed and not yet reported by a summary.
    unreported: u64,
}

/// What [`LineQuota::allow`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    /// Log the line; first log a summary of the `suppressed` lines before it (when above 0).
    Log {
        /// Lines suppressed since the last summary.
        suppressed: u64,
    },
    /// Over the key's or the total quota: do not log; the line is counted.
    Suppress,
}

impl LineQuota {
    /// A quota of `per_key` lines per key and `total` lines in all per `every`.
    pub fn new(every: Duration, per_key: u32, total: u32) -> LineQuota {
        LineQuota {
            every,
            per_key,
            total,
            window: Mutex::new(Window::default()),
        }
    }

    /// Whether a line for `key` may be logged now; counts it either way.
    pub fn allow(&self, key: impl Hash) -> Quota {
        self.allow_at(key, Instant::now())
    }

    fn allow_at(&self, key: impl Hash, now: Instant) -> Quota {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let key = hasher.finish();
        let mut w = lock(&self.window);
        if w.started
            .is_none_or(|t| now.duration_since(t) >= self.every)
        {
            w.started = Some(now);
            w.per_key.clear();
            w.logged = 0;
        }
        let known = w.per_key.len() < MAX_KEYS || w.per_key.contains_key(&key);
        let count = if known {
            let count = w.per_key.entry(key).or_insert(0);
            *count += 1;
            *count
        } else {
            u32::MAX
        };
        if count > self.per_key || w.logged >= self.total {
            w.unreported += 1;
            return Quota::Suppress;
        }
        w.logged += 1;
        Quota::Log {
            suppressed: std::mem::take(&mut w.unreported),
        }
    }

    /// Lines suppressed since the last summary, now reported (for a summary at exit).
    pub fn take_unreported(&self) -> u64 {
        std::mem::take(&mut lock(&self.window).unreported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_gets_its_quota_all_keys_the_total_and_the_rest_is_counted() {
        let quota = LineQuota::new(Duration::from_secs(60), 3, 5);
        let t0 = Instant::now();
        let mut logged = 0;
        for _ in 0..1000 {
            if quota.allow_at("lane-b", t0) != Quota::Suppress {
                logged += 1;
            }
        }
        assert_eq!(logged, 3);
        // The next line logged first reports what was suppressed before it.
        assert_eq!(quota.allow_at("lane-c", t0), Quota::Log { suppressed: 997 });
        assert_eq!(quota.allow_at("lane-d", t0), Quota::Log { suppressed: 0 });
        assert_eq!(
            quota.allow_at("lane-e", t0),
            Quota::Suppress,
            "the total is 5"
        );
        // The next window logs lane-b again.
        let next = t0 + Duration::from_secs(60);
        assert_eq!(quota.allow_at("lane-b", next), Quota::Log { suppressed: 1 });
        assert_eq!(quota.take_unreported(), 0);
    }

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
