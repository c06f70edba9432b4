//! One push through the daemon, start to end (ARCHITECTURE.md, "Push proxy"):
//!
//! 1. the header: the URL, resolved against the daemon's forges; the lane, by the peer's
//!    uid (or, for the daemon's own uid, the descriptor sent);
//! 2. connection 1 to the forge: its ref advertisement, relayed to the lane with only the
//!    capabilities the daemon forwards; the connection is then ended with a flush;
//! 3. the lane's request (shallow lines, commands, capabilities, push options) and its
//!    pack, spooled to the push's own 0700 directory, its trailer checked;
//! 4. the judgement: the lease, and every ref against the row's scope, with
//!    fast-forwards proven from the pack; any refusal answers every ref `ng`;
//! 5. connection 2 (its own session, dialled beside connection 1 so its handshake costs
//!    no time; nothing is sent on it before the judgement): the request, `atomic` asked
//!    where offered, the pack except its last bytes; judged again; REFUSED drops the
//!    connection (the forge's pack never ends, so it applies nothing); else the last
//!    bytes, and the forge's answer relayed.
//!
//! Everything is bounded: the header, each section, the pack ([`super::Settings`]), the
//! whole push ([`PUSH_DEADLINE`]).

use super::Pusher;
use super::advert::Advertisement;
use super::answer;
use super::forge::{self, Connection, SshFiles};
use super::lane::{self, Lane, Refusal};
use super::pkt;
use super::request::Request;
use super::spool;
use super::target::{self, Target};
use super::walk::{Commits, WalkError};
use crate::gate::Gated;
use crate::sync::read;
use row_fence_contract::Reason;
use row_fence_contract::push::{MAX_HEADER_BYTES, PushHeader};
use row_fence_contract::report::Shown;
use row_fence_contract::scope::RefUpdate;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// The longest one push may take, end to end.
pub const PUSH_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The header must arrive this soon after the connection (the helper sends it at once).
pub const HEADER_DEADLINE: Duration = Duration::from_secs(10);

/// How long a refused lane may take to send its request and pack before it is let go.
pub const REFUSED_DEADLINE: Duration = Duration::from_secs(60);

/// How long connection 1 may take to end once the daemon has sent its flush.
pub const FIRST_ENDS: Duration = Duration::from_secs(5);

/// At most this many lines in a forge's ref advertisement.
pub const MAX_ADVERTISED: usize = 1_000_000;

/// What ended a push, for the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The lane's side broke or sent what is not a push.
    #[error("the lane: {0}")]
    Lane(String),
    /// The forge's side, before its advertisement reached the lane (the lane is told with
    /// an `ERR` line).
    #[error("the forge: {0}")]
    Forge(String),
    /// The forge's side, after its answer was relayed to the lane as it gave it.
    #[error("the forge's answer: {0}")]
    ForgeAnswer(String),
    /// The daemon's own disk.
    #[error("the daemon's disk: {0}")]
    Disk(std::io::Error),
    /// Refused (already answered to the lane).
    #[error("refused: {0}")]
    Refused(String),
    /// The push took longer than [`PUSH_DEADLINE`].
    #[error("the push took longer than {} s", PUSH_DEADLINE.as_secs())]
    Deadline,
    /// The daemon stopped before the push ended (nothing of it was applied).
    #[error("the daemon stopped")]
    Stopped,
}

/// Serves one connection on the push socket, until the push ends or `stop` (the daemon's
/// stop) drops it: a push whose last bytes were not sent is not applied; one whose last
/// bytes were sent is the forge's to apply, and its lane sees the connection end.
pub async fn serve(pusher: &Pusher, stream: UnixStream, stop: &CancellationToken) {
    let cred = stream.peer_cred().ok();
    let uid = cred.map(|c| c.uid());
    let who = match cred {
        Some(c) => format!("uid {} pid {}", c.uid(), c.pid().unwrap_or(0)),
        None => "an unknown peer".to_string(),
    };
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let result = tokio::select! {
        outcome = tokio::time::timeout(PUSH_DEADLINE, push(pusher, uid, &who, &mut r, &mut w)) => {
            outcome.unwrap_or(Err(PushError::Deadline))
        }
        _ = stop.cancelled() => Err(PushError::Stopped),
    };
    match result {
        Ok(()) => tracing::debug!(peer = %who, "a push through the daemon ended"),
        Err(e) => tracing::info!(peer = %who, error = %e, "a push through the daemon did not land"),
    }
    let _ = w.shutdown().await;
}

/// The push's flow (see the module docs).
async fn push<R, W>(
    pusher: &Pusher,
    uid: Option<u32>,
    who: &str,
    lane_in: &mut BufReader<R>,
    lane_out: &mut W,
) -> Result<(), PushError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let judge = &pusher.judge;
    // Before the advertisement, a refusal is an ERR line git prints as a fatal error.
    let early = async |lane_out: &mut W, gated: Gated| -> PushError {
        let line = Shown {
            verdict: gated.verdict,
            detail: gated.detail.clone(),
            descriptor: None,
            elapsed_ms: 0,
        }
        .line();
        let text = line
            .strip_prefix("row-fence: ")
            .unwrap_or(&line)
            .to_string();
        let _ = lane_out.write_all(&answer::error_line(&text)).await;
        PushError::Refused(gated.detail)
    };
    let header = match tokio::time::timeout(HEADER_DEADLINE, read_header(lane_in))
        .await
        .map_err(|_| HeaderError::Late)
        .and_then(|read| read)
    {
        Ok(h) => h,
        Err(e) => {
            let gated = lane::refuse(judge, uid, who, Reason::ProtocolError, e.to_string());
            return Err(early(lane_out, gated).await);
        }
    };
    let lane = match who_pushes(pusher, uid, header.descriptor) {
        Ok(lane) => lane,
        Err(no) => {
            let gated = lane::refuse(judge, uid, who, Reason::PeerRefused, no.to_string());
            return Err(early(lane_out, gated).await);
        }
    };
    let target = match target::resolve(&pusher.settings.forges, &header.url) {
        Ok(t) => t,
        Err(e) => {
            let gated = lane::refuse(judge, uid, who, Reason::PeerRefused, e.to_string());
            return Err(early(lane_out, gated).await);
        }
    };
    // The lease and the repository, before the forge is dialled: a refused lane gets
    // nothing of the forge, not even its refs.
    if let Err(refusal) = lane::judge_reach(judge, &lane, uid, who, &target.repository).await {
        let refused = refused_unseen(pusher, uid, who, refusal, lane_in, lane_out);
        // A refused lane's answer is bounded in time too: it holds its uid's slot.
        return tokio::time::timeout(REFUSED_DEADLINE, refused)
            .await
            .unwrap_or(Err(PushError::Deadline));
    }
    let dir = pusher.workdir().map_err(PushError::Disk)?;
    let files = ssh_files(pusher, &dir.0, &target, &lane).map_err(PushError::Disk)?;
    let agent = super::agent::serve(&files.agent, pusher.shared.clone(), lane.key_owner())
        .map_err(PushError::Disk)?;
    let result = relay(
        pusher, uid, who, &lane, &target, &dir.0, &files, lane_in, lane_out,
    )
    .await;
    agent.abort();
    drop(dir);
    if let Err(PushError::Forge(e)) = &result {
        // The lane's git must learn why (a forge unreachable before the advertisement).
        let _ = lane_out
            .write_all(&answer::error_line(&format!("the forge: {e}")))
            .await;
    }
    result
}

/// Steps 2 to 5, once the lane and the target are known.
#[allow(clippy::too_many_arguments)]
async fn relay<R, W>(
    pusher: &Pusher,
    uid: Option<u32>,
    who: &str,
    lane: &Lane,
    target: &Target,
    dir: &Path,
    files: &SshFiles,
    lane_in: &mut BufReader<R>,
    lane_out: &mut W,
) -> Result<(), PushError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Connection 2 is dialled at once, beside connection 1, so its session costs the push
    // no time of its own; nothing is sent on it before the first judgement. Through the
    // daemon's master, a forge that serves one session per connection refuses it while
    // connection 1 is open: it is then asked again once connection 1 has ended.
    let (first_ended, ended) = tokio::sync::oneshot::channel::<()>();
    let second = async {
        let master_was_there = files.control.as_ref().is_some_and(|c| c.exists());
        match advertised_once(pusher, target, files, true).await {
            Ok(done) => Ok(done),
            Err(e) if master_was_there => {
                tracing::debug!(error = %e, "the forge's second session waits for the first to end");
                let _ = ended.await;
                advertised(pusher, target, files).await
            }
            Err(e) => Err(e),
        }
    };
    let front = async {
        // Connection 1: the advertisement only, relayed; then ended with a flush (no
        // commands) while the lane works out its push.
        let (mut first, advert) = advertised(pusher, target, files)
            .await
            .map_err(|e| PushError::Forge(e.to_string()))?;
        let relayed = async {
            let options = !pusher.settings.options.is_empty();
            lane_out.write_all(&advert.for_lane(options)).await?;
            lane_out.flush().await
        };
        relayed.await.map_err(|e| PushError::Lane(e.to_string()))?;
        if let Some(w) = first.writer.as_mut() {
            let _ = w.write_all(pkt::FLUSH).await;
            let _ = w.flush().await;
        }
        let end = async {
            let _ = tokio::time::timeout(FIRST_ENDS, first.finish()).await;
            let _ = first_ended.send(());
        };
        let format = advert.object_format().to_string();
        let ((), asked) = tokio::join!(
            end,
            read_request(pusher, uid, who, &format, lane_in, lane_out)
        );
        asked.map(|request| request.map(|r| (r, format)))
    };
    let (dialled, front) = tokio::join!(second, front);
    let (request, format) = match front {
        Ok(Some(front)) => front,
        other => {
            if let Ok((conn, _)) = dialled {
                conn.kill().await;
            }
            return other.map(|_| ());
        }
    };
    let pack = dir.join("pack");
    let max = pusher.settings.max_pack_bytes;

    // The first judgement, before anything reaches the forge: the lease, and every ref
    // against the row's scope, each update taken as a fast-forward until the pack proves
    // it (the second judgement holds the proof).
    let assumed: Vec<RefUpdate> = request.commands.iter().map(|c| c.update(true)).collect();
    let judged = lane::judge(&pusher.judge, lane, uid, who, &target.repository, &assumed).await;
    // A daemon-wide slot is held from here to the push's end: a lane stalling before its
    // request, or refused, holds only its own uid's.
    let slot = match &judged {
        Ok(_) => pusher.slots.hold(uid),
        Err(_) => None,
    };
    let busy = judged.is_ok() && slot.is_none();
    let (mut second, advert2) = match (judged, dialled) {
        (Ok(_), Ok(dialled)) if !busy => dialled,
        (judged, dialled) => {
            let dialled = match dialled {
                Ok((conn, _)) => {
                    conn.kill().await;
                    None
                }
                Err(e) => Some(e.to_string()),
            };
            // The lane's git reads the answer once its pack is read: drained, never kept.
            let spooled = drain_pack(pusher, &request, lane_in, &format).await;
            return match (judged, spooled) {
                (Err(refusal), _) => refused(&request, lane_out, refusal).await,
                (Ok(_), _) if busy => {
                    let why = format!(
                        "the daemon is serving {} pushes already; push again in a moment",
                        super::MAX_PUSHES
                    );
                    refuse_all(pusher, uid, who, &request, lane_out, &why, None).await
                }
                (Ok(_), Err(e)) => {
                    let unpack = e.to_string();
                    refuse_all(pusher, uid, who, &request, lane_out, &unpack, Some(&unpack)).await
                }
                (Ok(_), Ok(_)) => {
                    let why = dialled.unwrap_or_else(|| "the forge's second connection".into());
                    refuse_all(pusher, uid, who, &request, lane_out, &why, Some(&why)).await
                }
            };
        }
    };

    let mut caps: Vec<String> = request
        .caps
        .iter()
        .filter(|c| advert2.offers(c) || c.starts_with("agent="))
        .cloned()
        .collect();
    let mut notes = Vec::new();
    if advert2.offers("atomic") {
        if !caps.iter().any(|c| c == "atomic") {
            caps.push("atomic".into());
        }
    } else if request.commands.len() > 1 {
        notes.extend(answer::note(
            &request,
            "row-fence: the forge does not offer atomic pushes: a ref it rejects does not stop the others",
        ));
    }
    // The request, then the pack streamed to the forge as it is spooled, its last bytes
    // held back.
    let sent = match second.writer.as_mut() {
        Some(w) => w.write_all(&request.encode(&caps)).await,
        None => Err(std::io::Error::other("the forge's input is closed")),
    };
    let (tee, copy) = tokio::sync::mpsc::channel(TEE_CHUNKS);
    let tee = sent.is_ok().then_some(tee);
    let (spooled, forwarded) = tokio::join!(
        spool_pack(&request, lane_in, &pack, max, &format, tee),
        forward(copy, second.writer.as_mut()),
    );
    let pack_len = match spooled {
        Ok(len) => len,
        Err(e) => {
            second.kill().await;
            let unpack = e.to_string();
            return refuse_all(pusher, uid, who, &request, lane_out, &unpack, Some(&unpack)).await;
        }
    };
    let streamed = sent.and(forwarded).and_then(|(sent, held)| {
        let whole = sent + held.len() as u64 == pack_len.unwrap_or(0);
        if whole {
            Ok(held)
        } else {
            Err(std::io::Error::other(
                "the copy to the forge fell short of the pack",
            ))
        }
    });
    let held = match streamed {
        Ok(held) => held,
        Err(e) => {
            let (_, said) = second.finish().await;
            let why = format!("sending the push to the forge: {e}{}", suffix(&said));
            return refuse_all(pusher, uid, who, &request, lane_out, &why, Some(&why)).await;
        }
    };
    let updates = match classify(&request, pack_len.map(|_| pack.as_path()), &format).await {
        Ok(u) => u,
        Err(e) => {
            second.kill().await;
            let why = e.to_string();
            return refuse_all(pusher, uid, who, &request, lane_out, &why, Some(&why)).await;
        }
    };
    // The second judgement, the fast-forwards proven, before the pack's last bytes.
    if let Err(refusal) =
        lane::judge(&pusher.judge, lane, uid, who, &target.repository, &updates).await
    {
        second.kill().await;
        return refused(&request, lane_out, refusal).await;
    }
    let ended = match second.writer.as_mut() {
        Some(w) => {
            async {
                w.write_all(&held).await?;
                w.flush().await
            }
            .await
        }
        None => Err(std::io::Error::other("the forge's input is closed")),
    };
    if let Err(e) = ended {
        let (_, said) = second.finish().await;
        let why = format!("sending the pack to the forge: {e}{}", suffix(&said));
        return refuse_all(pusher, uid, who, &request, lane_out, &why, Some(&why)).await;
    }
    second.writer = None;
    // The write is the forge's now: relaying its answer holds no daemon-wide slot (a slow
    // forge hook, or a lane not reading a long report, keeps only its uid's).
    drop(slot);
    if !notes.is_empty() {
        let _ = lane_out.write_all(&notes).await;
    }
    // The forge's answer, as it gives it (its side-band, its report).
    let copied = tokio::io::copy(&mut second.reader, lane_out).await;
    let _ = lane_out.flush().await;
    let (ok, said) = second.finish().await;
    match copied {
        Ok(0) => Err(PushError::ForgeAnswer(format!(
            "the forge answered nothing{}",
            suffix(&said)
        ))),
        Ok(_) if ok => Ok(()),
        Ok(_) => Err(PushError::ForgeAnswer(format!(
            "the forge's receive-pack failed{}",
            suffix(&said)
        ))),
        Err(e) => Err(PushError::Lane(e.to_string())),
    }
}

/// Chunks of the pack waiting for the forge's connection: with [`spool::TEE_CHUNK_BYTES`],
/// the most of a pack the daemon holds in memory.
const TEE_CHUNKS: usize = 8;

/// The bytes held back until the second judgement: the pack's trailer (20 bytes for
/// SHA-1, 32 for SHA-256; 32 holds back both). Without them the forge's pack never ends,
/// so it applies nothing.
const HOLD_BACK: usize = 32;

/// Writes the spooled pack's copy to the forge as it comes, all but its last
/// [`HOLD_BACK`] bytes. Returns the bytes written and those held back. On an error the
/// copy is closed, so the spool goes on without it.
async fn forward(
    mut copy: tokio::sync::mpsc::Receiver<Vec<u8>>,
    writer: Option<&mut Box<dyn AsyncWrite + Unpin + Send>>,
) -> std::io::Result<(u64, Vec<u8>)> {
    let Some(w) = writer else {
        return Err(std::io::Error::other("the forge's input is closed"));
    };
    let mut held: Vec<u8> = Vec::new();
    let mut sent = 0u64;
    while let Some(chunk) = copy.recv().await {
        held.extend_from_slice(&chunk);
        if held.len() > HOLD_BACK {
            let ready = held.len() - HOLD_BACK;
            w.write_all(&held[..ready]).await?;
            sent += ready as u64;
            held.drain(..ready);
        }
    }
    w.flush().await?;
    Ok((sent, held))
}

/// The lane's pack read to its end and kept nowhere (a refused push's: its git reads the
/// answer only then); `None` when every command is a delete.
async fn drain_pack<R: AsyncRead + Unpin>(
    pusher: &Pusher,
    request: &Request,
    lane_in: &mut BufReader<R>,
    format: &str,
) -> Result<Option<u64>, spool::SpoolError> {
    if !request.has_pack() {
        return Ok(None);
    }
    let max = pusher.settings.max_pack_bytes;
    // A refused lane's pack is taken for a bounded time too: it holds its uid's slot.
    match tokio::time::timeout(REFUSED_DEADLINE, spool::drain(lane_in, max, format)).await {
        Ok(drained) => drained.map(Some),
        Err(_) => Err(spool::SpoolError::NotWithin {
            within_s: REFUSED_DEADLINE.as_secs(),
        }),
    }
}

/// The lane's pack spooled (and given to `tee`); `None` when every command is a delete.
async fn spool_pack<R: AsyncRead + Unpin>(
    request: &Request,
    lane_in: &mut BufReader<R>,
    pack: &Path,
    max: u64,
    format: &str,
    tee: Option<spool::Tee>,
) -> Result<Option<u64>, spool::SpoolError> {
    if !request.has_pack() {
        return Ok(None);
    }
    spool::spool_teed(lane_in, pack, max, format, tee)
        .await
        .map(Some)
}

/// The lane's request (shallow lines, commands, capabilities, push options). `None`: the
/// lane pushed nothing, or was answered already (the error is returned).
async fn read_request<R, W>(
    pusher: &Pusher,
    uid: Option<u32>,
    who: &str,
    format: &str,
    lane_in: &mut BufReader<R>,
    lane_out: &mut W,
) -> Result<Option<Request>, PushError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let hex_len = if format == "sha256" { 64 } else { 40 };
    let bound = super::request::MAX_REQUEST_BYTES;
    let lines = match pkt::read_section(lane_in, request_lines(), bound).await {
        Ok(lines) => lines,
        Err(e) => {
            let why = format!("the push request: {e}");
            lane::refuse(&pusher.judge, uid, who, Reason::ProtocolError, why.clone());
            let _ = lane_out.write_all(&answer::error_line(&why)).await;
            return Err(PushError::Lane(why));
        }
    };
    if lines.is_empty() {
        return Ok(None); // Nothing to push: git sent a flush alone.
    }
    let mut request = match Request::parse(&lines, hex_len) {
        Ok(r) => r,
        Err(e) => {
            let refusal = lane::refuse(
                &pusher.judge,
                uid,
                who,
                Reason::ProtocolError,
                e.to_string(),
            );
            let _ = lane_out
                .write_all(&answer::error_line(&refusal.detail))
                .await;
            return Err(PushError::Lane(e.to_string()));
        }
    };
    if request.asks("push-options") {
        let most = super::request::MAX_OPTIONS_BYTES;
        let options = pkt::read_section(lane_in, super::request::MAX_OPTIONS + 1, most)
            .await
            .map_err(|e| PushError::Lane(e.to_string()))?;
        if let Err(e) = request.set_options(&options) {
            return refuse_all(pusher, uid, who, &request, lane_out, &e.to_string(), None)
                .await
                .map(|()| None);
        }
        if let Some(option) = request.option_not_passed(&pusher.settings.options) {
            // An option acts on the forge beyond the refs judged: only named ones pass.
            let why = format!(
                "the push option {option:?} is not one the daemon passes to the forge (its operator allows one with --push-option NAME)"
            );
            let _ = drain_pack(pusher, &request, lane_in, format).await;
            return refuse_all(pusher, uid, who, &request, lane_out, &why, None)
                .await
                .map(|()| None);
        }
    }
    Ok(Some(request))
}

/// Opens a connection to the forge and reads its advertisement: through the daemon's
/// ssh master, and once more on a connection of its own if that fails (a master gone
/// stale, a forge that serves one session per connection to two pushes at once).
async fn advertised(
    pusher: &Pusher,
    target: &Target,
    files: &SshFiles,
) -> Result<(Connection, Advertisement), forge::ForgeError> {
    if let Some(control) = &files.control {
        // Only a master that was there can fail where a connection of its own would not
        // (ssh makes the master itself when there is none, or only a stale socket).
        let was_there = control.exists();
        match advertised_once(pusher, target, files, true).await {
            Ok(done) => return Ok(done),
            Err(e) if was_there => {
                tracing::debug!(error = %e, "the daemon's ssh master failed; dialling on a connection of its own")
            }
            Err(e) => return Err(e),
        }
    }
    advertised_once(pusher, target, files, false).await
}

/// One try of [`advertised`].
async fn advertised_once(
    pusher: &Pusher,
    target: &Target,
    files: &SshFiles,
    shared: bool,
) -> Result<(Connection, Advertisement), forge::ForgeError> {
    // Either arm, by the forge's scheme (the HTTPS arm: super::https).
    let mut conn = super::https::open(pusher, target, files, shared)?;
    let bound = super::https::MAX_ADVERT_BYTES as usize;
    match pkt::read_section(&mut conn.reader, MAX_ADVERTISED, bound).await {
        Ok(lines) => Ok((conn, Advertisement::parse(lines))),
        Err(e) => {
            let (_, said) = conn.finish().await;
            Err(forge::ForgeError::Broken(format!(
                "the forge's advertisement: {e}{}",
                suffix(&said)
            )))
        }
    }
}

/// The request section's bound: commands and shallow lines.
fn request_lines() -> usize {
    super::request::MAX_COMMANDS + super::request::MAX_SHALLOW
}

/// `: <what ssh said>` when it said something.
fn suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else if said.starts_with(super::https::SAID) {
        // The HTTPS arm names itself.
        format!(" ({said})")
    } else {
        format!(" (ssh: {said})")
    }
}

/// The updates with their kinds, fast-forwards proven from the pack.
async fn classify(
    request: &Request,
    pack: Option<&Path>,
    format: &str,
) -> Result<Vec<RefUpdate>, WalkError> {
    let needs_walk = request
        .commands
        .iter()
        .any(|c| !c.is_delete() && !super::request::is_zero(&c.old));
    let commits = match (needs_walk, pack) {
        (true, Some(pack)) => {
            let pack = pack.to_path_buf();
            let format = format.to_string();
            tokio::task::spawn_blocking(move || Commits::read(&pack, &format))
                .await
                .map_err(|e| WalkError::Io(std::io::Error::other(e)))??
        }
        _ => Commits::default(),
    };
    Ok(request
        .commands
        .iter()
        .map(|c| c.update(commits.descends(&c.new, &c.old)))
        .collect())
}

/// Answers a lane refused before the forge was dialled: an advertisement of no refs, its
/// request read and its pack drained, then every ref `ng` with the verdict line, as a
/// refusal at the write reads.
async fn refused_unseen<R, W>(
    pusher: &Pusher,
    uid: Option<u32>,
    who: &str,
    refusal: Refusal,
    lane_in: &mut BufReader<R>,
    lane_out: &mut W,
) -> Result<(), PushError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let empty = Advertisement::empty();
    let sent = async {
        lane_out.write_all(&empty.for_lane(false)).await?;
        lane_out.flush().await
    };
    sent.await.map_err(|e| PushError::Lane(e.to_string()))?;
    let format = empty.object_format().to_string();
    let request = match read_request(pusher, uid, who, &format, lane_in, lane_out).await {
        Ok(Some(request)) => request,
        Ok(None) => return Err(PushError::Refused(refusal.gated.detail)),
        Err(e) => return Err(e),
    };
    if let Err(e) = drain_pack(pusher, &request, lane_in, &format).await {
        tracing::debug!(error = %e, "a refused lane's pack did not end");
    }
    refused(&request, lane_out, refusal).await
}

/// Answers a refusal of the lease or a ref: every ref `ng`, the verdict line on band 2.
async fn refused<W: AsyncWrite + Unpin>(
    request: &Request,
    lane_out: &mut W,
    refusal: Refusal,
) -> Result<(), PushError> {
    let Refusal { gated, refname } = refusal;
    let line = Shown {
        verdict: gated.verdict,
        detail: gated.detail.clone(),
        descriptor: None,
        elapsed_ms: 0,
    }
    .line();
    let headline = gated.verdict.headline();
    let mut reasons: Vec<(String, String)> = request
        .commands
        .iter()
        .map(|c| {
            let why = match &refname {
                Some(r) if *r == c.refname => format!("row-fence: {headline}: outside the row's scope"),
                Some(_) => format!("row-fence: {headline}: another ref of this push is outside the row's scope (all or nothing)"),
                None => format!("row-fence: {headline}"),
            };
            (c.refname.clone(), why)
        })
        .collect();
    reasons.dedup();
    let bytes = answer::refusal(request, "ok", &reasons, &line);
    let _ = lane_out.write_all(&bytes).await;
    let _ = lane_out.flush().await;
    Err(PushError::Refused(line))
}

/// Answers an error that stops the push (a bad pack, a forge that failed before the
/// pack was sent): every ref `ng`, nothing applied; recorded like any refusal.
async fn refuse_all<W: AsyncWrite + Unpin>(
    pusher: &Pusher,
    uid: Option<u32>,
    who: &str,
    request: &Request,
    lane_out: &mut W,
    why: &str,
    unpack: Option<&str>,
) -> Result<(), PushError> {
    let gated = lane::refuse(
        &pusher.judge,
        uid,
        who,
        Reason::ProtocolError,
        why.to_string(),
    );
    let reasons: Vec<(String, String)> = request
        .commands
        .iter()
        .map(|c| (c.refname.clone(), format!("row-fence: not pushed: {why}")))
        .collect();
    let bytes = answer::refusal(
        request,
        unpack.unwrap_or("ok"),
        &reasons,
        &format!("row-fence: {} {why}", gated.verdict.headline()),
    );
    let _ = lane_out.write_all(&bytes).await;
    let _ = lane_out.flush().await;
    Err(PushError::Lane(why.to_string()))
}

/// Reads the header line, bounded.
async fn read_header<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> Result<PushHeader, HeaderError> {
    let mut line = Vec::new();
    let mut limited = (&mut *r).take(MAX_HEADER_BYTES as u64);
    limited
        .read_until(b'\n', &mut line)
        .await
        .map_err(HeaderError::Io)?;
    if line.last() != Some(&b'\n') {
        return Err(HeaderError::NotOneLine);
    }
    serde_json::from_slice(&line).map_err(HeaderError::Json)
}

/// Why the push header was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Reading it failed.
    #[error("reading the push header: {0}")]
    Io(std::io::Error),
    /// No line within the bound.
    #[error(
        "the push header is not one line of at most {MAX_HEADER_BYTES} bytes (is this git-remote-row-fence?)"
    )]
    NotOneLine,
    /// Not the header's JSON.
    #[error("the push header does not parse: {0}")]
    Json(serde_json::Error),
    /// Not within [`HEADER_DEADLINE`].
    #[error("no push header within {} s (is this git-remote-row-fence?)", HEADER_DEADLINE.as_secs())]
    Late,
}

/// Why the peer is no lane the daemon pushes for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoLane {
    /// The socket did not say who the peer is.
    #[error("the push socket could not read the peer's uid")]
    NoUid,
    /// The daemon's own uid sent no descriptor.
    #[error(
        "the daemon pushes only for a lane: this repository has no descriptor (row-fence acquire writes one)"
    )]
    NoDescriptor,
    /// Another uid bound to no lane.
    #[error(
        "uid {0} is bound to no lane (row-fence lane add): the daemon pushes only for a bound lane"
    )]
    Unbound(u32),
}

/// The lane of the peer `uid` (see [`Lane`]).
fn who_pushes(
    pusher: &Pusher,
    uid: Option<u32>,
    descriptor: Option<row_fence_contract::Descriptor>,
) -> Result<Lane, NoLane> {
    let uid = uid.ok_or(NoLane::NoUid)?;
    if uid == pusher.own_uid {
        return descriptor.map(Lane::SameUid).ok_or(NoLane::NoDescriptor);
    }
    match read(&pusher.shared.lanes).lane_of(uid) {
        Some(binding) => Ok(Lane::Bound(binding.clone())),
        None => Err(NoLane::Unbound(uid)),
    }
}

/// Writes the files ssh reads for this push.
fn ssh_files(
    pusher: &Pusher,
    dir: &Path,
    target: &Target,
    lane: &Lane,
) -> std::io::Result<SshFiles> {
    let owner = lane.key_owner();
    let public: Vec<String> = read(&pusher.shared.held)
        .push
        .identities_for(owner.as_deref())
        .iter()
        .filter_map(|i| match &i.credential {
            ssh_agent_lib::proto::PublicCredential::Key(k) => {
                ssh_key::PublicKey::new(k.clone(), "").to_openssh().ok()
            }
            _ => None,
        })
        .collect();
    let host_keys = pusher.shared.forges.openssh_lines();
    let forge = &target.forge;
    let destination = format!("{}@{}:{}", forge.user, forge.host, forge.port);
    let control = (forge.scheme == super::target::Scheme::Ssh)
        .then(|| forge::control_path(&pusher.settings.masters, &destination, &host_keys, &public))
        .flatten();
    forge::write_files(dir, &forge.known_hosts_name(), &host_keys, &public, control)
}
