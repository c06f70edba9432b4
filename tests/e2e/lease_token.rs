//! The lease token (ARCHITECTURE.md, "Lease token"): only the descriptor a grant wrote can
//! be presented. A descriptor written from a refusal's words is refused `token_mismatch`,
//! on both stores (the Redis ask script judges the holder; the shared rule the token);
//! nothing is granted whose descriptor cannot be written; the token and its hash are never
//! printed; a token is never reissued (a lost descriptor is a new grant), only a lease
//! granted before lease tokens is armed; renew and release need the token.

use crate::util::{Home, Redis, Repo, git};
use std::fs;
use std::os::unix::fs::PermissionsExt;

on_both_stores!(
    a_descriptor_forged_from_a_refusal_is_refused_token_mismatch,
    a_grant_whose_descriptor_cannot_be_written_is_not_made,
    neither_the_token_nor_its_hash_is_ever_printed,
    a_token_is_never_reissued_and_a_lost_descriptor_is_a_new_grant,
    renew_and_release_need_the_holders_token,
);

fn a_descriptor_forged_from_a_refusal_is_refused_token_mismatch(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let _daemon = home.daemon();
    let (generation, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    // Everything the refusal says, nothing the holder alone has.
    let forged = home.path("forged.json");
    fs::write(
        &forged,
        format!(r#"{{"board":"board-1","row":"row-1","lane":"lane-b","generation":{generation}}}"#),
    )
    .unwrap();
    let refused = home.ask_with(&forged, &[]);
    refused.expect(3, "row-fence: REFUSED (token_mismatch)");
    // The refusal's words name no command that would arm the forger's descriptor.
    assert!(!refused.stderr.contains("--reissue"), "{}", refused.stderr);
    // A guessed token is no better.
    let guessed = home.path("guessed.json");
    fs::write(
        &guessed,
        format!(
            r#"{{"board":"board-1","row":"row-1","lane":"lane-b","generation":{generation},"token":"{}"}}"#,
            "0".repeat(64)
        ),
    )
    .unwrap();
    home.ask_with(&guessed, &[])
        .expect(3, "row-fence: REFUSED (token_mismatch)");
    // Through git's pre-push hook: the forged descriptor's push leaves the remote unmoved.
    let repo = Repo::new(&home, "forged");
    fs::copy(&forged, repo.descriptor()).unwrap();
    let pushed = repo.commit_and_push(&home, "forged");
    assert_ne!(pushed.code, 0, "{}", pushed.stderr);
    assert!(
        pushed.stderr.contains("token_mismatch"),
        "{}",
        pushed.stderr
    );
    assert_eq!(repo.remote_head(&home), "");
    // The holder's own descriptor pushes.
    fs::copy(&b, repo.descriptor()).unwrap();
    let pushed = repo.commit_and_push(&home, "holder");
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    assert_eq!(repo.remote_head(&home), repo.local_head(&home));
    let _ = git;
}

fn a_grant_whose_descriptor_cannot_be_written_is_not_made(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let missing = home.path("no-such-dir/lane-b.json");
    let ran = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-b",
        "--write-descriptor",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("nothing was granted"), "{}", ran.stderr);
    let shown = home.cli(&["show", "board-1", "--json"]);
    assert_eq!(shown.stdout.trim(), "[]", "{}", shown.stderr);
    // A directory as the target: the same.
    let dir = home.path("a-dir");
    fs::create_dir(&dir).unwrap();
    let ran = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-b",
        "--write-descriptor",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    // Another lane takes the row without --takeover: nothing was held.
    home.acquire("board-1", "row-1", "lane-a", &[]);
    assert_eq!(
        fs::read_dir(home.dir.path().join("a-dir")).unwrap().count(),
        0
    );
}

fn neither_the_token_nor_its_hash_is_ever_printed(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let daemon = home.daemon();
    let (_, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    let mode = fs::metadata(&b).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let d: serde_json::Value = serde_json::from_str(&fs::read_to_string(&b).unwrap()).unwrap();
    let token = d["token"]
        .as_str()
        .expect("the descriptor carries the token")
        .to_string();
    assert_eq!(token.len(), 64);
    let forged = home.path("forged.json");
    fs::write(
        &forged,
        r#"{"board":"board-1","row":"row-1","lane":"lane-b","generation":1}"#,
    )
    .unwrap();
    let mut seen = vec![
        home.ask_with(&b, &["--json"]).stdout,
        home.ask_with(&forged, &["--json"]).stdout,
        home.cli(&["show", "board-1", "--json"]).stdout,
        home.cli(&["show", "board-1"]).stdout,
        home.cli(&["records", "board-1", "--json"]).stdout,
        home.cli(&["records", "board-1"]).stdout,
        home.cli(&["status", "--json"]).stdout,
        home.cli(&[
            "acquire",
            "board-1",
            "row-2",
            "--lane",
            "lane-b",
            "--write-descriptor",
            home.path("row-2.json").to_str().unwrap(),
        ])
        .stdout,
    ];
    seen.push(daemon.log_text());
    for entry in fs::read_dir(&home.home).unwrap().flatten() {
        if entry.file_name() == "ledger" || entry.path().extension().is_some_and(|e| e == "jsonl") {
            seen.push(fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    let hash = {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(token.as_bytes());
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    for text in &seen {
        assert!(!text.contains(&token), "the token was printed: {text}");
        assert!(
            !text.contains(&hash),
            "the token's hash was printed: {text}"
        );
        assert!(!text.contains("token_sha256"), "{text}");
    }
}

/// Naming the holder proves nothing, so a lease with a token is never given another one:
/// `--reissue` by the holder's name (or another's) is refused and the holder's descriptor
/// keeps working; a holder that lost its descriptor acquires the row again, a new
/// generation that fences the lost one. Only a lease stored without a token (granted
/// before lease tokens, or by a raw batch) is armed, at its generation.
fn a_token_is_never_reissued_and_a_lost_descriptor_is_a_new_grant(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let _daemon = home.daemon();
    let (generation, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    for lane in ["lane-b", "lane-a"] {
        let ran = home.cli(&["acquire", "board-1", "row-1", "--lane", lane, "--reissue"]);
        assert_eq!(ran.code, 3, "{lane}: {}", ran.stderr);
        assert!(!ran.stdout.contains("token"), "{lane}: {}", ran.stdout);
    }
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    let lost = home.path("lost.json");
    fs::copy(&b, &lost).unwrap();
    let (again, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    assert!(
        again > generation,
        "a new grant: {again} after {generation}"
    );
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    home.ask_with(&lost, &[])
        .expect(3, "row-fence: REFUSED (stale_generation)");

    // A lease stored without a token: refused until its holder arms it, at its generation.
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    // A raw lease's generation is the revision its batch commits at, as a grant's is.
    let listed = home.cli(&["records", "board-1", "--json"]);
    let next = serde_json::from_str::<serde_json::Value>(&listed.stdout).unwrap()["revision"]
        .as_u64()
        .unwrap()
        + 1;
    let batch = home.path("batch.json");
    let claim = serde_json::json!([{"kind": "put", "section": "claims", "key": "row-2",
        "expected": -1, "value": {"holder": "lane-b", "generation": next,
        "expires_at_ms": in_an_hour}}]);
    fs::write(&batch, claim.to_string()).unwrap();
    let ran = home.cli(&["batch", "board-1", "--file", batch.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let bare = home.path("bare.json");
    fs::write(
        &bare,
        format!(r#"{{"board":"board-1","row":"row-2","lane":"lane-b","generation":{next}}}"#),
    )
    .unwrap();
    let refused = home.ask_with(&bare, &[]);
    refused.expect(3, "row-fence: REFUSED (token_mismatch)");
    assert!(refused.stderr.contains("--reissue"), "{}", refused.stderr);
    let other = home.cli(&[
        "acquire",
        "board-1",
        "row-2",
        "--lane",
        "lane-a",
        "--reissue",
    ]);
    assert_eq!(other.code, 3, "{}", other.stderr);
    let (armed, armed_descriptor) = home.acquire("board-1", "row-2", "lane-b", &["--reissue"]);
    assert_eq!(armed, next, "armed at its generation");
    home.ask_with(&armed_descriptor, &[])
        .expect(0, "row-fence: ALLOWED");
    let twice = home.cli(&[
        "acquire",
        "board-1",
        "row-2",
        "--lane",
        "lane-b",
        "--reissue",
    ]);
    assert_eq!(twice.code, 3, "armed once only: {}", twice.stderr);
    home.ask_with(&armed_descriptor, &[])
        .expect(0, "row-fence: ALLOWED");
}

fn renew_and_release_need_the_holders_token(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let (generation, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    let g = generation.to_string();
    let named = [
        "board-1",
        "row-1",
        "--lane",
        "lane-b",
        "--generation",
        g.as_str(),
    ];
    let bare = home.cli(&[&["renew"][..], &named[..]].concat());
    assert_eq!(bare.code, 3, "{}", bare.stderr);
    assert!(bare.stderr.contains("token"), "{}", bare.stderr);
    let bare = home.cli(&[&["release"][..], &named[..]].concat());
    assert_eq!(bare.code, 3, "{}", bare.stderr);
    let with = ["--descriptor", b.to_str().unwrap()];
    let renewed = home.cli(&[&["renew"][..], &named[..], &with[..]].concat());
    assert_eq!(renewed.code, 0, "{}", renewed.stderr);
    let released = home.cli(&[&["release"][..], &named[..], &with[..]].concat());
    assert_eq!(released.code, 0, "{}", released.stderr);
    let shown = home.cli(&["show", "board-1", "--json"]);
    assert_eq!(shown.stdout.trim(), "[]");
}

/// With `?asks=all` every verdict is in the asks stream, once and as answered: a forged
/// descriptor's ask is one `refused`/`token_mismatch` entry (the ask script allowed the
/// holder, generation and expiry, and had recorded an `allowed` entry before the token was
/// judged), the holder's ask one `allowed`.
#[test]
fn the_asks_stream_records_each_ask_once_with_its_final_verdict() {
    let redis = Redis::start();
    let home = Home::with_store(format!("{}?asks=all", redis.url()));
    let _daemon = home.daemon();
    let (generation, b) = home.acquire("board-1", "row-1", "lane-b", &[]);
    let forged = home.path("forged.json");
    fs::write(
        &forged,
        format!(r#"{{"board":"board-1","row":"row-1","lane":"lane-b","generation":{generation}}}"#),
    )
    .unwrap();
    let stream = || -> Vec<(String, String)> {
        let out = redis.cli(&["XRANGE", "rowfence:board:{board-1}:fence:asks", "-", "+"]);
        let words: Vec<&str> = out.lines().map(str::trim).collect();
        let field = |at: usize, name: &str| -> String {
            words[at..]
                .windows(2)
                .find(|w| w[0] == name)
                .map(|w| w[1].to_string())
                .unwrap_or_default()
        };
        words
            .iter()
            .enumerate()
            .filter(|(_, w)| **w == "verdict")
            .map(|(i, _)| (words[i + 1].to_string(), field(i, "reason")))
            .collect()
    };
    home.ask_with(&forged, &[])
        .expect(3, "row-fence: REFUSED (token_mismatch)");
    assert_eq!(
        stream(),
        vec![("refused".to_string(), "token_mismatch".to_string())]
    );
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    assert_eq!(stream().len(), 2);
    assert_eq!(stream()[1].0, "allowed");
}
