//! HTTP clients on the command line: a request that writes (a method other than GET or
//! HEAD, a body, an upload) is a fenced write, like `gh api` with one; a plain GET only
//! reads. `curl -X POST …/pulls/1/merge` with a token merges a pull request as surely as
//! `gh pr merge` does.

use crate::command::{Ctx, Effect};
use crate::words::Value;

/// Classifies `curl`, `wget` and HTTPie-style (`http`, `https`, `xh`) invocations.
pub fn classify(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let writes = match program {
        "curl" => curl(args),
        "wget" => wget(args),
        _ => httpie(args),
    };
    match writes {
        Some(what) => vec![ctx.fenced(format!("{program} {what}"))],
        None => Vec::new(),
    }
}

fn method_writes(method: &str) -> bool {
    !matches!(
        method.to_ascii_uppercase().as_str(),
        "GET" | "HEAD" | "OPTIONS"
    )
}

fn curl(args: &[Value]) -> Option<String> {
    const BODY: &[&str] = &[
        "-d",
        "--data",
        "--data-ascii",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "--json",
        "-F",
        "--form",
        "--form-string",
        "-T",
        "--upload-file",
    ];
    let mut k = 0;
    while k < args.len() {
        let Some(w) = args[k].literal() else {
            k += 1;
            continue;
        };
        k += 1;
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w, None),
        };
        if BODY.contains(&name)
            || BODY
                .iter()
                .any(|b| b.len() == 2 && name.starts_with(b) && name.len() > 2)
        {
            return Some("with a request body".into());
        }
        if name == "-X" || name == "--request" {
            let method = match inline {
                Some(m) => Value::Literal(m.to_string()),
                None => {
                    k += 1;
                    args.get(k - 1)
                        .cloned()
                        .unwrap_or(Value::Dynamic("-X".into()))
                }
            };
            match method {
                Value::Literal(m) if !method_writes(&m) => {}
                other => return Some(other.text().to_string()),
            }
        } else if let Some(m) = name.strip_prefix("-X").filter(|m| !m.is_empty())
            && method_writes(m)
        {
            return Some(m.to_string());
        }
    }
    None
}

fn wget(args: &[Value]) -> Option<String> {
    for a in args {
        let Some(w) = a.literal() else { continue };
        let name = w.split_once('=').map_or(w, |(n, _)| n);
        if matches!(
            name,
            "--post-data" | "--post-file" | "--body-data" | "--body-file"
        ) {
            return Some("with a request body".into());
        }
        if name == "--method" {
            let method = w.split_once('=').map(|(_, m)| m).unwrap_or("POST");
            if method_writes(method) {
                return Some(method.to_string());
            }
        }
    }
    None
}

/// `http [METHOD] URL [ITEM…]`: an explicit method, or any data item (`a=b`, `a:=b`,
/// `a@file`), makes it write.
fn httpie(args: &[Value]) -> Option<String> {
    let operands: Vec<&Value> = args.iter().filter(|a| !a.text().starts_with('-')).collect();
    let first = operands.first()?;
    if let Some(m) = first.literal()
        && m.chars().all(|c| c.is_ascii_uppercase())
        && method_writes(m)
    {
        return Some(m.to_string());
    }
    operands
        .iter()
        .skip(1)
        .any(|a| {
            a.literal()
                .is_none_or(|w| w.contains('=') || w.contains(":=") || w.contains('@'))
        })
        .then(|| "with a request body".into())
}
