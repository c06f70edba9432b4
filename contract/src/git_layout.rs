//! How git lays out its git dirs, read with std alone (no `git` subprocess: this runs on
//! every fenced write): a linked worktree's git dir names its repository's common dir in
//! `commondir`, and a submodule's git dir lives under its superproject's git dir, in
//! `<super git dir>/modules/<name>` (names may hold `/`; submodules nest).

use std::fs;
use std::path::{Path, PathBuf};

/// The file, in a repository's common git dir, that holds git's transport gate settings;
/// the repository's config includes it (`row-fence install git-hook` writes both, and the
/// gate finds a moved repository by it).
pub const INCLUDE_FILE: &str = "row-fence.gitconfig";

/// True when `dir` looks like a git dir: a `HEAD` file, and an `objects` directory (a
/// repository) or a `commondir` file (a linked worktree's git dir).
pub fn is_git_dir(dir: &Path) -> bool {
    fs::metadata(dir.join("HEAD")).is_ok_and(|m| m.is_file())
        && (fs::metadata(dir.join("objects")).is_ok_and(|m| m.is_dir())
            || fs::metadata(dir.join("commondir")).is_ok_and(|m| m.is_file()))
}

/// The git dir of the superproject whose submodule keeps its git dir at `git_dir`
/// (`<super>/modules/<name>`), or `None` when `git_dir` is no submodule's. The nearest
/// `modules` ancestor whose parent is a git dir wins, so a submodule named `a/modules/b`
/// and a submodule `b` nested in `a` both lead back to a git dir of the same superproject.
/// `git_dir` is made canonical first: a `gitdir:` file names it as `../.git/modules/x`.
pub fn superproject(git_dir: &Path) -> Option<PathBuf> {
    let git_dir = fs::canonicalize(git_dir).ok()?;
    git_dir
        .ancestors()
        .skip(1)
        .filter(|a| a.file_name().is_some_and(|n| n == "modules"))
        .filter_map(Path::parent)
        .find(|candidate| is_git_dir(candidate))
        .map(Path::to_path_buf)
}

/// The common dir of the repository `git_dir` belongs to: the target of its `commondir`
/// file (a linked worktree's git dir), else `git_dir` itself; canonical. `None` when it
/// cannot be read.
pub fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    let named = match fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end_matches(['\n', '\r'])),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => git_dir.to_path_buf(),
        Err(_) => return None,
    };
    fs::canonicalize(named).ok()
}

/// Every git dir of the repository whose common dir is `common`: the common dir (the main
/// worktree's, or a bare repository's) and each linked worktree's, `<common>/worktrees/*`.
pub fn worktree_git_dirs(common: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![common.to_path_buf()];
    if let Ok(entries) = fs::read_dir(common.join("worktrees")) {
        let mut linked: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_git_dir(p))
            .collect();
        linked.sort();
        dirs.extend(linked);
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_dir(path: &Path) {
        fs::create_dir_all(path.join("objects")).unwrap();
        fs::write(path.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[test]
    fn a_submodule_git_dir_leads_to_its_outermost_superproject_step_by_step() {
        let tmp = std::env::temp_dir().join(format!("rf-layout-{}", std::process::id()));
        let top = tmp.join("super/.git");
        let a = top.join("modules/a");
        let b = a.join("modules/b");
        let slashed = top.join("modules/x/modules/y");
        for dir in [&top, &a, &b, &slashed] {
            git_dir(dir);
        }
        let canon = |p: &Path| fs::canonicalize(p).unwrap();
        assert_eq!(superproject(&b), Some(canon(&a)));
        assert_eq!(superproject(&a), Some(canon(&top)));
        assert_eq!(superproject(&top), None);
        // `x` is no git dir, so `x/modules/y` is a submodule named so, of the top.
        assert_eq!(superproject(&slashed), Some(canon(&top)));
        fs::create_dir_all(tmp.join("super/sub")).unwrap();
        let dotted = tmp.join("super/sub/../.git/modules/a");
        assert_eq!(superproject(&dotted), Some(canon(&top)));
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_linked_worktree_names_its_common_dir() {
        let tmp = std::env::temp_dir().join(format!("rf-common-{}", std::process::id()));
        let common = tmp.join("repo/.git");
        git_dir(&common);
        let linked = common.join("worktrees/w1");
        fs::create_dir_all(&linked).unwrap();
        fs::write(linked.join("HEAD"), "ref: refs/heads/w1\n").unwrap();
        fs::write(linked.join("commondir"), "../..\n").unwrap();
        let canon = fs::canonicalize(&common).unwrap();
        assert_eq!(common_dir(&linked), Some(canon.clone()));
        assert_eq!(common_dir(&common), Some(canon.clone()));
        assert_eq!(
            worktree_git_dirs(&canon),
            vec![canon.clone(), canon.join("worktrees/w1")]
        );
        fs::remove_dir_all(&tmp).unwrap();
    }
}
