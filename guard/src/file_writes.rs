//! Where a file tool may not write outside quarantine (ARCHITECTURE.md, "Quarantine"):
//! never into the fence's home, whose session bindings and quarantine records decide
//! which row a session answers to; and, for a row-bound session whose row is not ALLOWED
//! (the fence cannot be read and no refusal is remembered), never into a git directory
//! (`.git` in any spelling a disk opens as it, or a bare repository's) or a harness's
//! settings ([`Harness::settings_dir`]: `.claude`…), which would change what the next
//! git command or the next session runs. Each path is resolved as the kernel resolves it
//! at check time ([`crate::real_path`]). A tool the guard does not know is not read here.

use crate::file_tools::{self, APPLY_PATCH};
use crate::real_path;
use row_fence_contract::harness::Harness;
use std::path::{Component, Path, PathBuf};

/// Which places are closed to a write.
pub struct Rules<'a> {
    /// `$ROW_FENCE_HOME` (closed to every session).
    pub home: Option<&'a Path>,
    /// Close git directories and harness settings too.
    pub guard_git: bool,
    /// Why the directory the tool runs in is unknown (a Codex without `tool_cwd`), when it
    /// is: then a relative path names no place the guard can judge, and is denied.
    pub unknown_base: Option<&'a str>,
}

/// Why a file tool's write is denied (the denial's sentence is its Display).
#[derive(Debug, thiserror::Error)]
pub enum WriteDenied {
    /// The tool's input could not be read as the paths it writes
    /// ([`file_tools::Unread`]).
    #[error("{0}")]
    Unread(file_tools::Unread),
    /// A relative path, while the directory the tool runs in is unknown: it names no
    /// place the guard can judge.
    #[error("{}: a relative path, and the directory the tool runs in is unknown ({why}); name the file by its absolute path", .path.display())]
    RelativeFromUnknownBase {
        /// The relative path, as the input names it.
        path: PathBuf,
        /// Why the directory the tool runs in is unknown.
        why: String,
    },
    /// A tool the guard does not know names more strings than it judges
    /// ([`MAX_OPAQUE_STRINGS`]).
    #[error(
        "`{tool}` is a tool the guard does not know, and its input holds more than {MAX_OPAQUE_STRINGS} strings, any of which it may write"
    )]
    TooManyStrings {
        /// The tool's name.
        tool: String,
    },
    /// A path the tool writes lands in a place `rules` close.
    #[error("{}: {place}", .target.display())]
    Closed {
        /// The path as the tool names it (absolute, before links are resolved).
        target: PathBuf,
        /// Where it lands, or that the guard cannot tell.
        place: ClosedPlace,
    },
}

/// A closed place a write lands in, or why the guard cannot tell where it lands.
#[derive(Debug, thiserror::Error)]
pub enum ClosedPlace {
    /// The path could not be resolved as the kernel would (fail closed).
    #[error("the guard cannot resolve where it lands ({0})")]
    Unresolved(#[source] real_path::Unresolved),
    /// The fence's home (its real path).
    #[error("it lands in the fence's home {} (session bindings, quarantine records), which no tool call writes", .0.display())]
    Home(PathBuf),
    /// A `.git` directory, in any spelling the disk opens as it.
    #[error(
        "it lands in a .git directory, which a session whose row is not ALLOWED does not write"
    )]
    DotGit,
    /// A harness's settings directory ([`Harness::settings_dir`]).
    #[error(
        "it lands in a harness's settings ({0}), which a session whose row is not ALLOWED does not write"
    )]
    Settings(&'static str),
    /// A directory laid out as a git directory (its real path).
    #[error("it lands in the git directory {}, which a session whose row is not ALLOWED does not write", .0.display())]
    GitDir(PathBuf),
}

/// `Ok` when the call of `name` with `input` writes nowhere `rules` close (or is not a
/// file tool that writes); else why not. Relative paths are taken from `base`.
pub fn check(
    name: &str,
    input: &serde_json::Value,
    base: &Path,
    rules: &Rules,
) -> Result<(), WriteDenied> {
    let targets = |base: &Path| -> Result<Option<Vec<PathBuf>>, WriteDenied> {
        Ok(Some(if name == APPLY_PATCH {
            file_tools::patch_targets(input, base).map_err(WriteDenied::Unread)?
        } else {
            match file_tools::find(name) {
                Some(tool) if file_tools::writes(name) => {
                    let named =
                        file_tools::named(tool, input, base, false).map_err(WriteDenied::Unread)?;
                    named.paths.into_iter().chain(named.unknown).collect()
                }
                _ => return Ok(None),
            }
        }))
    };
    if file_tools::find(name).is_none()
        && name != APPLY_PATCH
        && crate::quarantine::tools::opaque_outside(name, rules.home)
    {
        return opaque_stays_out_of_home(name, input, base, rules);
    }
    let Some(absolute) = targets(base)? else {
        return Ok(());
    };
    if let Some(why) = rules.unknown_base {
        // Taken from an empty base, a relative path stays relative.
        let bare = targets(Path::new(""))?.unwrap_or_default();
        if let Some(relative) = bare.iter().find(|p| !p.is_absolute()) {
            return Err(WriteDenied::RelativeFromUnknownBase {
                path: relative.clone(),
                why: why.to_string(),
            });
        }
    }
    for target in absolute {
        lands_open(&target, rules)?;
    }
    Ok(())
}

/// The most strings of an opaque tool's input judged as paths before the guard stops
/// reading it (and denies).
pub const MAX_OPAQUE_STRINGS: usize = 4096;

/// The longest text a kernel opens as a path (`PATH_MAX`, with its NUL): a longer string
/// names no file.
const PATH_MAX: usize = 4096;

/// A tool the guard does not know (a harness's next edit tool, an MCP tool not read-only
/// by rule) may write any path its input names, in any member: every string in it, at
/// every depth and at every reading ([`file_tools::readings`]), is judged as a path, and
/// none may land in the fence's home, which no tool call writes. (Whether it runs at all
/// for a row-bound session is the standing ask's: it is opaque.)
fn opaque_stays_out_of_home(
    name: &str,
    input: &serde_json::Value,
    base: &Path,
    rules: &Rules,
) -> Result<(), WriteDenied> {
    if rules.home.is_none() {
        return Ok(());
    }
    let mut texts = Vec::new();
    let mut stack = vec![input];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::String(text) => {
                if texts.len() == MAX_OPAQUE_STRINGS {
                    return Err(WriteDenied::TooManyStrings {
                        tool: name.to_string(),
                    });
                }
                texts.push(text.as_str());
            }
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(members) => stack.extend(members.values()),
            _ => {}
        }
    }
    let home_only = Rules {
        home: rules.home,
        guard_git: false,
        unknown_base: None,
    };
    for text in texts {
        if text.is_empty() || text.len() >= PATH_MAX || text.contains('\0') {
            continue;
        }
        for place in file_tools::readings(text, base).unwrap_or_default() {
            // A text whose way the kernel cannot walk (a file as a directory, no
            // permission) names no file the tool could write either.
            if let Err(real_path::Unresolved::Io { .. }) = real_path::resolve(&place) {
                continue;
            }
            lands_open(&place, &home_only)?;
        }
    }
    Ok(())
}

/// `Ok` when `target` lands nowhere `rules` close; else where it lands.
fn lands_open(target: &Path, rules: &Rules) -> Result<(), WriteDenied> {
    let denied = |place: ClosedPlace| {
        Err(WriteDenied::Closed {
            target: target.to_path_buf(),
            place,
        })
    };
    let landing = match real_path::resolve(target) {
        Ok(landing) => landing.real,
        Err(e) => return denied(ClosedPlace::Unresolved(e)),
    };
    if let Some(home) = rules.home.and_then(|h| real_path::resolve(h).ok())
        && landing.starts_with(&home.real)
    {
        return denied(ClosedPlace::Home(home.real));
    }
    if !rules.guard_git {
        return Ok(());
    }
    for part in landing.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        if real_path::is_dot_git(name) {
            return denied(ClosedPlace::DotGit);
        }
        if let Some(dir) = Harness::ALL
            .map(Harness::settings_dir)
            .into_iter()
            .find(|d| real_path::names_dir(name, d))
        {
            return denied(ClosedPlace::Settings(dir));
        }
    }
    if let Some(git_dir) = landing.ancestors().skip(1).find(|a| is_git_dir(a)) {
        return denied(ClosedPlace::GitDir(git_dir.to_path_buf()));
    }
    Ok(())
}

/// True when `dir` is laid out as a git directory (a bare repository, or one planted
/// under another name): a `HEAD` file, an `objects` and a `refs` directory.
fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_home_is_closed_to_everyone_and_git_and_settings_to_an_unread_row() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let tree = root.join("wt");
        let home = root.join("home");
        let bare = root.join("remote.git");
        for d in [
            tree.join(".git"),
            home.join("sessions"),
            bare.join("objects"),
            bare.join("refs/heads"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink(home.join("sessions"), tree.join("qlink")).unwrap();
        std::os::unix::fs::symlink(home.join("sessions/new.json"), tree.join("dangling")).unwrap();
        let write = |path: &str, guard_git: bool| {
            let rules = Rules {
                home: Some(&home),
                guard_git,
                unknown_base: None,
            };
            check(
                "Write",
                &json!({"file_path": path, "content": "x"}),
                &tree,
                &rules,
            )
        };
        for path in ["qlink/../sessions/s.json", "qlink/s.json", "dangling"] {
            assert!(write(path, false).is_err(), "{path}");
        }
        assert!(write(&home.join("x").display().to_string(), false).is_err());
        assert!(write("notes.md", false).is_ok());
        assert!(write(".git/config", false).is_ok());
        for path in [
            ".git/config",
            ".GIT/config",
            ".claude/settings.json",
            ".Codex/config.toml",
            "sub/.gemini/settings.json",
            "../remote.git/refs/heads/main",
        ] {
            assert!(write(path, true).is_err(), "{path}");
        }
        assert!(write(".gitattributes", true).is_ok());
        // Every harness's settings, as the harness names its directory.
        for harness in Harness::ALL {
            let path = format!("{}/hooks.json", harness.settings_dir());
            assert!(
                matches!(
                    write(&path, true),
                    Err(WriteDenied::Closed { place: ClosedPlace::Settings(d), .. }) if d == harness.settings_dir()
                ),
                "{path}"
            );
            assert!(write(&path, false).is_ok(), "{path}");
        }
        // A member the table does not list is judged as a path too.
        let rules = Rules {
            home: Some(&home),
            guard_git: false,
            unknown_base: None,
        };
        let extra = |v: &str| json!({"file_path": "notes.md", "target_file": v, "content": "x"});
        assert!(check("Write", &extra("qlink/s.json"), &tree, &rules).is_err());
        assert!(check("Write", &extra("src/x.rs"), &tree, &rules).is_ok());
        assert!(
            check(
                "Edit",
                &json!({"file_path": "a", "encoding": "utf-8"}),
                &tree,
                &rules
            )
            .is_ok()
        );
        let patch = json!({"command": "*** Begin Patch\n*** Add File: qlink/../sessions/s.json\n+x\n*** End Patch"});
        let rules = Rules {
            home: Some(&home),
            guard_git: false,
            unknown_base: None,
        };
        assert!(check("apply_patch", &patch, &tree, &rules).is_err());
        // `~` is the user's home to the harness: judged there too.
        let user = std::env::var("HOME").unwrap();
        let tilde = |p: &str| json!({"command": format!("*** Begin Patch\n*** Add File: {p}\n+x\n*** End Patch")});
        let in_home = home
            .strip_prefix(&user)
            .ok()
            .map(|rest| format!("~/{}/sessions/s.json", rest.display()));
        if let Some(p) = in_home {
            assert!(
                check("apply_patch", &tilde(&p), &tree, &rules).is_err(),
                "{p}"
            );
        }
        let unknown = Rules {
            home: Some(&home),
            guard_git: false,
            unknown_base: Some("no tool_cwd"),
        };
        assert!(check("apply_patch", &tilde("notes.md"), &tree, &unknown).is_err());
        let absolute = tree.join("notes.md").display().to_string();
        assert!(check("apply_patch", &tilde(&absolute), &tree, &unknown).is_ok());
        assert!(check("Read", &json!({"file_path": "qlink/s.json"}), &tree, &rules).is_ok());
    }

    #[test]
    fn a_tool_the_guard_does_not_know_writes_no_path_its_input_names_into_the_home() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let tree = root.join("wt");
        let home = root.join("home");
        std::fs::create_dir_all(home.join("sessions")).unwrap();
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("README.md"), "").unwrap();
        std::os::unix::fs::symlink(home.join("sessions"), tree.join("qlink")).unwrap();
        let rules = Rules {
            home: Some(&home),
            guard_git: false,
            unknown_base: None,
        };
        let run = |name: &str, input: serde_json::Value| check(name, &input, &tree, &rules);
        let binding = home.join("sessions/s.json").display().to_string();
        for (name, input) in [
            ("EditNotebook", json!({"target_notebook": binding})),
            ("smart_edit", json!({"a": [{"b": {"c": binding}}]})),
            ("mcp__fs__write_file", json!({"path": "qlink/s.json"})),
            ("x", json!(binding)),
        ] {
            assert!(run(name, input.clone()).is_err(), "{name} {input}");
        }
        let many: Vec<String> = (0..=MAX_OPAQUE_STRINGS).map(|k| k.to_string()).collect();
        assert!(run("x", json!(many)).is_err());
        for (name, input) in [
            ("EditNotebook", json!({"target_notebook": "nb.ipynb"})),
            (
                "mcp__gh__create_issue",
                json!({"body": "README.md/x", "n": 3}),
            ),
            ("mcp__gh__get_issue", json!({"path": binding})),
            ("TodoWrite", json!({"todos": [binding]})),
            ("x", json!({"long": "a".repeat(PATH_MAX)})),
        ] {
            assert!(run(name, input.clone()).is_ok(), "{name} {input}");
        }
    }
}
