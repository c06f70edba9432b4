//! `row-fence …`: every subcommand that is not a read is fenced (lease writes: ARCHITECTURE.md,
//! "The path of a fenced write"; and what changes the fence's own state: `stop`, the store's
//! `accept-*` and `copy`, lane bindings, keys, the token); `install` changes the fence itself
//! and is opaque. The global options are the command line's own (`--home`,
//! `--store`, `--socket`, `--key-prefix` take a value); an option the guard does not know
//! may take the next word as its value, so whatever follows it is not read as a harmless
//! subcommand (fail closed).

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// Global options that take the next word as their value.
const VALUED: &[&str] = &["--home", "--store", "--socket", "--key-prefix"];

/// Global options without a value.
const FLAGS: &[&str] = &["--print-stamp", "-h", "--help", "-V", "--version"];

/// Subcommands that only read: a board, the store, the daemon, the docs. Every other
/// subcommand is fenced as a write, so a subcommand the CLI gains later is asked about
/// until it is named here (an allowlist: `stop`, `store accept-regression`, `lane add`,
/// `keys add`, `token add` all change the fence or what it answers).
const READS: &[&str] = &[
    "show",
    "check",
    "status",
    "health",
    "records",
    "log",
    "doctor",
    "completion",
    "help",
    "forge-check",
];

/// Commands whose own subcommand decides, with the subcommands that only read.
const READS_UNDER: &[(&str, &[&str])] = &[
    ("store", &["check", "help"]),
    ("lane", &["list", "help"]),
    ("keys", &["list", "help"]),
    ("controller", &["show", "help"]),
    ("token", &["help"]),
];

/// Options of reading commands that make them write: `top --allow-writes` releases rows,
/// `render --out` writes a job file, `man DIR` writes pages.
fn writes_anyway(command: &str, rest: &[Value]) -> bool {
    fn literal(v: &Value) -> Option<&str> {
        match v {
            Value::Literal(w) => Some(w.as_str()),
            Value::Dynamic(_) => None,
        }
    }
    match command {
        "top" => rest
            .iter()
            .any(|v| literal(v).is_none_or(|w| w.starts_with("--allow-writes"))),
        "render" => rest
            .iter()
            .any(|v| literal(v).is_none_or(|w| w == "--out" || w.starts_with("--out="))),
        "man" => rest
            .iter()
            .any(|v| literal(v).is_none_or(|w| !w.starts_with('-'))),
        _ => false,
    }
}

/// The effect of subcommand `command` with the words after it.
fn subcommand(command: &str, rest: &[Value], ctx: &Ctx) -> Vec<Effect> {
    if command == "install" {
        return vec![ctx.opaque("`row-fence install` changes the fence")];
    }
    let mut action = format!("row-fence {command}");
    let reads = if let Some((_, under)) = READS_UNDER.iter().find(|(c, _)| *c == command) {
        // The first word after it that is no option names what it does.
        match rest
            .iter()
            .find(|v| !matches!(v, Value::Literal(w) if w.starts_with('-')))
        {
            Some(Value::Literal(w)) => {
                action = format!("{action} {w}");
                under.contains(&w.as_str())
            }
            Some(Value::Dynamic(_)) => false,
            None => true,
        }
    } else {
        READS.contains(&command) || matches!(command, "top" | "render" | "man")
    };
    if reads && !writes_anyway(command, rest) {
        Vec::new()
    } else {
        vec![ctx.fenced(action)]
    }
}

/// Classifies `row-fence ARGS`.
pub fn classify(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut i = 0;
    while i < args.len() {
        match &args[i] {
            Value::Literal(w) if VALUED.contains(&w.as_str()) => i += 2,
            Value::Literal(w)
                if FLAGS.contains(&w.as_str())
                    || VALUED.iter().any(|v| w.starts_with(&format!("{v}="))) =>
            {
                i += 1
            }
            Value::Literal(w) if w.starts_with('-') => {
                return vec![ctx.fenced(format!(
                    "row-fence {w} … (an option the guard does not know, before the subcommand)"
                ))];
            }
            Value::Literal(w) => return subcommand(w, &args[i + 1..], ctx),
            Value::Dynamic(raw) => {
                return vec![ctx.fenced(format!("row-fence {raw}"))];
            }
        }
    }
    Vec::new()
}
