//! The location fence against a real HTTP server on loopback: the map contract and its
//! failures through the real daemon and asker, the cache's timing rules with a
//! controllable clock, inertness, and a tenant moving between two daemons.

use crate::contract::runtime;
use crate::util::{Home, Redis, bin, run};
use row_fence_contract::Reason;
use row_fence_contract::ledger::DecidedBy;
use row_fence_resident::location::fetch::Source;
use row_fence_resident::location::{Clock, LocationFence, Settings};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "s3cret-access-value";

/// What the map server answers.
#[derive(Clone)]
enum Answer {
    Json(String),
    Status(u16),
    Html,
    Hang(Duration),
    /// 302 to this URL.
    Redirect(String),
}

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers `GET /api/tenants` as told and
/// counts the requests (and remembers their headers).
struct MapServer {
    port: u16,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<AtomicUsize>,
    headers: Arc<Mutex<Vec<String>>>,
    delay: Arc<Mutex<Duration>>,
}

impl MapServer {
    fn start(answer: Answer) -> MapServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = MapServer {
            port,
            answer: Arc::new(Mutex::new(answer)),
            requests: Arc::new(AtomicUsize::new(0)),
            headers: Arc::new(Mutex::new(Vec::new())),
            delay: Arc::new(Mutex::new(Duration::ZERO)),
        };
        let (answer, requests, headers, delay) = (
            server.answer.clone(),
            server.requests.clone(),
            server.headers.clone(),
            server.delay.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (answer, requests, headers, delay) = (
                    answer.clone(),
                    requests.clone(),
                    headers.clone(),
                    delay.clone(),
                );
                std::thread::spawn(move || serve(stream, &answer, &requests, &headers, &delay));
            }
        });
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn serve(
    stream: TcpStream,
    answer: &Mutex<Answer>,
    requests: &AtomicUsize,
    headers: &Mutex<Vec<String>>,
    delay: &Mutex<Duration>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push(line.trim_end().to_string());
    }
    if head.is_empty() {
        return;
    }
    requests.fetch_add(1, Ordering::SeqCst);
    headers.lock().unwrap().extend(head.iter().cloned());
    std::thread::sleep(*delay.lock().unwrap());
    let answer = answer.lock().unwrap().clone();
    let (status, content_type, body) = match answer {
        Answer::Json(body) => (200, "application/json", body),
        Answer::Status(code) => (code, "application/json", r#"{"error":"boom"}"#.to_string()),
        Answer::Html => (
            200,
            "text/html; charset=utf-8",
            "<!DOCTYPE html><html><body>Sign in with Access</body></html>".to_string(),
        ),
        Answer::Hang(d) => {
            std::thread::sleep(d);
            return;
        }
        Answer::Redirect(to) => {
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            return;
        }
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn map(rows: Value) -> Answer {
    Answer::Json(json!({"tenants": rows, "generatedAt": 1790990005000u64}).to_string())
}

fn acme(location: &str, epoch: i64, state: &str) -> Value {
    json!({"id": "acme", "name": "Acme", "location": location, "epoch": epoch, "state": state, "moveId": null})
}

/// A home whose registry puts board `b` under tenant `acme` (and `orphan` under none),
/// with `b/r` held by lane-a; returns the home and lane-a's descriptor.
fn fenced_home(redis: &Redis) -> (Home, std::path::PathBuf) {
    let home = Home::on(Some(redis));
    std::fs::create_dir_all(home.home.join("registry")).unwrap();
    std::fs::write(
        home.home.join("registry/boards.toml"),
        "[boards.b]\ntenant = \"acme\"\n\n[boards.orphan]\n",
    )
    .unwrap();
    let (_, d) = home.acquire("b", "r", "lane-a", &[]);
    (home, d)
}

fn fence_env<'a>(location: &'a str, url: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("ROW_FENCE_LOCATION", location),
        ("ROW_FENCE_TENANT_MAP_URL", url),
        ("ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_ID", "client-id-1"),
        ("ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_SECRET", SECRET),
    ]
}

#[test]
fn the_map_contract_decides_each_verdict_through_the_daemon_and_the_secret_never_shows() {
    let redis = Redis::start();
    let cases: Vec<(&str, Answer, i32, &str)> = vec![
        (
            "good map",
            map(json!([acme("here", 3, "active")])),
            0,
            "row-fence: ALLOWED",
        ),
        (
            "generatedAt as an object",
            Answer::Json(
                json!({"tenants": [acme("here", 3, "active")], "generatedAt": {"at": 1}})
                    .to_string(),
            ),
            0,
            "row-fence: ALLOWED",
        ),
        (
            "HTTP 500",
            Answer::Status(500),
            1,
            "row-fence: COULD NOT READ (map_unreachable)",
        ),
        (
            "an access login page",
            Answer::Html,
            1,
            "row-fence: COULD NOT READ (map_unreachable)",
        ),
        (
            "a non-integer epoch",
            map(json!([{"id": "acme", "location": "here", "epoch": "3", "state": "active"}])),
            1,
            "row-fence: COULD NOT READ (map_unreachable)",
        ),
        (
            "a duplicated tenant",
            map(json!([
                acme("here", 3, "active"),
                acme("here", 4, "active")
            ])),
            3,
            "row-fence: REFUSED (tenant_ambiguous)",
        ),
        (
            "a missing tenant",
            map(json!([{"id": "other", "location": "here", "epoch": 1, "state": "active"}])),
            3,
            "row-fence: REFUSED (tenant_not_in_map)",
        ),
        (
            "draining",
            map(json!([acme("here", 3, " Draining ")])),
            3,
            "row-fence: REFUSED (tenant_not_active)",
        ),
        (
            "moved",
            map(json!([acme("there", 4, "active")])),
            3,
            "row-fence: REFUSED (mapped_elsewhere)",
        ),
    ];
    for (name, answer, code, line) in cases {
        let server = MapServer::start(answer);
        let (home, d) = fenced_home(&redis);
        let url = server.url();
        let daemon = home.daemon_with(&[], &fence_env("here", &url));
        let ran = home.ask_with(&d, &["--json"]);
        assert!(
            ran.code == code && ran.verdict_line().starts_with(line),
            "{name}: exit {} {}",
            ran.code,
            ran.stderr
        );
        let status = crate::util::status(&daemon.socket);
        let log = daemon.log_text();
        let ledger = std::fs::read_to_string(home.home.join("refusals.jsonl")).unwrap_or_default();
        for output in [&ran.stdout, &ran.stderr, &status.to_string(), &log, &ledger] {
            assert!(
                !output.contains(SECRET),
                "{name}: the secret leaked into {output}"
            );
        }
        let headers = server
            .headers
            .lock()
            .unwrap()
            .join("\n")
            .to_ascii_lowercase();
        assert!(
            headers.contains(&format!("cf-access-client-secret: {SECRET}")),
            "{name}: {headers}"
        );
        assert!(
            headers.contains("cf-access-client-id: client-id-1"),
            "{name}"
        );
        assert_eq!(status["location_fence"]["location"], "here");
    }
}

/// A map URL answering 302 to another origin (another port on loopback): the access
/// headers never reach it, and its map is not trusted (COULD NOT READ) unless the operator
/// allowed that origin — and then it is still not sent the headers.
#[test]
fn a_redirect_to_another_origin_gets_no_secret_and_is_trusted_only_when_allowed() {
    let redis = Redis::start();
    let other = MapServer::start(map(json!([acme("here", 3, "active")])));
    let first = MapServer::start(Answer::Redirect(format!("{}/api/tenants", other.url())));
    let (home, d) = fenced_home(&redis);
    let (first_url, other_url) = (first.url(), other.url());
    {
        let daemon = home.daemon_with(&[], &fence_env("here", &first_url));
        let ran = home.ask_with(&d, &[]);
        ran.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
        assert_eq!(other.requests(), 0, "the other origin was never asked");
        let status = crate::util::status(&daemon.socket).to_string();
        assert!(
            status.contains("ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS"),
            "{status}"
        );
        let first_headers = first
            .headers
            .lock()
            .unwrap()
            .join("\n")
            .to_ascii_lowercase();
        assert!(
            first_headers.contains("cf-access-client-secret"),
            "{first_headers}"
        );
        for output in [&ran.stderr, &status, &daemon.log_text()] {
            assert!(!output.contains(SECRET), "the secret leaked into {output}");
        }
    }
    // Allowed: the map is trusted, and still no access header went to that origin.
    let mut env = fence_env("here", &first_url);
    env.push(("ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS", &other_url));
    let _daemon = home.daemon_with(&[], &env);
    home.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    assert!(other.requests() >= 1);
    let other_headers = other
        .headers
        .lock()
        .unwrap()
        .join("\n")
        .to_ascii_lowercase();
    assert!(
        !other_headers.contains("cf-access-client"),
        "the other origin got an access header: {other_headers}"
    );
}

/// A password in the map URL's userinfo is a secret like the access secret: `status`
/// shows the URL with `***` for it, and a failed fetch's error (reqwest writes the whole URL
/// into its message) carries it neither into the verdict, `status` nor the log.
#[test]
fn a_password_in_the_map_url_never_shows() {
    let redis = Redis::start();
    let closed = crate::util::free_port();
    let url = format!("http://mapuser:map-url-password@127.0.0.1:{closed}");
    let (home, d) = fenced_home(&redis);
    let daemon = home.daemon_with(&[], &fence_env("here", &url));
    let ran = home.ask_with(&d, &["--json"]);
    ran.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
    let status = crate::util::status(&daemon.socket);
    assert_eq!(
        status["location_fence"]["map_url"],
        format!("http://mapuser:***@127.0.0.1:{closed}/api/tenants")
    );
    let ledger = std::fs::read_to_string(home.home.join("refusals.jsonl")).unwrap_or_default();
    for output in [
        &ran.stdout,
        &ran.stderr,
        &status.to_string(),
        &daemon.log_text(),
        &ledger,
    ] {
        assert!(
            !output.contains("map-url-password") && !output.contains(SECRET),
            "a secret leaked into {output}"
        );
    }
}

#[test]
fn a_map_that_hangs_past_the_fetch_timeout_is_map_unreachable() {
    let redis = Redis::start();
    let server = MapServer::start(Answer::Hang(Duration::from_secs(8)));
    let (home, d) = fenced_home(&redis);
    let url = server.url();
    let _daemon = home.daemon_with(&[], &fence_env("here", &url));
    let ran = home.ask_with(&d, &["--timeout-ms", "9000"]);
    ran.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
    assert!(
        ran.elapsed >= Duration::from_secs(5),
        "the fetch waited for its 5 s timeout: {:?}",
        ran.elapsed
    );
    // Within the 5 s retry spacing the next ask does not wait on another fetch.
    let again = home.ask_with(&d, &["--timeout-ms", "3000"]);
    again.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
    assert_eq!(server.requests(), 1);
}

#[test]
fn map_unreachable_names_its_cause_from_the_daemon_and_from_check() {
    let redis = Redis::start();
    let (home, d) = fenced_home(&redis);
    let refused = {
        // A port nobody listens on: bound, then released.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port())
    };
    let not_found = MapServer::start(Answer::Status(404));
    let not_json = MapServer::start(Answer::Json("{not json".into()));
    for (url, cause) in [
        (not_found.url(), "HTTP 404"),
        (not_json.url(), "not JSON"),
        (refused, "cannot connect"),
    ] {
        let env = fence_env("here", &url);
        let mut check = home.command(bin("row-fence"));
        check
            .envs(env.iter().copied())
            .args(["check", "--descriptor"])
            .arg(&d);
        let ran = run(&mut check);
        ran.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
        assert!(
            ran.verdict_line().contains(cause),
            "{cause}: {}",
            ran.stderr
        );
        let daemon = home.daemon_with(&[], &env);
        let ran = home.ask_with(&d, &[]);
        ran.expect(1, "row-fence: COULD NOT READ (map_unreachable)");
        assert!(
            ran.verdict_line().contains(cause),
            "{cause}: {}",
            ran.stderr
        );
        drop(daemon);
    }
}

#[test]
fn a_board_without_a_tenant_and_a_fence_without_a_map_url_are_fenced() {
    let redis = Redis::start();
    let server = MapServer::start(map(json!([acme("here", 3, "active")])));
    let (home, _) = fenced_home(&redis);
    let (_, orphan) = home.acquire("orphan", "r", "lane-a", &[]);
    let url = server.url();
    {
        let _daemon = home.daemon_with(&[], &fence_env("here", &url));
        home.ask_with(&orphan, &[])
            .expect(3, "row-fence: REFUSED (tenant_unknown)");
    }
    let (home, d) = fenced_home(&redis);
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_LOCATION", "here")]);
    home.ask_with(&d, &[])
        .expect(1, "row-fence: COULD NOT READ (map_missing)");
    home.ask_with(&d, &[])
        .expect(1, "row-fence: COULD NOT READ (map_missing)");
    let warnings = daemon
        .log_text()
        .matches("without ROW_FENCE_TENANT_MAP_URL")
        .count();
    assert_eq!(warnings, 1, "one warning at start: {}", daemon.log_text());
}

#[test]
fn a_registry_that_does_not_parse_stops_the_daemon_naming_the_line() {
    let home = Home::file();
    std::fs::create_dir_all(home.home.join("registry")).unwrap();
    std::fs::write(
        home.home.join("registry/boards.toml"),
        "[boards.b]\ntenant = \"acme\"\ntenant = nope\n",
    )
    .unwrap();
    let ran = crate::util::run(&mut home.command(crate::util::bin("row-fence-resident")));
    assert_ne!(ran.code, 0);
    assert!(
        ran.stderr.contains("boards.toml") && ran.stderr.contains("line 3"),
        "{}",
        ran.stderr
    );
    assert!(!home.socket().exists(), "it never bound");
}

#[test]
fn status_shows_the_location_the_map_and_its_rows_without_fetching() {
    let redis = Redis::start();
    let server = MapServer::start(map(json!([acme("here", 5, "active")])));
    let (home, d) = fenced_home(&redis);
    let url = server.url();
    let _daemon = home.daemon_with(&[], &fence_env("here", &url));
    let before = home.cli(&["status"]);
    assert!(
        before.stdout.contains("location   here (map never fetched"),
        "{}",
        before.stdout
    );
    assert_eq!(server.requests(), 0, "status never fetches");
    home.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    let after = home.cli(&["status"]);
    assert!(
        after
            .stdout
            .contains("tenant acme at here (epoch 5, active)"),
        "{}",
        after.stdout
    );
    assert_eq!(server.requests(), 1);
}

#[test]
fn unset_the_fence_is_inert_no_fetch_and_no_extra_field() {
    let redis = Redis::start();
    let server = MapServer::start(map(json!([acme("there", 1, "active")])));
    let (mut home, d) = fenced_home(&redis);
    // Every verdict recorded: the ALLOWED asks' entries are the ones that must carry no
    // location field.
    home.store = format!("{}?asks=all", redis.url());
    let url = server.url();
    let (with_url, blank) = {
        let _daemon = home.daemon_with(
            &[],
            &[
                ("ROW_FENCE_TENANT_MAP_URL", url.as_str()),
                ("ROW_FENCE_LOCATION", "  "),
            ],
        );
        (
            home.ask_with(&d, &["--json"]),
            home.cli(&["status", "--json"]),
        )
    };
    let plain = {
        let _daemon = home.daemon();
        home.ask_with(&d, &["--json"])
    };
    assert_eq!(server.requests(), 0, "no fetch");
    with_url.expect(0, "row-fence: ALLOWED");
    let strip = |v: &mut Value| v.as_object_mut().unwrap().remove("elapsed_ms");
    let (mut a, mut b) = (with_url.json(), plain.json());
    strip(&mut a);
    strip(&mut b);
    assert_eq!(a, b, "the same answer as without any location setting");
    assert!(!blank.stdout.contains("location"), "{}", blank.stdout);
    let entries = redis.cli(&["XRANGE", "rowfence:board:{b}:fence:asks", "-", "+"]);
    assert!(entries.contains("allowed"), "{entries}");
    assert!(
        !entries.contains("location") && !entries.contains("epoch"),
        "{entries}"
    );
}

#[test]
fn a_moved_tenant_is_fenced_at_the_old_location_and_allowed_at_the_new_one() {
    let redis = Redis::start();
    let server = MapServer::start(map(json!([acme("here", 1, "active")])));
    let url = server.url();
    let (here, d) = fenced_home(&redis);
    let (there, _) = {
        let there = Home::on(Some(&redis));
        std::fs::create_dir_all(there.home.join("registry")).unwrap();
        std::fs::write(
            there.home.join("registry/boards.toml"),
            "[boards.b]\ntenant = \"acme\"\n",
        )
        .unwrap();
        (there, ())
    };
    let quick = [("ROW_FENCE_TENANT_MAP_REFRESH_MS", "200")];
    let mut here_env = fence_env("here", &url);
    here_env.extend(quick);
    let mut there_env = fence_env("there", &url);
    there_env.extend(quick);
    let _here = here.daemon_with(&[], &here_env);
    let _there = there.daemon_with(&[], &there_env);
    here.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    there
        .ask_with(&d, &[])
        .expect(3, "row-fence: REFUSED (mapped_elsewhere)");

    server.set(map(json!([acme("there", 2, "active")])));
    let until = Instant::now() + Duration::from_secs(10);
    let settled = |home: &Home, code: i32| {
        while home.ask_with(&d, &[]).code != code {
            assert!(
                Instant::now() < until,
                "the move was not seen within the window"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    settled(&here, 3);
    settled(&there, 0);
    here.ask_with(&d, &[])
        .expect(3, "row-fence: REFUSED (mapped_elsewhere)");
    there.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    let entries = redis.cli(&[
        "XREVRANGE",
        "rowfence:board:{b}:fence:asks",
        "+",
        "-",
        "COUNT",
        "2",
    ]);
    assert!(
        entries.contains("location") && entries.contains("mapped_elsewhere"),
        "{entries}"
    );
    let ledger = row_fence_contract::ledger::read(&here.home.join("refusals.jsonl")).unwrap();
    let last = ledger.last().unwrap();
    assert_eq!(
        (last.location.as_deref(), last.epoch, last.verdict.reason()),
        (Some("here"), Some(2), Some(Reason::MappedElsewhere))
    );
    // The cold path records the same fields: one ledger record type, built once.
    let mut check = here.command(bin("row-fence"));
    check
        .envs(here_env.iter().copied())
        .args(["check", "--descriptor"])
        .arg(&d);
    run(&mut check).expect(3, "row-fence: REFUSED (mapped_elsewhere)");
    let ledger = row_fence_contract::ledger::read(&here.home.join("refusals.jsonl")).unwrap();
    let last = ledger.last().unwrap();
    assert_eq!(
        (
            last.decided_by,
            last.location.as_deref(),
            last.epoch,
            last.verdict.reason()
        ),
        (
            DecidedBy::Check,
            Some("here"),
            Some(2),
            Some(Reason::MappedElsewhere)
        )
    );
}

/// A clock the test moves by hand.
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl ManualClock {
    fn at(ms: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(ms)))
    }
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

fn fence_at(server: &MapServer, clock: Arc<ManualClock>) -> Arc<LocationFence> {
    let settings = Settings {
        location: "here".into(),
        source: Some(Source {
            url: server.url(),
            client_id: None,
            client_secret: None,
            allowed_origins: Vec::new(),
        }),
        refresh_ms: row_fence_resident::location::REFRESH_MS,
    };
    LocationFence::new(settings, clock).unwrap()
}

/// Waits until the fence's fetches have all finished (its count stops at `n`).
async fn settle(fence: &LocationFence, server: &MapServer, n: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    while server.requests() < n || fence.status().fetches as usize != server.requests() {
        assert!(Instant::now() < until);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The fetch's result lands just after the server answered.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test]
fn a_map_is_served_from_memory_for_30_s_and_one_refetch_serves_100_concurrent_asks() {
    let server = MapServer::start(map(json!([acme("here", 1, "active")])));
    *server.delay.lock().unwrap() = Duration::from_millis(300);
    runtime().block_on(async {
        let clock = ManualClock::at(1_000_000);
        let fence = fence_at(&server, clock.clone());
        for decision in concurrent_checks(&fence, 100).await {
            assert_eq!(decision.fenced, None);
        }
        assert_eq!(server.requests(), 1, "100 concurrent asks share one fetch");
        clock.advance(29_999);
        assert_eq!(fence.check(Some("acme"), soon()).await.fenced, None);
        assert_eq!(
            server.requests(),
            1,
            "younger than 30 s: served from memory"
        );
        clock.advance(1);
        concurrent_checks(&fence, 100).await;
        settle(&fence, &server, 2).await;
        assert_eq!(server.requests(), 2, "one refetch for 100 asks after 30 s");
    });
}

#[test]
fn a_failing_map_is_retried_every_5_s_and_the_last_good_one_goes_stale_at_60_s() {
    let server = MapServer::start(map(json!([acme("here", 1, "active")])));
    runtime().block_on(async {
        let clock = ManualClock::at(1_000_000);
        let fence = fence_at(&server, clock.clone());
        assert_eq!(fence.check(Some("acme"), soon()).await.fenced, None);
        server.set(Answer::Status(500));
        clock.advance(30_000);
        assert_eq!(
            fence.check(Some("acme"), soon()).await.fenced,
            None,
            "the last good map still serves"
        );
        settle(&fence, &server, 2).await;
        for _ in 0..4 {
            clock.advance(1_000);
            assert_eq!(fence.check(Some("acme"), soon()).await.fenced, None);
        }
        assert_eq!(server.requests(), 2, "no new try within 5 s of a failure");
        clock.advance(1_000);
        fence.check(Some("acme"), soon()).await;
        settle(&fence, &server, 3).await;
        assert_eq!(server.requests(), 3, "the next try 5 s later");
        clock.advance(60_000 - 35_000);
        let at_60 = fence.check(Some("acme"), soon()).await;
        settle(&fence, &server, server.requests()).await;
        assert_eq!(at_60.fenced, None, "60 s old is still fresh");
        clock.advance(1);
        let stale = fence.decide(Some("acme"));
        assert_eq!(
            (stale.fenced.map(|r| r.as_str()), stale.epoch),
            (Some("map_stale"), 1)
        );
        assert_eq!(
            fence.status().last_fetch_error.map(|e| e.contains("500")),
            Some(true)
        );
    });
}

/// Runs `n` checks for acme at once and returns their decisions.
async fn concurrent_checks(
    fence: &Arc<LocationFence>,
    n: usize,
) -> Vec<row_fence_resident::location::policy::Decision> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let fence = fence.clone();
            tokio::spawn(async move { fence.check(Some("acme"), soon()).await })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}
