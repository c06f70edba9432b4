//! `row-fence lane add|list|remove|reload`: which uid is which lane for the key broker
//! (ARCHITECTURE.md, "Key broker"). The bindings are a file under the home that only the
//! daemon's uid writes (0600 in a 0700 directory), changed here under a lock, recorded in
//! the audit log before it is written, and read again by the daemon on request.

use crate::keys::{JsonArgs, ask};
use row_fence_contract::descriptor::{self, DESCRIPTOR_FILE};
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{Op, PROTOCOL_VERSION, Request};
use row_fence_contract::report::out;
use row_fence_contract::{exit, paths, say};
use row_fence_resident::audit::{self, AuditRecord};
use row_fence_resident::broker::lanes::{self, Binding, Lanes};
use row_fence_resident::broker::writable::Principal;
use row_fence_resident::config::Settings;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

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
    /// Bind a uid to a lane, its worktree and its lease: the key broker signs for that uid as that lane, for that lease only
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
    /// The board of the lease the lane acts for (with --row): a descriptor naming another lease is refused. Needed unless the descriptor is where the lane's uid cannot change it
    #[arg(long, value_name = "BOARD", requires = "row")]
    board: Option<String>,
    /// The row of that lease (with --board)
    #[arg(long, value_name = "ROW", requires = "board")]
    row: Option<String>,
}

#[derive(clap::Args, Debug)]
struct LaneRemoveArgs {
    /// The lane's name, or its uid
    lane: String,
}

impl LaneArgs {
    /// True for `lane list`, whose output is its whole result.
    pub fn only_reads(&self) -> bool {
        matches!(self.command, LaneCommand::List(_))
    }
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
                lanes
                    .add(binding.clone())
                    .map_err(|e| Failure::usage(e.to_string()))?;
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
    let descriptor = real_directory(&descriptor)?;
    if let Some(board) = &args.board {
        descriptor::validate_board(board).map_err(Failure::usage)?;
    }
    if let Some(row) = &args.row {
        descriptor::validate_row(row).map_err(Failure::usage)?;
    }
    if args.board.is_none() {
        unpinned_descriptor_is_out_of_reach(&descriptor, uid)?;
    }
    Ok(Binding {
        lane: Some(args.lane.clone()),
        uid,
        worktree: Some(worktree),
        descriptor,
        board: args.board.clone(),
        row: args.row.clone(),
    })
}

/// The descriptor's path with its directory's symbolic links resolved now, by the
/// operator: the daemon follows none when it reads a bound descriptor (ARCHITECTURE.md,
/// "Key broker"), so a path through one (macOS's `/tmp`, a linked directory) would never
/// be read.
fn real_directory(descriptor: &Path) -> Result<PathBuf, Failure> {
    let (Some(dir), Some(name)) = (descriptor.parent(), descriptor.file_name()) else {
        return Err(Failure::usage(format!(
            "the descriptor path {} names no file",
            descriptor.display()
        )));
    };
    let dir = std::fs::canonicalize(dir).map_err(|e| {
        Failure::usage(format!("the descriptor's directory {}: {e}", dir.display()))
    })?;
    Ok(dir.join(name))
}

/// A binding that names no lease stands only on a descriptor the lane cannot change:
/// otherwise the lane could make it name another lease (ARCHITECTURE.md, "Key broker").
/// The daemon checks it again at every read; this says so before anything is written.
fn unpinned_descriptor_is_out_of_reach(descriptor: &Path, uid: u32) -> Result<(), Failure> {
    let lane = Principal::of(uid);
    // The descriptor may not exist yet (granted later): its directory decides then.
    let target = if descriptor.exists() {
        descriptor
    } else {
        descriptor.parent().unwrap_or(Path::new("/"))
    };
    match lane.can_change(target) {
        Ok(None) => Ok(()),
        Ok(Some(reach)) => Err(Failure::usage(format!(
            "{} can change the descriptor {} (through {reach}): name the lease it acts for with --board and --row, or keep its descriptor where only this user writes (--descriptor)",
            lane.name(),
            descriptor.display(),
        ))),
        Err(e) => Err(Failure::could_not(format!(
            "cannot tell whether uid {uid} can change the descriptor {}: {e}",
            descriptor.display()
        ))),
    }
}

fn audit_of(binding: &Binding) -> AuditRecord {
    let mut record = AuditRecord::new("", paths::euid(), true);
    record.lane = binding.lane.clone();
    record.uid = Some(binding.uid);
    record.detail = match binding.pinned() {
        Some((board, row)) => format!(
            "descriptor {}, lease {board}/{row}",
            binding.descriptor.display()
        ),
        None => format!("descriptor {}", binding.descriptor.display()),
    };
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
        "{:<24} {:>8}  {:<24} {:<40} DESCRIPTOR",
        "LANE", "UID", "LEASE", "WORKTREE"
    ));
    for b in lanes.bindings() {
        let lease = b
            .pinned()
            .map_or("(its descriptor's)".to_string(), |(board, row)| {
                format!("{board}/{row}")
            });
        out(&format!(
            "{:<24} {:>8}  {:<24} {:<40} {}",
            b.lane.as_deref().unwrap_or("-"),
            b.uid,
            lease,
            b.worktree
                .as_ref()
                .map_or("-".to_string(), |w| w.display().to_string()),
            b.descriptor.display()
        ));
    }
}
