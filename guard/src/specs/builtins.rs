//! The shell's own commands read by their records: those that run their words as a
//! command (`eval`, `source`, `command`…), whose name among another program's words is a
//! command handed over ([`super::Spec::takes_commands`]), and those that print (`printf`,
//! `print`), whose words are data but for the options [`crate::builtin_readers::prints`]
//! reads.
//! `exec` runs as a wrapper (`wrappers.rs`); the rest are [`crate::builtins`]'s.

use super::{Runs, Spec};
use crate::builtin_readers::{command, prints, runs_code};

/// The shell's own commands read by their records.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["eval", "source", "."],
        Runs::Builtin {
            read: runs_code,
            takes_commands: true,
        },
    ),
    Spec::new(
        &["command", "builtin"],
        Runs::Builtin {
            read: command,
            takes_commands: true,
        },
    ),
    Spec::new(
        &["printf", "print"],
        Runs::Builtin {
            read: prints,
            takes_commands: false,
        },
    ),
];
