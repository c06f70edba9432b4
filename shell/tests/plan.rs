//! The shell reader on its own: the typed plan of a command (simple commands, their words'
//! values, the directories each runs in, their redirections) with a caller that knows
//! only `cd` and `sh -c`, so that what the plan says comes from the shell's rules alone.

use row_fence_shell::dir::Dir;
use row_fence_shell::effect::{At, Effect, Move};
use row_fence_shell::walk::{Env, Plan, Programs, Redirect, Simple, plan};
use row_fence_shell::words::Value;
use std::path::Path;

/// A caller that knows two programs and notes every command word it is asked about.
struct Two;

impl Programs for Two {
    type Note = String;

    fn command(&self, argv: &[Value], at: &At<'_>) -> Vec<Effect<String>> {
        match argv {
            [Value::Literal(cd), to] if cd == "cd" => vec![Effect::Move(Move::Cd {
                to: Some(to.clone()),
                physical: false,
            })],
            [Value::Literal(sh), Value::Literal(c), Value::Literal(code)]
                if sh == "sh" && c == "-c" =>
            {
                vec![Effect::Code {
                    text: code.clone(),
                    dirs: at.dirs.to_vec(),
                }]
            }
            [first, ..] => vec![Effect::Note(first.text().to_string())],
            [] => Vec::new(),
        }
    }

    fn assigned(&self, _name: &str, _value: &Value, _at: &At<'_>) -> Vec<Effect<String>> {
        Vec::new()
    }

    fn opaque(&self, why: String, _dirs: &[Dir]) -> String {
        format!("opaque: {why}")
    }

    fn waits(&self, program: &str) -> bool {
        program == "sleep"
    }
}

fn read(command: &str) -> Plan<String> {
    let env = Env {
        home: Some("/home/u".into()),
        cdpath: false,
        path: Some("/nonexistent-bin".into()),
    };
    plan(command, Path::new("/"), &env, &Two)
}

fn literal(words: &[&str]) -> Vec<Value> {
    words
        .iter()
        .map(|w| Value::Literal(w.to_string()))
        .collect()
}

#[test]
fn a_command_becomes_simple_commands_with_their_words_directories_and_redirections() {
    let plan = read("cd /tmp && A=1 git push origin \"$B\" > out.txt 2>&1");
    assert_eq!(plan.unreadable, None);
    assert_eq!(plan.commands.len(), 2, "{:?}", plan.commands);
    assert_eq!(
        plan.commands[1],
        Simple {
            argv: vec![
                Value::Literal("git".into()),
                Value::Literal("push".into()),
                Value::Literal("origin".into()),
                Value::Dynamic("\"$B\"".into()),
            ],
            assignments: vec![("A".into(), Value::Literal("1".into()))],
            dirs: vec![Dir::Known("/tmp".into())],
            redirects: vec![
                Redirect {
                    fd: None,
                    op: ">".into(),
                    target: Value::Literal("out.txt".into()),
                },
                Redirect {
                    fd: Some(2),
                    op: ">&".into(),
                    target: Value::Literal("1".into()),
                },
            ],
        }
    );
    assert_eq!(plan.notes.len(), 1);
    assert_eq!(plan.notes[0].note, "git");
}

#[test]
fn code_the_caller_hands_back_is_read_and_scoping_follows_bash() {
    let plan = read("(cd /tmp); sh -c 'cd /usr && ls'; pwd & sleep 1; echo $(date)");
    let at: Vec<(String, Vec<Dir>)> = plan
        .commands
        .iter()
        .filter(|c| !c.argv.is_empty())
        .map(|c| (c.argv[0].text().to_string(), c.dirs.clone()))
        .collect();
    let root = vec![Dir::Known("/".into())];
    assert_eq!(
        at,
        [
            ("cd".into(), root.clone()),
            ("sh".into(), root.clone()),
            ("cd".into(), root.clone()),
            ("ls".into(), vec![Dir::Known("/usr".into())]),
            ("pwd".into(), root.clone()),
            ("sleep".into(), root.clone()),
            ("date".into(), root.clone()),
            ("echo".into(), root),
        ]
    );
    let deferred: Vec<(&str, Option<&str>)> = plan
        .notes
        .iter()
        .map(|n| (n.note.as_str(), n.deferred.as_deref()))
        .collect();
    assert_eq!(
        deferred,
        [
            ("ls", None),
            ("pwd", Some("in the background (`&`)")),
            ("sleep", None),
            ("date", Some("after `sleep`")),
            ("echo", Some("after `sleep`")),
        ]
    );
    assert_eq!(plan.commands[0].argv, literal(&["cd", "/tmp"]));
}

#[test]
fn what_the_text_does_not_show_is_noted_as_opaque_never_guessed() {
    let plan = read("echo ${x@P}");
    assert_eq!(
        plan.notes[0].note,
        "opaque: `${…@P}` expands data as a prompt, running what it holds"
    );
    let unreadable = read("echo 'unterminated");
    assert!(unreadable.unreadable.is_some());
}
