//! The asker's whole flow: resolve the descriptor, decide what it can decide itself
//! (UNFENCED, a missing or unreadable descriptor, a socket it cannot trust), otherwise
//! print `row-fence: asking …`, ask the daemon within one deadline, check the answer
//! echoes what was asked, print exactly one verdict line and return the exit code. The
//! asking is the contract's one client (`row_fence_contract::client`). Every path that
//! cannot find out ends COULD NOT READ (ARCHITECTURE.md, "Invariants": fail closed).

use crate::push_updates::Unreadable;
use row_fence_contract::client::{self, Judged, SESSION_ENV};
use row_fence_contract::descriptor::{self, Descriptor, Resolution};
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::paths;
use row_fence_contract::protocol::Op;
use row_fence_contract::report::{self, Shown};
use row_fence_contract::scope::RefUpdate;
use row_fence_contract::verdict::{Reason, Verdict};
use row_fence_stamp::BUILD_DIGEST;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one run of the asker is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--descriptor PATH`.
    pub descriptor: Option<PathBuf>,
    /// `--action TEXT`, the fenced action, for the ledger and the asks stream.
    pub action: String,
    /// `--socket PATH`.
    pub socket: Option<PathBuf>,
    /// `--home DIR` (else `ROW_FENCE_HOME`, else `~/.row-fence`): the home whose registry
    /// the stamp hashes, whose ledger records what the asker decides, and whose socket it
    /// asks unless `socket` names another.
    pub home: Option<PathBuf>,
    /// The total deadline.
    pub timeout: Duration,
    /// `--json`: also print the verdict object on stdout.
    pub json: bool,
    /// `--push-updates`: the pushed refs read from stdin, judged against the row's scope
    /// with the lease (empty: the lease alone); unreadable ones make the ask COULD NOT READ.
    pub updates: Result<Vec<RefUpdate>, Unreadable>,
}

/// Runs one ask and returns the process exit code (0, 1 or 3).
pub fn run(options: &Options) -> i32 {
    let started = Instant::now();
    run_resolved(
        options,
        descriptor::resolve_here(options.descriptor.as_deref()),
        started,
    )
}

/// Runs one ask about a descriptor resolved by the caller (git's transport gate binds the
/// lookup to the repository that runs it), from `started` on, and returns the exit code.
/// The lines printed and the ledger records written are the asker's own.
pub fn run_resolved(options: &Options, resolution: Resolution, started: Instant) -> i32 {
    let asker = Asker {
        started,
        options,
        home: paths::home(options.home.as_deref()).and_then(|path| {
            std::path::absolute(&path)
                .map_err(|source| paths::HomeError::NotAbsolute { path, source })
        }),
        cwd: std::env::current_dir().ok(),
        session: std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()),
    };
    asker.run(resolution)
}

struct Asker<'a> {
    started: Instant,
    options: &'a Options,
    home: Result<PathBuf, paths::HomeError>,
    cwd: Option<PathBuf>,
    session: Option<String>,
}

impl Asker<'_> {
    fn run(&self, resolution: Resolution) -> i32 {
        match resolution {
            Resolution::Unbound(detail) => self.finish(
                Verdict::Unfenced,
                format!("(not row-bound: {detail})"),
                None,
            ),
            Resolution::Missing(path) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorMissing),
                format!("the named descriptor {} does not exist", path.display()),
                None,
                Some(&path),
            ),
            Resolution::Unreadable(path, detail) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                format!("{}: {detail}", path.display()),
                None,
                Some(&path),
            ),
            Resolution::Found(path, d) => self.ask(&path, d),
        }
    }

    fn ask(&self, path: &Path, d: Descriptor) -> i32 {
        let updates = match &self.options.updates {
            Ok(updates) => updates.clone(),
            Err(e) => {
                return self.decide(
                    Verdict::CouldNotRead(Reason::ProtocolError),
                    e.to_string(),
                    Some(&d),
                    Some(path),
                );
            }
        };
        let prepared = match client::prepare(
            self.home.as_deref(),
            self.options.socket.as_deref(),
            BUILD_DIGEST,
        ) {
            Ok(prepared) => prepared,
            Err(unasked) => return self.judged(unasked.judged(), d, path),
        };
        report::say(&report::asking_line(&prepared.socket, &d));
        let deadline = self.started + self.options.timeout;
        let caller = prepared.caller_from_env(self.cwd.as_deref());
        let mut request = prepared.request(&d, &self.options.action, caller, deadline);
        if let Op::Ask(ask) = &mut request.op {
            ask.updates = updates;
        }
        let exchanged = client::exchange(&prepared.socket, &request, deadline);
        let judged =
            client::verdict_of(&d, &prepared.socket, self.options.timeout, Some(exchanged));
        self.judged(judged, d, path)
    }

    /// Prints what the ask came to; records it first when the asker decided it.
    fn judged(&self, judged: Judged, d: Descriptor, path: &Path) -> i32 {
        if judged.by_daemon {
            self.finish(judged.verdict, judged.detail, Some(d))
        } else {
            self.decide(judged.verdict, judged.detail, Some(&d), Some(path))
        }
    }

    /// A verdict the asker decided itself: recorded in the ledger, then printed.
    fn decide(
        &self,
        verdict: Verdict,
        detail: String,
        d: Option<&Descriptor>,
        path: Option<&Path>,
    ) -> i32 {
        if let Ok(home) = &self.home {
            let record = LedgerRecord::new(DecidedBy::Asker, verdict, detail.clone())
                .with_descriptor(d)
                .with_caller(
                    self.session.as_deref(),
                    self.cwd
                        .as_ref()
                        .map(|c| c.display().to_string())
                        .as_deref(),
                    &self.options.action,
                )
                .with_descriptor_path(path);
            // The verdict stands whether or not the ledger could be written.
            let _ = ledger::append(&paths::ledger(home), &record);
        }
        self.finish(verdict, detail, d.cloned())
    }

    fn finish(&self, verdict: Verdict, detail: String, descriptor: Option<Descriptor>) -> i32 {
        let outcome = Shown {
            verdict,
            detail,
            descriptor,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
        };
        outcome.print(self.options.json);
        verdict.exit_code()
    }
}
