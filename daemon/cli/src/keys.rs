//! `row-fence keys add|list|remove`: the key broker's keys, held only in the running
//! daemon's memory (ARCHITECTURE.md, "Key broker"): sent over its control socket, which
//! takes key changes from the daemon's own uid only, and only to a socket in a directory no
//! other uid can write. Gone when the daemon stops. Also the control-socket exchange
//! `lanes` uses for its reload.

use row_fence_contract::client;
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{Answer, BrokerKey, KeysAdd, Op, PROTOCOL_VERSION, Request};
use row_fence_contract::report::out;
use row_fence_contract::{exit, paths, say};
use row_fence_resident::config::Settings;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
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
    /// A push key of this lane only: listed and signed for its uid alone, so a forge's forced command can name the lane (`ROW_FENCE_LANE`) for the forge hook
    #[arg(long, value_name = "LANE", conflicts_with = "read")]
    lane: Option<String>,
}

#[derive(clap::Args, Debug)]
struct KeysRemoveArgs {
    /// The key's fingerprint, `SHA256:…` as `row-fence keys list` prints it
    fingerprint: String,
}

#[derive(clap::Args, Debug)]
pub struct JsonArgs {
    /// Print a JSON array
    #[arg(long)]
    pub json: bool,
}

impl KeysArgs {
    /// True for `keys list`, whose output is its whole result.
    pub fn only_reads(&self) -> bool {
        matches!(self.command, KeysCommand::List(_))
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
            lane: args.lane.clone(),
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
    read_secret(file, MAX_KEY_BYTES, "key", "a private key")
}

/// A secret (a private key, a forge token) from `file` or stdin (`-`), into memory wiped
/// when dropped. A file must be the caller's own with no group or other bits (`holder`
/// names it in that error: "a private key", "a token file"), since another uid that can
/// read it has the secret too; at most `max` bytes (more is not such a secret: usage
/// error), never blank. `what` names the secret in the other errors.
pub(crate) fn read_secret(
    file: &Path,
    max: u64,
    what: &str,
    holder: &str,
) -> Result<Zeroizing<String>, Failure> {
    let mut text = Zeroizing::new(String::new());
    if file == Path::new("-") {
        std::io::stdin()
            .take(max + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("cannot read the {what} from stdin: {e}")))?;
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let meta = opened
            .metadata()
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let uid = paths::euid();
        if meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(Failure::usage(format!(
                "{}: owned by uid {} with mode {:03o}; {holder} must be uid {uid}'s with no group or other bits (chmod 600)",
                file.display(),
                meta.uid(),
                meta.mode() & 0o777
            )));
        }
        opened
            .take(max + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
    }
    if text.trim().is_empty() {
        return Err(Failure::usage(if file == Path::new("-") {
            format!("no {what} on stdin")
        } else {
            format!("{} is empty", file.display())
        }));
    }
    if text.len() as u64 > max {
        return Err(Failure::usage(format!("the {what} is over {max} bytes")));
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
        "{:<52} {:<12} {:<5} {:<16} COMMENT",
        "FINGERPRINT", "ALGORITHM", "KIND", "LANE"
    ));
    for k in keys {
        out(&format!(
            "{:<52} {:<12} {:<5} {:<16} {}",
            k.fingerprint,
            k.algorithm,
            k.kind,
            k.lane.as_deref().unwrap_or("-"),
            k.comment
        ));
    }
}

/// One request to the daemon; its `error` is the command's failure.
pub fn ask(settings: &Settings, request: &Request) -> Result<Answer, Failure> {
    exchange(settings, &request.to_line())
}

/// Sends `line` to the daemon's control socket once its directory is known to be only
/// this uid's: a key goes to no socket another uid could have put there.
pub fn exchange(settings: &Settings, line: &[u8]) -> Result<Answer, Failure> {
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
