//! The names a program file is read as: a program is known by what it runs, not by the
//! name it was typed as (ARCHITECTURE.md, "The agent guard's policy"). A command word
//! leads to a real file (`PATH` and symlinks followed: `editor` → `vim.basic`, `./x` →
//! python); that file's record reads it, and so does the typed name's, since a program
//! may act on the name it is called by (`ex` is vim reading stdin). A program file no
//! record knows under either name, outside every `PATH` directory and not a script, is
//! one the lane may have made or copied (`cp python3 ./p`): what it runs is opaque.

use std::io::Read;
use std::path::Path;

/// How the dispatcher reads the program a command word leads to.
#[derive(Debug, Default)]
pub struct Known {
    /// The names whose records read it, each reading kept: the fenced program it is
    /// alone, else the real file's record name (when it has one) and the typed name.
    pub names: Vec<String>,
    /// Why what it runs is opaque: no record knows it and the lane may have made it.
    pub planted: Option<String>,
}

impl Known {
    /// A program read by one name.
    pub fn one(name: impl Into<String>) -> Known {
        Known {
            names: vec![name.into()],
            planted: None,
        }
    }

    /// Adds what `other` is read as (the same word run from another directory).
    pub fn join(&mut self, other: Known) {
        for name in other.names {
            if !self.names.contains(&name) {
                self.names.push(name);
            }
        }
        if self.planted.is_none() {
            self.planted = other.planted;
        }
    }
}

/// What the file `target` (the real file, symlinks followed) is read as, typed as
/// `typed` (without a directory). `located`: where the word put it before links were
/// followed (`None` for a name found on `PATH`); `path`: the hook's `PATH` (`None`: the
/// guard's own), whose directories hold installed programs.
pub fn known(target: &Path, typed: &str, located: Option<&Path>, path: Option<&str>) -> Known {
    let real = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if crate::fenced::is_fenced_program(&real.to_ascii_lowercase()) {
        return Known::one(real);
    }
    if let Some(fenced) = crate::fenced::same_program(target) {
        return Known::one(fenced);
    }
    if real == typed || crate::specs::BY_CALLED_NAME.contains(&real.as_str()) {
        return unknown_checked(Known::one(typed), target, typed, located, path);
    }
    // A script's code is the file's, whatever its name says; only a compiled program
    // carries a distribution's flavour in its name.
    let record = if is_script(target) {
        crate::specs::find(&real).map(|_| real.clone())
    } else {
        crate::specs::record_name(&real)
    };
    let mut names: Vec<String> = record.into_iter().collect();
    if !names.iter().any(|n| n == typed) {
        names.push(typed.to_string());
    }
    unknown_checked(
        Known {
            names,
            planted: None,
        },
        target,
        typed,
        located,
        path,
    )
}

/// `known`, made opaque when no record reads it, it is no script, and it lies outside
/// every directory of `path`.
fn unknown_checked(
    mut known: Known,
    target: &Path,
    typed: &str,
    located: Option<&Path>,
    path: Option<&str>,
) -> Known {
    if known
        .names
        .iter()
        .any(|n| crate::specs::record_name(n).is_some())
        || is_script(target)
    {
        return known;
    }
    let installed = installed_dirs(path);
    let on_path = |file: &Path| {
        file.parent()
            .and_then(|d| std::fs::canonicalize(d).ok())
            .is_some_and(|d| installed.contains(&d))
    };
    if on_path(target) || located.is_some_and(on_path) {
        return known;
    }
    known.planted = Some(format!(
        "`{typed}` runs {}, a program outside PATH the guard has no record of: it may be a copy of an interpreter or shell, so what it runs is unknown",
        target.display()
    ));
    known
}

/// The directories of `path` (the guard's own `PATH` when `None`), resolved.
fn installed_dirs(path: Option<&str>) -> Vec<std::path::PathBuf> {
    let path = match path {
        Some(p) => std::ffi::OsString::from(p),
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect()
}

/// True when the file starts with `#!`: a script, whose code is the file's.
fn is_script(target: &Path) -> bool {
    let mut head = [0u8; 2];
    std::fs::File::open(target)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"#!")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn program(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_link_is_read_by_the_file_it_leads_to_and_the_name_it_was_called_by() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        program(&bin.join("vim.basic"), b"\x7fELF vim");
        let path = bin.display().to_string();
        let target = bin.join("vim.basic");
        let k = known(&target, "editor", None, Some(&path));
        assert_eq!(k.names, ["vim", "editor"]);
        assert!(k.planted.is_none());
        let k = known(&target, "ex", None, Some(&path));
        assert_eq!(k.names, ["vim", "ex"]);
        // A link in the worktree to an installed program is that program.
        symlink(&target, tmp.path().join("x")).unwrap();
        let k = known(&target, "x", Some(&tmp.path().join("x")), Some(&path));
        assert_eq!(k.names, ["vim", "x"]);
        assert!(k.planted.is_none());
        // busybox runs as the name it is called by.
        program(&bin.join("busybox"), b"\x7fELF busybox");
        let k = known(&bin.join("busybox"), "ls", None, Some(&path));
        assert_eq!(k.names, ["ls"]);
    }

    #[test]
    fn an_unknown_program_outside_path_is_opaque_unless_it_is_a_script() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let path = bin.display().to_string();
        program(&tmp.path().join("p"), b"\x7fELF a copied python");
        let k = known(&tmp.path().join("p"), "p", None, Some(&path));
        assert!(k.planted.is_some());
        program(&tmp.path().join("run.sh"), b"#!/bin/sh\necho hi\n");
        let k = known(&tmp.path().join("run.sh"), "run.sh", None, Some(&path));
        assert!(k.planted.is_none());
        // A script is not read by a flavour its name seems to carry.
        program(&tmp.path().join("env.sh"), b"#!/bin/sh\n");
        let k = known(&tmp.path().join("env.sh"), "e", None, Some(&path));
        assert_eq!(k.names, ["e"]);
        program(&bin.join("tool"), b"\x7fELF installed");
        let k = known(&bin.join("tool"), "tool", None, Some(&path));
        assert!(k.planted.is_none());
        // A copy under a name a record knows is read as that name.
        let k = known(&tmp.path().join("p"), "python3", None, Some(&path));
        assert!(k.planted.is_none());
        assert_eq!(k.names, ["python3"]);
    }
}
