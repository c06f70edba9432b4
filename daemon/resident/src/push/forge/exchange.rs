//! The task of one HTTPS connection, as [`super::Connection`]'s HTTPS arm holds it: what
//! the arm needs to abandon it, wait for it, or hear how it ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How what this arm says starts (an error's suffix names the transport).
pub const SAID: &str = "https: ";

/// Why an HTTPS exchange did not go through; each names the URL it was at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The request failed on its way (the connection, TLS, a read).
    #[error("{url}: {}", causes(.source))]
    Transport {
        /// The URL.
        url: String,
        /// What the client said.
        source: reqwest::Error,
    },
    /// The forge refused the daemon's credential (401 or 403).
    #[error(
        "the forge refused the daemon's credential at {url} (HTTP {status}): the operator loads the forge's token with `row-fence token add FILE --forge ORIGIN`"
    )]
    Credential {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// Another status than a success.
    #[error("the forge answered HTTP {status} to {url}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The answer is not git's smart HTTP (its text says what was seen).
    #[error("{0}")]
    NotSmartHttp(String),
    /// The advertisement is larger than the bound, in bytes.
    #[error("the forge's advertisement at {url} is larger than {max} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The bound, in bytes.
        max: u64,
    },
    /// The push session stopped reading or writing.
    #[error("the push ended on the daemon's side: {0}")]
    Gone(#[source] std::io::Error),
}

/// A client error with its causes (a TLS failure is in the causes), and what to do when a
/// certificate is at fault.
fn causes(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    if text.contains("certificate") || text.contains("UnknownIssuer") {
        text.push_str(
            " (the forge's certificate is not signed by the CA the daemon trusts: --push-ca, or the system's roots)",
        );
    }
    text
}

/// The task of one HTTPS connection, as [`super::forge`]'s arm holds it.
pub struct Exchange {
    /// `None` once finished.
    task: Option<tokio::task::JoinHandle<Result<(), ExchangeError>>>,
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
        task: tokio::task::JoinHandle<Result<(), ExchangeError>>,
        aborted: Arc<AtomicBool>,
    ) -> Exchange {
        Exchange {
            task: Some(task),
            aborted,
        }
    }
}
