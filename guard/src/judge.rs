//! From a plan to an exit code (ARCHITECTURE.md, "The agent guard's policy"): resolve the
//! session's binding and every place's descriptor the way the asker does, ask the daemon
//! about each distinct descriptor (concurrently, under one deadline for the whole hook),
//! print the asker's lines (`row-fence: asking …`, then one verdict line per ask), record
//! what the guard decides itself in the ledger, and exit 2 unless every ask is ALLOWED
//! (or nothing involved is row-bound).

use crate::binding::{self, Binding};
use crate::finding::{Dir, Kind, Place};
use crate::input::Hook;
use crate::walk::Plan;
use row_fence_contract::client::{self, ExchangeError, Prepared};
use row_fence_contract::descriptor::{self, Descriptor, Lookup, Resolution};
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::paths;
use row_fence_contract::protocol::{Answer, Request};
use row_fence_contract::report::{self, Shown};
use row_fence_contract::verdict::{Reason, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use crate::exit::{ALLOW, DENY};

/// The most distinct places one command may write from; beyond it a row-bound session is
/// denied without asking (the hook must answer inside Claude Code's timeout).
pub const MAX_PLACES: usize = 32;

/// Problems (places it cannot name, descriptors it cannot read) after which the judge
/// stops resolving: the command is denied already.
pub const MAX_PROBLEMS: usize = 8;

/// Actions named per place and per binding: more only lengthen the verdict line.
pub const MAX_ACTIONS_PER_ASK: usize = 4;

/// What the judge needs from the guard's environment.
#[derive(Debug)]
pub struct Settings {
    /// `$ROW_FENCE_HOME` (bindings, ledger, socket, registry).
    pub home: Result<PathBuf, paths::HomeError>,
    /// `--socket`, if given.
    pub socket: Option<PathBuf>,
    /// `ROW_FENCE_DESCRIPTOR` from the hook's environment: the whole session is bound.
    pub descriptor_env: Option<PathBuf>,
    /// When the hook started.
    pub started: Instant,
    /// The whole hook's deadline.
    pub deadline: Instant,
    /// The guard binary's build digest (`row_fence_stamp::BUILD_DIGEST`), the build half
    /// of the code stamp it asks with.
    pub build: &'static str,
}

/// One distinct descriptor to ask about.
struct AskItem {
    descriptor: Descriptor,
    actions: Vec<String>,
    cwd: PathBuf,
    /// True when a fenced write or opaque call was filed here: its verdict denies under
    /// today's rules. False for the standing ask alone (every call of a row-bound
    /// session), whose COULD NOT READ does not stop a harmless call.
    counts: bool,
}

/// A verdict the guard decided without the daemon.
struct Decided {
    verdict: Verdict,
    detail: String,
    descriptor: Option<Descriptor>,
    path: Option<PathBuf>,
    action: String,
    counts: bool,
}

/// One ask's outcome.
struct Asked {
    path: PathBuf,
    verdict: Verdict,
    detail: String,
    descriptor: Descriptor,
    action: String,
    counts: bool,
}

/// Where the session stands with its row, from the standing asks.
#[derive(Debug, PartialEq)]
enum Standing {
    /// Nothing the session is bound to (or its cwd) is row-bound.
    Unbound,
    /// Every standing ask is ALLOWED.
    Allowed,
    /// A standing ask is REFUSED: the session is quarantined.
    Refused {
        /// The refusal, as shown.
        line: String,
        /// The refused descriptor.
        path: PathBuf,
        /// The refused descriptor's contents, when read (its board, row and lane).
        descriptor: Option<Descriptor>,
    },
    /// A standing ask could not be read, or the binding could not.
    Unread,
}

struct Judge<'a> {
    settings: &'a Settings,
    hook: &'a Hook,
    cwd: PathBuf,
    asks: BTreeMap<PathBuf, AskItem>,
    decided: Vec<Decided>,
    /// Denials that are not verdicts: a place the text does not name, a command the
    /// guard cannot read, a write that would land after the call.
    problems: Vec<(Reason, String, String)>,
    /// The descriptors asked about on every call (the binding, `ROW_FENCE_DESCRIPTOR`,
    /// the descriptor a remembered quarantine names, or for an input without a session
    /// its cwd's), and the action they are asked with.
    standing: Vec<PathBuf>,
    standing_action: String,
    /// The session's binding could not be read or written: it may be row-bound, so it
    /// is quarantined (fail closed).
    binding_problem: Option<String>,
    /// Where the session's binding was made (its working tree is the quarantine's
    /// bound for file tools); `None` when no binding stands (a session bound only by
    /// `ROW_FENCE_DESCRIPTOR`, or whose binding cannot be read): the hook's `cwd` is
    /// wherever the agent last `cd`'d, so it says nothing about the worktree.
    bound_from: Option<PathBuf>,
}

/// Judges `plan` (read from `hook`; `cwd` the session's working directory) and returns
/// the exit code. Read top to bottom, this is why a call was allowed: the session stands
/// on its descriptors, git's places are asked about, an unbound call with nothing fenced
/// answers at once, and otherwise every standing ask, and every finding at every place,
/// must come back ALLOWED.
pub fn judge(hook: &Hook, plan: &Plan, cwd: &Path, settings: &Settings) -> i32 {
    let mut judge = Judge::new(hook, cwd, settings);
    judge.stand();
    judge.git_places(plan);
    if let Some(code) = judge.unbound(plan) {
        return code;
    }
    judge.standing_asks();
    match &hook.tool {
        crate::input::Tool::Other { name, .. } => judge.other_tool(name),
        crate::input::Tool::Bash { .. } => judge.findings(plan),
    }
    judge.finish()
}

impl<'a> Judge<'a> {
    /// A judge of one call, nothing asked yet.
    fn new(hook: &'a Hook, cwd: &Path, settings: &'a Settings) -> Judge<'a> {
        Judge {
            settings,
            hook,
            cwd: cwd.to_path_buf(),
            asks: BTreeMap::new(),
            decided: Vec::new(),
            problems: Vec::new(),
            standing: Vec::new(),
            standing_action: match &hook.tool {
                crate::input::Tool::Bash { command, .. } => {
                    format!("(every call) {}", crate::finding::short(command))
                }
                other => format!("(every call) {}", other.name()),
            },
            binding_problem: None,
            bound_from: None,
        }
    }
}

impl Judge<'_> {
    /// The descriptors the session stands on, asked about on every call: its binding and
    /// `ROW_FENCE_DESCRIPTOR` ([`Judge::bound`]), for an input without a session its
    /// cwd's, and the one a remembered quarantine names.
    fn stand(&mut self) {
        let bound = self.bound();
        // An input without a session is judged by its cwd (ARCHITECTURE.md, "Quarantine").
        self.standing = if bound.is_empty() && self.hook.session.is_none() {
            match resolve(&self.cwd, None) {
                Resolution::Found(path, _) => {
                    report::say(&format!(
                        "row-fence guard: the hook input carries no session id, so this call is judged by its directory's descriptor ({}) and no quarantine is remembered between calls.",
                        path.display()
                    ));
                    vec![path]
                }
                _ => Vec::new(),
            }
        } else {
            bound
        };
        // A remembered quarantine stands until the descriptor it refused is ALLOWED again,
        // whatever the binding says now (ARCHITECTURE.md, "Quarantine").
        if let (Ok(home), Some(session)) = (&self.settings.home, &self.hook.session)
            && let Ok(Some(q)) = crate::quarantine::record::read(home, session)
            && !self.standing.contains(&q.descriptor)
        {
            self.standing.push(q.descriptor);
        }
    }

    /// The answer of a call nothing row-bound is involved in, when it needs no ask: a
    /// tool other than the shell is denied only when it writes the fence's home, and a
    /// shell command with nothing fenced or opaque runs (a patch it carries to
    /// `apply_patch` is a file write). `None`: the call is asked about.
    fn unbound(&self, plan: &Plan) -> Option<i32> {
        let involved = !self.standing.is_empty()
            || self.binding_problem.is_some()
            || !self.asks.is_empty()
            || !self.problems.is_empty();
        if involved {
            return None;
        }
        let bash = matches!(self.hook.tool, crate::input::Tool::Bash { .. });
        if !bash || (plan.findings.is_empty() && plan.unreadable.is_none()) {
            return Some(self.file_writes(false));
        }
        None
    }

    /// A row-bound session asks on every call: a refusal quarantines it.
    fn standing_asks(&mut self) {
        for path in self.standing.clone() {
            let action = self.standing_action.clone();
            self.explicit(&action, &path);
        }
    }

    /// A tool other than the shell: an MCP tool that is not read-only by rule, and a
    /// tool the guard does not know, is opaque: it runs only when the standing ask is
    /// ALLOWED (today's rules for a call the guard cannot read).
    fn other_tool(&mut self, name: &str) {
        if crate::quarantine::tools::opaque_outside(name, self.settings.home.as_deref().ok()) {
            for path in self.standing.clone() {
                self.explicit(name, &path);
            }
        }
    }

    /// A shell command's findings: a command the guard could not read denies; so does
    /// one writing from more places than it can ask about, or (row-bound) a write that
    /// would land after the call; every other finding is asked about at each place, and
    /// with the session's standing descriptors.
    fn findings(&mut self, plan: &Plan) {
        if plan.findings.is_empty() && plan.unreadable.is_none() {
            return;
        }
        if let Some(why) = &plan.unreadable {
            self.problems.push((
                Reason::CommandUnreadable,
                "(a command the guard could not read)".into(),
                format!("{why}; the guard cannot tell what it writes"),
            ));
            return;
        }
        let places: BTreeSet<&Place> = plan.findings.iter().flat_map(|f| &f.places).collect();
        let is_bound = !self.standing.is_empty() || self.binding_problem.is_some();
        if places.len() > MAX_PLACES && is_bound {
            self.problems.push((
                Reason::TooManyDirectories,
                format!("{} commands", plan.findings.len()),
                format!(
                    "the command writes from {} places, over the guard's limit of {MAX_PLACES} for a row-bound session; split it",
                    places.len()
                ),
            ));
            return;
        }
        // A write the harness runs in the background outlives the call, whatever the text.
        let background = matches!(
            self.hook.tool,
            crate::input::Tool::Bash {
                background: true,
                ..
            }
        )
        .then_some(
            "the harness runs the call in the background (run_in_background, is_background)",
        );
        // Each place is resolved for a few of its actions (the rest only lengthen the
        // verdict line), the session's binding for a few distinct actions, and the walk
        // stops once enough problems deny the command anyway: a long command costs its
        // distinct places, not its clauses.
        let mut per_place: BTreeMap<&Place, usize> = BTreeMap::new();
        let mut explicit_actions: BTreeSet<&str> = BTreeSet::new();
        for finding in &plan.findings {
            if self.problems.len() >= MAX_PROBLEMS {
                break;
            }
            let deferred = finding.deferred.as_deref().or(background);
            if let Some(when) = deferred
                && is_bound
            {
                self.problems.push((
                    Reason::DeferredWrite,
                    finding.action.clone(),
                    deferred_why(when),
                ));
                continue;
            }
            for place in &finding.places {
                if Instant::now() >= self.settings.deadline {
                    self.problems.push((
                        Reason::Timeout,
                        finding.action.clone(),
                        "the guard ran out of time resolving directories; retry".into(),
                    ));
                    return;
                }
                let seen = per_place.entry(place).or_insert(0);
                *seen += 1;
                if *seen <= MAX_ACTIONS_PER_ASK {
                    self.place(&finding.action, finding.kind, place, deferred, is_bound);
                }
            }
            if explicit_actions.len() < MAX_ACTIONS_PER_ASK
                && explicit_actions.insert(finding.action.as_str())
            {
                for path in self.standing.clone() {
                    self.explicit(&finding.action, &path);
                }
            }
        }
    }
}

/// The denial's sentence for a write that would land after the call.
fn deferred_why(when: &str) -> String {
    format!(
        "it would run after this call returns ({when}): the fence judges it now and the write would land later, when the row may be gone. Run it in the foreground, in a call of its own"
    )
}

impl Judge<'_> {
    /// The descriptors the whole session is bound to: `ROW_FENCE_DESCRIPTOR`, and the
    /// session's binding, made now if its working directory resolves to a descriptor.
    fn bound(&mut self) -> Vec<PathBuf> {
        let mut bound = Vec::new();
        if let Some(path) = &self.settings.descriptor_env {
            bound.push(self.cwd.join(path));
        }
        let (Some(session), Ok(home)) = (&self.hook.session, &self.settings.home) else {
            return bound;
        };
        match binding::read(home, session) {
            Ok(Some(b)) => {
                self.bound_from = Some(b.cwd.clone());
                bound.push(b.descriptor);
            }
            Ok(None) => {
                if let Resolution::Found(path, _) = resolve(&self.cwd, None) {
                    let offered = Binding {
                        session: session.clone(),
                        descriptor: path.clone(),
                        cwd: self.cwd.clone(),
                        bound_at_ms: ledger::now_ms(),
                    };
                    match binding::bind(home, &offered) {
                        // The binding that stands judges, whichever racing call made it.
                        Ok(stands) => {
                            self.bound_from = Some(stands.cwd);
                            bound.push(stands.descriptor);
                        }
                        // A row-bound session whose binding cannot be written would be
                        // unbound from the next call on: fail closed.
                        Err(why) => {
                            self.binding_problem = Some(why.to_string());
                            self.bound_from = Some(self.cwd.clone());
                            bound.push(path);
                        }
                    }
                }
            }
            Err(why) => {
                // A session whose binding cannot be read may be bound: fail closed.
                self.binding_problem = Some(why.to_string());
            }
        }
        bound
    }

    /// git reads the configuration of the repository it runs in, which the lane owning it
    /// may have planted (ARCHITECTURE.md, "Quarantine"): every place git (or an opaque
    /// command, which may run git) runs at whose
    /// descriptor is not one the session stands on is asked about too, and a verdict
    /// other than ALLOWED denies the call — a refused lane's repository is no place for
    /// git to run, whoever calls it (an unbound session in a parent directory, another
    /// lane's session with `git -C`).
    fn git_places(&mut self, plan: &Plan) {
        if plan.git_places_over {
            self.problems.push((
                Reason::TooManyDirectories,
                "git".into(),
                format!(
                    "git runs in more than {} places, over the guard's limit; split the command",
                    crate::walk::MAX_GIT_PLACES
                ),
            ));
        }
        let standing: Vec<PathBuf> = self
            .standing
            .iter()
            .map(|p| crate::quarantine::record::identity(p))
            .collect();
        // Code the guard cannot read may run git there too.
        let opaque = plan
            .findings
            .iter()
            .filter(|f| f.kind == Kind::Opaque)
            .flat_map(|f| &f.places);
        // A harness's reader that runs git (Gemini CLI's grep runs `git grep` where it
        // searches): its directory is such a place.
        let tool_place = match &self.hook.tool {
            crate::input::Tool::Other { name, input }
                if crate::quarantine::tools::RUNS_PROGRAMS.contains(&name.as_str()) =>
            {
                let dir = match input.get("dir_path").or_else(|| input.get("path")) {
                    Some(serde_json::Value::String(d)) => self.cwd.join(d),
                    _ => self.cwd.clone(),
                };
                Some(crate::finding::Place {
                    dir: Dir::Known(dir),
                    git_dir: None,
                })
            }
            _ => None,
        };
        let mut seen = 0;
        for place in plan
            .git_places
            .iter()
            .chain(opaque)
            .chain(tool_place.as_ref())
        {
            seen += 1;
            if seen > MAX_PLACES {
                break;
            }
            let Dir::Known(dir) = &place.dir else {
                continue;
            };
            let git_dir = match &place.git_dir {
                None => None,
                Some(Dir::Known(g)) => Some(g.display().to_string()),
                Some(Dir::Unknown(_)) => continue,
            };
            if !dir.is_dir() {
                continue;
            }
            if let Resolution::Found(path, d) = resolve(dir, git_dir.as_deref())
                && !standing.contains(&crate::quarantine::record::identity(&path))
            {
                let action = format!(
                    "git (or code that may run it) in {}, whose configuration is lane {}'s",
                    dir.display(),
                    d.lane
                );
                self.ask(path, d, &action, dir);
            }
        }
    }

    /// Resolves one place's descriptor and files the ask (or the guard's own verdict).
    /// `deferred`: the finding would run after the call (then a row-bound place denies
    /// instead of asking). `bound`: the session is row-bound.
    ///
    /// A directory the guard cannot name (a `cd` into a substitution, one that does not
    /// exist yet) denies a fenced write. An opaque command there is not asked about its
    /// place: its code could change directory itself wherever it starts, so the place
    /// adds nothing to what it is judged by — the session's binding (asked for every
    /// finding) when row-bound, nothing when unbound, and git's transport gate behind both
    /// (ARCHITECTURE.md, "The agent guard's policy"). Only where the harness does not say
    /// where the whole call runs (a Codex without `tool_cwd`) does a row-bound session's
    /// opaque command deny too. (The repository there is asked about as a place git may
    /// run at: [`Judge::git_places`].)
    fn place(
        &mut self,
        action: &str,
        kind: Kind,
        place: &Place,
        deferred: Option<&str>,
        bound: bool,
    ) {
        let call_unknown = match &self.hook.runs_in {
            crate::input::RunsIn::Unknown(why) => Some(why.clone()),
            _ => None,
        };
        let unknown_denies = kind == Kind::Fenced || (call_unknown.is_some() && bound);
        let dir = match (&call_unknown, &place.dir) {
            (Some(why), _) => Dir::Unknown(why.clone()),
            (None, dir) => dir.clone(),
        };
        let dir = match dir {
            Dir::Known(dir) => dir,
            Dir::Unknown(why) => {
                let next = if call_unknown.is_some() {
                    "The harness does not say where this call runs: use a release that does (Codex 0.169.0 or later sends tool_cwd)"
                } else {
                    "Spell the directory out"
                };
                if unknown_denies {
                    self.problems.push((
                        Reason::DirectoryUnknown,
                        action.to_string(),
                        format!("it runs in {why}; the guard cannot tell whether that directory is row-bound. {next}"),
                    ));
                }
                return;
            }
        };
        let git_dir = match &place.git_dir {
            None => None,
            // Like a working directory, a git dir made later may be anything.
            Some(Dir::Known(g)) if !g.exists() => {
                if unknown_denies {
                    self.problems.push((
                        Reason::DirectoryUnknown,
                        action.to_string(),
                        format!(
                            "its git dir {} does not exist yet; the guard cannot tell whether it will be row-bound",
                            g.display()
                        ),
                    ));
                }
                return;
            }
            Some(Dir::Known(g)) => Some(g.display().to_string()),
            Some(Dir::Unknown(why)) => {
                if unknown_denies {
                    self.problems.push((
                        Reason::DirectoryUnknown,
                        action.to_string(),
                        format!(
                            "its git dir is {why}; the guard cannot tell whether it is row-bound"
                        ),
                    ));
                }
                return;
            }
        };
        // A directory that does not exist yet may be anything by the time the command
        // runs (a clone, a copy of a worktree, a symlink to one): it cannot be judged now.
        if !dir.is_dir() {
            if unknown_denies {
                self.problems.push((
                    Reason::DirectoryUnknown,
                    action.to_string(),
                    format!(
                        "it runs in {}, which does not exist yet; the guard cannot tell whether it will be row-bound. Create it first, then run the command",
                        dir.display()
                    ),
                ));
            }
            return;
        }
        let mut candidates = vec![dir.clone()];
        if let Ok(physical) = std::fs::canonicalize(&dir)
            && physical != dir
        {
            candidates.push(physical);
        }
        for candidate in candidates {
            match resolve(&candidate, git_dir.as_deref()) {
                Resolution::Unbound(_) => {}
                Resolution::Found(_, _) if deferred.is_some() => {
                    self.problems.push((
                        Reason::DeferredWrite,
                        action.to_string(),
                        deferred_why(deferred.unwrap_or_default()),
                    ));
                }
                Resolution::Found(path, d) => self.ask(path, d, action, &candidate),
                Resolution::Missing(path) => self.decide(
                    Verdict::CouldNotRead(Reason::DescriptorMissing),
                    format!("the named descriptor {} does not exist", path.display()),
                    None,
                    Some(path),
                    action,
                ),
                Resolution::Unreadable(path, detail) => self.decide(
                    Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                    format!("{}: {detail}", path.display()),
                    None,
                    Some(path),
                    action,
                ),
            }
        }
    }

    /// Files an ask about a descriptor the session is bound to.
    fn explicit(&mut self, action: &str, path: &Path) {
        match descriptor::read(path) {
            Ok(Some(d)) => {
                let cwd = self.cwd.clone();
                self.ask(path.to_path_buf(), d, action, &cwd);
            }
            Ok(None) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorMissing),
                format!(
                    "this session is bound to {}, which no longer exists",
                    path.display()
                ),
                None,
                Some(path.to_path_buf()),
                action,
            ),
            Err(detail) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                format!("{}: {detail}", path.display()),
                None,
                Some(path.to_path_buf()),
                action,
            ),
        }
    }

    fn ask(&mut self, path: PathBuf, descriptor: Descriptor, action: &str, cwd: &Path) {
        let counts = action != self.standing_action;
        let item = self.asks.entry(path).or_insert_with(|| AskItem {
            descriptor,
            actions: Vec::new(),
            cwd: cwd.to_path_buf(),
            counts: false,
        });
        item.counts |= counts;
        if !item.actions.iter().any(|a| a == action) {
            item.actions.push(action.to_string());
        }
    }

    fn decide(
        &mut self,
        verdict: Verdict,
        detail: String,
        descriptor: Option<Descriptor>,
        path: Option<PathBuf>,
        action: &str,
    ) {
        let counts = action != self.standing_action;
        if let Some(d) = self
            .decided
            .iter_mut()
            .find(|d| d.path == path && d.verdict == verdict)
        {
            d.counts |= counts;
            return;
        }
        self.decided.push(Decided {
            verdict,
            detail,
            descriptor,
            path,
            action: action.to_string(),
            counts,
        });
    }

    /// Asks, prints, records, and returns the code: the quarantine's rule when the
    /// session stands refused (or is remembered refused and cannot be read now), else
    /// today's rules (every fenced write and opaque call ALLOWED).
    fn finish(mut self) -> i32 {
        let decided = std::mem::take(&mut self.decided);
        for d in &decided {
            self.print(d.verdict, &d.detail, d.descriptor.clone());
            self.record(
                d.verdict,
                &d.detail,
                d.descriptor.as_ref(),
                d.path.as_deref(),
                &d.action,
            );
        }
        let asked = self.ask_all();
        let standing = self.standing_of(&decided, &asked);
        let home = self.settings.home.as_ref().ok().cloned();
        let session = self.hook.session.clone();
        let remembered = || match (&home, &session) {
            (Some(home), Some(session)) => {
                crate::quarantine::record::is_quarantined(home, session)
                    // A fresh session of a refused lane, while the fence cannot be read:
                    // the refusal another session of it met still stands.
                    || crate::quarantine::record::names_any(home, &self.standing)
            }
            // An input without a session id is judged by its cwd's descriptor: a record
            // naming it (a session of that lane was refused) stands for it too.
            (Some(home), None) => crate::quarantine::record::names_any(home, &self.standing),
            // A session whose home cannot be found may have been refused: fail closed.
            (None, Some(_)) => true,
            (None, None) => false,
        };
        let quarantined = match &standing {
            Standing::Refused { .. } => true,
            Standing::Unread => self.binding_problem.is_some() || remembered(),
            Standing::Allowed | Standing::Unbound => false,
        };
        // The first refusal is remembered (its descriptor stands until it is ALLOWED
        // again, beside the binding's), and not written again on every refused call.
        if let (Standing::Refused { line, path, .. }, Some(home), Some(session)) =
            (&standing, &home, &session)
            && !matches!(crate::quarantine::record::read(home, session), Ok(Some(_)))
        {
            let marked = crate::quarantine::record::mark(
                home,
                &crate::quarantine::record::Quarantine {
                    session: session.clone(),
                    descriptor: path.clone(),
                    refusal: line.clone(),
                    since_ms: ledger::now_ms(),
                },
            );
            if let Err(e) = marked {
                report::say(&format!(
                    "row-fence guard: cannot record this session's quarantine ({e}); it holds for this call."
                ));
            }
        }
        if quarantined {
            return self.quarantine(&standing);
        }
        if let (Standing::Allowed, Some(home), Some(session)) = (&standing, &home, &session) {
            // The row granted back: the session leaves quarantine.
            let _ = crate::quarantine::record::lift(home, session);
        }
        {
            // A file tool's writes, and a patch a shell call carries to `apply_patch`: a
            // row-bound session whose row is not ALLOWED writes no git directory and no
            // harness settings (ARCHITECTURE.md, "Quarantine").
            let guard_git = !matches!(standing, Standing::Allowed | Standing::Unbound);
            if self.file_writes(guard_git) == DENY {
                return DENY;
            }
        }
        let mut denied = Vec::new();
        for (reason, action, why) in std::mem::take(&mut self.problems) {
            report::say(&format!("row-fence guard: cannot judge `{action}`: {why}."));
            self.record(Verdict::CouldNotRead(reason), &why, None, None, &action);
            denied.push(action);
        }
        denied.extend(decided.into_iter().filter(|d| d.counts).map(|d| d.action));
        denied.extend(
            asked
                .into_iter()
                .filter(|a| a.counts && a.verdict != Verdict::Allowed)
                .map(|a| a.action),
        );
        if denied.is_empty() {
            return ALLOW;
        }
        denied.dedup();
        report::say(&format!(
            "row-fence guard: blocked: {}. The command did not run.",
            crate::finding::short(&denied.join("; "))
        ));
        DENY
    }

    /// The session's standing, from the standing asks' verdicts (and the guard's own).
    fn standing_of(&self, decided: &[Decided], asked: &[Asked]) -> Standing {
        if self.standing.is_empty() {
            return if self.binding_problem.is_some() {
                Standing::Unread
            } else {
                Standing::Unbound
            };
        }
        let mut standing = Standing::Allowed;
        for path in &self.standing {
            let verdict = asked
                .iter()
                .find(|a| &a.path == path)
                .map(|a| (a.verdict, a.detail.clone(), Some(a.descriptor.clone())))
                .or_else(|| {
                    decided
                        .iter()
                        .find(|d| d.path.as_ref() == Some(path))
                        .map(|d| (d.verdict, d.detail.clone(), d.descriptor.clone()))
                });
            match verdict {
                Some((Verdict::Allowed, ..)) => {}
                Some((v @ Verdict::Refused(_), detail, d)) => {
                    let line = Shown {
                        verdict: v,
                        detail,
                        descriptor: d.clone(),
                        elapsed_ms: 0,
                    }
                    .line();
                    return Standing::Refused {
                        line,
                        path: path.clone(),
                        descriptor: d,
                    };
                }
                _ => standing = Standing::Unread,
            }
        }
        if self.binding_problem.is_some() {
            Standing::Unread
        } else {
            standing
        }
    }

    /// The quarantine's rule: the call runs only if it only reads, with nothing the lane
    /// could have configured or planted.
    fn quarantine(&self, standing: &Standing) -> i32 {
        let worktree = self
            .bound_from
            .as_deref()
            .map(crate::quarantine::worktree_of);
        let home = self.settings.home.as_deref().ok();
        let verdict =
            crate::quarantine::permits(&self.hook.tool, &self.cwd, worktree.as_deref(), home);
        let why_quarantined = self.why_quarantined(standing);
        match verdict {
            Ok(()) => {
                report::say(&format!(
                    "row-fence guard: this session is quarantined ({why_quarantined}); this call only reads, so it runs."
                ));
                ALLOW
            }
            Err(why) => {
                // Not a verdict of its own: the refusal that quarantined the session is
                // in the ledger already (the daemon's); the denial is counted in the
                // home's denial log, which status and health read. A count that cannot
                // be written does not change the answer.
                if let Some(home) = home {
                    let denial = row_fence_contract::quarantine::Denial {
                        ts_ms: ledger::now_ms(),
                        session: self.hook.session.clone().unwrap_or_default(),
                        tool: self.hook.tool.name().to_string(),
                    };
                    if let Err(e) = row_fence_contract::quarantine::record_denial(home, &denial) {
                        report::say(&format!(
                            "row-fence guard: cannot count this denial in the home ({e})."
                        ));
                    }
                }
                let readers = match &worktree {
                    Some(tree) => format!(
                        "Read, Glob, Grep and LS inside {} outside .git",
                        tree.display()
                    ),
                    None => "no file reader, since no binding names this session's worktree".into(),
                };
                report::say(&format!(
                    "row-fence guard: QUARANTINED: this session no longer holds its row. {why_quarantined}. While the row is gone only reading runs ({readers}; MCP tools that only read): no shell, no file writes. This call ({}) was denied: {why}. Stop now and do not try another way: report to whoever started you that the row is gone and who holds it (row-fence status shows the same). Denied: the call did not run.",
                    self.hook.tool.name()
                ));
                DENY
            }
        }
    }

    /// What `row-fence status` would say of the session's row: which row, who holds it
    /// and why the ask was refused (or, remembered, why it stands).
    fn why_quarantined(&self, standing: &Standing) -> String {
        let mut why = self.why_refused(standing);
        if let (Standing::Refused { .. }, Some(problem)) = (standing, &self.binding_problem) {
            why.push_str(&format!("; and its binding cannot be trusted ({problem})"));
        }
        why
    }

    fn why_refused(&self, standing: &Standing) -> String {
        match standing {
            Standing::Refused {
                line,
                path,
                descriptor,
            } => match descriptor {
                Some(d) => format!(
                    "Row {}/{} (lane {}, generation {}, descriptor {}): {line}",
                    d.board,
                    d.row,
                    d.lane,
                    d.generation,
                    path.display()
                ),
                None => format!("Descriptor {}: {line}", path.display()),
            },
            _ => {
                if let Some(why) = &self.binding_problem {
                    return format!(
                        "Its binding to a row cannot be trusted ({why}), so it is treated as refused"
                    );
                }
                let recorded = match (&self.settings.home, &self.hook.session) {
                    (Ok(home), Some(session)) => crate::quarantine::record::read(home, session)
                        .ok()
                        .flatten(),
                    _ => None,
                };
                match recorded {
                    Some(q) => format!(
                        "Its row was refused earlier ({}, descriptor {}) and the fence cannot be read now, so the refusal stands",
                        q.refusal,
                        q.descriptor.display()
                    ),
                    None => "Its row was refused earlier (this session or another of its lane) and the fence cannot be read now, so the refusal stands".into(),
                }
            }
        }
    }

    /// The rule for a file tool's writes outside quarantine: never into the fence's home;
    /// with `guard_git` (a row-bound session whose row is not ALLOWED), never into a git
    /// directory or a harness's settings. Prints the denial and returns the exit code.
    ///
    /// A shell command that carries a patch to `apply_patch` (Codex applies it itself,
    /// reporting the call as its shell: [`crate::file_tools::shell_patch`]) is judged as
    /// that `apply_patch` too.
    fn file_writes(&self, guard_git: bool) -> i32 {
        let carried;
        let (name, input, after_cd) = match &self.hook.tool {
            crate::input::Tool::Other { name, input } => (name.as_str(), input, false),
            crate::input::Tool::Bash { command, .. } => {
                let Some(at_call_dir) = crate::file_tools::shell_patch(command) else {
                    return ALLOW;
                };
                carried = serde_json::json!({ "command": command });
                (crate::file_tools::APPLY_PATCH, &carried, !at_call_dir)
            }
        };
        let base = match &self.hook.runs_in {
            crate::input::RunsIn::At(dir) => dir.clone(),
            _ => self.cwd.clone(),
        };
        let rules = crate::file_writes::Rules {
            home: self.settings.home.as_deref().ok(),
            guard_git,
            unknown_base: match &self.hook.runs_in {
                crate::input::RunsIn::Unknown(why) => Some(why),
                _ if after_cd => Some(crate::file_tools::PATCH_AFTER_CD),
                _ => None,
            },
        };
        match crate::file_writes::check(name, input, &base, &rules) {
            Ok(()) => ALLOW,
            Err(why) => {
                report::say(&format!(
                    "row-fence guard: `{name}` may not write there: {why}. Denied: the call did not run."
                ));
                DENY
            }
        }
    }

    /// Asks the daemon about every distinct descriptor at once; returns every outcome.
    fn ask_all(&mut self) -> Vec<Asked> {
        if self.asks.is_empty() {
            return Vec::new();
        }
        let asks: Vec<(PathBuf, AskItem)> = std::mem::take(&mut self.asks).into_iter().collect();
        let action_of = |item: &AskItem| self.action_of(item);
        let prepared = match client::prepare(
            self.settings.home.as_deref(),
            self.settings.socket.as_deref(),
            self.settings.build,
        ) {
            Ok(prepared) => prepared,
            Err(unasked) => {
                let judged = unasked.judged();
                let mut outcomes = Vec::new();
                for (path, item) in &asks {
                    self.print(
                        judged.verdict,
                        &judged.detail,
                        Some(item.descriptor.clone()),
                    );
                    self.record(
                        judged.verdict,
                        &judged.detail,
                        Some(&item.descriptor),
                        Some(path),
                        &action_of(item),
                    );
                    outcomes.push(Asked {
                        path: path.clone(),
                        verdict: judged.verdict,
                        detail: judged.detail.clone(),
                        descriptor: item.descriptor.clone(),
                        action: action_of(item),
                        counts: item.counts,
                    });
                }
                return outcomes;
            }
        };
        let marker = Marker::write(self.settings.home.as_ref().ok(), &asks);
        let answers = if asks.len() == 1 {
            // One ask: no thread to hand over to (the exchange keeps its own deadline).
            let (_, item) = &asks[0];
            report::say(&report::asking_line(&prepared.socket, &item.descriptor));
            let request = self.request(&prepared, item, &action_of(item));
            vec![Some(client::exchange(
                &prepared.socket,
                &request,
                self.settings.deadline,
            ))]
        } else {
            self.ask_concurrently(&asks, &prepared)
        };
        let within = self
            .settings
            .deadline
            .saturating_duration_since(self.settings.started);
        let mut outcomes = Vec::new();
        let mut cut_off = false;
        for ((path, item), exchanged) in asks.iter().zip(answers) {
            let action = action_of(item);
            let d = &item.descriptor;
            cut_off |= matches!(exchanged, None | Some(Err(ExchangeError::Timeout)));
            let judged = client::verdict_of(d, &prepared.socket, within, exchanged);
            self.print(judged.verdict, &judged.detail, Some(d.clone()));
            if !judged.by_daemon {
                self.record(judged.verdict, &judged.detail, Some(d), Some(path), &action);
            }
            outcomes.push(Asked {
                path: path.clone(),
                verdict: judged.verdict,
                detail: judged.detail.clone(),
                descriptor: d.clone(),
                action,
                counts: item.counts,
            });
        }
        if cut_off {
            report::say(
                "row-fence guard: the fence was cut off mid-ask (no verdict before the hook's deadline); retry.",
            );
        }
        drop(marker);
        outcomes
    }

    /// Several asks at once, each on its own thread, collected until the deadline; a
    /// missing answer is `None` (cut off).
    fn ask_concurrently(
        &self,
        asks: &[(PathBuf, AskItem)],
        prepared: &Prepared,
    ) -> Vec<Option<Result<Answer, ExchangeError>>> {
        let action_of = |item: &AskItem| self.action_of(item);
        let (tx, rx) = mpsc::channel();
        for (k, (_, item)) in asks.iter().enumerate() {
            report::say(&report::asking_line(&prepared.socket, &item.descriptor));
            let request = self.request(prepared, item, &action_of(item));
            let tx = tx.clone();
            let socket = prepared.socket.clone();
            let deadline = self.settings.deadline;
            std::thread::spawn(move || {
                let _ = tx.send((k, client::exchange(&socket, &request, deadline)));
            });
        }
        drop(tx);
        let mut answers: Vec<Option<Result<Answer, ExchangeError>>> =
            asks.iter().map(|_| None).collect();
        let mut left = asks.len();
        while left > 0 {
            let wait = self
                .settings
                .deadline
                .saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
                Ok((k, answer)) => {
                    answers[k] = Some(answer);
                    left -= 1;
                }
                Err(_) => break,
            }
        }
        answers
    }

    /// What an ask says it is about: its fenced writes and opaque calls, or, for the
    /// standing ask alone, the call itself.
    fn action_of(&self, item: &AskItem) -> String {
        let counting: Vec<&str> = item
            .actions
            .iter()
            .map(String::as_str)
            .filter(|a| *a != self.standing_action)
            .collect();
        if counting.is_empty() {
            crate::finding::short(&item.actions.join("; "))
        } else {
            crate::finding::short(&counting.join("; "))
        }
    }

    /// The ask about `item`, for the session the hook input names.
    fn request(&self, prepared: &Prepared, item: &AskItem, action: &str) -> Request {
        let caller = prepared.caller_for_session(self.hook.session.as_deref(), &item.cwd);
        prepared.request(&item.descriptor, action, caller, self.settings.deadline)
    }

    fn print(&self, verdict: Verdict, detail: &str, descriptor: Option<Descriptor>) {
        let outcome = Shown {
            verdict,
            detail: detail.to_string(),
            descriptor,
            elapsed_ms: self.settings.started.elapsed().as_millis() as u64,
        };
        report::say(&outcome.line());
    }

    /// Appends what the guard decided itself to the refusal ledger (the daemon records
    /// what it decides).
    fn record(
        &self,
        verdict: Verdict,
        detail: &str,
        d: Option<&Descriptor>,
        path: Option<&Path>,
        action: &str,
    ) {
        let Ok(home) = &self.settings.home else {
            return;
        };
        let cwd = self.cwd.display().to_string();
        let record = LedgerRecord::new(DecidedBy::Guard, verdict, detail)
            .with_descriptor(d)
            .with_caller(self.hook.session.as_deref(), Some(&cwd), action)
            .with_descriptor_path(path);
        // The denial stands whether or not the ledger could be written.
        let _ = ledger::append(&paths::ledger(home), &record);
    }
}

/// The asker's resolution, from `cwd` with `git_dir` as `GIT_DIR`, never reading the
/// guard's own environment (the session's explicit descriptor is handled as a binding).
fn resolve(cwd: &Path, git_dir: Option<&str>) -> Resolution {
    descriptor::resolve(&Lookup {
        explicit: None,
        descriptor_env: None,
        git_dir_env: git_dir,
        cwd,
    })
}

/// `$ROW_FENCE_HOME/guard/asking.<parent pid>`, present while the guard asks: when the
/// guard dies mid-ask, the hook's shell fallback finds it and reports CUT OFF MID-ASK
/// (deny, retry) instead of NEVER RAN.
pub struct Marker {
    path: Option<PathBuf>,
}

/// The marker's directory under the home.
pub fn marker_dir(home: &Path) -> PathBuf {
    home.join("guard")
}

impl Marker {
    fn write(home: Option<&PathBuf>, asks: &[(PathBuf, AskItem)]) -> Marker {
        use std::os::unix::fs::DirBuilderExt;
        let Some(home) = home else {
            return Marker { path: None };
        };
        let dir = marker_dir(home);
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
        let path = dir.join(format!("asking.{}", std::os::unix::process::parent_id()));
        let text: String = asks
            .iter()
            .map(|(p, _)| format!("{}\n", p.display()))
            .collect();
        match std::fs::write(&path, text) {
            Ok(()) => Marker { path: Some(path) },
            Err(_) => Marker { path: None },
        }
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}
