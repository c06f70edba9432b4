//! `row-fence keys add|list|remove` and `row-fence lane add|list|remove`: the operator's
//! acts on the key broker (ARCHITECTURE.md, "Key broker").
//!
//! Keys go to the running daemon over its control socket and live only in its memory
//! (gone when it stops); the daemon answers only its own uid, and this command sends a
//! key only to a socket in a directory no other uid can write. Lane bindings are a file
//! under the home that only the daemon's uid writes (0600 in a 0700 directory), changed
//! here under a lock, recorded in the audit log before it is written, and read again by
//! the daemon on request.

use row_fence_contract::client;
use row_fence_contract::descriptor::{self, DESCRIPTOR_FILE};
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{Answer, BrokerKey, KeysAdd, Op, PROTOCOL_VERSION, Request};
use row_fence_contract::report::out;
use row_fence_contract::{exit, paths, say};
use row_fence_resident::audit::{self, AuditRecord};
use row_fence_resident::broker::lanes::{self, Binding, Lanes};
use row_fence_resident::config::Settings;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zeroize::{Zeroize, Zeroizing};

/// How long a key or lane command waits for the daemon.
const DAEMON_MS: u64 = 5_000;

/// A key file or stdin is refused above this size (as the daemon refuses a key file).
const MAX_KEY_BYTES: u64 = 64 * 1024;

#[derive(clap::Args, Debug)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(clap::Subcommand, Debug)]
enum KeysCommand {
    /// Load a private key into the running daemon's memory (gone when it stops)
    Add(KeysAddArgs),
    /// List the keys the daemon holds (fingerprints, never key material)
    List(JsonArgs),
    /// Drop a key from the daemon's memory
    Remove(KeysRemoveArgs),
}

#[derive(clap::Args, Debug)]
struct KeysAddArgs {
    /// An unencrypted OpenSSH private key file (Ed25519 or RSA), the daemon's uid's with mode 600; `-` reads it from stdin
    file: PathBuf,
    /// A read key: signed for every peer, ALLOWED or not (the forge must let it only fetch)
    #[arg(long)]
    read: bool,
}

#[derive(clap::Args, Debug)]
struct KeysRemoveArgs {
    /// The key's fingerprint, `SHA256:…` as `row-fence keys list` prints it
    fingerprint: String,
}

#[derive(clap::Args, Debug)]
struct JsonArgs {
    /// Print a JSON array
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct LaneArgs {
    /// The bindings file [env: ROW_FENCE_BROKER_LANES] [default: $ROW_FENCE_HOME/broker/lanes.toml]
    #[arg(long, global = true, value_name = "FILE")]
    lanes: Option<PathBuf>,
    #[command(subcommand)]
    command: LaneCommand,
}

#[derive(clap::Subcommand, Debug)]
enum LaneCommand {
    /// Bind a uid to a lane and its worktree: the key broker signs for that uid as that lane
    Add(LaneAddArgs),
    /// List the bindings
    List(JsonArgs),
    /// Remove a lane's binding (by lane name or uid)
    Remove(LaneRemoveArgs),
    /// Make the running daemon read the bindings file again (after editing it by hand)
    Reload,
}

#[derive(clap::Args, Debug)]
struct LaneAddArgs {
    /// The lane's name (the descriptor must name the same lane)
    lane: String,
    /// The lane's user: a name or a numeric uid
    #[arg(long, value_name = "USER|UID")]
    uid: String,
    /// The lane's worktree; its descriptor is <git dir>/row-fence.json
    #[arg(long, value_name = "DIR")]
    worktree: PathBuf,
    /// The lane's descriptor, when it is not the worktree's <git dir>/row-fence.json
    #[arg(long, value_name = "PATH")]
    descriptor: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct LaneRemoveArgs {
    /// The lane's name, or its uid
    lane: String,
}

impl KeysArgs {
    /// True for `keys list`, whose output is its whole result.
    pub fn only_reads(&self) -> bool {
        matches!(self.command, KeysCommand::List(_))
    }
}

impl LaneArgs {
    /// True for `lane list`, whose output is its whole result.
    pub fn only_reads(&self) -> bool {
        matches!(self.command, LaneCommand::List(_))
    }
}

/// Runs a `keys` command.
pub fn keys(args: KeysArgs, settings: &Settings) -> Outcome {
    match args.command {
        KeysCommand::Add(add) => keys_add(add, settings),
        KeysCommand::List(list) => {
            let answer = ask(
                settings,
                &Request {
                    v: PROTOCOL_VERSION,
                    op: Op::KeysList,
                },
            )?;
            print_keys(answer.keys.as_deref().unwrap_or_default(), list.json);
            Ok(exit::ALLOWED)
        }
        KeysCommand::Remove(remove) => {
            let op = Op::KeysRemove {
                fingerprint: remove.fingerprint,
            };
            let answer = ask(
                settings,
                &Request {
                    v: PROTOCOL_VERSION,
                    op,
                },
            )?;
            say!("row-fence: {}", answer.detail);
            Ok(exit::ALLOWED)
        }
    }
}

fn keys_add(args: KeysAddArgs, settings: &Settings) -> Outcome {
    // This process holds the key too, briefly: no core file, no ptrace by its own uid.
    row_fence_resident::broker::harden()
        .map_err(|e| Failure::could_not(format!("cannot protect this process's memory: {e}")))?;
    let key = read_key(&args.file)?;
    let mut request = Request {
        v: PROTOCOL_VERSION,
        op: Op::KeysAdd(KeysAdd {
            key: key.to_string(),
            read: args.read,
        }),
    };
    let mut line = request.to_line();
    if let Op::KeysAdd(add) = &mut request.op {
        add.key.zeroize();
    }
    let answer = exchange(settings, &line);
    line.zeroize();
    let answer = answer?;
    say!(
        "row-fence: {} (held in the daemon's memory only: add it again after the daemon restarts)",
        answer.detail
    );
    Ok(exit::ALLOWED)
}

/// The key's text from `file` (the caller's own, private to it, as OpenSSH wants a
/// private key) or stdin (`-`).
fn read_key(file: &Path) -> Result<Zeroizing<String>, Failure> {
    let mut text = Zeroizing::new(String::new());
    if file == Path::new("-") {
        std::io::stdin()
            .take(MAX_KEY_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("cannot read the key from stdin: {e}")))?;
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let meta = opened
            .metadata()
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let uid = paths::euid();
        if meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(Failure::usage(format!(
                "{}: owned by uid {} with mode {:03o}; a private key must be uid {uid}'s with no group or other bits (chmod 600)",
                file.display(),
                meta.uid(),
                meta.mode() & 0o777
            )));
        }
        opened
            .take(MAX_KEY_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
    }
    if text.trim().is_empty() {
        return Err(Failure::usage(if file == Path::new("-") {
            "no key on stdin".to_string()
        } else {
            format!("{} is empty", file.display())
        }));
    }
    if text.len() as u64 > MAX_KEY_BYTES {
        return Err(Failure::usage(format!(
            "the key is over {MAX_KEY_BYTES} bytes: not a private key"
        )));
    }
    Ok(text)
}

fn print_keys(keys: &[BrokerKey], json: bool) {
    if json {
        out(&serde_json::to_string(keys).expect("keys serialize"));
        return;
    }
    if keys.is_empty() {
        out("the key broker holds no key");
        return;
    }
    out(&format!(
        "{:<52} {:<12} {:<5} COMMENT",
        "FINGERPRINT", "ALGORITHM", "KIND"
    ));
    for k in keys {
        out(&format!(
            "{:<52} {:<12} {:<5} {}",
            k.fingerprint, k.algorithm, k.kind, k.comment
        ));
    }
}

/// One request to the daemon; its `error` is the command's failure.
fn ask(settings: &Settings, request: &Request) -> Result<Answer, Failure> {
    exchange(settings, &request.to_line())
}

/// Sends `line` to the daemon's control socket once its directory is known to be only
/// this uid's: a key goes to no socket another uid could have put there.
fn exchange(settings: &Settings, line: &[u8]) -> Result<Answer, Failure> {
    let socket = &settings.socket;
    paths::check_socket_length(socket).map_err(Failure::could_not)?;
    paths::check_socket_dir(socket, paths::euid(), false).map_err(|e| {
        Failure::could_not(format!(
            "{e}; run this as the daemon's user (its socket's directory is that user's alone)"
        ))
    })?;
    let deadline = Instant::now() + Duration::from_millis(DAEMON_MS);
    let bytes = client::exchange_line(socket, line, deadline).map_err(|e| {
        Failure::could_not(format!(
            "no answer from the daemon on {}: {e}",
            socket.display()
        ))
    })?;
    let answer: Answer = serde_json::from_slice(&bytes)
        .map_err(|e| Failure::could_not(format!("the daemon's answer is not valid JSON: {e}")))?;
    if let Some(error) = answer.error {
        return Err(Failure::could_not(error));
    }
    if answer.verdict.is_some() {
        // A daemon that does not know the operation answers protocol_error.
        return Err(Failure::could_not(format!(
            "the daemon did not do it: {} (is it an older row-fence-resident?)",
            answer.detail
        )));
    }
    Ok(answer)
}

/// Runs a `lane` command.
pub fn lane(args: LaneArgs, settings: &Settings) -> Outcome {
    let path = args
        .lanes
        .or_else(|| {
            std::env::var_os("ROW_FENCE_BROKER_LANES")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| lanes::default_path(&settings.home));
    match args.command {
        LaneCommand::List(list) => {
            let lanes = load(&path)?;
            print_lanes(&lanes, list.json);
            Ok(exit::ALLOWED)
        }
        LaneCommand::Add(add) => {
            let binding = binding(&add)?;
            change(settings, &path, "lane add", |lanes| {
                let record = audit_of(&binding);
                lanes.add(binding.clone()).map_err(Failure::usage)?;
                Ok(record)
            })
        }
        LaneCommand::Reload => {
            let answer = ask(
                settings,
                &Request {
                    v: PROTOCOL_VERSION,
                    op: Op::LanesReload,
                },
            )?;
            say!("row-fence: {}", answer.detail);
            Ok(exit::ALLOWED)
        }
        LaneCommand::Remove(remove) => change(settings, &path, "lane remove", |lanes| {
            lanes
                .remove(&remove.lane)
                .map(|b| audit_of(&b))
                .ok_or_else(|| {
                    Failure::usage(format!(
                        "no lane {} is bound in {}",
                        remove.lane,
                        path.display()
                    ))
                })
        }),
    }
}

/// The binding `lane add` makes: the uid resolved, the worktree made absolute, the
/// descriptor found in its git dir.
fn binding(args: &LaneAddArgs) -> Result<Binding, Failure> {
    descriptor::validate_lane(&args.lane).map_err(Failure::usage)?;
    let uid = match args.uid.parse::<u32>() {
        Ok(uid) => uid,
        Err(_) => nix::unistd::User::from_name(&args.uid)
            .map_err(|e| Failure::could_not(format!("cannot look up user {}: {e}", args.uid)))?
            .ok_or_else(|| Failure::usage(format!("no user named {}", args.uid)))?
            .uid
            .as_raw(),
    };
    if uid == 0 || uid == paths::euid() {
        return Err(Failure::usage(format!(
            "uid {uid} is root or the daemon's own: a lane needs a uid of its own"
        )));
    }
    let worktree = std::fs::canonicalize(&args.worktree)
        .map_err(|e| Failure::usage(format!("the worktree {}: {e}", args.worktree.display())))?;
    let descriptor = match &args.descriptor {
        Some(path) if path.is_absolute() => path.clone(),
        Some(path) => {
            return Err(Failure::usage(format!(
                "the descriptor path {} is not absolute",
                path.display()
            )));
        }
        None => match descriptor::find_git_dir(&worktree) {
            Ok(Some(git_dir)) => git_dir.join(DESCRIPTOR_FILE),
            Ok(None) => {
                return Err(Failure::usage(format!(
                    "{} is in no git worktree (--descriptor names the descriptor otherwise)",
                    worktree.display()
                )));
            }
            Err(broken) => return Err(Failure::could_not(broken)),
        },
    };
    Ok(Binding {
        lane: Some(args.lane.clone()),
        uid,
        worktree: Some(worktree),
        descriptor,
    })
}

fn audit_of(binding: &Binding) -> AuditRecord {
    let mut record = AuditRecord::new("", paths::euid(), true);
    record.lane = binding.lane.clone();
    record.uid = Some(binding.uid);
    record.detail = format!("descriptor {}", binding.descriptor.display());
    record
}

/// Changes the bindings at `path` under its lock: read, change, audit, write (0600), then
/// ask the daemon to read them again. Nothing is written when the audit record cannot be.
fn change(
    settings: &Settings,
    path: &Path,
    act: &str,
    edit: impl FnOnce(&mut Lanes) -> Result<AuditRecord, Failure>,
) -> Outcome {
    own_home(settings)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Failure::could_not(format!("cannot create {}: {e}", dir.display())))?;
    }
    paths::check_socket_dir(path, paths::euid(), false).map_err(|e| {
        Failure::could_not(format!(
            "the bindings' directory is not the daemon's user's alone: {e}"
        ))
    })?;
    let lock_path = dir.join(".lanes.lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Failure::could_not(format!("{}: {e}", lock_path.display())))?;
    let _lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| Failure::could_not(format!("{}: {e}", lock_path.display())))?;
    let mut lanes = load(path)?;
    let mut record = edit(&mut lanes)?;
    record.act = act.to_string();
    audit::append(&settings.home, &record).map_err(|e| {
        Failure::could_not(format!(
            "the audit log cannot be written ({e}); nothing was changed"
        ))
    })?;
    row_fence_store::atomic_file::write(path, lanes.to_toml().as_bytes(), 0o600, true)
        .map_err(|e| Failure::could_not(format!("cannot write {}: {e}", path.display())))?;
    say!(
        "row-fence: {act} {}: {} lane bindings in {}",
        record.lane.as_deref().unwrap_or("?"),
        lanes.len(),
        path.display()
    );
    reload(settings, path);
    Ok(exit::ALLOWED)
}

/// Asks the daemon to read the bindings again; a daemon that is not running reads them
/// when it starts, so that is said, not failed. A daemon reading another file is named.
fn reload(settings: &Settings, path: &Path) {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::LanesReload,
    };
    match ask(settings, &request) {
        Ok(answer) if !answer.detail.ends_with(&format!(" {}", path.display())) => say!(
            "row-fence: warning: the daemon reads another bindings file ({}), not {}: set --lanes or ROW_FENCE_BROKER_LANES to the daemon's --broker-lanes",
            answer.detail,
            path.display()
        ),
        Ok(answer) => say!("row-fence: the daemon read them: {}", answer.detail),
        Err(failure) => say!(
            "row-fence: warning: the daemon did not read them ({}); it reads them when it starts",
            failure.message
        ),
    }
}

/// Bindings are the operator's act: only the home's owner (the daemon's user) changes
/// them, so the audit log and the file stay that user's.
fn own_home(settings: &Settings) -> Result<(), Failure> {
    if !settings.home.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&settings.home)
            .map_err(|e| {
                Failure::could_not(format!(
                    "cannot create the home {}: {e}",
                    settings.home.display()
                ))
            })?;
    }
    let meta = std::fs::metadata(&settings.home)
        .map_err(|e| Failure::could_not(format!("the home {}: {e}", settings.home.display())))?;
    let uid = paths::euid();
    if meta.uid() != uid {
        return Err(Failure::usage(format!(
            "the home {} is uid {}'s: run this as the daemon's user (uid {}), not uid {uid}",
            settings.home.display(),
            meta.uid(),
            meta.uid()
        )));
    }
    Ok(())
}

fn load(path: &Path) -> Result<Lanes, Failure> {
    if !path.exists() {
        return Ok(Lanes::default());
    }
    Lanes::load(path, paths::euid()).map_err(Failure::could_not)
}

fn print_lanes(lanes: &Lanes, json: bool) {
    if json {
        let all: Vec<&Binding> = lanes.bindings().collect();
        out(&serde_json::to_string(&all).expect("bindings serialize"));
        return;
    }
    if lanes.is_empty() {
        out("no lane is bound");
        return;
    }
    out(&format!(
        "{:<24} {:>8}  {:<40} DESCRIPTOR",
        "LANE", "UID", "WORKTREE"
    ));
    for b in lanes.bindings() {
        out(&format!(
            "{:<24} {:>8}  {:<40} {}",
            b.lane.as_deref().unwrap_or("-"),
            b.uid,
            b.worktree
                .as_ref()
                .map_or("-".to_string(), |w| w.display().to_string()),
            b.descriptor.display()
        ));
    }
}
