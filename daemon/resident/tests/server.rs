//! The real server, in process, on its own socket in a temp dir (mini-redis's
//! `tests/server.rs`): protocol errors, the read deadline, `busy`, a foreign stamp, and
//! verdicts from a real file store, without spawning a binary. Time-dependent cases pause
//! tokio's clock instead of sleeping.

use row_fence_contract::protocol::{
    Answer, Ask, Caller, MAX_MESSAGE_BYTES, Op, PROTOCOL_VERSION, Request,
};
use row_fence_contract::{Descriptor, Reason, Verdict};
use row_fence_resident::config::Settings;
use row_fence_resident::judge::Judge;
use row_fence_resident::own_code::OwnCode;
use row_fence_resident::resident::Resident;
use row_fence_resident::server;
use row_fence_store::file::FileStore;
use row_fence_store::lease::{self, Grant};
use row_fence_store::{LeaseStore, StoreSpec};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

/// The build digest the daemon under test carries; its asks are made with the same.
const TEST_BUILD: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A server on a temp socket over a file store in the same temp dir.
struct Served {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    store: Arc<dyn LeaseStore>,
    resident: Arc<Resident>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    /// A server that serves this process's own uid.
    async fn start() -> Served {
        Served::serving(vec![nix::unistd::geteuid().as_raw()]).await
    }

    /// A server that serves the uids `uids` (the daemon's own and `--allowed-uids`).
    async fn serving(uids: Vec<u32>) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let socket = home.join("sock");
        let store: Arc<dyn LeaseStore> = Arc::new(FileStore::new(home.join("store")));
        let settings = Settings {
            home: home.clone(),
            socket: socket.clone(),
            store: StoreSpec::File(None),
            key_prefix: "rowfence".into(),
            margin_ms: row_fence_resident::config::DEFAULT_MARGIN_MS,
        };
        let own_code = OwnCode::capture(&home, TEST_BUILD).unwrap();
        let judge = Arc::new(Judge::new(store.clone(), &settings));
        let resident = Arc::new(Resident::new(judge, own_code, settings, uids));
        let listener = UnixListener::bind(&socket).unwrap();
        let shutdown = resident.shutdown.clone();
        let task = tokio::spawn(server::run(listener, resident.clone(), shutdown.clone()));
        Served {
            _dir: dir,
            socket,
            store,
            resident,
            shutdown,
            task,
        }
    }

    /// Sends raw bytes, returns the answer line (empty when the server closed without one).
    async fn exchange(&self, bytes: &[u8]) -> String {
        let mut stream = UnixStream::connect(&self.socket).await.unwrap();
        let _ = stream.write_all(bytes).await;
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer).await;
        answer
    }

    async fn ask(&self, d: &Descriptor, stamp: &str, deadline_ms: u64) -> Answer {
        let request = Request {
            v: PROTOCOL_VERSION,
            op: Op::Ask(Box::new(Ask {
                stamp: stamp.to_string(),
                deadline_ms,
                descriptor: d.clone(),
                action: "git push origin".into(),
                caller: Caller::default(),
                updates: Vec::new(),
            })),
        };
        let mut line = serde_json::to_vec(&request).unwrap();
        line.push(b'\n');
        serde_json::from_str(&self.exchange(&line).await).unwrap()
    }

    async fn stop(mut self) {
        self.shutdown.cancel();
        (&mut self.task).await.unwrap();
    }
}

impl Drop for Served {
    /// The ledger writer appends on a thread of its own: it is waited for before the temp
    /// dir goes, or its last line would make the directory again and leave it behind.
    fn drop(&mut self) {
        self.resident.judge.refusals.close();
    }
}

fn verdict(answer: &Answer) -> Option<Verdict> {
    answer.parsed_verdict()
}

async fn grant(store: &dyn LeaseStore, lane: &str, takeover: bool) -> Descriptor {
    let token = row_fence_contract::LeaseToken::generate().unwrap();
    let grant = Grant {
        board: "b",
        row: "r",
        lane,
        ttl_ms: 3_600_000,
        takeover,
        tenant: None,
        token: &token,
        reissue: false,
    };
    lease::acquire(store, &grant, None).await.unwrap().0
}

#[tokio::test]
async fn malformed_requests_get_protocol_error_and_the_server_keeps_serving() {
    let served = Served::start().await;
    let d = grant(served.store.as_ref(), "lane-a", false).await;
    for line in [
        &b"not json\n"[..],
        b"{\"v\":2,\"op\":\"ping\"}\n",
        b"{\"v\":1,\"op\":\"ask\"}\n",
        b"{\"v\":1,\"op\":\"ask\",\"stamp\":\"x\",\"deadline_ms\":100,\"descriptor\":{\"board\":\"B!\",\"row\":\"r\",\"lane\":\"l\",\"generation\":1}}\n",
        b"\xff\xfe\n",
        b"{\"v\":1,\"op\":\"ask\",\"deadline_ms\":-1}\n",
    ] {
        let answer: Answer = serde_json::from_str(&served.exchange(line).await).unwrap();
        assert_eq!(
            verdict(&answer),
            Some(Verdict::CouldNotRead(Reason::ProtocolError)),
            "{line:?}"
        );
    }
    // One byte over 64 KiB without a newline: protocol_error, never a panic. (More bytes
    // than the server reads would make its close a reset, and the answer unreadable.)
    let answer = served.exchange(&vec![b'x'; MAX_MESSAGE_BYTES + 1]).await;
    assert!(answer.contains("protocol_error"), "{answer}");
    let answer = served.ask(&d, &served.resident.stamp, 3000).await;
    assert_eq!(verdict(&answer), Some(Verdict::Allowed), "{answer:?}");
    served.stop().await;
}

#[tokio::test]
async fn an_answer_that_quotes_what_the_peer_sent_stays_one_readable_message() {
    let served = Served::start().await;
    // Each U+0085 is 2 bytes sent and 6 quoted back ("\u{85}"): quoting a request near
    // 64 KiB used to make answers of 140-230 KB, which no client may read.
    let wide = "\u{85}".repeat(30_000);
    let bad_board = serde_json::json!({"v": 1, "op": "ask", "stamp": "x", "deadline_ms": 100,
        "descriptor": {"board": wide, "row": "r", "lane": "l", "generation": 1}});
    let bad_type = serde_json::json!({"v": 1, "op": "ask", "stamp": "x", "deadline_ms": wide});
    for request in [bad_board, bad_type] {
        let mut line = serde_json::to_vec(&request).unwrap();
        line.push(b'\n');
        assert!(line.len() <= MAX_MESSAGE_BYTES);
        let text = served.exchange(&line).await;
        assert!(text.len() <= MAX_MESSAGE_BYTES, "{} bytes", text.len());
        let answer: Answer = serde_json::from_str(&text).unwrap();
        assert_eq!(
            verdict(&answer),
            Some(Verdict::CouldNotRead(Reason::ProtocolError))
        );
        assert!(answer.detail.ends_with('…'), "{}", answer.detail);
    }
    served.stop().await;
}

#[test]
fn no_answer_goes_out_over_the_message_limit() {
    let mut huge = Answer::could_not_read(Reason::ProtocolError, "d");
    huge.board = Some("b".repeat(MAX_MESSAGE_BYTES));
    let line = server::wire_line(&huge);
    assert!(line.len() <= MAX_MESSAGE_BYTES);
    let answer: Answer = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        verdict(&answer),
        Some(Verdict::CouldNotRead(Reason::ProtocolError))
    );
    assert!(answer.detail.contains("message limit"), "{}", answer.detail);
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_sends_nothing_gets_protocol_error_after_the_read_deadline() {
    let served = Served::start().await;
    let mut stream = UnixStream::connect(&served.socket).await.unwrap();
    // Paused: tokio moves the clock to the read deadline as soon as all tasks wait.
    let started = tokio::time::Instant::now();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.contains("protocol_error"), "{answer}");
    assert_eq!(started.elapsed(), server::READ_DEADLINE);
    served.stop().await;
}

#[tokio::test]
async fn an_ask_with_too_little_time_left_is_busy_without_a_store_call() {
    let served = Served::start().await;
    let d = grant(served.store.as_ref(), "lane-a", false).await;
    let answer = served.ask(&d, &served.resident.stamp, 1).await;
    assert_eq!(
        verdict(&answer),
        Some(Verdict::CouldNotRead(Reason::Busy)),
        "{answer:?}"
    );
    served.stop().await;
}

#[tokio::test]
async fn a_foreign_stamp_is_stale_code_and_the_server_stays_when_its_own_code_did_not_change() {
    let served = Served::start().await;
    let d = grant(served.store.as_ref(), "lane-a", false).await;
    let answer = served.ask(&d, &"0".repeat(64), 3000).await;
    assert_eq!(
        verdict(&answer),
        Some(Verdict::CouldNotRead(Reason::StaleCode)),
        "{answer:?}"
    );
    assert!(
        !served.shutdown.is_cancelled(),
        "the asker is the foreign one"
    );
    let answer = served.ask(&d, &served.resident.stamp, 3000).await;
    assert_eq!(verdict(&answer), Some(Verdict::Allowed));
    served.stop().await;
}

#[tokio::test]
async fn a_takeover_is_seen_by_the_next_ask_and_status_counts_it() {
    let served = Served::start().await;
    let a = grant(served.store.as_ref(), "lane-a", false).await;
    let stamp = served.resident.stamp.clone();
    assert_eq!(
        verdict(&served.ask(&a, &stamp, 3000).await),
        Some(Verdict::Allowed)
    );
    let b = grant(served.store.as_ref(), "lane-b", true).await;
    assert_eq!(
        verdict(&served.ask(&a, &stamp, 3000).await),
        Some(Verdict::Refused(Reason::DifferentHolder))
    );
    assert_eq!(
        verdict(&served.ask(&b, &stamp, 3000).await),
        Some(Verdict::Allowed)
    );
    let status: Answer =
        serde_json::from_str(&served.exchange(b"{\"v\":1,\"op\":\"status\"}\n").await).unwrap();
    let status = status.status.expect("a status object");
    assert_eq!(
        (
            status.counts.asks,
            status.counts.allowed,
            status.counts.refused
        ),
        (3, 2, 1)
    );
    assert_eq!(
        status.counts.by_reason.get(&Reason::DifferentHolder),
        Some(&1)
    );
    assert_eq!(status.recent_refusals.len(), 1);
    served.stop().await;
}

/// A peer whose uid the daemon does not serve is refused before anything it sends is
/// judged: an ask about a row its lane holds, a ping and a status are each COULD NOT READ
/// `peer_refused`, naming the uids served and the peer's, and counted. Run in process with
/// a uid list that leaves this process out, so it runs without root.
#[tokio::test]
async fn a_peer_whose_uid_is_not_served_is_refused_whatever_it_asks() {
    let me = nix::unistd::geteuid().as_raw();
    let other = me.wrapping_add(1);
    let served = Served::serving(vec![other]).await;
    let d = grant(served.store.as_ref(), "lane-a", false).await;
    let stamp = served.resident.stamp.clone();
    let asked = served.ask(&d, &stamp, 3000).await;
    let pinged: Answer =
        serde_json::from_str(&served.exchange(b"{\"v\":1,\"op\":\"ping\"}\n").await).unwrap();
    let status: Answer =
        serde_json::from_str(&served.exchange(b"{\"v\":1,\"op\":\"status\"}\n").await).unwrap();
    for answer in [&asked, &pinged, &status] {
        assert_eq!(
            verdict(answer),
            Some(Verdict::CouldNotRead(Reason::PeerRefused)),
            "{answer:?}"
        );
        assert!(
            answer.pong.is_none() && answer.status.is_none(),
            "{answer:?}"
        );
        assert!(
            answer.detail.starts_with(&format!(
                "this daemon serves uid(s) [{other}], not uid {me} (pid "
            )),
            "{}",
            answer.detail
        );
    }
    let counts = served.resident.status().counts;
    assert_eq!(
        counts.by_reason.get(&Reason::PeerRefused),
        Some(&3),
        "{counts:?}"
    );
    assert_eq!(counts.allowed, 0);
    served.stop().await;
}
