//! `row-fence …`: lease writes are fenced (acquire, renew, release, batch, controller,
//! migrate: ARCHITECTURE.md, "The path of a fenced write"); `install` changes the fence
//! itself and is opaque. The global options are the command line's own (`--home`,
//! `--store`, `--socket`, `--key-prefix` take a value); an option the guard does not know
//! may take the next word as its value, so whatever follows it is not read as a harmless
//! subcommand (fail closed).

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// Global options that take the next word as their value.
const VALUED: &[&str] = &["--home", "--store", "--socket", "--key-prefix"];

/// Global options without a value.
const FLAGS: &[&str] = &["--print-stamp", "-h", "--help", "-V", "--version"];

/// Subcommands that write a lease or a fenced batch.
const WRITES: &[&str] = &[
    "acquire",
    "renew",
    "release",
    "batch",
    "controller",
    "migrate",
];

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
            Value::Literal(w) => {
                return if WRITES.contains(&w.as_str()) {
                    vec![ctx.fenced(format!("row-fence {w}"))]
                } else if w == "install" {
                    vec![ctx.opaque("`row-fence install` changes the fence")]
                } else {
                    Vec::new()
                };
            }
            Value::Dynamic(raw) => {
                return vec![ctx.fenced(format!("row-fence {raw}"))];
            }
        }
    }
    Vec::new()
}
