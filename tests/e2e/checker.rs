//! The one history checker every store's fault tests hand their histories to (the file
//! store's kill test, Redis standalone, Sentinel and failover, etcd: `history.rs`,
//! `split_brain.rs`, `failover.rs`, `etcd.rs`).
//!
//! A history is what the clients saw: each grant (`acquire --takeover`), renew, ask and
//! accept of a row, with when it was invoked and when it completed, and how it ended —
//! acknowledged, refused, could not read, or unknown (failed or killed: it may or may not
//! have taken effect). It is checked for linearizability against a per-row lease register,
//! the way porcupine and etcd's robustness tests check theirs, with unknown outcomes
//! patched from what the store shows afterwards:
//!
//! - The model: a row holds nothing or one lease `(holder, generation)`. A grant replaces
//!   it with a generation above every one before (a generation is the board revision the
//!   grant committed at); an accept (`store accept-regression`) drops it at its revision;
//!   an ask is ALLOWED, and a renew acknowledged, only for the lease the row holds. A
//!   refusal and a could-not-read constrain nothing (the lease may have expired; failing
//!   closed is never wrong here).
//! - Linearizable: every operation can be given one instant inside its invoke–complete
//!   interval at which the model, applied in that order, gives what the client saw. Since
//!   the model's writes carry rising generations, their order is known (by generation),
//!   and the search porcupine does over orders reduces to placing each write and the
//!   reads of its lease as early as their intervals allow, in that order: exact for this
//!   model, and linear.
//! - Unknown outcomes: a grant that may have committed did so only if something shows it
//!   (the store's lease afterwards, or an ALLOWED ask for its generation); it is then
//!   placed at its generation with no completion bound, otherwise it never happened (no
//!   read needs it).
//!
//! Named failures: an ALLOWED ask (or an acknowledged renew) no order explains
//! ([`Failure::WrongAllowed`], [`Failure::WrongRenew`]); a generation acknowledged twice
//! ([`Failure::GenerationRepeated`]) or below one acknowledged before it began
//! ([`Failure::GenerationBack`]); an acknowledged grant the store no longer holds
//! afterwards ([`Failure::LostGrant`]); `store_regressed` where no history was lost (no
//! loss the test made, no regression an operator then accepted: [`Failure::FalseRegressed`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// What a client called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// A grant that replaces the row's lease (`acquire --takeover`, or a first grant).
    Grant { lane: String },
    /// A renew of `lane`'s lease at `generation`.
    Renew { lane: String, generation: u64 },
    /// An ask for `lane` at `generation`.
    Ask { lane: String, generation: u64 },
    /// `store accept-regression`: every lease of the board dropped.
    Accept,
}

/// How it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Return {
    /// A grant acknowledged at this generation.
    Granted(u64),
    /// A renew acknowledged.
    Renewed,
    /// ALLOWED.
    Allowed,
    /// REFUSED, with its reason.
    Refused(String),
    /// COULD NOT READ, with its reason.
    CouldNotRead(String),
    /// An accept committed at this revision.
    Accepted(u64),
    /// Failed, timed out or killed: it may or may not have taken effect.
    Unknown,
}

impl Return {
    /// An ask's return from the asker's exit code and verdict line.
    pub fn of_ask(code: i32, line: &str) -> Return {
        let reason = line
            .split_once('(')
            .and_then(|(_, rest)| rest.split_once(')'))
            .map(|(reason, _)| reason.to_string())
            .unwrap_or_default();
        match code {
            0 => Return::Allowed,
            3 => Return::Refused(reason),
            _ => Return::CouldNotRead(reason),
        }
    }
}

/// One operation on one row.
#[derive(Clone, Debug)]
pub struct Event {
    pub row: String,
    pub call: Call,
    pub ret: Return,
    pub invoked: Instant,
    pub completed: Instant,
}

/// What the clients saw, and when the test itself lost history on purpose (a restore),
/// after which `store_regressed` is the right answer.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub events: Vec<Event>,
    pub losses: Vec<Instant>,
}

impl History {
    /// Records one operation.
    pub fn push(
        &mut self,
        row: &str,
        call: Call,
        ret: Return,
        invoked: Instant,
        completed: Instant,
    ) {
        self.events.push(Event {
            row: row.to_string(),
            call,
            ret,
            invoked,
            completed,
        });
    }
}

/// What the store holds afterwards, read once the faults healed (after every operation):
/// per row, the lease's holder and generation, `None` when it holds none.
#[derive(Clone, Debug)]
pub struct Afterwards {
    pub rows: BTreeMap<String, Option<(String, u64)>>,
    pub at: Instant,
}

/// A way the history is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// An ALLOWED ask no linearization explains.
    WrongAllowed(String),
    /// An acknowledged renew no linearization explains.
    WrongRenew(String),
    /// One generation acknowledged to two grants.
    GenerationRepeated(String),
    /// A grant acknowledged at a generation below one acknowledged before it began.
    GenerationBack(String),
    /// An acknowledged grant (or accept) the store no longer shows afterwards.
    LostGrant(String),
    /// `store_regressed` where no history was lost.
    FalseRegressed(String),
}

impl Failure {
    /// The failure's name.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::WrongAllowed(_) => "wrong ALLOWED",
            Failure::WrongRenew(_) => "wrong renew",
            Failure::GenerationRepeated(_) => "generation repeated",
            Failure::GenerationBack(_) => "generation back",
            Failure::LostGrant(_) => "lost acknowledged grant",
            Failure::FalseRegressed(_) => "false store_regressed",
        }
    }
}

/// The counts of a history and its failures.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub grants: usize,
    pub acknowledged: usize,
    pub unknown: usize,
    pub renews: usize,
    pub asks: usize,
    pub allowed: usize,
    pub refused: usize,
    pub could_not_read: usize,
    pub accepts: usize,
    pub failures: Vec<Failure>,
}

impl Report {
    /// How many failures of `kind` ([`Failure::kind`]).
    pub fn count(&self, kind: &str) -> usize {
        self.failures.iter().filter(|f| f.kind() == kind).count()
    }

    /// One line of counts, for the test's output.
    pub fn summary(&self, name: &str) -> String {
        let kinds = [
            "wrong ALLOWED",
            "wrong renew",
            "generation repeated",
            "generation back",
            "lost acknowledged grant",
            "false store_regressed",
        ];
        let failures: Vec<String> = kinds
            .iter()
            .map(|k| format!("{} {k}", self.count(k)))
            .collect();
        format!(
            "{name}: {} grants ({} acknowledged, {} unknown), {} renews, {} accepts, {} asks ({} ALLOWED, {} REFUSED, {} COULD NOT READ); linearizable per row: {}",
            self.grants,
            self.acknowledged,
            self.unknown,
            self.renews,
            self.accepts,
            self.asks,
            self.allowed,
            self.refused,
            self.could_not_read,
            failures.join(", ")
        )
    }

    /// Prints the summary and panics naming every failure.
    #[track_caller]
    pub fn assert_sound(&self, name: &str) {
        eprintln!("{}", self.summary(name));
        assert!(
            self.failures.is_empty(),
            "{name}: {}",
            self.failures
                .iter()
                .map(|f| format!("{}: {f:?}", f.kind()))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// A write of the register: a grant (`lane`) or an accept (`None`), at `generation`.
#[derive(Clone, Debug)]
struct Write {
    generation: u64,
    lane: Option<String>,
    invoked: Instant,
    /// `None`: an unknown outcome, placed with no completion bound.
    completed: Option<Instant>,
    acknowledged: bool,
}

/// A read of the register: an ALLOWED ask or an acknowledged renew.
#[derive(Clone, Debug)]
struct Read {
    lane: String,
    generation: u64,
    invoked: Instant,
    completed: Instant,
    renew: bool,
}

impl Read {
    fn wrong(&self, why: String) -> Failure {
        if self.renew {
            Failure::WrongRenew(why)
        } else {
            Failure::WrongAllowed(why)
        }
    }
}

const TICK: Duration = Duration::from_nanos(1);

/// Checks `history` against the store `afterwards` (see the module).
pub fn check(history: &History, afterwards: &Afterwards) -> Report {
    let mut report = Report::default();
    for e in &history.events {
        match (&e.call, &e.ret) {
            (Call::Grant { .. }, r) => {
                report.grants += 1;
                match r {
                    Return::Granted(_) => report.acknowledged += 1,
                    _ => report.unknown += 1,
                }
            }
            (Call::Renew { .. }, Return::Renewed) => report.renews += 1,
            (Call::Accept, Return::Accepted(_)) => report.accepts += 1,
            (Call::Ask { .. }, r) => {
                report.asks += 1;
                match r {
                    Return::Allowed => report.allowed += 1,
                    Return::Refused(_) => report.refused += 1,
                    _ => report.could_not_read += 1,
                }
            }
            _ => {}
        }
    }
    report.failures.extend(false_regressed(history));
    let rows: BTreeSet<&str> = history
        .events
        .iter()
        .map(|e| e.row.as_str())
        .chain(afterwards.rows.keys().map(String::as_str))
        .collect();
    for row in rows {
        let events: Vec<&Event> = history.events.iter().filter(|e| e.row == row).collect();
        let held = afterwards.rows.get(row).cloned().flatten();
        report
            .failures
            .extend(check_row(row, &events, held, afterwards.at));
    }
    report
}

/// `store_regressed` answers no loss explains: none the test made before the ask
/// completed, and no accept (an operator who found the regression) after it began.
fn false_regressed(history: &History) -> Vec<Failure> {
    history
        .events
        .iter()
        .filter(|e| matches!(&e.ret, Return::CouldNotRead(r) if r == "store_regressed"))
        .filter(|e| {
            let lost = history.losses.iter().any(|l| *l <= e.completed);
            let accepted = history
                .events
                .iter()
                .any(|a| a.call == Call::Accept && a.invoked >= e.invoked);
            !lost && !accepted
        })
        .map(|e| {
            Failure::FalseRegressed(format!("{} {:?} answered store_regressed", e.row, e.call))
        })
        .collect()
}

fn check_row(
    row: &str,
    events: &[&Event],
    held: Option<(String, u64)>,
    read_at: Instant,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    let mut writes: Vec<Write> = Vec::new();
    let mut unknown: Vec<(String, Instant)> = Vec::new();
    let mut reads: Vec<Read> = Vec::new();
    for e in events {
        match (&e.call, &e.ret) {
            (Call::Grant { lane }, Return::Granted(g)) => writes.push(Write {
                generation: *g,
                lane: Some(lane.clone()),
                invoked: e.invoked,
                completed: Some(e.completed),
                acknowledged: true,
            }),
            (Call::Grant { lane }, Return::Unknown) => unknown.push((lane.clone(), e.invoked)),
            (Call::Accept, Return::Accepted(revision)) => writes.push(Write {
                generation: *revision,
                lane: None,
                invoked: e.invoked,
                completed: Some(e.completed),
                acknowledged: true,
            }),
            (Call::Ask { lane, generation }, Return::Allowed)
            | (Call::Renew { lane, generation }, Return::Renewed) => reads.push(Read {
                lane: lane.clone(),
                generation: *generation,
                invoked: e.invoked,
                completed: e.completed,
                renew: matches!(e.call, Call::Renew { .. }),
            }),
            _ => {}
        }
    }
    // One generation, one acknowledged grant.
    let mut by_generation: BTreeMap<u64, Vec<&Write>> = BTreeMap::new();
    for w in &writes {
        by_generation.entry(w.generation).or_default().push(w);
    }
    for (g, ws) in &by_generation {
        if ws.len() > 1 {
            failures.push(Failure::GenerationRepeated(format!(
                "{row}: generation {g} acknowledged {} times ({:?})",
                ws.len(),
                ws.iter().map(|w| w.lane.clone()).collect::<Vec<_>>()
            )));
        }
    }
    // Unknown outcomes, patched from what shows them.
    let mut patch = |lane: &str, generation: u64, before: Instant, writes: &mut Vec<Write>| {
        let at = unknown
            .iter()
            .rposition(|(l, invoked)| l == lane && *invoked <= before)?;
        let (lane, invoked) = unknown.remove(at);
        writes.push(Write {
            generation,
            lane: Some(lane),
            invoked,
            completed: None,
            acknowledged: false,
        });
        Some(())
    };
    let known = |writes: &[Write], g: u64| writes.iter().any(|w| w.generation == g);
    if let Some((holder, g)) = &held
        && !known(&writes, *g)
        && patch(holder, *g, read_at, &mut writes).is_none()
    {
        failures.push(Failure::LostGrant(format!(
            "{row}: the store holds {holder} at generation {g}, which no recorded grant made"
        )));
    }
    for r in &reads {
        if !known(&writes, r.generation)
            && patch(&r.lane, r.generation, r.completed, &mut writes).is_none()
        {
            failures.push(r.wrong(format!(
                "{row}: {} at generation {} answered as held, a generation no grant made",
                r.lane, r.generation
            )));
        }
    }
    writes.sort_by_key(|w| w.generation);
    writes.dedup_by_key(|w| w.generation);
    // Generations rise in real time.
    for a in writes.iter().filter(|w| w.acknowledged) {
        for b in writes.iter().filter(|w| w.acknowledged) {
            if let Some(done) = a.completed
                && done < b.invoked
                && b.generation < a.generation
            {
                failures.push(Failure::GenerationBack(format!(
                    "{row}: generation {} acknowledged after generation {} had been",
                    b.generation, a.generation
                )));
            }
        }
    }
    // The reads of each write's lease, which must hold it.
    let mut of_write: Vec<Vec<&Read>> = vec![Vec::new(); writes.len()];
    for r in &reads {
        let Some(k) = writes.iter().position(|w| w.generation == r.generation) else {
            continue;
        };
        match &writes[k].lane {
            Some(lane) if *lane == r.lane => of_write[k].push(r),
            holder => failures.push(r.wrong(format!(
                "{row}: {} at generation {} answered as held, but generation {} is {holder:?}'s",
                r.lane, r.generation, r.generation
            ))),
        }
    }
    // Each write, then its reads, as early as their intervals allow, in generation order.
    let mut floor: Option<Instant> = None;
    for (k, w) in writes.iter().enumerate() {
        let mut at = floor.map_or(w.invoked, |f| w.invoked.max(f + TICK));
        if let Some(done) = w.completed
            && at > done
        {
            // Forced past its completion: by reads of an older lease that began after it
            // was acknowledged (they saw a replaced lease), else by an older generation
            // placed after it.
            let stale: Vec<&&Read> = of_write[..k]
                .iter()
                .flatten()
                .filter(|r| r.invoked > done)
                .collect();
            for r in &stale {
                failures.push(r.wrong(format!(
                    "{row}: {} at generation {} answered as held {:?} after generation {} was acknowledged",
                    r.lane,
                    r.generation,
                    r.invoked - done,
                    w.generation
                )));
            }
            if stale.is_empty() {
                failures.push(Failure::GenerationBack(format!(
                    "{row}: generation {} cannot follow the generations below it, one of which took effect after it was acknowledged",
                    w.generation
                )));
            }
            at = done;
        }
        let mut last = at;
        let mut its_reads = of_write[k].clone();
        its_reads.sort_by_key(|r| r.invoked);
        for r in its_reads {
            let t = r.invoked.max(at + TICK);
            if t > r.completed {
                // Answered before this grant could take effect: an older lease's read
                // that began after it completed is what pushed it (blamed), else itself.
                let older: Vec<&&Read> = of_write[..k]
                    .iter()
                    .flatten()
                    .filter(|o| o.invoked > r.completed)
                    .collect();
                if older.is_empty() {
                    failures.push(r.wrong(format!(
                        "{row}: {} at generation {} answered as held before that grant could have taken effect",
                        r.lane, r.generation
                    )));
                }
                for o in older {
                    failures.push(o.wrong(format!(
                        "{row}: {} at generation {} answered as held {:?} after {} at generation {} already was",
                        o.lane,
                        o.generation,
                        o.invoked - r.completed,
                        r.lane,
                        r.generation
                    )));
                }
                continue;
            }
            last = last.max(t);
        }
        floor = Some(last);
    }
    // Afterwards the store holds the newest write's lease: nothing acknowledged was lost.
    if let Some(newest) = writes.iter().rev().find(|w| w.acknowledged) {
        let shown = held.as_ref().map_or(0, |(_, g)| *g);
        let lost = match &newest.lane {
            Some(lane) => held.as_ref().is_none_or(|(h, g)| {
                *g < newest.generation || (*g == newest.generation && h != lane)
            }),
            None => shown != 0 && shown < newest.generation,
        };
        if lost {
            failures.push(Failure::LostGrant(format!(
                "{row}: generation {} ({:?}) was acknowledged, but the store holds {held:?} afterwards",
                newest.generation, newest.lane
            )));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made history: times in ms after a common start.
    struct Made {
        start: Instant,
        history: History,
    }

    impl Made {
        fn new() -> Made {
            Made {
                start: Instant::now(),
                history: History::default(),
            }
        }
        fn at(&self, ms: u64) -> Instant {
            self.start + Duration::from_millis(ms)
        }
        fn op(&mut self, call: Call, ret: Return, from: u64, to: u64) -> &mut Made {
            let (a, b) = (self.at(from), self.at(to));
            self.history.push("r", call, ret, a, b);
            self
        }
        fn grant(&mut self, lane: &str, ret: Return, from: u64, to: u64) -> &mut Made {
            self.op(Call::Grant { lane: lane.into() }, ret, from, to)
        }
        fn ask(&mut self, lane: &str, g: u64, ret: Return, from: u64, to: u64) -> &mut Made {
            self.op(
                Call::Ask {
                    lane: lane.into(),
                    generation: g,
                },
                ret,
                from,
                to,
            )
        }
        fn check(&self, held: Option<(&str, u64)>) -> Report {
            let afterwards = Afterwards {
                rows: [("r".to_string(), held.map(|(h, g)| (h.to_string(), g)))].into(),
                at: self.at(10_000),
            };
            check(&self.history, &afterwards)
        }
    }

    fn kinds(report: &Report) -> Vec<&'static str> {
        report.failures.iter().map(Failure::kind).collect()
    }

    #[test]
    fn a_sound_history_passes_with_asks_racing_takeovers_and_an_unknown_grant_patched() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .ask("a", 1, Return::Allowed, 20, 30)
            // An ask overlapping the takeover may see either lease.
            .grant("b", Return::Granted(2), 40, 60)
            .ask("a", 1, Return::Allowed, 45, 55)
            .ask("b", 2, Return::Allowed, 50, 70)
            .ask("a", 1, Return::Refused("different_holder".into()), 80, 90)
            .ask(
                "a",
                1,
                Return::CouldNotRead("store_unreachable".into()),
                80,
                90,
            )
            .op(
                Call::Renew {
                    lane: "b".into(),
                    generation: 2,
                },
                Return::Renewed,
                100,
                110,
            )
            // Killed mid-write: the store shows it committed.
            .grant("c", Return::Unknown, 120, 130)
            .grant("d", Return::Unknown, 140, 150);
        let report = h.check(Some(("c", 3)));
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        assert_eq!(
            (report.acknowledged, report.unknown, report.allowed),
            (2, 2, 3)
        );
    }

    #[test]
    fn an_allowed_for_a_replaced_lease_is_a_wrong_allowed() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .grant("b", Return::Granted(2), 20, 30)
            .ask("a", 1, Return::Allowed, 40, 50);
        assert_eq!(kinds(&h.check(Some(("b", 2)))), ["wrong ALLOWED"]);
    }

    /// Each ask alone overlaps the takeover, so a check per ask passes; together no order
    /// explains them: the newer lease was seen, then the older one.
    #[test]
    fn two_asks_that_each_fit_but_not_together_are_not_linearizable() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .grant("b", Return::Granted(2), 20, 100)
            .ask("b", 2, Return::Allowed, 30, 40)
            .ask("a", 1, Return::Allowed, 50, 60);
        assert_eq!(kinds(&h.check(Some(("b", 2)))), ["wrong ALLOWED"]);
    }

    #[test]
    fn a_generation_given_twice_or_going_back_is_named() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(5), 0, 10)
            .grant("b", Return::Granted(5), 20, 30);
        assert!(kinds(&h.check(Some(("b", 5)))).contains(&"generation repeated"));
        let mut h = Made::new();
        h.grant("a", Return::Granted(5), 0, 10)
            .grant("b", Return::Granted(4), 20, 30);
        assert!(kinds(&h.check(Some(("b", 4)))).contains(&"generation back"));
    }

    #[test]
    fn an_acknowledged_grant_the_store_no_longer_holds_is_lost() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .grant("b", Return::Granted(2), 20, 30);
        assert_eq!(kinds(&h.check(Some(("a", 1)))), ["lost acknowledged grant"]);
        assert_eq!(kinds(&h.check(None)), ["lost acknowledged grant"]);
        // An unknown grant that never showed is no loss.
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .grant("b", Return::Unknown, 20, 30);
        assert!(h.check(Some(("a", 1))).failures.is_empty());
    }

    #[test]
    fn store_regressed_with_no_loss_is_false_and_after_one_is_right() {
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10).ask(
            "a",
            1,
            Return::CouldNotRead("store_regressed".into()),
            20,
            30,
        );
        assert_eq!(kinds(&h.check(Some(("a", 1)))), ["false store_regressed"]);
        h.history.losses.push(h.at(15));
        assert!(h.check(Some(("a", 1))).failures.is_empty());
        // Or an operator who then accepted the regression: every lease dropped.
        let mut h = Made::new();
        h.grant("a", Return::Granted(1), 0, 10)
            .ask(
                "a",
                1,
                Return::CouldNotRead("store_regressed".into()),
                20,
                30,
            )
            .op(Call::Accept, Return::Accepted(7), 40, 50)
            .ask("a", 1, Return::Allowed, 60, 70);
        assert_eq!(kinds(&h.check(None)), ["wrong ALLOWED"]);
    }

    #[test]
    fn an_ask_reads_its_reason_from_the_verdict_line() {
        assert_eq!(
            Return::of_ask(
                1,
                "row-fence: COULD NOT READ (store_regressed) the store went back"
            ),
            Return::CouldNotRead("store_regressed".into())
        );
        assert_eq!(
            Return::of_ask(3, "row-fence: REFUSED (different_holder) x"),
            Return::Refused("different_holder".into())
        );
        assert_eq!(Return::of_ask(0, "row-fence: ALLOWED"), Return::Allowed);
    }
}
