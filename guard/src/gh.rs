//! `gh …`: every command is a fenced write except a read-only allowlist (ARCHITECTURE.md,
//! "The agent guard's policy"): `view`, `list`, `status`, `diff`, `checks` of any group,
//! `search`, `status`, `auth status`, `api` with GET and no body fields, help and version.

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// Verbs that only read, whatever their group (`gh pr view`, `gh run list`).
const READ_VERBS: &[&str] = &["view", "list", "ls", "status", "diff", "checks"];

/// Top-level commands that only read.
const READ_COMMANDS: &[&str] = &[
    "search",
    "status",
    "help",
    "version",
    "--version",
    "--help",
    "-h",
];

/// Classifies `gh ARGS`.
pub fn classify(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match &args[i] {
            Value::Literal(w) if w == "-R" || w == "--repo" || w == "--hostname" => i += 2,
            Value::Literal(w)
                if w.starts_with('-')
                    && words.is_empty()
                    && !READ_COMMANDS.contains(&w.as_str()) =>
            {
                i += 1
            }
            Value::Literal(w) if w.starts_with('-') && !words.is_empty() => {
                if (w == "--help" || w == "-h") && words.len() <= 2 {
                    return Vec::new();
                }
                i += 1;
            }
            other => {
                words.push(other.clone());
                i += 1;
                if words.len() == 2 {
                    break;
                }
            }
        }
    }
    // `gh pr merge --help` prints help: a flag right after the command path.
    if matches!(args.get(i).and_then(Value::literal), Some("--help" | "-h")) {
        return Vec::new();
    }
    let fenced =
        |what: &str| vec![ctx.fenced(format!("gh {what}{}", operand(&args[i.min(args.len())..])))];
    let text = |v: &Value| v.text().to_string();
    let Some(first) = words.first() else {
        return Vec::new();
    };
    let Some(command) = first.literal() else {
        return fenced(&text(first));
    };
    if READ_COMMANDS.contains(&command) {
        return Vec::new();
    }
    if command == "api" {
        return api(&args[1..], ctx);
    }
    let Some(verb) = words.get(1) else {
        return fenced(command);
    };
    let what = format!("{command} {}", verb.text());
    match verb.literal() {
        Some(v) if READ_VERBS.contains(&v) => Vec::new(),
        Some("status") if command == "auth" => Vec::new(),
        _ => fenced(&what),
    }
}

/// `gh api`: GET (the default, unless a body field is given) with no fields only reads.
fn api(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    const FIELDS: &[&str] = &["-f", "-F", "--field", "--raw-field", "--input"];
    const VALUED: &[&str] = &[
        "-H",
        "--header",
        "-q",
        "--jq",
        "-t",
        "--template",
        "--hostname",
        "--cache",
        "-p",
        "--preview",
    ];
    let mut method: Option<String> = None;
    let mut fields = false;
    let mut endpoint = String::new();
    let mut i = 0;
    let mut dynamic = false;
    while i < args.len() {
        let Some(w) = args[i].literal() else {
            dynamic = true;
            i += 1;
            continue;
        };
        i += 1;
        if w == "-X" || w == "--method" {
            match args.get(i).and_then(Value::literal) {
                Some(m) => method = Some(m.to_ascii_uppercase()),
                None => dynamic = true,
            }
            i += 1;
        } else if let Some(m) = w.strip_prefix("--method=") {
            method = Some(m.to_ascii_uppercase());
        } else if let Some(m) = w.strip_prefix("-X").filter(|m| !m.is_empty()) {
            method = Some(m.to_ascii_uppercase());
        } else if FIELDS.contains(&w) {
            fields = true;
            i += 1;
        } else if FIELDS.iter().any(|f| w.starts_with(f) && w.len() > f.len()) {
            fields = true;
        } else if VALUED.contains(&w) {
            i += 1;
        } else if !w.starts_with('-') && endpoint.is_empty() {
            endpoint = w.to_string();
        }
    }
    let method = method.unwrap_or_else(|| if fields { "POST".into() } else { "GET".into() });
    if method == "GET" && !fields && !dynamic && endpoint != "graphql" {
        return Vec::new();
    }
    vec![ctx.fenced(format!("gh api {method} {endpoint}").trim_end().to_string())]
}

/// The first operand (a number, a tag), for the action text.
fn operand(rest: &[Value]) -> String {
    rest.iter()
        .map(Value::text)
        .find(|w| !w.starts_with('-'))
        .map(|w| format!(" {w}"))
        .unwrap_or_default()
}
