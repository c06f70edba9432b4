//! `row-fence forge-check`: what the forge's `pre-receive` hook runs (ARCHITECTURE.md,
//! "Forge hook"). It reads the push's ref updates from stdin (`<old> <new> <ref>` lines,
//! as git hands them to pre-receive), classifies each (create, delete, fast-forward or
//! not, by `git merge-base --is-ancestor` in the repository, which sees the pushed
//! objects in git's quarantine), takes the lane from what the forge authenticated, and
//! asks the daemon on the key broker's socket whether that lane holds a row whose scope
//! covers every update now. Exit 0 only for ALLOWED; anything else (no lane, no daemon,
//! an answer that is not a verdict for this lane) prints one line,
//! `row-fence: REFUSED (<reason>) <detail>`, which git shows as `remote: …`, and exits
//! with the verdict's code: the push is rejected whole.

use row_fence_contract::protocol::Answer;
use row_fence_contract::scope::{self, RefUpdate, UpdateKind, valid_oid, valid_refname};
use row_fence_contract::{Reason, Verdict, say};
use row_fence_resident::broker::forge_check::{FORGE_CHECK, ForgeCheck, MAX_UPDATES};
use ssh_agent_lib::agent::Session;
use ssh_agent_lib::proto::Extension;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long the daemon gets to answer (it bounds its store call by 5 s).
const ANSWER_WITHIN: Duration = Duration::from_secs(8);

/// The classification of a push's updates (one `git merge-base` each) gets this long;
/// past it the push is refused (`timeout`) rather than held open.
const CLASSIFY_WITHIN: Duration = Duration::from_secs(10);

/// The most stdin read: [`MAX_UPDATES`] lines of two SHA-256 ids and a long ref.
const MAX_INPUT_BYTES: u64 = (MAX_UPDATES as u64 + 1) * 512;

#[derive(clap::Args, Debug)]
pub struct ForgeCheckArgs {
    /// The key broker's socket
    #[arg(long, value_name = "PATH", env = "ROW_FENCE_BROKER_SOCKET")]
    agent: PathBuf,
    /// Where the lane's name comes from: env:NAME or remote-user (REMOTE_USER)
    #[arg(long, value_name = "SOURCE", default_value = "env:ROW_FENCE_LANE", value_parser = row_fence_install::forge_hook::parse_lane_from)]
    lane_from: String,
    /// The repository [default: GIT_DIR, as git runs the hook, else the current directory]
    #[arg(long, value_name = "PATH")]
    repo: Option<PathBuf>,
}

/// Runs the check; returns the exit code (0 only for ALLOWED), having printed the line.
pub async fn run(args: ForgeCheckArgs) -> i32 {
    let verdict = match judge(&args).await {
        Ok(detail) => {
            say!("row-fence: ALLOWED {detail}");
            return 0;
        }
        Err((verdict, detail)) => {
            let reason = verdict.reason().map_or("protocol_error", |r| r.as_str());
            say!("row-fence: REFUSED ({reason}) {}", one_line(&detail));
            verdict
        }
    };
    verdict.exit_code().max(1)
}

type Refusal = (Verdict, String);

fn could_not(reason: Reason, detail: impl Into<String>) -> Refusal {
    (Verdict::CouldNotRead(reason), detail.into())
}

async fn judge(args: &ForgeCheckArgs) -> Result<String, Refusal> {
    let lane = lane(&args.lane_from)?;
    let repo = repository(args.repo.as_deref())?;
    let updates = updates(&repo)?;
    let check = ForgeCheck {
        lane: lane.clone(),
        repository: repo.display().to_string(),
        updates,
    };
    let answer = ask(&args.agent, &check).await?;
    match answer.parsed_verdict() {
        Some(Verdict::Allowed) if answer.lane.as_deref() == Some(lane.as_str()) => {
            Ok(answer.detail)
        }
        Some(Verdict::Allowed) => Err(could_not(
            Reason::ProtocolError,
            format!("the daemon's ALLOWED names another lane than {lane}"),
        )),
        Some(verdict) => Err((verdict, answer.detail)),
        None => Err(could_not(
            Reason::ProtocolError,
            format!("the daemon's answer is not a verdict: {}", answer.detail),
        )),
    }
}

/// The lane's name from `env:NAME` or `remote-user`; missing or empty refuses.
fn lane(source: &str) -> Result<String, Refusal> {
    let var = source.strip_prefix("env:").unwrap_or("REMOTE_USER");
    match std::env::var(var) {
        Ok(lane) if !lane.is_empty() => Ok(lane),
        _ => Err(could_not(
            Reason::PeerRefused,
            format!(
                "{var} is not set: the forge did not say which lane pushes (a lane's own key with a forced command setting it, or git-http-backend's authenticated user)"
            ),
        )),
    }
}

/// The repository's canonical path: `repo`, else `GIT_DIR`, else `.`.
fn repository(repo: Option<&Path>) -> Result<PathBuf, Refusal> {
    let given = repo
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("GIT_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::canonicalize(&given).map_err(|e| {
        could_not(
            Reason::DescriptorUnreadable,
            format!("the repository {}: {e}", given.display()),
        )
    })
}

/// Reads and classifies stdin's ref updates.
fn updates(repo: &Path) -> Result<Vec<RefUpdate>, Refusal> {
    let mut input = String::new();
    std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut input)
        .map_err(|e| {
            could_not(
                Reason::ProtocolError,
                format!("cannot read the ref updates: {e}"),
            )
        })?;
    // A push cut short here would have refs no one judged: over the limit is refused whole.
    if input.len() as u64 > MAX_INPUT_BYTES {
        return Err(could_not(
            Reason::ProtocolError,
            format!("the push names more ref updates than the {MAX_UPDATES} one check judges"),
        ));
    }
    let mut updates = Vec::new();
    let started = std::time::Instant::now();
    for line in input.lines().filter(|l| !l.is_empty()) {
        if started.elapsed() > CLASSIFY_WITHIN {
            return Err(could_not(
                Reason::Timeout,
                format!(
                    "classifying the push's ref updates took over {CLASSIFY_WITHIN:?}; the push is refused"
                ),
            ));
        }
        let mut words = line.split(' ');
        let (Some(old), Some(new), Some(refname), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(could_not(
                Reason::ProtocolError,
                format!("{line:?} is not `<old> <new> <ref>`"),
            ));
        };
        if !valid_oid(old) || !valid_oid(new) || !valid_refname(refname) {
            return Err(could_not(
                Reason::ProtocolError,
                format!("{line:?} is not `<old> <new> <ref>` with object ids and a ref name"),
            ));
        }
        let kind = classify(repo, old, new);
        updates.push(RefUpdate {
            old: old.into(),
            new: new.into(),
            refname: refname.into(),
            kind,
        });
    }
    Ok(updates)
}

/// The update's kind; fast-forward only when git proves old an ancestor of new in the
/// forge's repository ([`scope::classify`]).
fn classify(repo: &Path, old: &str, new: &str) -> UpdateKind {
    scope::classify(old, new, || {
        Command::new("git")
            .arg("--git-dir")
            .arg(repo)
            .args(["merge-base", "--is-ancestor", old, new])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// One exchange on the broker socket, within [`ANSWER_WITHIN`].
async fn ask(socket: &Path, check: &ForgeCheck) -> Result<Answer, Refusal> {
    let unreadable = |detail: String| could_not(Reason::FenceUnreadable, detail);
    let stream = tokio::time::timeout(ANSWER_WITHIN, tokio::net::UnixStream::connect(socket))
        .await
        .map_err(|_| unreadable(format!("{} did not accept in time", socket.display())))?
        .map_err(|e| {
            unreadable(format!(
                "cannot reach the fence at {}: {e}",
                socket.display()
            ))
        })?;
    let mut client = ssh_agent_lib::client::Client::new(stream);
    let body = serde_json::to_vec(check).expect("a forge check serializes");
    let sent = Extension {
        name: FORGE_CHECK.to_string(),
        details: body.into(),
    };
    let answered = tokio::time::timeout(ANSWER_WITHIN, client.extension(sent))
        .await
        .map_err(|_| {
            could_not(
                Reason::Timeout,
                format!("no answer within {ANSWER_WITHIN:?}"),
            )
        })?
        .map_err(|e| {
            unreadable(format!(
                "the agent on {} refused the check ({e}): is it row-fence's key broker?",
                socket.display()
            ))
        })?;
    let reply = answered.filter(|r| r.name == FORGE_CHECK).ok_or_else(|| {
        unreadable(format!(
            "the agent on {} did not answer the check",
            socket.display()
        ))
    })?;
    serde_json::from_slice(reply.details.as_ref()).map_err(|e| {
        could_not(
            Reason::ProtocolError,
            format!("the answer is not valid: {e}"),
        )
    })
}

/// The detail on one line, as git prints one `remote:` line per line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
