//! The task of one HTTPS connection, as [`super::Connection`]'s HTTPS arm holds it: what
//! the arm needs to abandon it, wait for it, or hear how it ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How what this arm says starts (an error's suffix names the transport).
pub const SAID: &str = "https: ";

/// The task of one HTTPS connection, as [`super::forge`]'s arm holds it.
pub struct Exchange {
    /// `None` once finished.
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
    aborted: Arc<AtomicBool>,
}

impl Exchange {
    /// Abandons the exchange: a request under way is dropped before its body ends.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        if let Some(task) = &self.task {
            task.abort();
        }
    }

    /// Waits for the task to be gone (after [`Exchange::abort`]).
    pub async fn wait(&mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Waits for the exchange to end: whether it went well, and what went wrong.
    pub async fn finish(mut self) -> (bool, String) {
        let Some(task) = self.task.take() else {
            return (false, format!("{SAID}the exchange was abandoned"));
        };
        match task.await {
            Ok(Ok(())) => (true, String::new()),
            Ok(Err(why)) => (false, format!("{SAID}{why}")),
            Err(e) => (false, format!("{SAID}the exchange ended: {e}")),
        }
    }
}

/// An exchange dropped unfinished (the push's deadline, an early return) is abandoned,
/// as ssh's child is killed on drop. Its input may have closed first, ending the body;
/// the pack's last bytes are then still missing, so the forge applies nothing.
impl Drop for Exchange {
    fn drop(&mut self) {
        self.abort();
    }
}

impl Exchange {
    /// An exchange of the running `task`, abandoned through `aborted`.
    pub fn new(
        task: tokio::task::JoinHandle<Result<(), String>>,
        aborted: Arc<AtomicBool>,
    ) -> Exchange {
        Exchange {
            task: Some(task),
            aborted,
        }
    }
}
