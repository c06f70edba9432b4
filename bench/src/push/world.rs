//! The private world the push case pushes in: the run's environment for every git and
//! row-fence process (its own HOME, no agent, no inherited git or TLS settings, the
//! helper on PATH), the clones of each arm, one commit and one push.

use crate::local::{io, stdout_of};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The run's temp dir, the binaries under test and the direct ssh arm's command.
pub struct World {
    /// The run's temp dir: HOME, TMPDIR and the daemon's home are under it.
    pub root: PathBuf,
    /// Where `row-fence`, `row-fence-resident` and `git-remote-row-fence` are.
    pub bin_dir: PathBuf,
    /// The ssh command of the direct ssh arm (the same key the daemon holds); the other
    /// arms never run ssh.
    pub ssh: String,
}

impl World {
    /// A command with the run's environment: its own HOME, no agent, the helper on PATH,
    /// nothing of the caller's (`GIT_SSL_CAINFO` and the like would change what git trusts).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", &self.root)
            .env("TMPDIR", &self.root)
            .env("ROW_FENCE_HOME", self.root.join("home"))
            .env("ROW_FENCE_STORE", "file")
            .env("ROW_FENCE_PUSH_SOCKET", self.root.join("push.sock"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .stdin(Stdio::null());
        cmd
    }

    /// A program of the binaries under test, with the run's environment.
    pub fn ours(&self, program: &str) -> Command {
        self.command(&self.bin_dir.join(program).display().to_string())
    }

    /// `git ARGS` in `dir`; its stdout, or `Err` with its stderr.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Result<String, String> {
        let what = format!("git {args:?} in {}", dir.display());
        stdout_of(self.command("git").current_dir(dir).args(args), &what)
    }

    /// A bare repository at `bare` and a clone at `clone` whose `origin` is `remote`.
    pub fn repository(&self, bare: &Path, clone: &Path, remote: &str) -> Result<(), String> {
        let text = |p: &Path| p.display().to_string();
        self.git(
            &self.root,
            &["init", "-q", "--bare", "-b", "main", &text(bare)],
        )?;
        self.git(&self.root, &["init", "-q", "-b", "main", &text(clone)])?;
        self.git(clone, &["remote", "add", "origin", remote])?;
        Ok(())
    }

    /// One new commit in `clone` (untimed), with `bytes` of content when given.
    pub fn commit(&self, clone: &Path, i: usize, bytes: Option<&[u8]>) -> Result<(), String> {
        match bytes {
            Some(bytes) => fs::write(clone.join("large.bin"), bytes).map_err(io("large.bin"))?,
            None => fs::write(clone.join("file.txt"), format!("{i}\n")).map_err(io("file.txt"))?,
        }
        self.git(clone, &["add", "-A"])?;
        self.git(clone, &["commit", "-q", "-m", &format!("commit {i}")])?;
        Ok(())
    }

    /// The push of `clone`'s main, as timed: what the clone's remote and config say.
    pub fn push(&self, clone: &Path) -> Command {
        let mut cmd = self.command("git");
        cmd.current_dir(clone)
            .env("GIT_SSH_COMMAND", &self.ssh)
            .args(["push", "-q", "origin", "HEAD:refs/heads/main"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// One push of `clone`, checked: `Err` with git's stderr and the daemon's log.
    pub fn push_checked(&self, clone: &Path, what: &str) -> Result<(), String> {
        let out = self.push(clone).output().map_err(io("a push"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} from {} failed: {}; daemon log: {}",
                clone.display(),
                String::from_utf8_lossy(&out.stderr).trim(),
                fs::read_to_string(self.root.join("daemon.log")).unwrap_or_default()
            ))
        }
    }
}
