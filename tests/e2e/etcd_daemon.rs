//! The daemon and the CLI on a real 3-member etcd cluster (ARCHITECTURE.md, "The etcd
//! store"): a whole cluster restored from a snapshot taken before a takeover answers
//! `store_regressed` until an operator accepts it; `etcds://` with client certificates, a
//! wrong CA said plainly, the client key's path never printed; `store check` names the
//! members, the leader, the quorum and the key prefix; `health` goes unhealthy while asks
//! fail for want of a quorum.

use crate::etcd_cluster::{ClusterTls, EtcdCluster};
use crate::util::{Home, Ran, bin, run, status, until};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The reproduction: lane-a holds the row; a snapshot is saved; lane-b takes the row over
/// (acknowledged: the home records its revision); then the whole cluster is restored from
/// the snapshot, every member, under a running daemon. Its revision went back: the daemon
/// and a cold `row-fence check` answer `store_regressed` for lane-a, never ALLOWED, until
/// `store accept-regression`; then neither old lane holds the row and the next grant's
/// generation was never handed out.
#[test]
fn a_cluster_restored_from_before_a_takeover_never_allows_the_old_holder() {
    let mut cluster = EtcdCluster::start_direct();
    let home = Home::with_store(cluster.url());
    let _daemon = home.daemon();
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let snapshot = cluster.dir.path().join("before-takeover.db");
    cluster.snapshot_save(&snapshot);
    let (g2, b) = home.acquire("b", "r", "lane-b", &["--takeover"]);
    assert!(g2 > g1);
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");

    cluster.restore_all(&snapshot);
    let answers: Vec<Ran> = (0..10).map(|_| home.ask_with(&a, &[])).collect();
    let allowed = answers.iter().filter(|r| r.code == 0).count();
    let regressed = answers
        .iter()
        .filter(|r| {
            r.verdict_line()
                .starts_with("row-fence: COULD NOT READ (store_regressed)")
        })
        .count();
    eprintln!(
        "restored cluster: 10 asks for lane-a through the daemon, {allowed} ALLOWED, {regressed} store_regressed"
    );
    assert_eq!(allowed, 0, "{answers:?}");
    assert_eq!(regressed, 10, "{answers:?}");
    assert!(
        answers[0].stderr.contains(&format!("revision {g1}"))
            && answers[0].stderr.contains(&format!("revision {g2}")),
        "{}",
        answers[0].stderr
    );
    for d in [&a, &b] {
        home.cli(&["check", "--descriptor", d.to_str().unwrap()])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
        home.ask_with(d, &[])
            .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    }
    // The cluster's other spellings are one store: its members in another order, by
    // `localhost`, or only one or two of them (the identity is in the cluster).
    let port = |i: usize| cluster.members[i].client_port;
    for url in [
        format!(
            "etcd://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
            port(2),
            port(0),
            port(1)
        ),
        format!(
            "etcd://localhost:{},localhost:{},localhost:{}",
            port(0),
            port(1),
            port(2)
        ),
        format!("etcd://127.0.0.1:{},127.0.0.1:{}", port(0), port(1)),
        format!("etcd://127.0.0.1:{}", port(2)),
    ] {
        let ran = run(home
            .command(bin("row-fence"))
            .env("ROW_FENCE_STORE", &url)
            .args(["check", "--descriptor", a.to_str().unwrap()]));
        ran.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    }

    let accepted = home.cli(&["store", "accept-regression", "b", "--json"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    for d in [&a, &b] {
        home.ask_with(d, &[])
            .expect(3, "row-fence: REFUSED (not_held)");
    }
    let (g3, c) = home.acquire("b", "r", "lane-c", &[]);
    assert!(
        g3 > g2,
        "generation {g3} was handed out before ({g1}, {g2})"
    );
    home.ask_with(&c, &[]).expect(0, "row-fence: ALLOWED");
    home.cli(&["check", "--descriptor", c.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
}

/// The cluster's identity key deleted by hand: through any URL the home answers
/// `store_regressed` (it knew the cluster's identity at every member). An operator's accept
/// made through a URL naming one member accepts the cluster: the other members the home
/// knew the old identity at expect the new one too, so a URL naming all of them (the
/// daemon's) grants and answers ALLOWED, with no generation handed out again.
#[test]
fn an_accept_through_one_member_accepts_the_cluster() {
    let cluster = EtcdCluster::start_direct();
    let home = Home::with_store(cluster.url());
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    let deleted = run(cluster.ctl(&[0]).args(["del", "rowfence/store-id"]));
    assert_eq!(deleted.stdout.trim(), "1", "{}", deleted.stderr);
    home.cli(&["check", "--descriptor", a.to_str().unwrap()])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let accepted = run(home
        .command(bin("row-fence"))
        .env("ROW_FENCE_STORE", cluster.url_of(0))
        .args(["store", "accept-regression", "b"]));
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let _daemon = home.daemon();
    let (g2, c) = home.acquire("b", "r", "lane-c", &[]);
    assert!(g2 > g1, "generation {g2} was handed out before ({g1})");
    home.ask_with(&c, &[]).expect(0, "row-fence: ALLOWED");
    home.cli(&["check", "--descriptor", c.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
}

/// A member listening on loopback and on this machine's address is one member whichever
/// the URL names: its identity key deleted by hand (what a restore from before the identity
/// leaves), a home that knew it as `127.0.0.1` answers `store_regressed` through a URL
/// naming this machine's address — the daemon, a cold check and a grant — never ALLOWED
/// from a fresh start.
#[test]
fn a_member_named_by_this_machines_address_is_the_one_loopback_names() {
    let Some(ip) = crate::util::this_machines_address() else {
        eprintln!("this machine has no address but loopback: nothing to name the member by");
        return;
    };
    let etcd = crate::etcd_cluster::SingleEtcd::start_also_on(&ip);
    let port = etcd.client_port;
    let healthy = until(
        Duration::from_secs(20),
        || run(etcd.ctl().args(["endpoint", "health"])),
        |r| r.code == 0,
    );
    assert_eq!(healthy.code, 0, "{}", healthy.stderr);
    let home = Home::with_store(format!("etcd://127.0.0.1:{port}"));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let deleted = run(etcd.ctl().args(["del", "rowfence/store-id"]));
    assert_eq!(deleted.stdout.trim(), "1", "{}", deleted.stderr);
    let by_address = format!("etcd://{ip}:{port}");
    let checked = run(home
        .command(bin("row-fence"))
        .env("ROW_FENCE_STORE", &by_address)
        .args(["check", "--descriptor", a.to_str().unwrap()]));
    checked.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_STORE", by_address.as_str())]);
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    drop(daemon);
    let granted = run(home
        .command(bin("row-fence"))
        .env("ROW_FENCE_STORE", &by_address)
        .args(["acquire", "b", "r2", "--lane", "lane-c"]));
    assert_eq!(granted.code, 1, "{}", granted.stderr);
    assert!(
        granted.stderr.contains("carries no identity"),
        "{}",
        granted.stderr
    );
}

/// Makes a CA in `dir` (`<name>-ca.pem`), and, signed by it, a server certificate for
/// 127.0.0.1 and a client certificate, with the `openssl` CLI (P-256, valid 2 days).
fn certs(dir: &Path, name: &str) -> ClusterTls {
    let p = |file: &str| dir.join(format!("{name}-{file}"));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let openssl = |args: &[&str], files: &[(&str, PathBuf)]| {
        let mut cmd = Command::new("openssl");
        cmd.args(args).stdin(Stdio::null());
        for (flag, path) in files {
            cmd.arg(flag).arg(path);
        }
        let out = cmd.output().expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend(["-subj", "/CN=row-fence test CA"]);
    openssl(&ca, &[("-keyout", p("ca.key")), ("-out", p("ca.pem"))]);
    for (who, usage) in [
        (
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        let ext = p(&format!("{who}.ext"));
        std::fs::write(
            &ext,
            format!(
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n{usage}"
            ),
        )
        .unwrap();
        let mut req = vec!["req", "-nodes"];
        req.extend(ec);
        let subject = format!("/CN=row-fence test {who}");
        req.extend(["-subj", &subject]);
        openssl(
            &req,
            &[
                ("-keyout", p(&format!("{who}.key"))),
                ("-out", p(&format!("{who}.csr"))),
            ],
        );
        openssl(
            &["x509", "-req", "-days", "2", "-set_serial", "1"],
            &[
                ("-in", p(&format!("{who}.csr"))),
                ("-CA", p("ca.pem")),
                ("-CAkey", p("ca.key")),
                ("-extfile", ext),
                ("-out", p(&format!("{who}.pem"))),
            ],
        );
    }
    ClusterTls {
        ca: p("ca.pem"),
        server_cert: p("server.pem"),
        server_key: p("server.key"),
        client_cert: p("client.pem"),
        client_key: p("client.key"),
    }
}

/// `etcds://` against members that require client certificates: an ask is ALLOWED over
/// TLS through the daemon and through a cold check; a URL trusting another CA, or
/// presenting no client certificate, could not read (never ALLOWED) and says why; the
/// client key's path is printed nowhere (status, logs, messages).
#[test]
fn etcds_with_client_certificates_asks_and_a_wrong_ca_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certs(dir.path(), "right");
    let other = certs(dir.path(), "other");
    let cluster = EtcdCluster::start_tls(tls.clone());
    let url = cluster.tls_url();
    let home = Home::with_store(url.clone());
    let daemon = home.daemon();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    home.cli(&["check", "--descriptor", a.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
    let shown = home.cli(&["store", "check"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let s = status(&daemon.socket);
    assert!(s["store"].as_str().unwrap().starts_with("etcds://"), "{s}");
    let key = tls.client_key.display().to_string();
    let text = home.cli(&["status"]);
    for output in [
        s.to_string(),
        text.stdout,
        text.stderr,
        shown.stdout,
        shown.stderr,
        daemon.log_text(),
    ] {
        assert!(!output.contains(&key), "{output}");
    }

    // The right client certificate, but the members' certificate checked against another
    // CA; then the right CA and no client certificate.
    let wrong_ca = url.replace(
        &tls.ca.display().to_string(),
        &other.ca.display().to_string(),
    );
    let no_cert = format!(
        "etcds://127.0.0.1:{}?cacert={}",
        cluster.members[0].client_port,
        tls.ca.display()
    );
    for (name, store, says) in [
        (
            "a wrong CA",
            wrong_ca,
            "does not verify against this URL's cacert",
        ),
        (
            "no client certificate",
            no_cert,
            "presents no client certificate",
        ),
    ] {
        let elsewhere = Home::with_store(store);
        let checked = elsewhere.cli(&[
            "check",
            "--descriptor",
            a.to_str().unwrap(),
            "--timeout-ms",
            "3000",
        ]);
        eprintln!("{name}: {}", checked.verdict_line());
        let line = checked.verdict_line();
        assert_eq!(checked.code, 1, "{name}: {}", checked.stderr);
        assert!(
            line.starts_with("row-fence: COULD NOT READ (store_unreachable)")
                || line.starts_with("row-fence: COULD NOT READ (store_error)"),
            "{name}: {}",
            checked.stderr
        );
        assert!(
            checked.stderr.contains(says),
            "{name}: the reason is not said: {}",
            checked.stderr
        );
        assert!(!checked.stderr.contains(&key), "{}", checked.stderr);
        let acquired = elsewhere.cli(&["acquire", "b", "r2", "--lane", "lane-x"]);
        assert_ne!(acquired.code, 0, "{name}: {}", acquired.stdout);
        assert!(!acquired.stderr.contains(&key), "{}", acquired.stderr);
    }
}

/// `store check` on etcd names the members, the leader, the quorum and the key prefix. With
/// two of three members killed no ask can be answered: every ask could not read, `health`
/// goes unhealthy (`row_fence_healthy 0`) and `store check` fails; with them back, both
/// are healthy again.
#[test]
fn store_check_names_the_quorum_and_health_fails_while_asks_fail() {
    let mut cluster = EtcdCluster::start_direct();
    let home = Home::with_store(cluster.url());
    let shown = home.cli(&["store", "check"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    for part in [
        "members: ",
        "m0",
        "m1",
        "m2",
        "(leader)",
        "quorum: 2 of 3",
        "key prefix: rowfence/",
    ] {
        assert!(shown.stdout.contains(part), "{part}: {}", shown.stdout);
    }
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon_with(&[], &[("ROW_FENCE_HEARTBEAT_MS", "200")]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "1s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
    // The daemon's status gives the same as typed fields: the members as listed, the
    // leader among them, and the identity the store carries since the first write.
    let status = home.cli(&["status", "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let check = &status.json()["store_check"];
    let mut members: Vec<&str> = check["members"]
        .as_array()
        .map(|m| m.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    members.sort_unstable();
    assert_eq!(members, ["m0", "m1", "m2"], "{check}");
    let led = check["leader"].as_str().unwrap_or_default();
    assert!(["m0", "m1", "m2"].contains(&led), "{check}");
    let identity = check["identity"].as_str().unwrap_or_default();
    assert!(
        shown_identity(&home.cli(&["store", "check"]).stdout).is_some_and(|s| s == identity),
        "{check}"
    );

    let leader = cluster.leader();
    let lost: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    for i in &lost {
        cluster.kill9(*i);
    }
    let asking = || {
        let ran = home.ask_with(&a, &["--timeout-ms", "1500"]);
        assert_eq!(ran.code, 1, "{}", ran.stderr);
        assert!(
            ran.verdict_line().starts_with("row-fence: COULD NOT READ"),
            "{}",
            ran.stderr
        );
        ran
    };
    let health = until(
        Duration::from_secs(15),
        || {
            asking();
            home.cli(&["health", "--max-age", "1s", "--prometheus"])
        },
        |r| r.code == 1,
    );
    assert!(
        health.stdout.contains("row_fence_healthy 0"),
        "{}",
        health.stdout
    );
    let shown = home.cli(&["store", "check", "--timeout", "3s"]);
    assert_ne!(shown.code, 0, "{}", shown.stdout);

    for i in &lost {
        cluster.restart(*i);
    }
    cluster.wait_healthy(&[0, 1, 2], Duration::from_secs(45));
    until(
        Duration::from_secs(10),
        || home.ask_with(&a, &[]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: ALLOWED");
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "1s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
}

/// Every member paused (SIGSTOP), so no call is refused, none answers: an ask through the
/// daemon and a cold check each answer COULD NOT READ within their own deadline (1 s),
/// never ALLOWED; continued, the same ask is ALLOWED again.
#[test]
fn a_whole_cluster_paused_answers_could_not_read_within_the_asks_deadline() {
    let cluster = EtcdCluster::start_direct();
    let home = Home::with_store(cluster.url());
    let _daemon = home.daemon();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    for i in 0..crate::etcd_cluster::MEMBERS {
        cluster.signal(i, nix::sys::signal::Signal::SIGSTOP);
    }
    let started = std::time::Instant::now();
    let asked = home.ask_with(&a, &["--timeout-ms", "1000"]);
    let asked_in = started.elapsed();
    let started = std::time::Instant::now();
    let checked = home.cli(&[
        "--timeout",
        "1s",
        "check",
        "--descriptor",
        a.to_str().unwrap(),
    ]);
    let checked_in = started.elapsed();
    for i in 0..crate::etcd_cluster::MEMBERS {
        cluster.signal(i, nix::sys::signal::Signal::SIGCONT);
    }
    eprintln!("paused cluster: the ask answered in {asked_in:?}, the cold check in {checked_in:?}");
    asked.expect(1, "row-fence: COULD NOT READ");
    checked.expect(1, "row-fence: COULD NOT READ");
    assert!(asked_in < Duration::from_millis(1500), "{asked_in:?}");
    assert!(checked_in < Duration::from_millis(1800), "{checked_in:?}");
    until(
        Duration::from_secs(10),
        || home.ask_with(&a, &[]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: ALLOWED");
}

/// The identity `store check` prints (`identity: <id> (carried by the store; …)`).
fn shown_identity(stdout: &str) -> Option<String> {
    let at = stdout.find("identity: ")? + "identity: ".len();
    stdout[at..].split_whitespace().next().map(str::to_string)
}
