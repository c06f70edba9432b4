//! Whether a daemon answers for the home an installer bakes in. A hook switched on with
//! no daemon refuses every fenced write COULD NOT READ (README, "Order": load the daemon
//! first), so `install claude-hook` and `install git-hook` say so when none answers; they
//! still install (the hook on its own fails closed, and the job may be loading).

use row_fence_contract::client;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use std::time::{Duration, Instant};

/// How long the one status question may take: a serving daemon answers in milliseconds.
const ASK_FOR: Duration = Duration::from_millis(1500);

/// What was found on the home's socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Daemon {
    /// A daemon answered, serving this home.
    Answers,
    /// A daemon answered, serving another home (its `home`).
    OtherHome(String),
    /// Nothing answered (why).
    Silent(String),
}

impl Daemon {
    /// Asks the daemon on `settings.socket` for its status, once.
    pub fn ask(settings: &Settings) -> Daemon {
        match client::status(&settings.socket, Instant::now() + ASK_FOR) {
            Ok(s) if s.serves(&settings.home) => Daemon::Answers,
            Ok(s) => Daemon::OtherHome(s.home),
            Err(e) => Daemon::Silent(e.to_string()),
        }
    }

    /// The word `--json` reports: `answers`, `other_home` or `silent`.
    pub fn word(&self) -> &'static str {
        match self {
            Daemon::Answers => "answers",
            Daemon::OtherHome(_) => "other_home",
            Daemon::Silent(_) => "silent",
        }
    }

    /// Warns on stderr unless the daemon answers for `settings.home`; `what` names what is
    /// refused meanwhile ("the agent's fenced commands", "fenced pushes").
    pub fn warn(&self, settings: &Settings, what: &str) {
        let why = match self {
            Daemon::Answers => return,
            Daemon::OtherHome(home) => {
                format!("the daemon on {} serves {home}", settings.socket.display())
            }
            Daemon::Silent(why) => why.clone(),
        };
        say!(
            "row-fence: warning: no daemon answers for {}: {why}. Until one does, {what} are refused COULD NOT READ: load the daemon first (README, \"Install\", Order)",
            settings.home.display(),
        );
    }
}
