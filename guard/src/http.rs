//! HTTP clients on the command line: a request that writes (a method other than GET or
//! HEAD, a body, an upload) is a fenced write, like `gh api` with one; a plain GET only
//! reads. `curl -X POST …/pulls/1/merge` with a token merges a pull request as surely as
//! `gh pr merge` does.

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// Classifies a `curl` invocation.
pub fn curl_request(program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    request(program, curl(args), ctx)
}

/// Classifies a `wget` invocation.
pub fn wget_request(program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    request(program, wget(args), ctx)
}

/// Classifies an HTTPie-style (`http`, `https`, `xh`) invocation.
pub fn httpie_request(program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    request(program, httpie(args), ctx)
}

/// A fenced write when the request writes (`writes` says what it sends).
fn request(program: &str, writes: Option<String>, ctx: &Ctx) -> Vec<Effect> {
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

/// curl's short options that take a value (the rest of the cluster, or the next word).
const CURL_VALUED: &str = "AbcCdDeEFHKmoPQrTtuUwxXyYz";

fn curl(args: &[Value]) -> Option<String> {
    const BODY: &[&str] = &[
        "--data",
        "--data-ascii",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "--json",
        "--form",
        "--form-string",
        "--upload-file",
    ];
    let mut k = 0;
    while k < args.len() {
        let Some(w) = args[k].literal() else {
            k += 1;
            continue;
        };
        k += 1;
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let name = format!("--{name}");
            if BODY.contains(&name.as_str()) {
                return Some("with a request body".into());
            }
            if name == "--request" {
                let method = match inline {
                    Some(m) => Value::Literal(m.to_string()),
                    None => {
                        k += 1;
                        args.get(k - 1)
                            .cloned()
                            .unwrap_or(Value::Dynamic("--request".into()))
                    }
                };
                match method {
                    Value::Literal(m) if !method_writes(&m) => {}
                    other => return Some(other.text().to_string()),
                }
            } else if name == "--config" {
                return Some("with options read from a file".into());
            }
            continue;
        }
        if !w.starts_with('-') || w.len() < 2 {
            continue;
        }
        // A cluster of short options (`-sSfX PUT`, `-sd '{}'`): a valued option takes the
        // rest of the cluster or the next word.
        let flags: Vec<char> = w[1..].chars().collect();
        for (j, flag) in flags.iter().enumerate() {
            if !CURL_VALUED.contains(*flag) {
                continue;
            }
            let rest: String = flags[j + 1..].iter().collect();
            let value = if rest.is_empty() {
                k += 1;
                args.get(k - 1)
                    .cloned()
                    .unwrap_or(Value::Dynamic(format!("-{flag}")))
            } else {
                Value::Literal(rest)
            };
            match flag {
                'd' | 'F' | 'T' => return Some("with a request body".into()),
                'K' => return Some("with options read from a file".into()),
                'X' => match value {
                    Value::Literal(m) if !method_writes(&m) => {}
                    other => return Some(other.text().to_string()),
                },
                _ => {}
            }
            break;
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
        // wgetrc commands on the command line or in a file can set the method and body.
        if matches!(name, "-e" | "--execute" | "--config") || w.starts_with("-e") && w.len() > 2 {
            return Some("with wgetrc commands".into());
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
