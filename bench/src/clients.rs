//! The command one latency sample spawns, for each client and each route to the store.
//! Every sample is a new process, as a hook starts one per fenced write.

use crate::agent_hooks::{AgentHook, Call, Harness};
use crate::capture::AskScript;
use crate::fixture::{self, ACTION, Binaries};
use crate::python_client::PythonClient;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a sample runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Client {
    /// `/bin/true`: the cost of starting any process at all.
    True,
    /// `row-fence-bench-echo`: a minimal process doing one Unix-socket round trip.
    Echo,
    /// `row-fence-bench-echo --tcp`: the same minimal process doing one round trip with
    /// the bench's TCP echo server through the delay proxy, over the distant link.
    EchoLink,
    /// `row-fence-ask --version`: the asker binary's own start, asking nothing; splits
    /// the warm ask into "start the asker" and "ask".
    AskerStart,
    /// `row-fence-ask` → the warm daemon → Redis.
    Warm,
    /// `row-fence check`: the same gate in a new process, connecting to Redis itself.
    ColdRust,
    /// `redis-cli EVALSHA` of the ask script, connecting per sample.
    RedisCli,
    /// A Python `redis` client script running the ask script, connecting per sample.
    Python,
    /// `etcdctl get` of a row-lease-shaped key on the bench's private etcd: a lease
    /// service's own client, cold.
    Etcdctl,
    /// `sh -c true` with the hook JSON on stdin: Claude Code's way of running a hook, with
    /// nothing in it (the agent guard's yardstick).
    HookTrue,
    /// `sh -c /bin/true` the same way: the floor of any hook that runs one program.
    HookExecTrue,
    /// The installed agent guard (`sh -c '<the settings command>'`) for a harmless
    /// command in a row-bound worktree: parse, bind, the standing ask (every call of a
    /// row-bound session asks), ALLOWED.
    GuardHarmless,
    /// The installed agent guard for `git push origin main` in a row-bound worktree whose
    /// lane holds its row: parse, bind, one ask, ALLOWED.
    GuardPush,
    /// A harness's installed hook (`install agent-hook --agent NAME`) run the way that
    /// harness runs it, for one of [`Call`]'s calls.
    Agent(Harness, Call),
}

/// The report's name of an agent hook sample.
fn agent_label(harness: Harness, call: Call) -> &'static str {
    use Call::{Allowed, Large, Quarantined, Unbound};
    use Harness::{Claude, Codex, Cursor, Gemini};
    match (harness, call) {
        (Claude, Unbound) => "agent hook claude: unbound",
        (Claude, Allowed) => "agent hook claude: row-bound ALLOWED",
        (Claude, Large) => "agent hook claude: 100 KB command",
        (Claude, Quarantined) => "agent hook claude: quarantined (denied)",
        (Codex, Unbound) => "agent hook codex: unbound",
        (Codex, Allowed) => "agent hook codex: row-bound ALLOWED",
        (Codex, Large) => "agent hook codex: 100 KB command",
        (Codex, Quarantined) => "agent hook codex: quarantined (denied)",
        (Gemini, Unbound) => "agent hook gemini: unbound",
        (Gemini, Allowed) => "agent hook gemini: row-bound ALLOWED",
        (Gemini, Large) => "agent hook gemini: 100 KB command",
        (Gemini, Quarantined) => "agent hook gemini: quarantined (denied)",
        (Cursor, Unbound) => "agent hook cursor: unbound",
        (Cursor, Allowed) => "agent hook cursor: row-bound ALLOWED",
        (Cursor, Large) => "agent hook cursor: 100 KB command",
        (Cursor, Quarantined) => "agent hook cursor: quarantined (denied)",
    }
}

impl Client {
    /// The name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Client::True => "floor: /bin/true",
            Client::Echo => "floor: echo round trip",
            Client::EchoLink => "floor: echo round trip over the link",
            Client::AskerStart => "floor: row-fence-ask --version",
            Client::Warm => "warm: row-fence-ask",
            Client::ColdRust => "cold Rust: row-fence check",
            Client::RedisCli => "cold generic: redis-cli EVALSHA",
            Client::Python => "cold generic: Python redis",
            Client::Etcdctl => "lease service: etcdctl get",
            Client::HookTrue => "hook floor: sh -c true",
            Client::HookExecTrue => "hook floor: sh -c /bin/true",
            Client::GuardHarmless => "guard: harmless command",
            Client::GuardPush => "guard: fenced ALLOWED push",
            Client::Agent(h, c) => agent_label(h, c),
        }
    }

    /// A short name, for ratios and the pictures.
    pub fn short(self) -> &'static str {
        match self {
            Client::True => "/bin/true",
            Client::Echo => "echo",
            Client::EchoLink => "echo over the link",
            Client::AskerStart => "asker start",
            Client::Warm => "warm",
            Client::ColdRust => "cold Rust",
            Client::RedisCli => "redis-cli",
            Client::Python => "Python",
            Client::Etcdctl => "etcdctl get",
            Client::HookTrue => "sh -c true",
            Client::HookExecTrue => "sh -c /bin/true",
            Client::GuardHarmless => "guard harmless",
            Client::GuardPush => "guard push",
            Client::Agent(h, c) => agent_label(h, c),
        }
    }

    /// How many processes one sample starts (the sample's own included), and which.
    pub fn processes(self) -> &'static str {
        match self {
            Client::HookTrue => "1 (sh)",
            Client::HookExecTrue => "1 (sh, which execs /bin/true)",
            Client::GuardHarmless => "2 (sh, row-fence-guard)",
            Client::GuardPush => "2 (sh, row-fence-guard; the ask is in process)",
            Client::Agent(_, Call::Unbound) => "2 (sh, row-fence-guard; no ask)",
            Client::Agent(_, Call::Quarantined) => {
                "2 (sh, row-fence-guard; the standing ask REFUSED, the call denied)"
            }
            Client::Agent(..) => "2 (sh, row-fence-guard; the standing ask is in process)",
            _ => "1",
        }
    }

    /// The exit a sample of this client gives when it worked: 2 for a quarantined call
    /// (denied is its answer), 0 for everything else.
    pub fn expected_code(self) -> i32 {
        match self {
            Client::Agent(_, Call::Quarantined) => 2,
            _ => 0,
        }
    }

    /// True for the clients that are the product (a failure there aborts the run; a
    /// generic client that cannot run is skipped with a note instead).
    pub fn is_product(self) -> bool {
        matches!(
            self,
            Client::Warm
                | Client::ColdRust
                | Client::GuardHarmless
                | Client::GuardPush
                | Client::Agent(..)
        )
    }
}

/// How the clients reach Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// The Unix socket: nothing between client and server.
    Unix,
    /// TLS on loopback (`rediss://127.0.0.1`).
    Tls,
    /// Plain TCP through the delay proxy (5 ms each way).
    TcpDelayed,
    /// TLS through the delay proxy (5 ms each way).
    TlsDelayed,
}

impl Route {
    /// The name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Route::Unix => "Unix socket",
            Route::Tls => "TLS",
            Route::TcpDelayed => "TCP + 5 ms each way",
            Route::TlsDelayed => "TLS + 5 ms each way",
        }
    }
}

/// Where one route reaches Redis.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Which route.
    pub route: Route,
    /// The store URL the product and the Python client take.
    pub url: String,
    /// redis-cli's connection flags.
    pub cli_args: Vec<OsString>,
    /// The trust bundle TLS clients verify the server with.
    pub tls_bundle: Option<PathBuf>,
}

impl Endpoint {
    /// The Unix socket route.
    pub fn unix(socket: &Path) -> Endpoint {
        Endpoint {
            route: Route::Unix,
            url: format!("redis+unix://{}", socket.display()),
            cli_args: vec!["-s".into(), socket.into()],
            tls_bundle: None,
        }
    }

    /// A loopback TCP route on `port`, with TLS when `bundle` is given.
    pub fn tcp(route: Route, port: u16, bundle: Option<&Path>) -> Endpoint {
        let mut cli_args: Vec<OsString> = vec![
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string().into(),
        ];
        let scheme = match bundle {
            Some(bundle) => {
                cli_args.extend(["--tls".into(), "--cacert".into(), bundle.into()]);
                "rediss"
            }
            None => "redis",
        };
        Endpoint {
            route,
            url: format!("{scheme}://127.0.0.1:{port}"),
            cli_args,
            tls_bundle: bundle.map(Path::to_path_buf),
        }
    }

    /// The environment a Rust or Python TLS client needs: `SSL_CERT_FILE`.
    pub fn env(&self) -> Vec<(String, OsString)> {
        self.tls_bundle
            .iter()
            .map(|b| ("SSL_CERT_FILE".to_string(), b.clone().into_os_string()))
            .collect()
    }
}

/// Everything needed to build any client's command.
pub struct Clients {
    /// The binaries under test.
    pub bins: Binaries,
    /// The lane's descriptor.
    pub descriptor: PathBuf,
    /// `ROW_FENCE_HOME` for `row-fence check` (its ledger; no daemon there).
    pub cold_home: PathBuf,
    /// The echo server's socket.
    pub echo_socket: PathBuf,
    /// The delay proxy in front of the TCP echo server (`None`: no distant route).
    pub echo_link: Option<std::net::SocketAddr>,
    /// The private etcd's client endpoint (`None`: etcd could not be had, skipped).
    pub etcd: Option<String>,
    /// The ask script, for the generic clients (`None`: not found, skipped).
    pub ask_script: Option<AskScript>,
    /// The Python client (`None`: could not be installed, skipped).
    pub python: Option<PythonClient>,
    /// The agent guard as installed (`None`: not set up yet).
    pub guard: Option<crate::fixture::GuardHook>,
    /// Every harness's installed hook (empty: not set up yet).
    pub agents: Vec<AgentHook>,
}

impl Clients {
    /// The command for one sample of `client` on `endpoint`; `daemon_home` is the warm
    /// daemon's home on that route. `None` when the client is unavailable.
    pub fn command(
        &self,
        client: Client,
        endpoint: &Endpoint,
        daemon_home: &Path,
    ) -> Option<Command> {
        let env = endpoint.env();
        match client {
            Client::True => Some(Command::new("/bin/true")),
            Client::Echo => {
                let mut cmd = Command::new(self.bins.path("row-fence-bench-echo"));
                cmd.arg(&self.echo_socket);
                Some(cmd)
            }
            Client::EchoLink => {
                let addr = self.echo_link?;
                let mut cmd = Command::new(self.bins.path("row-fence-bench-echo"));
                cmd.arg("--tcp").arg(addr.to_string());
                Some(cmd)
            }
            Client::Etcdctl => {
                let mut cmd = Command::new("etcdctl");
                cmd.env("ETCDCTL_API", "3").args([
                    "--endpoints",
                    self.etcd.as_deref()?,
                    "get",
                    crate::etcd::KEY,
                ]);
                Some(cmd)
            }
            Client::AskerStart => {
                let mut cmd =
                    fixture::clean_command(self.bins.path("row-fence-ask"), daemon_home, &[]);
                cmd.arg("--version");
                Some(cmd)
            }
            Client::Warm => {
                let mut cmd =
                    fixture::clean_command(self.bins.path("row-fence-ask"), daemon_home, &[]);
                cmd.arg("--descriptor")
                    .arg(&self.descriptor)
                    .args(["--action", ACTION]);
                Some(cmd)
            }
            Client::ColdRust => {
                let mut cmd =
                    fixture::clean_command(self.bins.path("row-fence"), &self.cold_home, &env);
                cmd.args(["--store", &endpoint.url, "check", "--descriptor"])
                    .arg(&self.descriptor)
                    .args(["--action", ACTION]);
                Some(cmd)
            }
            Client::RedisCli => {
                let script = self.ask_script.as_ref()?;
                let mut cmd = Command::new("redis-cli");
                cmd.args(&endpoint.cli_args).args(script.evalsha_args());
                Some(cmd)
            }
            Client::Python => {
                let script = self.ask_script.as_ref()?;
                Some(self.python.as_ref()?.command(&endpoint.url, script, &env))
            }
            Client::HookTrue | Client::HookExecTrue | Client::GuardHarmless | Client::GuardPush => {
                let guard = self.guard.as_ref()?;
                let script = match client {
                    Client::HookTrue => "true",
                    Client::HookExecTrue => "/bin/true",
                    _ => guard.command.as_str(),
                };
                let mut cmd = fixture::clean_command("sh", daemon_home, &[]);
                cmd.arg("-c").arg(script).current_dir(&guard.cwd);
                Some(cmd)
            }
            Client::Agent(harness, call) => {
                let hook = self.agents.iter().find(|a| a.harness == harness)?;
                let (_, dir) = hook.input(call)?;
                let mut cmd = fixture::clean_command("sh", daemon_home, &[]);
                cmd.arg("-c").arg(&hook.command).current_dir(dir);
                Some(cmd)
            }
        }
    }

    /// The file a sample of `client` reads on stdin (the hook JSON), if any.
    pub fn input(&self, client: Client) -> Option<&Path> {
        if let Client::Agent(harness, call) = client {
            let hook = self.agents.iter().find(|a| a.harness == harness)?;
            return hook.input(call).map(|(input, _)| input);
        }
        let guard = self.guard.as_ref()?;
        match client {
            Client::GuardPush => Some(&guard.push),
            Client::HookTrue | Client::HookExecTrue | Client::GuardHarmless => {
                Some(&guard.harmless)
            }
            _ => None,
        }
    }

    /// Checks one run of `client` answers ALLOWED (its output captured); `Err` says what
    /// it printed instead.
    pub fn preflight(
        &self,
        client: Client,
        endpoint: &Endpoint,
        daemon_home: &Path,
    ) -> Result<(), String> {
        let mut cmd = self
            .command(client, endpoint, daemon_home)
            .ok_or_else(|| format!("{} is not available", client.label()))?;
        let stdin = match self.input(client) {
            Some(path) => std::fs::File::open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .into(),
            None => std::process::Stdio::null(),
        };
        let out = cmd
            .stdin(stdin)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", client.label()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let allowed = match client {
            Client::True
            | Client::Echo
            | Client::EchoLink
            | Client::AskerStart
            | Client::HookTrue
            | Client::HookExecTrue => true,
            // A row-bound session asks on every call (its standing ask): ALLOWED.
            Client::Warm | Client::ColdRust | Client::GuardHarmless | Client::GuardPush => {
                stderr.lines().any(|l| l.starts_with("row-fence: ALLOWED"))
            }
            // Unbound: nothing to ask, the call runs (Cursor's answer is JSON on stdout).
            Client::Agent(h, Call::Unbound) => h != Harness::Cursor || stdout.contains("allow"),
            // Refused: the session is quarantined and its shell call denied.
            Client::Agent(h, Call::Quarantined) => {
                stderr.contains("QUARANTINED")
                    && (h != Harness::Cursor || stdout.contains("\"deny\""))
            }
            Client::Agent(h, _) => {
                stderr.lines().any(|l| l.starts_with("row-fence: ALLOWED"))
                    && (h != Harness::Cursor || stdout.contains("\"allow\""))
            }
            Client::RedisCli | Client::Python => stdout.lines().next() == Some("allowed"),
            Client::Etcdctl => stdout.lines().next() == Some(crate::etcd::KEY),
        };
        if out.status.code() == Some(client.expected_code()) && allowed {
            Ok(())
        } else {
            Err(format!(
                "{} on {} did not answer ALLOWED ({}): {} {}",
                client.label(),
                endpoint.route.label(),
                out.status,
                stdout.trim(),
                stderr.trim()
            ))
        }
    }
}
