//! Where a file tool may not write outside quarantine (ARCHITECTURE.md, "Quarantine"):
//! never into the fence's home, whose session bindings and quarantine records decide
//! which row a session answers to; and, for a row-bound session whose row is not ALLOWED
//! (the fence cannot be read and no refusal is remembered), never into a git directory
//! (`.git` in any spelling a disk opens as it, or a bare repository's) or a harness's
//! settings (`.claude`, `.codex`, `.gemini`, `.cursor`), which would change what the next
//! git command or the next session runs. Each path is resolved as the kernel resolves it
//! at check time ([`crate::real_path`]). A tool the guard does not know is not read here.

use crate::file_tools::{self, APPLY_PATCH};
use crate::real_path;
use std::path::{Component, Path};

/// The harnesses' settings directories: a hook switched off there is off for the next
/// session.
pub const SETTINGS_DIRS: &[&str] = &[".claude", ".codex", ".gemini", ".cursor"];

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

/// `Ok` when the call of `name` with `input` writes nowhere `rules` close (or is not a
/// file tool that writes); else why not. Relative paths are taken from `base`.
pub fn check(
    name: &str,
    input: &serde_json::Value,
    base: &Path,
    rules: &Rules,
) -> Result<(), String> {
    let targets = |base: &Path| -> Result<Option<Vec<std::path::PathBuf>>, String> {
        Ok(Some(if name == APPLY_PATCH {
            file_tools::patch_targets(input, base)?
        } else {
            match file_tools::find(name) {
                Some(tool) if file_tools::writes(name) => {
                    let named = file_tools::named(tool, input, base, false)?;
                    named.paths.into_iter().chain(named.unknown).collect()
                }
                _ => return Ok(None),
            }
        }))
    };
    let Some(absolute) = targets(base)? else {
        return Ok(());
    };
    if let Some(why) = rules.unknown_base {
        // Taken from an empty base, a relative path stays relative.
        let bare = targets(Path::new(""))?.unwrap_or_default();
        if let Some(relative) = bare.iter().find(|p| !p.is_absolute()) {
            return Err(format!(
                "{}: a relative path, and the directory the tool runs in is unknown ({why}); name the file by its absolute path",
                relative.display()
            ));
        }
    }
    for target in absolute {
        lands_open(&target, rules)?;
    }
    Ok(())
}

fn lands_open(target: &Path, rules: &Rules) -> Result<(), String> {
    let denied = |why: &str| Err(format!("{}: {why}", target.display()));
    let landing = match real_path::resolve(target) {
        Ok(landing) => landing.real,
        Err(e) => return denied(&format!("the guard cannot resolve where it lands ({e})")),
    };
    if let Some(home) = rules.home.and_then(|h| real_path::resolve(h).ok())
        && landing.starts_with(&home.real)
    {
        return denied(&format!(
            "it lands in the fence's home {} (session bindings, quarantine records), which no tool call writes",
            home.real.display()
        ));
    }
    if !rules.guard_git {
        return Ok(());
    }
    for part in landing.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        if real_path::is_dot_git(name) {
            return denied(
                "it lands in a .git directory, which a session whose row is not ALLOWED does not write",
            );
        }
        if let Some(dir) = SETTINGS_DIRS.iter().find(|d| real_path::names_dir(name, d)) {
            return denied(&format!(
                "it lands in a harness's settings ({dir}), which a session whose row is not ALLOWED does not write"
            ));
        }
    }
    if let Some(git_dir) = landing.ancestors().skip(1).find(|a| is_git_dir(a)) {
        return denied(&format!(
            "it lands in the git directory {}, which a session whose row is not ALLOWED does not write",
            git_dir.display()
        ));
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
}
