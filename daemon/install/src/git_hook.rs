//! The git `pre-push` hook in a repository: installs `hooks/pre-push` without clobbering
//! a hook that is already there (it refuses, or with `chain` runs that hook before the
//! fence, so the fence's verdict comes last, right before the upload), and rolls back to exactly what was there before.
//!
//! With `chain` the hooks directory holds three files: `pre-push` (the chain,
//! `hooks/pre-push-chain`), `pre-push.row-fence` (the fence) and `pre-push.chained` (the
//! original, the same file or symlink under a second name). No moment of the install or
//! the rollback leaves `pre-push` missing: a push that starts halfway is still fenced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The fence's pre-push hook, as shipped in `hooks/pre-push`.
pub const PRE_PUSH: &str = include_str!("../../../hooks/pre-push");

/// The chain that runs the repository's own hook, then the fence.
pub const PRE_PUSH_CHAIN: &str = include_str!("../../../hooks/pre-push-chain");

/// The hook git runs before a push.
pub const HOOK: &str = "pre-push";
/// The fence, when chained.
pub const FENCE: &str = "pre-push.row-fence";
/// The repository's own hook, when chained.
pub const CHAINED: &str = "pre-push.chained";

/// One kind of hook the installer writes, chains and rolls back: the pre-push hook, and
/// a forge's pre-receive hook ([`crate::forge_hook`]), by the same code.
#[derive(Clone, Copy, Debug)]
pub struct HookFiles {
    /// The hook's name in the hooks directory.
    pub hook: &'static str,
    /// The fence's name when chained.
    pub fence: &'static str,
    /// The original hook's name when chained.
    pub chained: &'static str,
    /// The fence's hook as shipped (its baked lines empty).
    pub shipped: &'static str,
    /// The chain that runs the original, then the fence.
    pub chain: &'static str,
    /// The `NAME=''` lines the installer fills in.
    pub baked: &'static [&'static str],
}

/// The pre-push hook's files.
pub const PRE_PUSH_FILES: HookFiles = HookFiles {
    hook: HOOK,
    fence: FENCE,
    chained: CHAINED,
    shipped: PRE_PUSH,
    chain: PRE_PUSH_CHAIN,
    baked: &BAKED_NAMES,
};

/// Fills the `NAME=''` lines of `files.shipped` with `values` (in `files.baked`'s order),
/// each quoted for sh; a value with a line break is refused.
pub fn render_of(files: &HookFiles, values: &[&str]) -> Result<String, BakeError> {
    let mut text = String::with_capacity(files.shipped.len() + 256);
    for line in files.shipped.split_inclusive('\n') {
        match baked_line_of(files.baked, line) {
            Some(i) => {
                let value = values.get(i).copied().unwrap_or_default();
                if value.contains(['\n', '\r']) {
                    return Err(BakeError::LineBreak {
                        value: value.to_string(),
                    });
                }
                text.push_str(&format!(
                    "{}={}\n",
                    files.baked[i],
                    crate::shell::sh_quote(value)
                ));
            }
            None => text.push_str(line),
        }
    }
    Ok(text)
}

/// What install or rollback did.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Install: `pre-push` is now the fence.
    Installed,
    /// Install: `pre-push` is now the chain, the original kept as `pre-push.chained`.
    Chained,
    /// Install: the fence (or the chain) was already there; the fence was refreshed.
    AlreadyInstalled,
    /// Rollback: the fence's files are gone and the original, if any, is back.
    RolledBack,
    /// Rollback: no fence was installed.
    NotInstalled,
}

/// Why the hook was left alone.
#[derive(Debug)]
pub enum Refusal {
    /// Another `pre-push` is there and chaining was not asked for.
    Occupied(PathBuf),
    /// `pre-push` is not the fence's, so rollback does not touch it.
    NotOurs(PathBuf),
    /// A `pre-push.chained` is already there: a half-finished chain to sort out by hand.
    ChainedExists(PathBuf),
    /// Reading or writing the hooks directory failed.
    Io(PathBuf, io::Error),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Occupied(p) => write!(
                f,
                "{} is another pre-push hook; leaving it alone (--chain runs it before the fence)",
                p.display()
            ),
            Refusal::NotOurs(p) => write!(
                f,
                "{} is not row-fence's pre-push hook; leaving it alone",
                p.display()
            ),
            Refusal::ChainedExists(p) => write!(
                f,
                "{} already exists; move it away before chaining again",
                p.display()
            ),
            Refusal::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// What the fence's hook is baked with: the values `hooks/pre-push` leaves empty, so a push
/// asks the daemon's own asker at the daemon's home and socket whatever the pushing shell's
/// `PATH` and `ROW_FENCE_HOME` say (the agent hook's entry carries the same three).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baked {
    /// The directory of the `row-fence-ask` that runs beside the daemon.
    pub bin_dir: PathBuf,
    /// The daemon's `ROW_FENCE_HOME`.
    pub home: PathBuf,
    /// The daemon's socket.
    pub socket: PathBuf,
}

/// The lines of `hooks/pre-push` the installer fills in, each `NAME=''` as shipped.
const BAKED_NAMES: [&str; 3] = ["row_fence_bin_dir", "row_fence_home", "row_fence_socket"];

/// A value that cannot be baked into the hook.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BakeError {
    /// It holds a line break: the hook would not read back as the fence's.
    #[error("{value:?} holds a line break")]
    LineBreak {
        /// The value (a directory or socket path).
        value: String,
    },
    /// It is not UTF-8: the hook is text, and a changed path would name another place.
    #[error(transparent)]
    NotUtf8(#[from] crate::shell::NotUtf8),
}

impl Baked {
    /// The fence's hook with these values. A value holding a line break is refused: the
    /// hook would not read back as the fence's; so is one that is not UTF-8.
    pub fn render(&self) -> Result<String, BakeError> {
        let values = [&self.bin_dir, &self.home, &self.socket];
        let mut text = String::with_capacity(PRE_PUSH.len() + 256);
        for line in PRE_PUSH.split_inclusive('\n') {
            match baked_line(line) {
                Some(i) => {
                    let value = crate::shell::text(values[i])?.to_string();
                    if value.contains(['\n', '\r']) {
                        return Err(BakeError::LineBreak { value });
                    }
                    text.push_str(&format!(
                        "{}={}\n",
                        BAKED_NAMES[i],
                        crate::shell::sh_quote(&value)
                    ));
                }
                None => text.push_str(line),
            }
        }
        Ok(text)
    }
}

/// Which baked value `line` sets, if it is one of the lines the installer fills in.
fn baked_line(line: &str) -> Option<usize> {
    baked_line_of(&BAKED_NAMES, line)
}

/// Which of `names` `line` sets (`NAME=…`), if any.
fn baked_line_of(names: &[&str], line: &str) -> Option<usize> {
    names.iter().position(|name| {
        line.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('='))
    })
}

/// True when `text` is the fence's hook, as shipped or baked with any values.
pub fn is_fence(text: &str) -> bool {
    is_fence_of(&PRE_PUSH_FILES, text)
}

/// [`is_fence`] for the hook `files` describe: the shipped text with only its baked
/// lines' values changed.
pub fn is_fence_of(files: &HookFiles, text: &str) -> bool {
    let baked_line = |line: &str| baked_line_of(files.baked, line);
    let mut shipped = files.shipped.split_inclusive('\n');
    let mut theirs = text.split_inclusive('\n');
    loop {
        match (shipped.next(), theirs.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                let same_slot = baked_line(a).is_some_and(|i| baked_line(b) == Some(i));
                if !same_slot || !b.ends_with('\n') {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// What a hooks directory holds, as far as the fence is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No `pre-push`.
    Empty,
    /// `pre-push` is the fence's hook.
    Fence,
    /// `pre-push` is the chain (the repository's own hook, then the fence).
    Chain,
    /// `pre-push` is somebody else's hook.
    Other,
}

/// What `dir` holds.
pub fn state(dir: &Path) -> Result<State, Refusal> {
    state_of(&PRE_PUSH_FILES, dir)
}

/// [`state`] of the hook `files` describe.
pub fn state_of(files: &HookFiles, dir: &Path) -> Result<State, Refusal> {
    let hook = dir.join(files.hook);
    Ok(
        match read_text(&hook).map_err(|e| Refusal::Io(hook.clone(), e))? {
            None => State::Empty,
            Some(text) if is_fence_of(files, &text) => State::Fence,
            Some(text) if text == files.chain => State::Chain,
            Some(_) => State::Other,
        },
    )
}

/// Why [`install`] would refuse `dir`, checked before anything anywhere is written.
pub fn install_refusal(dir: &Path, chain: bool) -> Result<(), Refusal> {
    install_refusal_of(&PRE_PUSH_FILES, dir, chain)
}

/// [`install_refusal`] for the hook `files` describe.
pub fn install_refusal_of(files: &HookFiles, dir: &Path, chain: bool) -> Result<(), Refusal> {
    match state_of(files, dir)? {
        State::Other if !chain => Err(Refusal::Occupied(dir.join(files.hook))),
        State::Other if fs::symlink_metadata(dir.join(files.chained)).is_ok() => {
            Err(Refusal::ChainedExists(dir.join(files.chained)))
        }
        _ => Ok(()),
    }
}

/// Why [`rollback`] would refuse `dir`.
pub fn rollback_refusal(dir: &Path) -> Result<(), Refusal> {
    rollback_refusal_of(&PRE_PUSH_FILES, dir)
}

/// [`rollback_refusal`] for the hook `files` describe.
pub fn rollback_refusal_of(files: &HookFiles, dir: &Path) -> Result<(), Refusal> {
    match state_of(files, dir)? {
        State::Other => Err(Refusal::NotOurs(dir.join(files.hook))),
        _ => Ok(()),
    }
}

/// Installs the fence (`hook`, the rendered [`Baked`] hook) in `dir`. An existing,
/// different `pre-push` is refused unless `chain`, which keeps it as `pre-push.chained`
/// behind the chain. A fence already there is rewritten with `hook`'s values.
pub fn install(dir: &Path, chain: bool, hook_text: &str) -> Result<Done, Refusal> {
    install_of(&PRE_PUSH_FILES, dir, chain, hook_text)
}

/// [`install`] of the hook `files` describe.
pub fn install_of(
    files: &HookFiles,
    dir: &Path,
    chain: bool,
    hook_text: &str,
) -> Result<Done, Refusal> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| Refusal::Io(p, e)
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let hook = dir.join(files.hook);
    match read_text(&hook).map_err(io(&hook))? {
        None => {
            write_executable(&hook, hook_text).map_err(io(&hook))?;
            Ok(Done::Installed)
        }
        Some(text) if is_fence_of(files, &text) => {
            if text != hook_text {
                write_executable(&hook, hook_text).map_err(io(&hook))?;
            }
            Ok(Done::AlreadyInstalled)
        }
        Some(text) if text == files.chain => {
            let fence = dir.join(files.fence);
            write_executable(&fence, hook_text).map_err(io(&fence))?;
            Ok(Done::AlreadyInstalled)
        }
        Some(_) if !chain => Err(Refusal::Occupied(hook)),
        Some(_) => {
            let chained = dir.join(files.chained);
            if fs::symlink_metadata(&chained).is_ok() {
                return Err(Refusal::ChainedExists(chained));
            }
            let fence = dir.join(files.fence);
            write_executable(&fence, hook_text).map_err(io(&fence))?;
            keep_under_second_name(&hook, &chained).map_err(io(&chained))?;
            write_executable(&hook, files.chain).map_err(io(&hook))?;
            Ok(Done::Chained)
        }
    }
}

/// Removes the fence from `dir`: the fence's own `pre-push` is deleted; a chain is
/// replaced by the original (renamed back, so its bytes, mode and kind are as before).
/// Any other `pre-push` is refused.
pub fn rollback(dir: &Path) -> Result<Done, Refusal> {
    rollback_of(&PRE_PUSH_FILES, dir)
}

/// [`rollback`] of the hook `files` describe.
pub fn rollback_of(files: &HookFiles, dir: &Path) -> Result<Done, Refusal> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| Refusal::Io(p, e)
    };
    let hook = dir.join(files.hook);
    match read_text(&hook).map_err(io(&hook))? {
        None => Ok(Done::NotInstalled),
        Some(text) if is_fence_of(files, &text) => {
            fs::remove_file(&hook).map_err(io(&hook))?;
            Ok(Done::RolledBack)
        }
        Some(text) if text == files.chain => {
            let chained = dir.join(files.chained);
            if fs::symlink_metadata(&chained).is_ok() {
                fs::rename(&chained, &hook).map_err(io(&chained))?;
            } else {
                fs::remove_file(&hook).map_err(io(&hook))?;
            }
            let fence = dir.join(files.fence);
            fs::remove_file(&fence)
                .or_else(ignore_missing)
                .map_err(io(&fence))?;
            Ok(Done::RolledBack)
        }
        Some(_) => Err(Refusal::NotOurs(hook)),
    }
}

/// The hook's text; `None` when there is no hook. A hook that is not UTF-8 is nobody's
/// we know, so it reads as text that matches neither of ours.
fn read_text(path: &Path) -> io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A dangling symlink is still somebody's hook.
            match fs::symlink_metadata(path) {
                Ok(_) => Ok(Some(String::new())),
                Err(_) => Ok(None),
            }
        }
        Err(e) => Err(e),
    }
}

/// Gives `original` a second name without moving it: a hard link for a file (same
/// inode, bytes and mode), a new symlink to the same target for a symlink.
fn keep_under_second_name(original: &Path, second: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(original)?;
    if meta.file_type().is_symlink() {
        return std::os::unix::fs::symlink(fs::read_link(original)?, second);
    }
    fs::hard_link(original, second).or_else(|_| {
        // A filesystem without hard links: a copy keeps the bytes and the mode.
        fs::copy(original, second).map(drop)
    })
}

/// Writes `text` to `path` as an executable (0755), atomically: a temp file renamed
/// over it, so `path` is never missing or half written.
fn write_executable(path: &Path, text: &str) -> io::Result<()> {
    row_fence_store::atomic_file::write(path, text.as_bytes(), 0o755, false)
}

fn ignore_missing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn baked(home: &str) -> String {
        Baked {
            bin_dir: PathBuf::from("/opt/row fence/bin"),
            home: PathBuf::from(home),
            socket: PathBuf::from("/run/it's/sock"),
        }
        .render()
        .unwrap()
    }

    #[test]
    fn a_baked_hook_reads_back_as_the_fence_and_sh_reads_its_values() {
        let text = baked("/home/me/.row-fence");
        assert!(is_fence(&text) && is_fence(PRE_PUSH));
        assert!(!is_fence(&text.replace("exit 0", "exit 1")));
        assert!(!is_fence(&format!("{text}echo extra\n")));
        assert!(!is_fence(
            &text.replace("row_fence_home=", "row_fence_socket=")
        ));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{}\nprintf '%s|%s|%s' \"$row_fence_bin_dir\" \"$row_fence_home\" \"$row_fence_socket\"",
                text.lines().filter(|l| l.starts_with("row_fence_")).collect::<Vec<_>>().join("\n")
            ))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/opt/row fence/bin|/home/me/.row-fence|/run/it's/sock"
        );
        let broken = Baked {
            bin_dir: PathBuf::from("/a\nb"),
            home: PathBuf::from("/h"),
            socket: PathBuf::from("/s"),
        };
        assert!(broken.render().is_err());
    }

    #[test]
    fn a_fresh_install_rolls_back_to_no_hook() {
        let dir = tempfile::tempdir().unwrap();
        let text = baked("/h");
        assert_eq!(install(dir.path(), false, &text).unwrap(), Done::Installed);
        assert_eq!(fs::read_to_string(dir.path().join(HOOK)).unwrap(), text);
        let other = baked("/other");
        assert_eq!(
            install(dir.path(), false, &other).unwrap(),
            Done::AlreadyInstalled
        );
        assert_eq!(fs::read_to_string(dir.path().join(HOOK)).unwrap(), other);
        assert_eq!(rollback(dir.path()).unwrap(), Done::RolledBack);
        assert!(!dir.path().join(HOOK).exists());
        assert_eq!(rollback(dir.path()).unwrap(), Done::NotInstalled);
    }

    #[test]
    fn another_hook_is_refused_then_chained_then_restored_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join(HOOK);
        fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o750)).unwrap();
        let inode = fs::metadata(&hook).unwrap().ino();
        assert!(matches!(
            install_refusal(dir.path(), false),
            Err(Refusal::Occupied(_))
        ));
        assert!(matches!(
            install(dir.path(), false, PRE_PUSH),
            Err(Refusal::Occupied(_))
        ));
        assert_eq!(install(dir.path(), true, PRE_PUSH).unwrap(), Done::Chained);
        assert_eq!(fs::read_to_string(&hook).unwrap(), PRE_PUSH_CHAIN);
        assert_eq!(
            fs::read_to_string(dir.path().join(FENCE)).unwrap(),
            PRE_PUSH
        );
        assert_eq!(rollback(dir.path()).unwrap(), Done::RolledBack);
        let meta = fs::metadata(&hook).unwrap();
        assert_eq!(fs::read_to_string(&hook).unwrap(), "#!/bin/sh\nexit 0\n");
        assert_eq!((meta.ino(), meta.mode() & 0o777), (inode, 0o750));
        assert!(!dir.path().join(FENCE).exists() && !dir.path().join(CHAINED).exists());
    }

    #[test]
    fn rollback_leaves_a_foreign_hook_alone() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(HOOK), "#!/bin/sh\n").unwrap();
        assert!(matches!(rollback(dir.path()), Err(Refusal::NotOurs(_))));
        assert!(dir.path().join(HOOK).exists());
    }
}
