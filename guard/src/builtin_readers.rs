//! The readers of the shell's own commands that their records name
//! ([`crate::specs::Runs::Builtin`]): those that run their words (`eval`, `command`…)
//! and those that print (`printf`, `print`), with what they share with
//! [`crate::builtins`]: reading data into variables, and what a variable's name is.

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// `eval`, `source`, `.`: run code the text does not show ([`crate::specs::Runs::Builtin`]).
pub fn runs_code(program: &str, _: &[Value], ctx: &Ctx, _: usize) -> Vec<Effect> {
    ctx.opaque_in_shell(format!("`{program}` runs code the text does not show"))
        .into()
}

/// `command [-p] [--] CMD…` runs CMD as a program (`-v`/`-V` only look it up);
/// `builtin CMD…` runs the shell's own CMD ([`crate::specs::Runs::Builtin`]).
pub fn command(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    if program == "builtin" {
        return ctx.classify(args, false, depth + 1);
    }
    if args
        .iter()
        .take_while(|a| a.text().starts_with('-'))
        .any(|a| a.text().contains(['v', 'V']))
    {
        return Vec::new();
    }
    let rest: Vec<Value> = args
        .iter()
        .skip_while(|a| matches!(a.literal(), Some("-p")))
        .skip_while(|a| matches!(a.literal(), Some("--")))
        .cloned()
        .collect();
    ctx.classify(&rest, false, depth + 1)
}

/// `printf` (its `-v NAME` assigns) and zsh's `print` (whose `-P` expands its words as a
/// prompt, which may run them); otherwise their words are data
/// ([`crate::specs::Runs::Builtin`]).
pub fn prints(program: &str, args: &[Value], ctx: &Ctx, _: usize) -> Vec<Effect> {
    if program == "printf" {
        return read_into(program, args);
    }
    if args.iter().any(|a| {
        a.literal()
            .is_none_or(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('P'))
    }) {
        return vec![
            ctx.opaque("zsh's `print -P` expands its words as a prompt, which may run them"),
        ];
    }
    Vec::new()
}

/// True for a shell variable name.
pub fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `read NAME`, `printf -v NAME`, `mapfile NAME`, `getopts OPTS NAME`: assign variables
/// from data the text does not show.
pub fn read_into(program: &str, args: &[Value]) -> Vec<Effect> {
    let names: Vec<(String, Value)> = match program {
        "printf" => args
            .windows(2)
            .filter(|w| w[0].literal() == Some("-v"))
            .filter_map(|w| w[1].literal())
            .map(|n| (n.to_string(), Value::Dynamic(format!("${n}"))))
            .collect(),
        _ => args
            .iter()
            .filter_map(Value::literal)
            .filter(|w| is_name(w))
            .map(|n| (n.to_string(), Value::Dynamic(format!("${n}"))))
            .collect(),
    };
    if names.is_empty() {
        Vec::new()
    } else {
        vec![Effect::Assign(names)]
    }
}
