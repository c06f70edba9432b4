//! Environment variables that change what a later program runs (ARCHITECTURE.md, "The agent
//! guard's policy"; docs/git-layer.md, "Git's own layer": setting `GIT_SSH_COMMAND` is
//! opaque, since it overrides the transport gate's `core.sshCommand`). Setting one is
//! opaque, whatever its value: by prefix (`GIT_SSH_COMMAND=… cmd`), on its own (`export
//! X=…`) or through `env`. The editor and pager variables hold shell code: a literal value
//! is read as a command (`GIT_PAGER=cat` is ordinary), anything else is opaque.

use crate::effect::{Ctx, Effect};
use row_fence_shell::lookup::{CODE_TABLES, PROGRAM_TABLES};
use row_fence_shell::words::Value;

/// Variables whose setting alone is opaque and that belong to no one program's record
/// (the loader's, every program's home, ssh's askpass, which ssh-add runs too), beside the records' own
/// ([`crate::specs::EnvVars`]) and the shell's own tables of names, what a command word
/// runs ([`PROGRAM_TABLES`], [`CODE_TABLES`]).
const OPAQUE: &[&str] = &[
    "SSH_ASKPASS",
    "LD_PRELOAD",
    "LD_AUDIT",
    "HOME",
    "XDG_CONFIG_HOME",
];

/// Variables holding shell code that many programs run, beside the records' own.
const CODE: &[&str] = &["EDITOR", "VISUAL", "PAGER"];

/// What setting `name` to `value` does.
pub fn assigned(name: &str, value: &Value, ctx: &Ctx) -> Vec<Effect> {
    if opaque(name) {
        return vec![ctx.opaque(format!(
            "setting `{name}` changes what a later program runs"
        ))];
    }
    if let Value::Literal(text) = value
        && !code(name)
        && (text.contains("$(") || text.contains('`'))
    {
        // Code kept in a variable runs when bash evaluates it later (arithmetic
        // subscripts, `${x@P}`, an eval in another call).
        return vec![ctx.opaque(format!(
            "`{name}` is given code (`$(…)` or backticks) to run later"
        ))];
    }
    if code(name) {
        return match value {
            Value::Literal(code) => vec![Effect::Code {
                text: code.clone(),
                dirs: ctx.dirs.clone(),
            }],
            Value::Dynamic(raw) => {
                vec![ctx.opaque(format!("`{name}={raw}` is code only known when it runs"))]
            }
        };
    }
    Vec::new()
}

/// True when setting or exporting `name` changes what a later program runs (its value
/// aside).
pub fn changes_programs(name: &str) -> bool {
    opaque(name) || code(name)
}

/// True when `name` holds shell code a program runs.
fn code(name: &str) -> bool {
    CODE.contains(&name) || crate::specs::env_vars().any(|env| env.code.contains(&name))
}

/// True when setting `name` alone is opaque.
fn opaque(name: &str) -> bool {
    OPAQUE.contains(&name)
        || PROGRAM_TABLES.contains(&name)
        || CODE_TABLES.contains(&name)
        || crate::specs::env_vars().any(|env| {
            env.opaque.contains(&name) || env.opaque_prefixes.iter().any(|p| name.starts_with(p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_of_names_the_shell_reader_follows_is_opaque_to_set() {
        for table in PROGRAM_TABLES.iter().chain(CODE_TABLES) {
            assert!(opaque(table) && changes_programs(table), "{table}");
            assert!(!OPAQUE.contains(table), "{table} is listed twice");
        }
        assert!(PROGRAM_TABLES.contains(&"BASH_CMDS"));
        assert!(!opaque("PATHX") && !changes_programs("LANG"));
    }

    #[test]
    fn program_variables_are_their_records_and_listed_once() {
        let git = &crate::specs::find("git").expect("git's record").env;
        for name in [
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_PARAMETERS",
            "GIT_ALLOW_PROTOCOL",
        ] {
            assert!(git.opaque.contains(&name) && opaque(name), "{name}");
        }
        assert!(opaque("GIT_CONFIG_KEY_0") && opaque("BASH_FUNC_f%%"));
        for name in [
            "BASH_ENV",
            "PS1",
            "LESSOPEN",
            "LD_PRELOAD",
            "HOME",
            "CDPATH",
        ] {
            assert!(opaque(name), "{name}");
        }
        assert!(code("MANPAGER") && !opaque("MANPAGER"));
        assert!(git.code.contains(&"GIT_PAGER") && code("GIT_PAGER") && code("EDITOR"));
        assert!(!opaque("GIT_PAGER") && !code("GIT_DIR") && !opaque("GIT_DIR"));
        for env in crate::specs::env_vars() {
            for name in env.opaque.iter().chain(env.code) {
                assert!(
                    !OPAQUE.contains(name) && !CODE.contains(name),
                    "{name} is listed twice"
                );
            }
        }
    }
}
