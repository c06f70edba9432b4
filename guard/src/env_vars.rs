//! Environment variables that change what a later program runs (ARCHITECTURE.md, "The agent
//! guard's policy"; docs/git-layer.md, "Git's own layer": setting `GIT_SSH_COMMAND` is
//! opaque, since it overrides the transport gate's `core.sshCommand`). Setting one is
//! opaque, whatever its value: by prefix (`GIT_SSH_COMMAND=… cmd`), on its own (`export
//! X=…`) or through `env`. The editor and pager variables hold shell code: a literal value
//! is read as a command (`GIT_PAGER=cat` is ordinary), anything else is opaque.

use crate::effect::{Ctx, Effect};
use row_fence_shell::lookup::{CODE_TABLES, PROGRAM_TABLES};
use row_fence_shell::words::Value;

/// Variables whose setting alone is opaque (and the shell's own tables of names, what a
/// command word runs: [`PROGRAM_TABLES`], [`CODE_TABLES`]).
const OPAQUE: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_SSH_VARIANT",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_TEMPLATE_DIR",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "LD_PRELOAD",
    "LD_AUDIT",
    "SHELLOPTS",
    "BASHOPTS",
    "LESSOPEN",
    "LESSCLOSE",
    "GIT_ALLOW_PROTOCOL",
    "HOME",
    "XDG_CONFIG_HOME",
    "CDPATH",
];

/// Prefixes whose variables are opaque (`GIT_CONFIG_KEY_0`, `BASH_FUNC_f%%`).
const OPAQUE_PREFIXES: &[&str] = &["GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "BASH_FUNC_"];

/// Variables holding shell code that git or another program runs.
const CODE: &[&str] = &[
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "EDITOR",
    "VISUAL",
    "GIT_PAGER",
    "PAGER",
    "MANPAGER",
];

/// What setting `name` to `value` does.
pub fn assigned(name: &str, value: &Value, ctx: &Ctx) -> Vec<Effect> {
    if opaque(name) {
        return vec![ctx.opaque(format!(
            "setting `{name}` changes what a later program runs"
        ))];
    }
    if let Value::Literal(text) = value
        && !CODE.contains(&name)
        && (text.contains("$(") || text.contains('`'))
    {
        // Code kept in a variable runs when bash evaluates it later (arithmetic
        // subscripts, `${x@P}`, an eval in another call).
        return vec![ctx.opaque(format!(
            "`{name}` is given code (`$(…)` or backticks) to run later"
        ))];
    }
    if CODE.contains(&name) {
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
    opaque(name) || CODE.contains(&name)
}

/// True when setting `name` alone is opaque.
fn opaque(name: &str) -> bool {
    OPAQUE.contains(&name)
        || PROGRAM_TABLES.contains(&name)
        || CODE_TABLES.contains(&name)
        || OPAQUE_PREFIXES.iter().any(|p| name.starts_with(p))
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
}
