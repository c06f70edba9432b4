//! The configuration an allowlisted git command reads, checked before it may run in
//! quarantine (ARCHITECTURE.md, "Quarantine"): `-c` cannot neutralise a driver it does
//! not know by name, so the guard reads every scope (system, global, local, worktree,
//! `GIT_CONFIG_*`, includes) the way git will, with git itself, and allows only keys
//! known not to run a program when status/log/show/diff/branch/blame run. A key it does
//! not know denies.

use std::path::Path;
use std::process::{Command, Stdio};

/// Sections none of whose keys runs a program for the allowlisted subcommands (they are
/// read by commands the quarantine does not allow, such as fetch, push and commit).
const HARMLESS_SECTIONS: &[&str] = &[
    "user",
    "author",
    "committer",
    "init",
    "color",
    "column",
    "advice",
    "help",
    "i18n",
    "remote",
    "branch",
    "push",
    "pull",
    "fetch",
    "rebase",
    "rerere",
    "gc",
    "pack",
    "index",
    "feature",
    "maintenance",
    "extensions",
    "safe",
    "protocol",
    "http",
    "url",
    "credential",
    "commit",
    "tag",
    "format",
    "blame",
    "grep",
    "alias",
    "include",
    "includeif",
    "gui",
    "sendemail",
    "am",
    "apply",
    "status",
    "gpg",
    "transfer",
    "receive",
    "uploadpack",
    "submodule",
    "clone",
    "checkout",
    "worktree",
    "stash",
    "notes",
    "versionsort",
    "mailmap",
    "sequence",
    "merge",
    "diff",
    "log",
    "core",
];

/// Keys of `core` that run nothing (`core.pager`, `core.fsmonitor` with a hook,
/// `core.hooksPath`… are not here).
const CORE_KEYS: &[&str] = &[
    "repositoryformatversion",
    "filemode",
    "bare",
    "logallrefupdates",
    "ignorecase",
    "precomposeunicode",
    "symlinks",
    "autocrlf",
    "eol",
    "safecrlf",
    "quotepath",
    "abbrev",
    "editor",
    "excludesfile",
    "attributesfile",
    "untrackedcache",
    "splitindex",
    "commitgraph",
    "multipackindex",
    "whitespace",
    "compression",
    "worktree",
    "sparsecheckout",
    "sparsecheckoutcone",
    "checkstat",
    "trustctime",
    "preloadindex",
    "fscache",
    "longpaths",
    "sshcommand",
    "askpass",
    "packedgitlimit",
    "packedgitwindowsize",
    "deltabasecachelimit",
    "bigfilethreshold",
    "filesreflocklimit",
    "warnambiguousrefs",
    "notesref",
    "sharedrepository",
    "hidedotfiles",
    "createobject",
    "fsyncmethod",
    "fsync",
];

/// Why a key denies, if it does: `None` for a key known to run nothing here.
pub fn key_denies(key: &str, value: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    let parts: Vec<&str> = lower.splitn(2, '.').collect();
    let (section, rest) = match parts.as_slice() {
        [s, r] => (*s, *r),
        _ => {
            return Some(format!(
                "`{key}` is not a configuration key the guard knows"
            ));
        }
    };
    let var = rest.rsplit('.').next().unwrap_or(rest);
    let has_subsection = rest.contains('.');
    let runs = match section {
        s if !HARMLESS_SECTIONS.contains(&s) => true,
        "core" => match var {
            "fsmonitor" => !matches!(
                value.to_ascii_lowercase().as_str(),
                "false" | "true" | "0" | "1" | "no" | "yes" | "off" | "on" | ""
            ),
            v => has_subsection || !CORE_KEYS.contains(&v),
        },
        // Drivers (`diff.NAME.command`, `diff.NAME.textconv`, `merge.NAME.driver`) and
        // the external diff run programs; the two-part settings do not.
        "diff" => has_subsection || var == "external",
        "merge" => has_subsection,
        // `gpg.program` and `gpg.<format>.program` run whenever git verifies a
        // signature (`--show-signature`, the `%G` placeholders of `--format`): only the
        // settings that name no program are known to run nothing.
        "gpg" => !matches!(
            rest,
            "format" | "mintrustlevel" | "ssh.allowedsignersfile" | "ssh.revocationfile"
        ),
        // `log.showSignature` runs gpg for every commit shown.
        "log" => {
            var == "showsignature"
                && !matches!(
                    value.to_ascii_lowercase().as_str(),
                    "false" | "0" | "no" | "off"
                )
        }
        _ => false,
    };
    runs.then(|| format!("`{key}` may run a program when git reads this repository"))
}

/// Reads the configuration git will use in `dir` and returns why it denies, if it does.
/// Could not read it: denied (fail closed).
pub fn check(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!(
            "git would run in {}, which does not exist",
            dir.display()
        ));
    }
    let out = Command::new("git")
        .args(["config", "--list", "--includes", "-z"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("the guard cannot read git's configuration ({e})"))?;
    // Exit 1 with no output: no configuration at all.
    if !out.status.success() && !out.stdout.is_empty() {
        return Err("the guard cannot read git's configuration".into());
    }
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        if let Some(why) = key_denies(key, value) {
            return Err(why);
        }
    }
    // Submodules are read with their own configuration, and hooks run on an index
    // refresh: neither is read here, so both deny.
    let top = Command::new("git")
        .args(["rev-parse", "--show-toplevel", "--git-path", "hooks"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("the guard cannot ask git where the repository is ({e})"))?;
    let text = String::from_utf8_lossy(&top.stdout);
    let mut lines = text.lines();
    if let Some(top) = lines.next()
        && Path::new(top).join(".gitmodules").exists()
    {
        return Err(
            "the repository has submodules, whose configuration the guard does not read".into(),
        );
    }
    if let Some(hooks) = lines.next() {
        let hooks = dir.join(hooks);
        if hooks.join("post-index-change").exists() {
            return Err("the repository has a post-index-change hook, which a read may run".into());
        }
    }
    // A gitlink in the index is a submodule whether or not `.gitmodules` names it:
    // `git status` and `git diff` run `git status` inside it, with that repository's own
    // configuration (its fsmonitor, its hooks), which the read above never saw.
    if has_gitlink(dir)? {
        return Err(
            "the index holds a submodule (a gitlink), whose configuration the guard does not read"
                .into(),
        );
    }
    Ok(())
}

/// Whether the index of the repository holding `dir` has an entry of mode 160000 (a
/// gitlink). Could not read the index: an error (fail closed).
fn has_gitlink(dir: &Path) -> Result<bool, String> {
    let out = Command::new("git")
        .args(["ls-files", "--stage", "-z"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("the guard cannot read git's index ({e})"))?;
    if !out.status.success() {
        return Err("the guard cannot read git's index".into());
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .any(|entry| entry.starts_with(b"160000 ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_run_programs_deny_and_everyday_keys_do_not() {
        for (key, value) in [
            ("core.fsmonitor", "./x.sh"),
            ("core.pager", "sh -c x"),
            ("pager.log", "x"),
            ("diff.external", "x"),
            ("diff.foo.textconv", "x"),
            ("diff.foo.command", "x"),
            ("filter.lfs.clean", "git-lfs clean -- %f"),
            ("merge.foo.driver", "x"),
            ("core.hooksPath", "hooks"),
            ("trace2.eventTarget", "af_unix:/tmp/s"),
            ("log.showSignature", "true"),
            ("gpg.program", "x"),
            ("gpg.openpgp.program", "x"),
            ("gpg.ssh.program", "x"),
            ("gpg.x509.program", "x"),
            ("gpg.ssh.defaultKeyCommand", "x"),
            ("interactive.diffFilter", "x"),
            ("core.alternateRefsCommand", "x"),
            ("novel.key", "x"),
        ] {
            assert!(key_denies(key, value).is_some(), "{key}={value}");
        }
        for (key, value) in [
            ("user.name", "t"),
            ("core.bare", "false"),
            ("core.fsmonitor", "false"),
            ("remote.origin.url", "/x"),
            ("branch.main.remote", "origin"),
            ("diff.mnemonicPrefix", "true"),
            ("credential.helper", "store"),
            ("core.sshCommand", "row-fence-ssh"),
            ("log.showSignature", "false"),
            ("gpg.format", "ssh"),
            ("gpg.ssh.allowedSignersFile", "/x"),
            ("includeIf.gitdir:/x/.path", "/y"),
        ] {
            assert_eq!(key_denies(key, value), None, "{key}={value}");
        }
    }
}
