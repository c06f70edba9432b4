//! `row-fence render launchd|systemd`: prints (or writes) the job that runs the daemon
//! under the service manager, with this program's settings (home, store, socket, key
//! prefix) baked in.

use crate::deploy::{self, DEFAULT_LABEL, Job, JobSpec};
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use row_fence_store::StoreSpec;
use row_fence_store::atomic_file::write_private;
use row_fence_store::redis::DEFAULT_KEY_PREFIX;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// The service manager: launchd (macOS) or systemd (Linux)
    #[arg(value_enum)]
    job: Job,
    #[command(flatten)]
    spec: JobArgs,
    /// Write the job here (mode 0600: it may hold the store's password) instead of printing it
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// Print {"job","label","path","text"} as one JSON object (path: where it was written, or null)
    #[arg(long)]
    json: bool,
}

/// The flags that describe a job (shared with `install launchd|systemd`).
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// The launchd label and systemd unit name
    #[arg(long, default_value = DEFAULT_LABEL, value_name = "L")]
    pub label: String,
    /// The directory holding row-fence-resident (and the row-fence-ask the hooks run) [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// More environment for the daemon, e.g. RUST_LOG=info or PATH=… (repeatable)
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
}

impl JobArgs {
    /// The job these flags and `settings` describe.
    pub fn spec(&self, settings: &Settings) -> Result<JobSpec, Failure> {
        let mut env = Vec::new();
        // A socket or key prefix the operator set must reach the daemon too.
        if settings.socket != settings.home.join("sock") {
            env.push((
                "ROW_FENCE_SOCKET".to_string(),
                settings.socket.display().to_string(),
            ));
        }
        if settings.key_prefix != DEFAULT_KEY_PREFIX {
            env.push((
                "ROW_FENCE_KEY_PREFIX".to_string(),
                settings.key_prefix.clone(),
            ));
        }
        env.extend(self.env.iter().cloned());
        Ok(JobSpec {
            label: self.label.clone(),
            bin_dir: bin_dir(self.bin_dir.as_ref())?,
            home: settings.home.clone(),
            store: store_spelling(&settings.store)?,
            env,
        })
    }
}

pub fn run(args: RenderArgs, settings: &Settings) -> Outcome {
    let spec = args.spec.spec(settings)?;
    if !spec.resident().is_file() {
        say!(
            "row-fence: warning: {} does not exist (yet); the job runs that path",
            spec.resident().display()
        );
    }
    let text = deploy::render(args.job, &spec).map_err(Failure::could_not)?;
    if let Some(path) = &args.out {
        write_private(path, text.as_bytes())
            .map_err(|e| Failure::could_not(format!("cannot write {}: {e}", path.display())))?;
        say!("row-fence: wrote {}", path.display());
    }
    if args.json {
        out(&serde_json::json!({
            "job": clap::ValueEnum::to_possible_value(&args.job).map(|v| v.get_name().to_string()),
            "label": spec.label,
            "path": args.out.as_ref().map(|p| p.display().to_string()),
            "text": text,
        })
        .to_string());
    } else if args.out.is_none() {
        out(text.trim_end_matches('\n'));
    }
    Ok(exit::ALLOWED)
}

/// `--bin-dir`, else the directory of this very program (an installed `row-fence` sits
/// next to the daemon and the asker), made absolute.
pub fn bin_dir(flag: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    let dir = match flag {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(PathBuf::from))
            .ok_or_else(|| {
                Failure::could_not("cannot find this program's directory; give --bin-dir")
            })?,
    };
    std::path::absolute(&dir).map_err(|e| Failure::could_not(format!("{}: {e}", dir.display())))
}

/// `ROW_FENCE_STORE` as the daemon must read it; a relative `file:DIR` is made absolute
/// (the job does not start in this directory).
fn store_spelling(store: &StoreSpec) -> Result<String, Failure> {
    Ok(match store {
        StoreSpec::File(None) => "file".to_string(),
        StoreSpec::File(Some(dir)) => {
            let dir = std::path::absolute(dir)
                .map_err(|e| Failure::could_not(format!("{}: {e}", dir.display())))?;
            format!("file:{}", dir.display())
        }
        StoreSpec::Redis(url) | StoreSpec::Etcd(url) => url.clone(),
    })
}

/// An `--env` value without `=` (clap prints it as a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not NAME=VALUE")]
pub struct NotAssignment(pub String);

fn parse_env(text: &str) -> Result<(String, String), NotAssignment> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| NotAssignment(text.to_string()))
}
