//! The forge API endpoint's case (`--only forge-api`): `gh api /repos/o/r` through the
//! daemon's forge API socket ÷ the same gh through a plain Unix-socket relay (`socat`, no
//! judgement) to the same stand-in forge, p50 against p50 (target ≤ 1.2×); and, reported
//! separately, a judged write whose scope is in the request (a REST create: one ask) and
//! one that needs a lookup (a REST merge: one ask and one forge read), each against a read
//! through the daemon, with `curl --unix-socket` (gh's own start-up would hide them).
//!
//! Everything is private to the run: a stand-in GitHub API in Python on loopback HTTPS
//! (a CA and a certificate for api.github.com made with the openssl CLI, trusted by the
//! daemon through `--forge-api-ca`, by socat through `cafile`), the daemon under test on
//! the file store with the lane's row ALLOWED (the same-uid mode: `row-fence install gh`'s
//! placeholder names the lane), and socat's relay. gh opens one connection per request
//! (go-gh turns keep-alives off on a Unix socket), so each relay sample is one TLS
//! handshake with the stand-in; the daemon keeps its upstream connection warm.

use crate::children::Owned;
use crate::local::{free_port, io, log, text, wait_for, which};
use crate::options::Options;
use crate::sample::Sampler;
use crate::stats::Summary;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The daemon's p50 may be at most this many times the relay's.
pub const TARGET_RATIO: f64 = 1.2;

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// `gh api /repos/o/r` through the daemon.
    pub gh_daemon: Summary,
    /// The same through the plain relay.
    pub gh_relay: Summary,
    /// `curl` GET through the daemon (a read: no ask).
    pub curl_read: Summary,
    /// `curl` POST /repos/o/r/pulls through the daemon (one ask).
    pub curl_create: Summary,
    /// `curl` PUT /repos/o/r/pulls/1/merge through the daemon (one ask, one forge read).
    pub curl_merge: Summary,
    /// `row-fence-ask` for the same lane: what one ask costs on its own.
    pub ask: Summary,
    /// Samples that did not exit 0, all arms together.
    pub failed: usize,
}

impl Figures {
    /// daemon p50 ÷ relay p50 for gh (0 when the relay has no samples).
    pub fn ratio(&self) -> f64 {
        self.gh_daemon.p50_over(&self.gh_relay)
    }
}

/// Samples per arm: full, `--quick`, `--smoke`.
fn samples(options: &Options) -> usize {
    match (options.smoke, options.quick) {
        (true, _) => 5,
        (false, true) => 30,
        (false, false) => 150,
    }
}

/// One timed arm: its name and how to make its command.
type Arm<'a> = (&'static str, Box<dyn Fn() -> Command + 'a>);

/// The stand-in forge: answers the reads and the two writes the case sends.
const STAND_IN: &str = r#"
import http.server, ssl, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def reply(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n: self.rfile.read(n)
    def do_GET(self):
        if self.path == "/repos/o/r/pulls/1":
            self.reply({"number": 1, "head": {"ref": "feature", "sha": "1" * 40, "repo": {"full_name": "o/r"}}, "base": {"repo": {"full_name": "o/r"}}})
        else:
            self.reply({"id": 1, "full_name": "o/r"})
    def do_POST(self):
        self.drain(); self.reply({"number": 2}, 201)
    def do_PUT(self):
        self.drain(); self.reply({"merged": True})
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

/// Runs the case; `bin_dir` holds `row-fence` and `row-fence-resident`.
pub fn run(options: &Options, bin_dir: &Path) -> Result<Figures, String> {
    for program in ["gh", "socat", "curl", "python3", "openssl"] {
        which(program)?;
    }
    let dir = tempfile::Builder::new()
        .prefix("rf-bench-forge")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))?;
    let root = dir.path();
    certificates(root)?;
    let port = free_port()?;
    fs::write(root.join("standin.py"), STAND_IN).map_err(io("standin.py"))?;
    let _forge = Owned::spawn(
        Command::new("python3")
            .arg(root.join("standin.py"))
            .arg(port.to_string())
            .arg(root.join("server.pem"))
            .arg(root.join("server.key"))
            .stdout(Stdio::null())
            .stderr(log(&root.join("standin.log"))?),
        "the stand-in forge",
        Duration::from_secs(2),
    )?;
    wait_for("the stand-in forge", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })?;

    let home = root.join("home");
    let socket = root.join("forge").join("api.sock");
    let relay = root.join("relay.sock");
    let env = |cmd: &mut Command| {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root)
            .env("TMPDIR", root)
            .env("ROW_FENCE_HOME", &home)
            .env("ROW_FENCE_STORE", "file")
            .env("GH_NO_UPDATE_NOTIFIER", "1")
            .env("GH_PROMPT_DISABLED", "1");
    };
    let mut daemon = Command::new(bin_dir.join("row-fence-resident"));
    env(&mut daemon);
    daemon
        .arg("--forge-api-socket")
        .arg(&socket)
        .arg("--forge-api-ca")
        .arg(root.join("ca.pem"))
        .arg("--forge-api-connect")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log(&root.join("daemon.log"))?);
    let _daemon = Owned::spawn(&mut daemon, "row-fence-resident", Duration::from_secs(5))?;
    wait_for("the forge API socket", || socket.exists())?;
    let _relay = Owned::spawn(
        Command::new("socat")
            .arg(format!("UNIX-LISTEN:{},fork", relay.display()))
            .arg(format!(
                "OPENSSL:127.0.0.1:{port},cafile={},commonname=api.github.com",
                root.join("ca.pem").display()
            ))
            .stdout(Stdio::null())
            .stderr(log(&root.join("socat.log"))?),
        "socat",
        Duration::from_secs(2),
    )?;
    wait_for("the relay socket", || relay.exists())?;

    let cli = |args: &[&str], input: Option<&str>| -> Result<String, String> {
        let mut cmd = Command::new(bin_dir.join("row-fence"));
        env(&mut cmd);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(io("row-fence"))?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            use std::io::Write;
            stdin.write_all(text.as_bytes()).map_err(io("stdin"))?;
        }
        let out = child.wait_with_output().map_err(io("row-fence"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "row-fence {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    let descriptor = root.join("lane-a.json");
    cli(
        &[
            "acquire",
            "b",
            "r1",
            "--lane",
            "lane-a",
            "--ttl",
            "1h",
            "--write-descriptor",
            &text(&descriptor),
        ],
        None,
    )?;
    cli(&["token", "add", "-"], Some("ghp_benchTokenNotARealOne"))?;
    let gh_daemon = root.join("gh-daemon");
    let gh_relay = root.join("gh-relay");
    cli(
        &[
            "install",
            "gh",
            "--lane",
            "lane-a",
            "--repo",
            "o/r",
            "--gh-config-dir",
            &text(&gh_daemon),
            "--forge-api-socket",
            &text(&socket),
            "--descriptor",
            &text(&descriptor),
        ],
        None,
    )?;
    fs::create_dir_all(&gh_relay).map_err(io("gh-relay"))?;
    let config = fs::read_to_string(gh_daemon.join("config.yml")).map_err(io("config.yml"))?;
    fs::write(
        gh_relay.join("config.yml"),
        config.replace(&text(&socket), &text(&relay)),
    )
    .map_err(io("config.yml"))?;
    let hosts = fs::read_to_string(gh_daemon.join("hosts.yml")).map_err(io("hosts.yml"))?;
    fs::write(gh_relay.join("hosts.yml"), &hosts).map_err(io("hosts.yml"))?;
    let placeholder = hosts
        .lines()
        .find_map(|l| l.trim().strip_prefix("oauth_token: "))
        .ok_or("install gh wrote no placeholder")?
        .to_string();

    let gh = |config_dir: &Path| {
        let mut cmd = Command::new("gh");
        env(&mut cmd);
        cmd.args(["api", "/repos/o/r"])
            .env("GH_CONFIG_DIR", config_dir)
            .current_dir(root);
        cmd
    };
    let curl = |args: &[&str]| {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-f", "--max-time", "20", "--unix-socket"])
            .arg(&socket)
            .arg("-H")
            .arg(format!("Authorization: token {placeholder}"))
            .args(args);
        cmd
    };
    let create = ["-d", r#"{"head":"feature","base":"main","title":"t"}"#];
    let arms: Vec<Arm> = vec![
        ("gh through the daemon", Box::new(|| gh(&gh_daemon))),
        ("gh through the relay", Box::new(|| gh(&gh_relay))),
        (
            "curl read",
            Box::new(|| curl(&["http://api.github.com/repos/o/r"])),
        ),
        (
            "curl create",
            Box::new(move || {
                let mut args = create.to_vec();
                args.push("http://api.github.com/repos/o/r/pulls");
                curl(&args)
            }),
        ),
        (
            "curl merge",
            Box::new(|| {
                curl(&[
                    "-X",
                    "PUT",
                    "-d",
                    "{}",
                    "http://api.github.com/repos/o/r/pulls/1/merge",
                ])
            }),
        ),
        (
            "row-fence-ask",
            Box::new(|| {
                let mut cmd = Command::new(bin_dir.join("row-fence-ask"));
                env(&mut cmd);
                cmd.arg("--descriptor").arg(&descriptor);
                cmd
            }),
        ),
    ];
    // Each arm once, checked, before anything is timed.
    for (name, make) in &arms {
        let out = make().output().map_err(io("a first request"))?;
        if !out.status.success() {
            return Err(format!(
                "{name}'s first request failed: {}{}; daemon log: {}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim(),
                fs::read_to_string(root.join("daemon.log")).unwrap_or_default()
            ));
        }
    }
    let sampler = Sampler::new();
    let n = samples(options);
    let mut walls: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); arms.len()];
    let mut failed = 0;
    for i in 0..n {
        // Interleaved, the first arm rotating, so a neighbour's load slows all alike.
        for k in 0..arms.len() {
            let arm = (i + k) % arms.len();
            let sample = sampler.time(&mut (arms[arm].1)())?;
            if sample.code == 0 {
                walls[arm].push(sample.wall);
            } else {
                failed += 1;
            }
        }
    }
    Ok(Figures {
        gh_daemon: Summary::of(&walls[0]),
        gh_relay: Summary::of(&walls[1]),
        curl_read: Summary::of(&walls[2]),
        curl_create: Summary::of(&walls[3]),
        curl_merge: Summary::of(&walls[4]),
        ask: Summary::of(&walls[5]),
        failed,
    })
}

/// The case's report, in Markdown.
pub fn report(figures: Option<&Figures>, error: Option<&str>, command: &str) -> String {
    let mut md = String::from("# row-fence bench: the forge API endpoint\n\n");
    let _ = writeln!(md, "`{command}`\n");
    let _ = writeln!(
        md,
        "`gh api /repos/o/r` through the daemon's forge API socket ÷ the same gh through a plain Unix-socket relay to the same stand-in forge; p50 vs p50, target ≤ {TARGET_RATIO}×. Then what a judged write adds over a read through the daemon, with curl.\n"
    );
    if let Some(f) = figures {
        md.push_str(&Summary::table(
            "samples",
            &[
                ("gh api, through the daemon", &f.gh_daemon),
                ("gh api, through socat (no judgement)", &f.gh_relay),
                (
                    "curl GET, through the daemon (a read: no ask)",
                    &f.curl_read,
                ),
                (
                    "curl POST pulls, through the daemon (1 ask)",
                    &f.curl_create,
                ),
                (
                    "curl PUT merge, through the daemon (1 ask + 1 forge read)",
                    &f.curl_merge,
                ),
                ("row-fence-ask, the same lane (1 ask alone)", &f.ask),
            ],
        ));
        let ratio = f.ratio();
        let _ = writeln!(
            md,
            "\ndaemon ÷ relay p50 (gh): **{ratio:.3}×** — {}; failed samples: {}\n",
            if ratio > 0.0 && ratio <= TARGET_RATIO && f.failed == 0 {
                "met"
            } else {
                "MISSED"
            },
            f.failed
        );
        let _ = writeln!(
            md,
            "A judged create adds {:+.2} ms to a read's p50 (one ask); a judged merge {:+.2} ms (one ask and one forge read).\n",
            f.curl_create.p50_ms - f.curl_read.p50_ms,
            f.curl_merge.p50_ms - f.curl_read.p50_ms
        );
    }
    if let Some(error) = error {
        let _ = writeln!(md, "Not measured: {error}\n");
    }
    let _ = writeln!(md, "## How it was measured\n\n{HOW}");
    md
}

const HOW: &str = "Everything is private to the run: a stand-in GitHub API (Python's http.server over TLS, HTTP/1.1 keep-alive) on a free loopback port with a certificate for api.github.com from a CA made with the openssl CLI; the daemon under test on the file store with `--forge-api-socket`, `--forge-api-ca` and `--forge-api-connect`, its token loaded with `row-fence token add -`, the lane's row ALLOWED, the lane's gh wired by `row-fence install gh` (same-uid mode); socat relays a second Unix socket to the stand-in over TLS, verifying the same CA, with no judgement. gh opens one connection per request on a Unix socket, so every relay sample is one TLS handshake with the stand-in, while the daemon keeps its connection to the stand-in warm. The arms are interleaved sample by sample, the first arm rotating. Each sample is one process, spawn to exit.";

/// A CA and a server certificate for api.github.com it signs (P-256, 2 days), in `dir`.
fn certificates(dir: &Path) -> Result<(), String> {
    let p = |f: &str| dir.join(f);
    let openssl = |args: &[&str], files: &[(&str, PathBuf)]| -> Result<(), String> {
        let mut cmd = Command::new("openssl");
        cmd.args(args).stdin(Stdio::null());
        for (flag, path) in files {
            cmd.arg(flag).arg(path);
        }
        let out = cmd.output().map_err(io("openssl"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend(["-subj", "/CN=row-fence bench forge CA"]);
    openssl(&ca, &[("-keyout", p("ca.key")), ("-out", p("ca.pem"))])?;
    fs::write(
        p("server.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=DNS:api.github.com\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(io("server.ext"))?;
    let mut req = vec!["req", "-nodes"];
    req.extend(ec);
    req.extend(["-subj", "/CN=api.github.com"]);
    openssl(
        &req,
        &[("-keyout", p("server.key")), ("-out", p("server.csr"))],
    )?;
    openssl(
        &["x509", "-req", "-days", "2", "-set_serial", "1"],
        &[
            ("-in", p("server.csr")),
            ("-CA", p("ca.pem")),
            ("-CAkey", p("ca.key")),
            ("-extfile", p("server.ext")),
            ("-out", p("server.pem")),
        ],
    )
}
