//! The readers of programs whose own syntax says what they run: `xargs` and `find -exec`
//! (an inner command), `watch` (a command run again and again), `make` (rules given
//! inline or in a makefile made in the same command), copies to another host (`scp`,
//! `rsync`), and socat's `EXEC:` addresses (ARCHITECTURE.md, "The agent guard's policy").
//! Their records are in [`crate::specs`].

use crate::effect::{Ctx, Effect, deferred, script_file};
use crate::finding::Dir;
use row_fence_shell::state::resolve_physical;
use row_fence_shell::words::Value;

/// `scp`, `sftp`: copying to or from another host is opaque; alone they do nothing.
pub fn remote_copy(program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    if args.is_empty() {
        return Vec::new();
    }
    vec![ctx.opaque(format!("`{program}` copies to or from another host"))]
}

/// `rsync` to or from another host (`host:path`, `rsync://`) is opaque.
pub fn rsync(_program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    let remote = args.iter().any(|a| {
        a.literal().is_none_or(|w| {
            w.starts_with("rsync://") || w.split('/').next().is_some_and(|head| head.contains(':'))
        })
    });
    if remote {
        return vec![ctx.opaque("`rsync` copies to or from another host")];
    }
    Vec::new()
}

/// `xargs [options] [command [initial-arguments]]`: the command gets more arguments from
/// stdin, and with `-I R` each `R` is replaced by them: those words are unknown.
pub fn xargs(_program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const FLAGS: &[&str] = &[
        "-0",
        "--null",
        "-o",
        "--open-tty",
        "-p",
        "--interactive",
        "-r",
        "--no-run-if-empty",
        "-t",
        "--verbose",
        "-x",
        "--exit",
        "--show-limits",
    ];
    const VALUED: &[&str] = &[
        "-a",
        "--arg-file",
        "-d",
        "--delimiter",
        "-E",
        "-I",
        "-L",
        "-n",
        "--max-args",
        "-P",
        "--max-procs",
        "-s",
        "--max-chars",
        "--process-slot-var",
        "--max-lines",
        "--replace",
        "--eof",
    ];
    let mut replace: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`xargs {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        if arg == "--" {
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg, None),
        };
        if FLAGS.contains(&name) {
            continue;
        }
        if VALUED.contains(&name) {
            let v = inline.or_else(|| {
                i += 1;
                args.get(i - 1).and_then(Value::literal).map(str::to_string)
            });
            if name == "-I" || name == "--replace" {
                replace = v.or(Some("{}".into()));
            }
            continue;
        }
        if let Some(r) = name.strip_prefix("-I").filter(|r| !r.is_empty()) {
            replace = Some(r.to_string());
            continue;
        }
        if name == "-i" || name.starts_with("-i") {
            replace = Some(
                name.get(2..)
                    .filter(|r| !r.is_empty())
                    .unwrap_or("{}")
                    .to_string(),
            );
            continue;
        }
        if name.starts_with("-n")
            || name.starts_with("-L")
            || name.starts_with("-P")
            || name.starts_with("-d")
            || name.starts_with("-s")
            || name.starts_with("-l")
            || name.starts_with("-e")
            || name.starts_with("-a")
        {
            continue;
        }
        return vec![ctx.opaque(format!(
            "`xargs`'s option `{name}` is not one the guard reads"
        ))];
    }
    // An option that takes a value, written last without one, leaves no command.
    let mut inner: Vec<Value> = args
        .get(i..)
        .unwrap_or_default()
        .iter()
        .map(|a| match (&replace, a) {
            (Some(r), Value::Literal(w)) if w.contains(r.as_str()) => Value::Dynamic(w.clone()),
            _ => a.clone(),
        })
        .collect();
    if inner.is_empty() {
        return Vec::new();
    }
    if replace.is_none() {
        inner.push(Value::Dynamic("(arguments read from stdin)".into()));
    }
    ctx.classify(&inner, false, depth + 1)
}

/// `find … -exec CMD {} ;` (and `-execdir`, `-ok`, `-okdir`): each inner command runs
/// with the found paths as arguments; `-execdir` runs it in each file's directory.
pub fn find(_program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = args[i].text();
        i += 1;
        let in_file_dir = matches!(word, "-execdir" | "-okdir");
        if !matches!(word, "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        while i < args.len() && !matches!(args[i].text(), ";" | "+") {
            i += 1;
        }
        let inner: Vec<Value> = args[start..i]
            .iter()
            .map(|a| match a {
                Value::Literal(w) if w.contains("{}") => Value::Dynamic(w.clone()),
                other => other.clone(),
            })
            .collect();
        i += 1;
        let dirs = if in_file_dir {
            vec![Dir::Unknown(
                "`find -execdir` runs in each found file's directory".into(),
            )]
        } else {
            ctx.dirs.clone()
        };
        effects.extend(ctx.at(dirs).classify(&inner, false, depth + 1));
    }
    effects
}

/// `watch [options] command…`: the words are joined and run by `sh -c` (with `-x`, run
/// as they are), again and again: deferred.
pub fn watch(_program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    deferred(
        "`watch` runs it again and again, after this call's check",
        watch_once(args, ctx, depth),
    )
}

fn watch_once(args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const VALUED: &[&str] = &["-n", "--interval", "-q", "--equexit", "--differences"];
    let mut exec = false;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else { break };
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        if arg == "-x" || arg == "--exec" {
            exec = true;
        } else if VALUED.contains(&arg) {
            i += 1;
        }
    }
    let inner = args.get(i..).unwrap_or_default();
    if inner.is_empty() {
        return Vec::new();
    }
    if exec {
        return ctx.classify(inner, false, depth + 1);
    }
    match inner.iter().map(Value::literal).collect::<Option<Vec<_>>>() {
        Some(words) => vec![Effect::Code {
            text: words.join(" "),
            dirs: ctx.dirs.clone(),
        }],
        None => vec![ctx.opaque("`watch` runs a command only known when it runs")],
    }
}

/// `make`: running the project's makefile is ordinary work; rules given on the command
/// line (`--eval`), on stdin (`-f -`), or in a makefile that does not exist yet (made in
/// the same command) are code the text hands over (opaque).
pub fn make(program: &str, args: &[Value], ctx: &Ctx, _depth: usize) -> Vec<Effect> {
    make_rules(program, args, ctx).unwrap_or_default()
}

fn make_rules(program: &str, args: &[Value], ctx: &Ctx) -> Option<Vec<Effect>> {
    let mut dirs = ctx.dirs.clone();
    let mut files = Vec::new();
    let mut k = 0;
    while k < args.len() {
        let Some(w) = args[k].literal() else {
            return Some(vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[k].text()
            ))]);
        };
        k += 1;
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w, None),
        };
        let mut value = || match inline {
            Some(v) => Some(Value::Literal(v.to_string())),
            None => {
                k += 1;
                args.get(k - 1).cloned()
            }
        };
        match name {
            "-E" | "--eval" => {
                return Some(vec![
                    ctx.opaque(format!("`{program}` is given rules on its command line")),
                ]);
            }
            "-f" | "--file" | "--makefile" => files.extend(value()),
            "-C" | "--directory" => match value() {
                Some(target) => dirs = resolve_physical(&dirs, &target),
                None => return Some(Vec::new()),
            },
            _ if name.starts_with("-f") && name.len() > 2 => {
                files.push(Value::Literal(name[2..].to_string()));
            }
            _ if name.starts_with("-C") && name.len() > 2 => {
                dirs = resolve_physical(&dirs, &Value::Literal(name[2..].to_string()));
            }
            _ => {}
        }
    }
    let here = ctx.at(dirs);
    if files.is_empty() {
        // No `-f`: the makefile in each directory, which must exist already.
        let found = here.dirs.iter().all(|d| match d {
            Dir::Known(d) => ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .any(|f| d.join(f).is_file()),
            Dir::Unknown(_) => false,
        });
        if !found
            && !args
                .iter()
                .any(|a| matches!(a.text(), "--version" | "--help" | "-v"))
        {
            return Some(vec![here.opaque(format!(
                "`{program}` runs a makefile that does not exist yet"
            ))]);
        }
        return Some(Vec::new());
    }
    for file in &files {
        let effects = match file.literal() {
            Some("-") => vec![here.opaque(format!("`{program}` reads its rules from stdin"))],
            _ => script_file(program, file, &here),
        };
        if !effects.is_empty() {
            return Some(effects);
        }
    }
    Some(Vec::new())
}

/// socat's `EXEC:cmd` and `SYSTEM:cmd` addresses (options after the first comma).
pub fn socat(_program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut effects = Vec::new();
    for arg in args {
        let Some(w) = arg.literal() else {
            effects.push(ctx.opaque("`socat`'s address is only known when it runs"));
            continue;
        };
        let Some((kind, rest)) = w.split_once(':') else {
            continue;
        };
        if matches!(kind.to_ascii_uppercase().as_str(), "EXEC" | "SYSTEM") {
            let code = rest.split(',').next().unwrap_or_default();
            effects.push(Effect::Code {
                text: code.to_string(),
                dirs: ctx.dirs.clone(),
            });
        }
    }
    effects
}
