//! What the daemon tells the service manager that supervises it (systemd's `sd_notify`
//! protocol; launchd needs nothing). The unit rendered by `row-fence render systemd` is
//! `Type=notify` with a `WatchdogSec`: systemd counts the daemon as started only once it
//! says `READY=1`, which it says after the socket is bound, and restarts it when the
//! serving loop stops saying `WATCHDOG=1`. Without `NOTIFY_SOCKET` (launchd, a terminal,
//! the tests' own supervisor) every call here does nothing.

use std::path::Path;
use std::time::Duration;

/// Tells the service manager the daemon is serving on `socket`: `READY=1`, with a status
/// line for `systemctl status`. Called once, after the bind, so a unit that is "active"
/// always has a socket that answers. A failed notification is logged, never fatal: the
/// daemon serves whether or not systemd heard it (systemd then times the start out and
/// restarts it, which is its call to make).
pub fn ready(socket: &Path) {
    let status = format!("serving on {}", socket.display());
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&status),
    ]);
}

/// Tells the service manager the daemon is stopping (`STOPPING=1`), so a stop it did not
/// ask for (stale code, a signal) is shown as one rather than as a crash.
pub fn stopping() {
    notify(&[sd_notify::NotifyState::Stopping]);
}

fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager");
    }
}

/// The serving loop's watchdog: when systemd set `WATCHDOG_USEC` for this process, each
/// [`Watchdog::tick`] completes every half of that interval (systemd's advice: ping at
/// half the timeout) and sends `WATCHDOG=1`. Without a watchdog, `tick` never completes,
/// so a `select!` branch on it costs nothing.
pub struct Watchdog {
    /// `None`: no watchdog was asked for.
    interval: Option<tokio::time::Interval>,
}

impl Watchdog {
    /// Reads `WATCHDOG_USEC` (and `WATCHDOG_PID`, which must be ours or unset) from the
    /// daemon's own environment, set there by systemd.
    pub fn from_env() -> Watchdog {
        let interval = sd_notify::watchdog_enabled()
            .filter(|timeout| !timeout.is_zero())
            .map(|timeout| {
                let mut interval = tokio::time::interval((timeout / 2).max(MIN_PERIOD));
                // A loop that was busy past a tick pings once, not in a burst.
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval
            });
        if let Some(i) = &interval {
            tracing::info!(period = ?i.period(), "systemd watchdog on");
        }
        Watchdog { interval }
    }

    /// Completes when it is time to ping, after sending `WATCHDOG=1`; never completes when
    /// there is no watchdog. Cancel-safe: dropped before completing, no ping is lost.
    pub async fn tick(&mut self) {
        match &mut self.interval {
            Some(interval) => {
                interval.tick().await;
                notify(&[sd_notify::NotifyState::Watchdog]);
            }
            None => std::future::pending().await,
        }
    }
}

/// Pings are at most this frequent, whatever `WATCHDOG_USEC` says (a typo of a few
/// microseconds must not turn the serving loop into a busy loop).
const MIN_PERIOD: Duration = Duration::from_millis(10);
