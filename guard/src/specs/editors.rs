//! Editors that run commands given on their command line or stdin, and database shells
//! whose inline commands escape to the shell (`sqlite3 '.shell …'`, `psql -c '\! …'`).

use super::{DbShell, Editor, Runs, Spec};

/// vi's options that run commands.
const VI: &[&str] = &["-c", "-S", "--cmd"];

/// sqlite3's dot-commands that run a program (`.shell`, `.system`) or can pipe to one
/// (`.output |cmd`, `.import '|cmd'`…).
const SQLITE_ESCAPES: &[&str] = &[
    ".shell", ".system", ".sh ", ".once", ".output", ".import", ".read", ".excel",
];

/// The editors and database shells.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["vim", "vi", "view"],
        Runs::Editor(Editor {
            commands: Some(VI),
            vi_style: true,
            from_stdin: false,
        }),
    ),
    Spec::new(
        &["nvim"],
        Runs::Editor(Editor {
            commands: Some(&["-c", "-S", "--cmd", "-l"]),
            vi_style: true,
            from_stdin: false,
        }),
    ),
    Spec::new(
        &["ex"],
        Runs::Editor(Editor {
            commands: Some(VI),
            vi_style: true,
            from_stdin: true,
        }),
    ),
    Spec::new(
        &["ed", "red"],
        Runs::Editor(Editor {
            commands: None,
            vi_style: false,
            from_stdin: true,
        }),
    ),
    Spec::new(
        &["emacs"],
        Runs::Editor(Editor {
            commands: Some(&[
                "--eval",
                "-l",
                "--load",
                "--batch",
                "-batch",
                "--script",
                "-f",
                "--funcall",
            ]),
            vi_style: false,
            from_stdin: false,
        }),
    ),
    Spec::new(
        &["sqlite3"],
        Runs::DbShell(DbShell {
            escapes: SQLITE_ESCAPES,
            inline: &["-cmd", "--cmd"],
            commands_after_database: true,
        }),
    ),
    Spec::new(
        &["duckdb"],
        Runs::DbShell(DbShell {
            escapes: SQLITE_ESCAPES,
            inline: &["-c", "-cmd"],
            commands_after_database: true,
        }),
    ),
    Spec::new(
        &["psql"],
        Runs::DbShell(DbShell {
            escapes: &["\\!", "\\o |", "\\o|", "\\g |", "\\g|", "program"],
            inline: &["-c", "--command"],
            commands_after_database: false,
        }),
    ),
    Spec::new(
        &["mysql", "mariadb"],
        Runs::DbShell(DbShell {
            escapes: &["\\!", "system "],
            inline: &["-e", "--execute"],
            commands_after_database: false,
        }),
    ),
];
