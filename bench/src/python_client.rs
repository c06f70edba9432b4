//! The Python cold client: the kind of cold client the daemon replaces. A venv the bench
//! makes once (`python3 -m venv`, then `pip install redis`) and reuses while it imports;
//! a script that imports `redis`, connects, runs the ask script with `EVALSHA` and exits
//! 0 on `allowed`. When the venv cannot be made or pip cannot install, the case is
//! skipped and the report says why.

use crate::capture::AskScript;
use crate::children::Owned;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// pip gets this long to install `redis` before the case is skipped.
const INSTALL_LIMIT: Duration = Duration::from_secs(240);

const SCRIPT: &str = r#"# row-fence bench: one cold ask through the Python redis client.
# argv: URL SHA NUMKEYS KEYS... ARGS...
import sys
import redis

url, sha, numkeys, keys_and_args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
client = redis.Redis.from_url(url)
outcome = client.evalsha(sha, numkeys, *keys_and_args)[0]
outcome = outcome.decode() if isinstance(outcome, bytes) else str(outcome)
print(outcome)
sys.exit(0 if outcome == "allowed" else 3)
"#;

/// A ready Python client.
#[derive(Clone, Debug)]
pub struct PythonClient {
    /// The venv's interpreter.
    pub python: PathBuf,
    /// The script.
    pub script: PathBuf,
    /// "Python 3.x.y, redis-py a.b.c", for the report.
    pub version: String,
}

impl PythonClient {
    /// Makes (or reuses) the venv at `venv` and writes the script into `work`.
    pub fn prepare(venv: &Path, work: &Path) -> Result<PythonClient, String> {
        let python = venv.join("bin/python");
        if version(&python).is_err() {
            make_venv(venv)?;
        }
        let version = version(&python)?;
        let script = work.join("ask.py");
        std::fs::write(&script, SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
        Ok(PythonClient {
            python,
            script,
            version,
        })
    }

    /// The command for one ask against `url` (`redis+unix://` is passed as `unix://`).
    pub fn command(&self, url: &str, ask: &AskScript, env: &[(String, OsString)]) -> Command {
        let url = match url.strip_prefix("redis+unix://") {
            Some(path) => format!("unix://{path}"),
            None => url.to_string(),
        };
        let mut cmd = Command::new(&self.python);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg(&self.script)
            .arg(url)
            .arg(&ask.sha)
            .arg(ask.keys.len().to_string())
            .args(&ask.keys)
            .args(&ask.args);
        cmd
    }
}

fn version(python: &Path) -> Result<String, String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys, redis; print('Python %d.%d.%d, redis-py %s' % (sys.version_info[:3] + (redis.__version__,)))",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn make_venv(venv: &Path) -> Result<(), String> {
    eprintln!(
        "row-fence-bench: making the Python venv {} (pip install redis)",
        venv.display()
    );
    let _ = std::fs::remove_dir_all(venv);
    run_bounded(
        Command::new("python3").args(["-m", "venv"]).arg(venv),
        "python3 -m venv",
    )?;
    run_bounded(
        Command::new(venv.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "redis",
        ]),
        "pip install redis",
    )
}

/// Runs `cmd` to completion within [`INSTALL_LIMIT`], stopping early on Ctrl-C.
fn run_bounded(cmd: &mut Command, what: &str) -> Result<(), String> {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = Owned::spawn(cmd, what, Duration::from_secs(2))?;
    let until = Instant::now() + INSTALL_LIMIT;
    loop {
        match child.exited()? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("{what} failed: {status}")),
            None if Instant::now() >= until => {
                return Err(format!("{what} took over {INSTALL_LIMIT:?}"));
            }
            None => {
                crate::interrupt::check()?;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}
