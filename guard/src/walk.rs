//! The guard's reading of a command: the shell reader's walk ([`row_fence_shell::walk`])
//! with the guard's programs ([`crate::command`], [`crate::env_vars`]) saying what each
//! simple command and assignment does. Its notes become the plan the judge reads: every
//! fenced write and opaque command with the places it could run, and every place git runs
//! at (ARCHITECTURE.md, "The agent guard's policy").

use crate::effect::{Ctx, Effect, Note};
use crate::finding::{Dir, Finding, Kind, Place, short};
use row_fence_shell::effect::At;
use row_fence_shell::walk::{self as shell, Programs};
use row_fence_shell::words::Value;
use std::path::Path;

pub use row_fence_shell::walk::{Env, MAX_CODE_DEPTH, MAX_LOOP_PASSES, MAX_STEPS};

/// The guard's plan of a command.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Every fenced write and opaque command, in order.
    pub findings: Vec<Finding>,
    /// Why (part of) the command could not be read; the judge denies such a command.
    pub unreadable: Option<String>,
    /// Every distinct place git runs at (at most [`MAX_GIT_PLACES`]): the judge asks the
    /// row of each repository there.
    pub git_places: Vec<Place>,
    /// True when git runs at more places than [`MAX_GIT_PLACES`] (the judge denies: it
    /// cannot ask about them all in time).
    pub git_places_over: bool,
    /// The walk's work, counted: simple commands read (calls and loop passes included),
    /// at most [`MAX_STEPS`].
    pub steps: usize,
    /// The walk's work, counted: bytes of code parsed (nested code parsed again), at
    /// most 4 × the command's length + 64 KiB.
    pub parsed_bytes: usize,
}

/// The most distinct places git runs at that a plan keeps; past it the plan says so (the
/// judge denies).
pub const MAX_GIT_PLACES: usize = 32;

/// Reads `command` as run from `cwd`.
pub fn plan(command: &str, cwd: &Path, env: &Env) -> Plan {
    let read = shell::plan(command, cwd, env, &Guard);
    let mut plan = Plan {
        unreadable: read.unreadable,
        steps: read.steps,
        parsed_bytes: read.parsed_bytes,
        ..Plan::default()
    };
    for noted in read.notes {
        match noted.note {
            Note::Fenced { action, places } => plan.findings.push(Finding {
                kind: Kind::Fenced,
                action: short(&action),
                places,
                deferred: noted.deferred,
            }),
            Note::Opaque { why, places } => plan.findings.push(Finding {
                kind: Kind::Opaque,
                action: short(&format!("opaque: {why}")),
                places,
                deferred: noted.deferred,
            }),
            Note::GitAt(places) => git_at(&mut plan, places),
        }
    }
    plan
}

/// Adds the places git runs at, each once, up to [`MAX_GIT_PLACES`].
fn git_at(plan: &mut Plan, places: Vec<Place>) {
    for place in places {
        if plan.git_places.contains(&place) {
            continue;
        }
        if plan.git_places.len() >= MAX_GIT_PLACES {
            plan.git_places_over = true;
            break;
        }
        plan.git_places.push(place);
    }
}

/// The guard's programs, as the shell reader asks about them.
struct Guard;

impl Guard {
    fn ctx<'a>(at: &'a At<'a>) -> Ctx<'a> {
        Ctx {
            dirs: at.dirs.to_vec(),
            vars: at.vars,
            functions: at.functions,
            home: at.home,
            rebound: at.rebound,
            path: at.path,
            classifier: crate::command::classify,
        }
    }
}

impl Programs for Guard {
    type Note = Note;

    fn command(&self, argv: &[Value], at: &At<'_>) -> Vec<Effect> {
        crate::command::classify(argv, &Guard::ctx(at), true, 0)
    }

    fn assigned(&self, name: &str, value: &Value, at: &At<'_>) -> Vec<Effect> {
        crate::env_vars::assigned(name, value, &Guard::ctx(at))
    }

    fn opaque(&self, why: String, dirs: &[Dir]) -> Note {
        Note::Opaque {
            why,
            places: dirs
                .iter()
                .map(|d| Place {
                    dir: d.clone(),
                    git_dir: None,
                })
                .collect(),
        }
    }

    fn waits(&self, program: &str) -> bool {
        crate::specs::waits(program)
    }
}
