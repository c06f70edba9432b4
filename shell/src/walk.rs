//! Walks the syntax tree as bash would run it and produces a [`Plan`]: every simple
//! command read ([`Simple`]: its words' values, the directories it may run in, its
//! redirections) and, in order, the notes the caller's [`Programs`] made of them.
//! Scoping follows bash: a subshell's, a pipeline element's, a command substitution's and
//! a background job's `cd` does not leak; a brace group's, a function's and a loop's
//! does; `a && b` runs `b` only where `a` succeeded and `a || b` only where it failed.
//! Code inside words (command and process substitutions, expanding here-documents) and
//! literal code the caller hands back ([`Effect::Code`]: `bash -c '…'`) is walked too.

use crate::dir::Dir;
use crate::effect::{At, Effect};
use crate::moves;
use crate::parse;
use crate::source::Source;
use crate::state::State;
use crate::words::{self, Read, Scope, Value, Vars};
use brush_parser::ast;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;

/// What a program does, said by the caller: the walk knows the shell, the caller knows
/// the programs. Each method answers in the shell's terms ([`Effect`]) with notes of the
/// caller's own among them.
pub trait Programs {
    /// The caller's note of what it found (kept in the plan in order, never read here).
    type Note: Clone + std::fmt::Debug;

    /// What the simple command `argv` (the command word first, words already read) does,
    /// run at `at`.
    fn command(&self, argv: &[Value], at: &At<'_>) -> Vec<Effect<Self::Note>>;

    /// What assigning `value` to the variable `name` at `at` does (beyond setting it).
    fn assigned(&self, name: &str, value: &Value, at: &At<'_>) -> Vec<Effect<Self::Note>>;

    /// The note for code the walk finds it cannot read (`why`: a sentence), run at `dirs`:
    /// data evaluated as code, a zsh glob qualifier, arithmetic on a value only known
    /// when it runs, a name bound to code the text does not show.
    fn opaque(&self, why: String, dirs: &[Dir]) -> Self::Note;

    /// True when `program` (the command word's last part) waits before the next command
    /// runs (`sleep`, `wait`): what follows runs later than the call's check.
    fn waits(&self, program: &str) -> bool;
}

/// A note and when it takes effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Noted<N> {
    /// The caller's note.
    pub note: N,
    /// When it would run after the call returns, how (`in the background (&)`, `after
    /// sleep`, `under nohup`); `None` when it runs within the call.
    pub deferred: Option<String>,
}

/// One simple command the walk read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Simple {
    /// Its words' values, the command word first (empty for assignments alone).
    pub argv: Vec<Value>,
    /// Its prefix assignments (`A=1 cmd`), in order.
    pub assignments: Vec<(String, Value)>,
    /// Every directory it may run in.
    pub dirs: Vec<Dir>,
    /// Its redirections to and from files, in order.
    pub redirects: Vec<Redirect>,
}

/// A redirection to or from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The descriptor redirected, when the text names one.
    pub fd: Option<i32>,
    /// The operator as written: `<`, `>`, `>>`, `<>`, `>|`, `<&`, `>&`, `&>`, `&>>`.
    pub op: String,
    /// The file (or descriptor, for `<&` and `>&`) it names.
    pub target: Value,
}

/// How many times code may nest inside code (`$( $( … ) )`, `bash -c "bash -c …"`,
/// function calls) before the command is unreadable.
pub const MAX_CODE_DEPTH: usize = 32;

/// How many nested loops are each read twice (see `Walker::looped`).
pub const MAX_LOOP_PASSES: usize = 6;

/// The most simple commands the walk reads, calls and loop passes included: far above a
/// real command (a 1 MiB one holds about 40,000), and a bound on function calls that
/// call each other twice per level.
pub const MAX_STEPS: usize = 100_000;

/// What the walk takes from the hook's environment.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// `$HOME`.
    pub home: Option<String>,
    /// True when `CDPATH` is set: a relative `cd` may then land elsewhere.
    pub cdpath: bool,
    /// `$PATH`, where command names are looked up (`None`: the reader's own).
    pub path: Option<String>,
}

/// The walk's result.
#[derive(Clone, Debug)]
pub struct Plan<N> {
    /// Every simple command read, in the order read (a loop body read twice is here
    /// twice), at most [`MAX_STEPS`].
    pub commands: Vec<Simple>,
    /// The caller's notes, in order.
    pub notes: Vec<Noted<N>>,
    /// Why (part of) the command could not be read; the caller denies such a command.
    pub unreadable: Option<String>,
    /// The walk's work, counted: simple commands read (calls and loop passes included),
    /// at most [`MAX_STEPS`].
    pub steps: usize,
    /// The walk's work, counted: bytes of code parsed (nested code parsed again), at
    /// most 4 × the command's length + 64 KiB.
    pub parsed_bytes: usize,
}

impl<N> Default for Plan<N> {
    fn default() -> Self {
        Plan {
            commands: Vec::new(),
            notes: Vec::new(),
            unreadable: None,
            steps: 0,
            parsed_bytes: 0,
        }
    }
}

/// Reads `command` as run from `cwd`, asking `programs` what each simple command does.
pub fn plan<P: Programs>(command: &str, cwd: &Path, env: &Env, programs: &P) -> Plan<P::Note> {
    let mut walker = Walker {
        env,
        programs,
        plan: Plan::default(),
        functions: BTreeMap::new(),
        aliases: BTreeMap::new(),
        names: BTreeSet::new(),
        source: Source::new(""),
        pending: Vec::new(),
        budget: command.len().saturating_mul(4) + 64 * 1024,
        steps: 0,
        loops: 0,
        origin: std::path::PathBuf::new(),
        depth: 0,
        calling: Vec::new(),
        deferring: None,
        delayed: None,
    };
    let origin = crate::state::fold(cwd);
    walker.origin = origin.clone();
    let mut state = State::at(Dir::Known(origin));
    walker.code(command, &mut state);
    walker.plan.steps = walker.steps;
    walker.plan
}

struct Walker<'a, P: Programs> {
    env: &'a Env,
    /// What says what each program does.
    programs: &'a P,
    plan: Plan<P::Note>,
    /// Function bodies defined so far (with the text they were parsed from), called by
    /// name later.
    functions: BTreeMap<String, Rc<(ast::FunctionBody, Rc<Source>)>>,
    /// Alias bodies (and zsh's `functions[NAME]=BODY`), read as code where they are used.
    aliases: BTreeMap<String, String>,
    /// Every name defined as a function or an alias so far.
    names: BTreeSet<String>,
    /// The text the syntax tree being walked was parsed from (for source spans).
    source: Rc<Source>,
    /// Effects of the command being read that its words produced (names bound in the
    /// shell's tables), applied after it.
    pending: Vec<Effect<P::Note>>,
    /// Bytes of code left to parse: nested code is parsed again, so this keeps the whole
    /// walk linear in the command's length.
    budget: usize,
    /// Simple commands read so far.
    steps: usize,
    /// Loops being read, innermost last.
    loops: usize,
    /// The hook's working directory.
    origin: std::path::PathBuf,
    depth: usize,
    /// The functions being called, innermost last.
    calling: Vec<String>,
    /// Set while reading code that runs after the call returns (a background job, a
    /// command under `nohup` or `at`): how it is deferred.
    deferring: Option<String>,
    /// Set once the command has waited (`sleep`, `wait`): everything read after it runs
    /// later than the fence's answer.
    delayed: Option<String>,
}

impl<P: Programs> Walker<'_, P> {
    fn unreadable(&mut self, why: String) {
        self.plan.unreadable.get_or_insert(why);
    }

    /// Keeps the caller's note, marked when it runs after the call returns.
    fn note(&mut self, note: P::Note) {
        let deferred = self.deferring.clone().or_else(|| self.delayed.clone());
        self.plan.notes.push(Noted { note, deferred });
    }

    /// Notes code the walk cannot read, run where the state says.
    fn opaque(&mut self, why: String, state: &State) {
        let note = self.programs.opaque(why, &state.dirs);
        self.note(note);
    }

    /// Reads what `read` reads as code that runs after the call returns (`why`).
    fn deferred<T>(&mut self, why: &str, read: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.deferring.clone();
        if outer.is_none() {
            self.deferring = Some(why.to_string());
        }
        let out = read(self);
        self.deferring = outer;
        out
    }

    /// Parses and walks `text`, moving `state` as the code would.
    fn code(&mut self, text: &str, state: &mut State) {
        if self.depth >= MAX_CODE_DEPTH {
            return self.unreadable(format!("code nests more than {MAX_CODE_DEPTH} levels deep"));
        }
        if text.len() > self.budget {
            return self.unreadable("the command's nested code is too large to read".into());
        }
        self.budget -= text.len();
        self.plan.parsed_bytes += text.len();
        match parse::program(text) {
            Ok(program) => self.program(text, &program, state),
            Err(why) => self.unreadable(why.to_string()),
        }
    }

    /// Walks `program`, parsed from `text`.
    fn program(&mut self, text: &str, program: &ast::Program, state: &mut State) {
        self.depth += 1;
        let outer = std::mem::replace(&mut self.source, Source::new(text));
        for complete in &program.complete_commands {
            self.list(complete, state);
        }
        self.source = outer;
        self.depth -= 1;
    }

    /// Code that runs in a copy of the shell (a substitution, `bash -c`): its moves stay there.
    fn code_in_copy(&mut self, text: &str, state: &State) {
        let mut copy = state.clone();
        self.code(text, &mut copy);
    }

    fn list(&mut self, list: &ast::CompoundList, state: &mut State) {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            match separator {
                ast::SeparatorOperator::Async => {
                    let mut copy = state.clone();
                    self.deferred("in the background (`&`)", |w| w.and_or(and_or, &mut copy));
                }
                ast::SeparatorOperator::Sequence => self.and_or(and_or, state),
            }
        }
    }

    fn and_or(&mut self, list: &ast::AndOrList, state: &mut State) {
        let (mut ok, mut failed) = self.pipeline(&list.first, state.clone());
        for next in &list.additional {
            match next {
                ast::AndOr::And(p) => {
                    let (o, f) = self.pipeline(p, ok);
                    ok = o;
                    failed = failed.union(f);
                }
                ast::AndOr::Or(p) => {
                    let (o, f) = self.pipeline(p, failed);
                    ok = ok.union(o);
                    failed = f;
                }
            }
        }
        *state = ok.union(failed);
    }

    /// Returns the states after the pipeline succeeded and after it failed.
    fn pipeline(&mut self, pipeline: &ast::Pipeline, state: State) -> (State, State) {
        let (ok, failed) = if pipeline.seq.len() == 1 {
            self.command(&pipeline.seq[0], state)
        } else {
            // Every element of a pipeline runs in a subshell.
            for command in &pipeline.seq {
                let _ = self.command(command, state.clone());
            }
            (state.clone(), state)
        };
        if pipeline.bang {
            (failed, ok)
        } else {
            (ok, failed)
        }
    }

    fn command(&mut self, command: &ast::Command, state: State) -> (State, State) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, state),
            ast::Command::Compound(compound, redirects) => {
                let mut state = state;
                if let Some(redirects) = redirects {
                    for r in &redirects.0 {
                        let _ = self.redirect(r, &state);
                    }
                }
                self.compound(compound, &mut state);
                (state.clone(), state)
            }
            ast::Command::Function(definition) => {
                let name = definition.fname.value.clone();
                self.names.insert(name.clone());
                self.functions.insert(
                    name.clone(),
                    Rc::new((definition.body.clone(), Rc::clone(&self.source))),
                );
                // Bash may call a function without its name in the text (a trap,
                // `command_not_found_handle`, an exported function in a child shell):
                // its body is read where it is defined too.
                let mut copy = state.clone();
                self.call(&name, &[], &mut copy);
                (state.clone(), state)
            }
            ast::Command::ExtendedTest(test, redirects) => {
                if let Some(redirects) = redirects {
                    for r in &redirects.0 {
                        let _ = self.redirect(r, &state);
                    }
                }
                self.test(&test.expr, &state);
                (state.clone(), state)
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, state: &mut State) {
        match compound {
            ast::CompoundCommand::BraceGroup(group) => self.list(&group.list, state),
            ast::CompoundCommand::Subshell(sub) => {
                let mut copy = state.clone();
                self.list(&sub.list, &mut copy);
            }
            ast::CompoundCommand::Arithmetic(arith) => {
                match self.source.nested_subshells(&arith.loc) {
                    // `( (cmd) )` and `((cmd) )` are subshells to bash, whatever the parser
                    // made of them.
                    Some(inner) => self.code_in_copy(&inner, state),
                    None => self.expression(&arith.expr.value, state),
                }
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.expression(&e.value, state);
                }
                self.looped(&f.body.list, state);
            }
            ast::CompoundCommand::ForClause(f) => {
                let mut literal = true;
                for w in f.values.iter().flatten() {
                    literal &= self.word(w, state).literal().is_some();
                }
                let effects = self.programs.assigned(
                    &f.variable_name,
                    &Value::Dynamic(format!("${}", f.variable_name)),
                    &self.at(state, &state.vars, self.env.home.as_deref()),
                );
                self.apply(effects, state, None);
                // The loop variable takes each word in turn: known words are data the
                // text shows, even if the walk does not track which one.
                state.vars.insert(f.variable_name.clone(), None);
                if literal && f.values.is_some() {
                    state.tainted.remove(&f.variable_name);
                } else {
                    state.tainted.insert(f.variable_name.clone());
                }
                self.looped(&f.body.list, state);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.word(&c.value, state);
                let mut after = state.clone();
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(p, state);
                    }
                    if let Some(body) = &item.cmd {
                        let mut branch = state.clone();
                        self.list(body, &mut branch);
                        after = after.union(branch);
                    }
                }
                *state = after;
            }
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition, state);
                let mut then = state.clone();
                self.list(&i.then, &mut then);
                let mut after = then;
                let mut has_else = false;
                for e in i.elses.iter().flatten() {
                    let mut branch = state.clone();
                    match &e.condition {
                        Some(condition) => self.list(condition, &mut branch),
                        None => has_else = true,
                    }
                    self.list(&e.body, &mut branch);
                    after = after.union(branch);
                }
                if !has_else {
                    after = after.union(state.clone());
                }
                *state = after;
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0, state);
                self.looped(&w.1.list, state);
            }
            ast::CompoundCommand::Coprocess(c) => {
                self.deferred("as a coprocess (`coproc`)", |w| {
                    let _ = w.command(&c.body, state.clone());
                });
            }
        }
    }

    /// A loop body runs zero or more times: the state after is either.
    /// A second pass reads what an earlier iteration's `cd` or assignment changes; a body
    /// that changes nothing is read once. Nested loops that each change something would
    /// double the work per level, so past [`MAX_LOOP_PASSES`] levels such a loop is
    /// unreadable.
    fn looped(&mut self, body: &ast::CompoundList, state: &mut State) {
        let mut once = state.clone();
        self.loops += 1;
        let first = self.plan.notes.len();
        let waited_before = self.delayed.is_some();
        self.list(body, &mut once);
        if once != *state {
            if self.loops > MAX_LOOP_PASSES {
                self.unreadable(format!(
                    "loops nest more than {MAX_LOOP_PASSES} deep and change where later iterations run"
                ));
            } else {
                let mut twice = once.clone();
                self.list(body, &mut twice);
                once = once.union(twice);
            }
        }
        self.loops -= 1;
        // A loop that waits runs its writes again after the wait: every one of them.
        if !waited_before && let Some(why) = self.delayed.clone() {
            for f in &mut self.plan.notes[first..] {
                f.deferred
                    .get_or_insert_with(|| format!("in a loop that waits ({why})"));
            }
        }
        *state = state.clone().union(once);
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr, state: &State) {
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test(a, state);
                self.test(b, state);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test(a, state);
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(w, state);
            }
            ast::ExtendedTestExpr::BinaryTest(op, a, b) => {
                let a_value = self.word(a, state);
                let b_value = self.word(b, state);
                // `-eq` and friends evaluate both sides as arithmetic.
                if matches!(
                    op,
                    ast::BinaryPredicate::ArithmeticEqualTo
                        | ast::BinaryPredicate::ArithmeticNotEqualTo
                        | ast::BinaryPredicate::ArithmeticLessThan
                        | ast::BinaryPredicate::ArithmeticLessThanOrEqualTo
                        | ast::BinaryPredicate::ArithmeticGreaterThan
                        | ast::BinaryPredicate::ArithmeticGreaterThanOrEqualTo
                ) {
                    self.arithmetic_words(&[a_value, b_value], state);
                }
            }
        }
    }

    /// Words bash evaluates as arithmetic (`let`, `declare -i`, `[[ a -eq b ]]`): a literal
    /// is an expression whose `$(…)` runs; a word known only at run time is data evaluated
    /// as code.
    fn arithmetic_words(&mut self, words: &[Value], state: &State) {
        for word in words {
            match word {
                Value::Literal(text) => self.expression(text, state),
                Value::Dynamic(raw) => {
                    let opaque = raw.contains(['$', '`']) && !raw.trim().starts_with('\'');
                    if opaque {
                        self.opaque(
                            format!("arithmetic evaluates `{raw}`, only known when it runs"),
                            state,
                        );
                    }
                }
            }
        }
    }

    /// Arithmetic text: the code its substitutions run.
    fn expression(&mut self, text: &str, state: &State) {
        if text.contains(['$', '`']) {
            let _ = self.raw_word(&format!("\"{text}\""), state);
        }
        self.tainted_arithmetic(text, state);
    }

    /// Bash evaluates a variable named in arithmetic as an expression itself, and an array
    /// subscript in that value runs its `$(…)`: a value only known at run time is code
    /// only known at run time.
    fn tainted_arithmetic(&mut self, text: &str, state: &State) {
        if let Some(name) = identifiers(text).find(|n| state.tainted.contains(*n)) {
            self.opaque(
                format!("arithmetic evaluates `{name}`, whose value is only known when it runs"),
                state,
            );
        }
    }

    /// What the caller is told of the point `state` is at, with `vars` and `home`.
    fn at<'s>(&'s self, state: &'s State, vars: &'s Vars, home: Option<&'s str>) -> At<'s> {
        At {
            dirs: &state.dirs,
            vars,
            functions: &self.names,
            home,
            rebound: &state.rebound,
            path: self.env.path.as_deref(),
        }
    }

    /// `$HOME` at this point: the value assigned in the command, else the hook's.
    fn home<'s>(&'s self, state: &'s State) -> Option<&'s str> {
        match state.vars.get("HOME") {
            Some(value) => value.as_deref(),
            None => self.env.home.as_deref(),
        }
    }

    fn scope_read(&self, raw: &str, state: &State) -> (Value, Read) {
        let pwd = state.pwd();
        let scope = Scope {
            vars: &state.vars,
            home: self.home(state),
            pwd: pwd.as_deref(),
        };
        let mut found = Read::default();
        let value = words::read(raw, &scope, &mut found);
        (value, found)
    }

    /// Reads a word and walks the code it runs (each substitution in a copy of the shell).
    fn word(&mut self, word: &ast::Word, state: &State) -> Value {
        self.raw_word(&word.value, state)
    }

    fn raw_word(&mut self, raw: &str, state: &State) -> Value {
        let (value, found) = self.scope_read(raw, state);
        self.ran(found, state);
        value
    }

    fn ran(&mut self, found: Read, state: &State) {
        if found.zsh_code {
            self.opaque(
                "zsh runs code a glob qualifier `(e:…:)` or a flag `${(e)…}` holds".into(),
                state,
            );
        }
        if found.evaluates_data {
            self.opaque(
                "`${…@P}` expands data as a prompt, running what it holds".into(),
                state,
            );
        }
        for code in found.code {
            self.code_in_copy(&code, state);
        }
        for text in found.arithmetic {
            self.tainted_arithmetic(&text, state);
        }
    }

    /// Reads a redirection (and walks the code its words run); the file it names, if any.
    fn redirect(&mut self, redirect: &ast::IoRedirect, state: &State) -> Option<Redirect> {
        match redirect {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => {
                    let target = self.word(w, state);
                    return Some(Redirect {
                        fd: *fd,
                        op: kind.to_string(),
                        target,
                    });
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    let mut copy = state.clone();
                    self.list(&sub.list, &mut copy);
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    let pwd = state.pwd();
                    let scope = Scope {
                        vars: &state.vars,
                        home: self.home(state),
                        pwd: pwd.as_deref(),
                    };
                    let mut found = Read::default();
                    words::read_heredoc(&doc.doc.value, &scope, &mut found);
                    self.ran(found, state);
                }
            }
            ast::IoRedirect::HereString(_, w) => {
                self.word(w, state);
            }
            ast::IoRedirect::OutputAndError(w, append) => {
                let target = self.word(w, state);
                return Some(Redirect {
                    fd: None,
                    op: if *append { "&>>" } else { "&>" }.to_string(),
                    target,
                });
            }
        }
        None
    }

    fn assignment(
        &mut self,
        assignment: &ast::Assignment,
        state: &State,
    ) -> Option<(String, Value)> {
        let mut keyed: Vec<(Value, Value)> = Vec::new();
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(w) => {
                let v = self.word(w, state);
                if assignment.append {
                    Value::Dynamic(w.value.clone())
                } else {
                    v
                }
            }
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    let key = match k {
                        Some(k) => self.word(k, state),
                        None => Value::Dynamic("(an index)".into()),
                    };
                    let value = self.word(v, state);
                    keyed.push((key, value));
                }
                Value::Dynamic("(…)".into())
            }
        };
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name) => name.clone(),
            ast::AssignmentName::ArrayElementName(name, index) => {
                self.expression(index, state);
                let (key, _) = self.scope_read(index, state);
                keyed.push((key, value));
                return self
                    .bind_names(name, keyed, state)
                    .then(|| (name.clone(), Value::Dynamic(format!("{name}[{index}]"))));
            }
        };
        self.bind_names(&name, keyed, state);
        Some((name, value))
    }

    /// Assignments into the shell's own tables of names: bash's `BASH_CMDS` (and zsh's
    /// `commands`) bind a name to a program; `BASH_ALIASES` and zsh's `aliases`,
    /// `functions`… bind a name to code. Queued for the command's effects; always true.
    fn bind_names(&mut self, table: &str, keyed: Vec<(Value, Value)>, state: &State) -> bool {
        let programs = crate::lookup::PROGRAM_TABLES.contains(&table);
        if !programs && !crate::lookup::CODE_TABLES.contains(&table) {
            return true;
        }
        let mut rebinds = Vec::new();
        for (key, value) in keyed {
            let Value::Literal(name) = key else {
                let why = format!("`{table}[…]` binds a name the text does not show");
                self.pending
                    .push(Effect::Note(self.programs.opaque(why, &state.dirs)));
                self.pending.push(Effect::LoseTrack);
                continue;
            };
            match (programs, value) {
                (true, value) => rebinds.push((name, value.literal().map(str::to_string))),
                (false, Value::Literal(body)) => self.pending.push(Effect::Alias(name, body)),
                (false, Value::Dynamic(raw)) => {
                    let why = format!(
                        "`{table}[{name}]` is bound to code only known when it runs ({raw})"
                    );
                    self.pending
                        .push(Effect::Note(self.programs.opaque(why, &state.dirs)));
                    self.pending.push(Effect::LoseTrack);
                }
            }
        }
        if !rebinds.is_empty() {
            self.pending.push(Effect::Rebind(rebinds));
        }
        true
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, state: State) -> (State, State) {
        let mut state = state;
        // Counted up to the bound and no further: past it nothing more is read.
        if self.steps >= MAX_STEPS {
            self.unreadable(format!(
                "the command runs more than {MAX_STEPS} simple commands (calls and loops counted)"
            ));
            return (state.clone(), state);
        }
        self.steps += 1;
        let mut assignments = Vec::new();
        let mut redirects = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(
                item,
                &state,
                &mut assignments,
                &mut Vec::new(),
                &mut redirects,
            );
        }
        let mut argv = Vec::new();
        if let Some(w) = &simple.word_or_name {
            argv.push(self.word(w, &state));
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, &state, &mut Vec::new(), &mut argv, &mut redirects);
        }
        self.plan.commands.push(Simple {
            argv: argv.clone(),
            assignments: assignments.clone(),
            dirs: state.dirs.clone(),
            redirects,
        });
        let home = self.home(&state).map(str::to_string);
        if argv.is_empty() {
            // Plain assignments set the shell's own variables.
            for (name, value) in assignments {
                let effects = self.programs.assigned(
                    &name,
                    &value,
                    &self.at(&state, &state.vars, home.as_deref()),
                );
                self.apply(effects, &mut state, None);
                state.assign(name, &value);
            }
            let pending = std::mem::take(&mut self.pending);
            self.apply(pending, &mut state, None);
            return (state.clone(), state);
        }
        let mut overlay = state.vars.clone();
        let mut effects = Vec::new();
        for (name, value) in &assignments {
            overlay.insert(name.clone(), value.literal().map(str::to_string));
            let at = self.at(&state, &overlay, home.as_deref());
            effects.extend(self.programs.assigned(name, value, &at));
        }
        let at = self.at(&state, &overlay, home.as_deref());
        let mut moved = None;
        effects.extend(self.programs.command(&argv, &at));
        effects.append(&mut self.pending);
        self.apply(effects, &mut state, Some(&mut moved));
        if let Some(Value::Literal(word)) = argv.first() {
            let name = word.rsplit('/').next().unwrap_or(word);
            if self.programs.waits(name) && self.delayed.is_none() {
                self.delayed = Some(format!("after `{name}`"));
            }
        }
        match moved {
            Some((ok, failed)) => (ok, failed),
            None => (state.clone(), state),
        }
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        state: &State,
        assignments: &mut Vec<(String, Value)>,
        argv: &mut Vec<Value>,
        redirects: &mut Vec<Redirect>,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                redirects.extend(self.redirect(r, state));
            }
            ast::CommandPrefixOrSuffixItem::Word(w) => argv.push(self.word(w, state)),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                if let Some(pair) = self.assignment(a, state) {
                    assignments.push(pair.clone());
                    // As an argument (`export A=1`), the word itself.
                    argv.push(match pair.1 {
                        Value::Literal(v) => Value::Literal(format!("{}={v}", pair.0)),
                        Value::Dynamic(_) => Value::Dynamic(w.value.clone()),
                    });
                }
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                let mut copy = state.clone();
                self.list(&sub.list, &mut copy);
                argv.push(Value::Dynamic("<(…)".into()));
            }
        }
    }

    /// Applies a command's effects to the notes and the state. A move sets `moved` to
    /// the states after it succeeded and after it failed.
    fn apply(
        &mut self,
        effects: Vec<Effect<P::Note>>,
        state: &mut State,
        mut moved: Option<&mut Option<(State, State)>>,
    ) {
        for effect in effects {
            match effect {
                Effect::Note(note) => self.note(note),
                Effect::LoseTrack => {
                    state.lose_track("code the text does not show may have changed directory");
                }
                Effect::Code { text, dirs } => {
                    let mut inner = state.clone();
                    inner.dirs = dirs;
                    self.code(&text, &mut inner);
                }
                Effect::Move(m) => {
                    let result = moves::moved(
                        m,
                        state,
                        &self.origin,
                        self.env.home.as_deref(),
                        self.env.cdpath,
                    );
                    *state = result.0.clone().union(result.1.clone());
                    if let Some(slot) = moved.as_mut() {
                        **slot = Some(result);
                    }
                }
                Effect::Call(name, args) => self.call(&name, &args, state),
                Effect::Assign(pairs) => {
                    for (name, value) in pairs {
                        let effects = self.programs.assigned(
                            &name,
                            &value,
                            &self.at(state, &state.vars, self.env.home.as_deref()),
                        );
                        self.apply(effects, state, None);
                        state.assign(name, &value);
                    }
                }
                Effect::Unset(names) => {
                    for name in names {
                        state.vars.remove(&name);
                    }
                }
                Effect::Alias(name, body) => {
                    // Read where it is defined too: a later use may be spelled any way.
                    self.code_in_copy(&body, state);
                    self.names.insert(name.clone());
                    self.aliases.insert(name, body);
                }
                Effect::Rebind(pairs) => {
                    for (name, target) in pairs {
                        state.rebound.insert(name, target);
                    }
                }
                Effect::Arithmetic(words) => self.arithmetic_words(&words, state),
                Effect::Physical(on) => state.physical = on,
                Effect::Deferred { why, effects } => {
                    self.deferred(&why, |w| w.apply(effects, state, None));
                }
            }
        }
    }

    fn call(&mut self, name: &str, args: &[Value], state: &mut State) {
        // Shared, not copied: a body called 100,000 times is one tree.
        let Some(function) = self.functions.get(name).cloned() else {
            // An alias is replaced by its body, in this shell, where it is used.
            if let Some(body) = self.aliases.get(name).cloned()
                && !self.calling.iter().any(|c| c == name)
            {
                let mut text = body;
                for arg in args {
                    text.push(' ');
                    match arg {
                        Value::Literal(w) => text.push_str(&quoted(w)),
                        Value::Dynamic(raw) => text.push_str(raw),
                    }
                }
                self.calling.push(name.to_string());
                self.code(&text, state);
                self.calling.pop();
            }
            return;
        };
        // A recursive call runs the same body again: nothing new to find.
        if self.calling.iter().any(|c| c == name) {
            return;
        }
        if self.depth >= MAX_CODE_DEPTH {
            return self.unreadable(format!("function `{name}` calls nest too deep to read"));
        }
        let (body, source) = &*function;
        self.depth += 1;
        if let Some(redirects) = &body.1 {
            for r in &redirects.0 {
                let _ = self.redirect(r, state);
            }
        }
        self.calling.push(name.to_string());
        let outer = std::mem::replace(&mut self.source, Rc::clone(source));
        self.compound(&body.0, state);
        self.source = outer;
        self.calling.pop();
        self.depth -= 1;
    }
}

/// `word` single-quoted for the shell.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The variable names an arithmetic expression mentions (`x`, `$x`, `a[i]`).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
        .filter(|w| w.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()))
}
