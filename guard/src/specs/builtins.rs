//! The shell's own commands that run their words as a command (`eval`, `source`,
//! `command`…). [`crate::builtins`] reads them wherever they are the command word; their
//! records say what a word naming one means among another program's words: a command
//! handed over ([`super::Spec::takes_commands`]). `exec` runs as a wrapper
//! (`wrappers.rs`).

use super::{Runs, Spec};

/// The shell's own commands that run their words.
pub const SPECS: &[Spec] = &[Spec::new(
    &["eval", "source", ".", "command", "builtin"],
    Runs::Builtin,
)];
