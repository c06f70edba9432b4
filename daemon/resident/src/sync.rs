//! Locking that survives a panicked holder: the daemon must keep answering.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, recovering the data if a holder panicked (a poisoned counter is still a
/// counter; the daemon must keep answering).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
