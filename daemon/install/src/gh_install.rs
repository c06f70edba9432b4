//! `row-fence install gh`: a lane's gh sends every API request to the daemon's forge API
//! socket (ARCHITECTURE.md, "Forge API"). It writes the lane's gh `config.yml` with a
//! top-level `http_unix_socket` (appended to what is there) and its `hosts.yml` with a
//! per-lane placeholder token (replacing what is there: a real token left in a lane's file
//! is a route around the fence), and registers the lane, its repository and the
//! placeholder's hash in the daemon's `forge-api/lanes.toml`. What the two files held
//! before is kept under the home (`forge-api/installed/`, the operator's, 0600), and
//! `--rollback` writes it back byte for byte (removing a file install created), only while
//! the files still hold what install wrote. This is wiring, not the boundary: in the
//! hard mode the daemon names the lane by its uid, and a lane that drops the wiring holds
//! no token to reach the forge with.

use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::lease_token::LeaseToken;
use row_fence_contract::report::out;
use row_fence_contract::{paths, say};
use row_fence_resident::config::Settings;
use row_fence_resident::forge_api::lanes::{self, ForgeLane, ForgeLanes, placeholder_hash};
use row_fence_store::atomic_file::write_private;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The placeholder tokens' prefix: it names no forge's token format, so no scanner or
/// forge mistakes it for a real one.
pub const PLACEHOLDER_PREFIX: &str = "rowfence_placeholder_";

#[derive(clap::Args, Debug)]
pub struct GhArgs {
    /// The lane (its descriptor must name it)
    #[arg(long)]
    lane: String,
    /// The row's repository, owner/name: the only one the lane's writes may touch
    #[arg(long, value_name = "OWNER/NAME", required_unless_present = "rollback")]
    repo: Option<String>,
    /// The lane's gh config directory [default: $GH_CONFIG_DIR, else ~/.config/gh]
    #[arg(long, value_name = "DIR")]
    gh_config_dir: Option<PathBuf>,
    /// The daemon's forge API socket (row-fence-resident --forge-api-socket) [env: ROW_FENCE_FORGE_API_SOCKET]
    #[arg(long, value_name = "PATH")]
    forge_api_socket: Option<PathBuf>,
    /// The forge host gh knows the repository under [default: github.com]
    #[arg(long, value_name = "HOST", default_value = "github.com")]
    forge_host: String,
    /// Same-uid mode: the lane's descriptor, read by the daemon at every write of the lane's placeholder
    #[arg(long, value_name = "PATH")]
    descriptor: Option<PathBuf>,
    /// Take it out: the two files back byte for byte, the registration removed
    #[arg(long)]
    rollback: bool,
}

/// What install wrote, and what was there before, for one gh config directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Installed {
    lane: String,
    config_dir: PathBuf,
    files: Vec<FileState>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileState {
    path: PathBuf,
    /// The bytes before install (`None`: install created the file).
    before: Option<Vec<u8>>,
    /// The bytes install wrote.
    after: Vec<u8>,
}

/// What the command did, for `--json`.
#[derive(Serialize)]
struct Done {
    lane: String,
    action: &'static str,
    config: PathBuf,
    hosts: PathBuf,
    socket: Option<PathBuf>,
}

/// Runs `install gh`.
pub fn run(args: GhArgs, settings: &Settings, json: bool) -> Outcome {
    let config_dir = match &args.gh_config_dir {
        Some(dir) => dir.clone(),
        None => default_config_dir()?,
    };
    if !config_dir.is_absolute() {
        return Err(Failure::usage(format!(
            "--gh-config-dir {} must be absolute",
            config_dir.display()
        )));
    }
    let record = record_path(&settings.home, &config_dir);
    let done = if args.rollback {
        rollback(&args, settings, &config_dir, &record)?
    } else {
        install(&args, settings, &config_dir, &record)?
    };
    if json {
        out(&serde_json::to_string(&done).expect("serializes"));
    }
    Ok(exit::ALLOWED)
}

fn default_config_dir() -> Result<PathBuf, Failure> {
    if let Some(dir) = std::env::var_os("GH_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Failure::usage("no HOME: give --gh-config-dir"))?;
    Ok(PathBuf::from(home).join(".config").join("gh"))
}

/// `<home>/forge-api/installed/<sha256 of the config dir>.json`.
fn record_path(home: &Path, config_dir: &Path) -> PathBuf {
    let key = placeholder_hash(&config_dir.to_string_lossy());
    home.join("forge-api")
        .join("installed")
        .join(format!("{}.json", &key[..32]))
}

fn could_not(what: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::could_not(format!("{}: {e}", what.display()))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, Failure> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(could_not(path, e)),
    }
}

fn install(
    args: &GhArgs,
    settings: &Settings,
    config_dir: &Path,
    record: &Path,
) -> Result<Done, Failure> {
    let repo = args.repo.clone().unwrap_or_default();
    if !lanes::valid_repo(&repo) {
        return Err(Failure::usage(format!("--repo {repo:?} is not owner/name")));
    }
    if record.exists() {
        return Err(Failure::usage(format!(
            "gh in {} is already wired (row-fence install gh --lane {} --rollback first)",
            config_dir.display(),
            args.lane
        )));
    }
    let socket = row_fence_resident::config::flag_or_env(
        &args.forge_api_socket,
        "ROW_FENCE_FORGE_API_SOCKET",
    )
    .ok_or_else(|| Failure::usage("name the daemon's forge API socket: --forge-api-socket"))?;
    if !socket.is_absolute() || socket.to_str().is_none_or(|s| !yaml_plain(s)) {
        return Err(Failure::usage(format!(
            "the socket {} must be an absolute path of letters, digits and / . _ - only",
            socket.display()
        )));
    }
    if !yaml_plain(&args.lane) {
        return Err(Failure::usage(format!("--lane {:?}", args.lane)));
    }
    if !yaml_plain(&args.forge_host) {
        return Err(Failure::usage(format!(
            "--forge-host {:?}",
            args.forge_host
        )));
    }
    if let Some(d) = &args.descriptor
        && !d.is_absolute()
    {
        return Err(Failure::usage("--descriptor must be absolute"));
    }
    let placeholder = format!(
        "{PLACEHOLDER_PREFIX}{}",
        LeaseToken::generate()
            .map_err(|e| Failure::could_not(format!("no randomness: {e}")))?
            .expose()
    );
    // The registration first: a lane wired to a placeholder the daemon does not know is
    // refused every request, which is the safe half-done state.
    let lanes_path = lanes::default_path(&settings.home);
    let mut registered = ForgeLanes::load(&lanes_path, paths::euid())
        .map_err(|e| Failure::could_not(e.to_string()))?;
    if registered.by_lane(&args.lane).is_some() {
        return Err(Failure::usage(format!(
            "lane {} is already registered in {}",
            args.lane,
            lanes_path.display()
        )));
    }
    registered.lane.push(ForgeLane {
        lane: args.lane.clone(),
        repo,
        placeholder_sha256: Some(placeholder_hash(&placeholder)),
        descriptor: args.descriptor.clone(),
    });
    write_home_file(&lanes_path, registered.to_toml().as_bytes())?;

    let config = config_dir.join("config.yml");
    let hosts = config_dir.join("hosts.yml");
    let config_before = read_optional(&config)?;
    let hosts_before = read_optional(&hosts)?;
    if let Some(before) = &config_before
        && String::from_utf8_lossy(before)
            .lines()
            .any(|l| l.starts_with("http_unix_socket:"))
    {
        return Err(Failure::usage(format!(
            "{} already names an http_unix_socket: take it out first",
            config.display()
        )));
    }
    let mut config_after = config_before.clone().unwrap_or_default();
    if !config_after.is_empty() && !config_after.ends_with(b"\n") {
        config_after.push(b'\n');
    }
    config_after.extend_from_slice(
        format!(
            "# row-fence install gh: every API request goes to the daemon's forge API\nhttp_unix_socket: {}\n",
            socket.display()
        )
        .as_bytes(),
    );
    let hosts_after = format!(
        "# row-fence install gh: a placeholder, not a token; the daemon holds the real one\n{}:\n    oauth_token: {placeholder}\n    user: {}\n    git_protocol: https\n",
        args.forge_host, args.lane
    )
    .into_bytes();
    let installed = Installed {
        lane: args.lane.clone(),
        config_dir: config_dir.to_path_buf(),
        files: vec![
            FileState {
                path: config.clone(),
                before: config_before,
                after: config_after,
            },
            FileState {
                path: hosts.clone(),
                before: hosts_before,
                after: hosts_after,
            },
        ],
    };
    let text = serde_json::to_vec_pretty(&installed).expect("serializes");
    write_home_file(record, &text)?;
    let owner = owner_of_nearest(config_dir);
    let made: Vec<PathBuf> = config_dir
        .ancestors()
        .take_while(|d| !d.exists())
        .map(Path::to_path_buf)
        .collect();
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(config_dir)
        .map_err(|e| could_not(config_dir, e))?;
    for dir in &made {
        give_to_lane(dir, owner)?;
    }
    for file in &installed.files {
        write_lanes_file(&file.path, &file.after, owner)?;
    }
    say!(
        "row-fence: gh in {} sends its API requests to {} as lane {} (rollback: row-fence install gh --lane {} --gh-config-dir {} --rollback)",
        config_dir.display(),
        socket.display(),
        args.lane,
        args.lane,
        config_dir.display()
    );
    Ok(Done {
        lane: args.lane.clone(),
        action: "installed",
        config,
        hosts,
        socket: Some(socket),
    })
}

fn rollback(
    args: &GhArgs,
    settings: &Settings,
    config_dir: &Path,
    record: &Path,
) -> Result<Done, Failure> {
    let config = config_dir.join("config.yml");
    let hosts = config_dir.join("hosts.yml");
    if let Some(bytes) = read_optional(record)? {
        let installed: Installed =
            serde_json::from_slice(&bytes).map_err(|e| could_not(record, e))?;
        if installed.lane != args.lane {
            return Err(Failure::usage(format!(
                "gh in {} is wired for lane {}, not {}",
                config_dir.display(),
                installed.lane,
                args.lane
            )));
        }
        for file in &installed.files {
            let now = read_optional(&file.path)?;
            if now.as_deref() != Some(file.after.as_slice()) {
                return Err(Failure::could_not(format!(
                    "{} changed since install: not rolled back (compare it with {})",
                    file.path.display(),
                    record.display()
                )));
            }
        }
        for file in &installed.files {
            match &file.before {
                Some(before) => write_lanes_file(&file.path, before, owner_of_nearest(config_dir))?,
                None => fs::remove_file(&file.path).map_err(|e| could_not(&file.path, e))?,
            }
        }
        fs::remove_file(record).map_err(|e| could_not(record, e))?;
    }
    let lanes_path = lanes::default_path(&settings.home);
    let mut registered = ForgeLanes::load(&lanes_path, paths::euid())
        .map_err(|e| Failure::could_not(e.to_string()))?;
    let before = registered.lane.len();
    registered.lane.retain(|l| l.lane != args.lane);
    if registered.lane.len() != before {
        write_home_file(&lanes_path, registered.to_toml().as_bytes())?;
    }
    say!(
        "row-fence: gh in {} is no longer wired to the forge API; lane {} is not registered",
        config_dir.display(),
        args.lane
    );
    Ok(Done {
        lane: args.lane.clone(),
        action: "rolled back",
        config,
        hosts,
        socket: None,
    })
}

/// The owner of `dir` or of its nearest existing ancestor: whose the lane's gh files are.
fn owner_of_nearest(dir: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    dir.ancestors()
        .find_map(|d| fs::metadata(d).ok())
        .map(|m| (m.uid(), m.gid()))
}

/// Writes one of the lane's gh files (0600), and, when this runs as root for a lane of
/// another uid (the hard mode), gives it to the owner of the nearest directory that was
/// there, as the directories install made, so the lane's gh can read it.
fn write_lanes_file(path: &Path, bytes: &[u8], owner: Option<(u32, u32)>) -> Result<(), Failure> {
    write_private(path, bytes).map_err(|e| could_not(path, e))?;
    give_to_lane(path, owner)
}

/// Chowns `path` to `owner` when this runs as root and the owner is another uid.
fn give_to_lane(path: &Path, owner: Option<(u32, u32)>) -> Result<(), Failure> {
    match owner {
        Some((uid, gid)) if paths::euid() == 0 && uid != 0 => {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| could_not(path, e))
        }
        _ => Ok(()),
    }
}

/// Writes a file under the home (its directory created 0700).
fn write_home_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| could_not(dir, e))?;
    }
    write_private(path, bytes).map_err(|e| could_not(path, e))
}

/// A YAML plain scalar that needs no quoting: letters, digits, `/ . _ -`.
fn yaml_plain(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
}
