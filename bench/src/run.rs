//! The run, phase by phase: set up (certificates, the private redis-server, the lease,
//! the ask script, the Python venv, the echo server), then the latency phases (Unix
//! socket, TLS, TCP + 5 ms, TLS + 5 ms, oversubscribed), the daemon's throughput and
//! connections, and its memory. Every process and temp dir is owned by a guard local to
//! [`Runner::run`], so whatever way it returns, all of it is stopped and removed.

use crate::capture::AskScript;
use crate::certs::{self, Certs};
use crate::clients::{Client, Clients, Endpoint, Route};
use crate::delay_proxy::DelayProxy;
use crate::echo_server::{self, EchoServer};
use crate::etcd::Etcd;
use crate::fixture::{self, Binaries, Daemon, ask_line};
use crate::load::Oversubscription;
use crate::machine::{self, Machine};
use crate::options::{
    LOADED_CLIENTS, LOCAL_CLIENTS, NETWORK_CLIENTS, Options, Plan, agent_clients,
};
use crate::python_client::PythonClient;
use crate::redis_server::RedisServer;
use crate::sample::Sampler;
use crate::stats::Summary;
use crate::throughput::{self, Connections, Throughput};
use crate::{capture, interrupt, rss};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The budget the seed's hook gave a fenced write: a sample slower than this would have
/// been refused there.
pub const BUDGET: Duration = Duration::from_millis(5500);

/// The delay the proxy adds each way.
pub const DELAY: Duration = Duration::from_millis(5);

/// One client's figures in one phase.
#[derive(Clone, Debug)]
pub struct Row {
    /// Which client.
    pub client: Client,
    /// Its latencies (failed samples included: a refusal is a latency too).
    pub summary: Summary,
    /// Samples that exited non-zero (not ALLOWED) or were killed.
    pub failed: usize,
    /// Samples slower than [`BUDGET`].
    pub over_budget: usize,
    /// Every sample's wall time, in ms, in the order taken (for the plots).
    pub samples_ms: Vec<f64>,
}

/// One latency phase: the clients interleaved on one route.
#[derive(Clone, Debug)]
pub struct Phase {
    /// How the store was reached.
    pub route: Route,
    /// Busy processes running meanwhile (0: none).
    pub busy: usize,
    /// Load averages before and after.
    pub load: (String, String),
    /// Its figures, one row per client measured.
    pub rows: Vec<Row>,
    /// Clients not measured here, with the reason.
    pub skipped: Vec<(Client, String)>,
    /// True when the phase hit its time cap before every count was reached.
    pub capped: bool,
}

impl Phase {
    /// The row of `client`, if measured.
    pub fn row(&self, client: Client) -> Option<&Row> {
        self.rows.iter().find(|r| r.client == client)
    }
}

/// Everything one run measured, and what it could not.
#[derive(Clone, Debug)]
pub struct Results {
    /// The sample plan.
    pub plan: Plan,
    /// The machine.
    pub machine: Machine,
    /// (what, version) of everything under test.
    pub versions: Vec<(String, String)>,
    /// Load averages at the start and at the end.
    pub load: (String, String),
    /// The latency phases, in order.
    pub phases: Vec<Phase>,
    /// One in-process client asking back to back: the daemon's round trip without a
    /// process spawn in it.
    pub single: Option<Throughput>,
    /// Asks per second with concurrent clients.
    pub throughput: Option<Throughput>,
    /// Many connections at once.
    pub connections: Option<Connections>,
    /// The daemon's RSS idle after its first phase, in KiB.
    pub idle_rss_kib: Option<u64>,
    /// The fencing-records cases.
    pub records: Option<crate::records::Figures>,
    /// The file store's ask on boards of growing size.
    pub file_store: Option<crate::file_boards::Figures>,
    /// The ask with and without the read barrier of a replicated Redis.
    pub barrier: Option<crate::barrier::Figures>,
    /// The store's ask on etcd beside a durable Redis.
    pub stores: Option<crate::stores::Figures>,
    /// Where the daemon's CPU goes while one client asks (`None`: see the notes).
    pub profile: Option<crate::profile::Profile>,
    /// The daemon's RSS idle after all the load, in KiB.
    pub idle_after_load_kib: Option<u64>,
    /// Peak RSS of one run of each client on the Unix socket, the largest of
    /// [`Plan::rss_runs`] runs, in KiB.
    pub peak_rss_kib: Vec<(Client, u64)>,
    /// Setup facts and skips the reader must know.
    pub notes: Vec<String>,
    /// Why the run stopped early, if it did.
    pub failure: Option<String>,
    /// How long the run took, in s.
    pub seconds: f64,
}

impl Results {
    /// The peak RSS measured for `client`, in KiB.
    pub fn peak_rss(&self, client: Client) -> Option<u64> {
        self.peak_rss_kib
            .iter()
            .find_map(|(c, kib)| (*c == client).then_some(*kib))
    }

    /// The phase on `route`, unloaded (`loaded` false) or oversubscribed.
    pub fn phase(&self, route: Route, loaded: bool) -> Option<&Phase> {
        self.phases
            .iter()
            .find(|p| p.route == route && (p.busy > 0) == loaded)
    }

    /// The phase of the agent hooks (each harness's hook beside `sh -c /bin/true`).
    pub fn agent_phase(&self) -> Option<&Phase> {
        self.phases.iter().find(|p| {
            p.rows
                .iter()
                .any(|r| matches!(r.client, crate::clients::Client::Agent(..)))
        })
    }
}

/// A run in progress: the options and what has been measured so far.
pub struct Runner {
    /// The flags.
    options: Options,
    /// What has been measured so far (kept when a later phase fails).
    pub results: Results,
    /// Times every sample.
    sampler: Sampler,
    /// This bench's own `--version` (its build digest): the binaries measured must carry it.
    version: &'static str,
}

impl Runner {
    /// A runner for `options`; `version` is the bench binary's `row_fence_stamp::VERSION`
    /// (a value, so this library does not link the stamp crate).
    pub fn new(options: Options, version: &'static str) -> Runner {
        let plan = options.plan();
        Runner {
            options,
            results: Results {
                plan,
                machine: Machine::read(),
                versions: Vec::new(),
                load: (machine::load_average(), String::new()),
                phases: Vec::new(),
                single: None,
                throughput: None,
                connections: None,
                idle_rss_kib: None,
                records: None,
                file_store: None,
                barrier: None,
                stores: None,
                profile: None,
                idle_after_load_kib: None,
                peak_rss_kib: Vec::new(),
                notes: Vec::new(),
                failure: None,
                seconds: 0.0,
            },
            sampler: Sampler::new(),
            version,
        }
    }

    /// Runs every case; afterwards `results` holds what was measured and why it stopped
    /// if it stopped early. Everything started is stopped before this returns.
    pub fn run(&mut self) {
        let started = Instant::now();
        if let Err(e) = self.run_all() {
            self.results.failure = Some(e);
        }
        self.results.load.1 = machine::load_average();
        self.results.seconds = started.elapsed().as_secs_f64();
    }

    fn note(&mut self, note: String) {
        eprintln!("row-fence-bench: {note}");
        self.results.notes.push(note);
    }

    fn run_all(&mut self) -> Result<(), String> {
        interrupt::install();
        raise_fd_limit();
        let plan = self.results.plan;
        let bin_dir = match &self.options.bin_dir {
            Some(dir) => dir.clone(),
            None => current_exe_dir()?,
        };
        // Short paths: socket paths are limited to 107 bytes.
        let work = tempfile::Builder::new()
            .prefix("rfbench")
            .tempdir_in("/tmp")
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        let bins = Binaries::snapshot(&bin_dir, &work.path().join("bin"))?;
        bins.check_same_build(self.version)?;
        let dir = |name: &str| -> Result<PathBuf, String> {
            let path = work.path().join(name);
            std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(path)
        };

        let certs = match certs::make(&dir("tls")?) {
            Ok(certs) => Some(certs),
            Err(e) => {
                self.note(format!("TLS cases skipped: {e}"));
                None
            }
        };
        let (redis, certs) = self.start_redis(&dir("redis")?, certs)?;
        self.versions(&bins, &redis);
        let descriptor_path = work.path().join("descriptor.json");
        let cold_home = work.path().join("cold-home");
        // The server is durable (AOF, fsync always), so the grant needs no opt-out.
        let descriptor = fixture::acquire(&bins, &cold_home, &redis.unix_url(), &descriptor_path)?;
        let python = self.prepare_python(work.path());
        let echo = EchoServer::start(&work.path().join("echo.sock"))?;
        // One round trip over the distant link: the TCP echo server behind a delay proxy
        // of its own with the same delay as the store's.
        let echo_link = DelayProxy::start(loopback(echo_server::start_tcp()?), DELAY)?;
        let etcd = self.start_etcd(&dir("etcd")?);
        let mut clients = Clients {
            bins: bins.clone(),
            descriptor: descriptor_path,
            cold_home,
            echo_socket: echo.socket.clone(),
            echo_link: Some(echo_link.addr),
            etcd: etcd.as_ref().map(|e| e.endpoint.clone()),
            ask_script: None,
            python,
            guard: None,
            agents: Vec::new(),
        };

        // Unix socket, unloaded: the floor, warm, cold, generic, interleaved.
        let unix = Endpoint::unix(&redis.socket);
        let mut daemon = Daemon::start(&bins, &work.path().join("home-unix"), &unix.url, &[])?;
        clients.ask_script = self.capture_ask(&clients, &unix, &daemon, &redis)?;
        clients.guard = Some(fixture::guard_hook(
            &bins,
            &daemon.home,
            &clients.descriptor,
            work.path(),
        )?);
        self.phase(&clients, &unix, &daemon, &LOCAL_CLIENTS, None)?;
        // Every harness's hook, in a phase of its own beside its yardstick.
        let lane = clients
            .guard
            .as_ref()
            .map(|g| g.cwd.clone())
            .unwrap_or_default();
        clients.agents = crate::agent_hooks::install(
            &bins,
            &daemon.home,
            &redis.unix_url(),
            &lane,
            &work.path().join("agents"),
        )?;
        self.phase(&clients, &unix, &daemon, &agent_clients(), None)?;
        drop(etcd);
        daemon.check_alive()?;
        std::thread::sleep(Duration::from_secs(1));
        self.results.idle_rss_kib = rss::current_kib(daemon.pid()).ok();
        self.peak_rss(&clients, &unix, &daemon)?;

        self.network_phases(&clients, &bins, &redis, certs.as_ref(), work.path())?;

        // Oversubscribed: busy processes on every core, bounded by the phase's cap.
        let cores = self.results.machine.cores;
        let busy = Oversubscription::start(
            plan.busy_per_core,
            cores,
            plan.phase_cap + Duration::from_secs(60),
        )?;
        let count = busy.count();
        self.phase(&clients, &unix, &daemon, &LOADED_CLIENTS, Some(count))?;
        drop(busy);
        daemon.check_alive()?;

        self.daemon_cases(&bins, &redis, &mut daemon, &descriptor, work.path())?;
        drop(daemon);
        interrupt::check()?;
        eprintln!("row-fence-bench: fenced writes (bytes per change, batches per second)");
        let rate_for = plan.throughput_for.min(Duration::from_secs(5));
        self.results.records = Some(crate::records::measure(
            work.path(),
            rate_for,
            &plan.record_boards,
            plan.document_board,
        )?);
        interrupt::check()?;
        eprintln!(
            "row-fence-bench: file store asks on boards of {:?} rows",
            plan.file_boards
        );
        self.results.file_store = Some(crate::file_boards::measure(
            &bins,
            work.path(),
            &plan.file_boards,
            plan.file_asks,
            plan.warmup,
        )?);
        interrupt::check()?;
        eprintln!("row-fence-bench: the read barrier of a replicated Redis");
        self.results.barrier = Some(crate::barrier::measure(
            &bins,
            &dir("barrier")?,
            &redis,
            plan.barrier_asks,
            plan.warmup,
            rate_for,
        )?);
        interrupt::check()?;
        eprintln!("row-fence-bench: etcd beside Redis");
        match crate::stores::run(&dir("stores")?, plan.barrier_asks.max(50)) {
            Ok(figures) => self.results.stores = Some(figures),
            Err(e) => self.note(format!("etcd beside Redis skipped: {e}")),
        }
        Ok(())
    }

    /// Starts the private etcd for the `etcdctl get` comparison; `None` (with a note)
    /// when it cannot be had.
    fn start_etcd(&mut self, dir: &Path) -> Option<Etcd> {
        match Etcd::start(dir) {
            Ok(etcd) => {
                self.results
                    .versions
                    .push(("etcd".into(), etcd.version.clone()));
                Some(etcd)
            }
            Err(e) => {
                self.note(format!("etcdctl comparison skipped: {e}"));
                None
            }
        }
    }

    /// The daemon's CPU profile while one in-process client asks: on a daemon built
    /// with symbols when `--profile-daemon` names one (its own home, same store), else
    /// on `daemon` itself. Absent, with a note, when perf cannot run.
    fn profile(
        &mut self,
        bins: &Binaries,
        redis: &RedisServer,
        daemon: &Daemon,
        descriptor: &row_fence_contract::Descriptor,
        work: &Path,
    ) -> Result<(), String> {
        if let Err(why) = crate::profile::available() {
            self.note(format!("no CPU profile: {why}"));
            return Ok(());
        }
        let plan = self.results.plan;
        let symbolized = match &self.options.profile_daemon {
            Some(program) => Some(Daemon::start_program(
                program,
                &work.join("home-profile"),
                &redis.unix_url(),
                &[],
            )?),
            None => None,
        };
        let (target, binary) = match &symbolized {
            Some(d) => (
                d,
                "row-fence-resident built with symbols (`--profile-daemon`), same source and profile as the shipped one",
            ),
            None => (daemon, "the daemon under test"),
        };
        let request = ask_line(bins, &target.home, descriptor)?;
        let data = work.join("perf.data");
        eprintln!(
            "row-fence-bench: CPU profile of the daemon ({:?})",
            plan.profile_for
        );
        // One client asks from before perf attaches (its start can take a while on a busy
        // machine) until it has stopped, so the whole recording is of asking.
        let stop = Arc::new(AtomicBool::new(false));
        let asker = {
            let (stop, socket) = (stop.clone(), target.socket.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut asks = 0u64;
                while !stop.load(Ordering::Relaxed) && !interrupt::requested() {
                    if throughput::ask_once(&socket, &request).unwrap_or(false) {
                        asks += 1;
                    }
                }
                (asks, started.elapsed().as_secs_f64())
            })
        };
        let perf = crate::profile::start(target.pid(), &data, plan.profile_for);
        let recorded = perf.and_then(|mut perf| {
            let status = perf.wait(plan.profile_for + Duration::from_secs(60));
            stop.store(true, Ordering::Relaxed);
            status
        });
        stop.store(true, Ordering::Relaxed);
        let (asks, seconds) = asker.join().unwrap_or((0, 0.0));
        match recorded
            .and_then(|status| crate::profile::finish(status, &data, binary, asks, seconds))
        {
            Ok(profile) => {
                if profile
                    .groups
                    .iter()
                    .any(|(g, share)| *g == crate::profile::Group::Unresolved && *share > 5.0)
                {
                    self.note("the CPU profile's daemon frames are mostly unresolved: the shipped daemon is stripped; scripts/bench passes --profile-daemon with one built with symbols".into());
                }
                self.results.profile = Some(profile);
            }
            Err(e) => self.note(format!("no CPU profile: {e}")),
        }
        Ok(())
    }

    /// Warm, cold and generic clients over TLS, TCP + 5 ms and TLS + 5 ms, each route
    /// on a daemon of its own (the TLS routes only when certificates were made).
    fn network_phases(
        &mut self,
        clients: &Clients,
        bins: &Binaries,
        redis: &RedisServer,
        certs: Option<&Certs>,
        work: &Path,
    ) -> Result<(), String> {
        let mut routes = Vec::new();
        let mut proxies = Vec::new();
        if let (Some(certs), Some(tls_port)) = (certs, redis.tls_port) {
            routes.push(Endpoint::tcp(Route::Tls, tls_port, Some(&certs.bundle)));
        }
        let plain = DelayProxy::start(loopback(redis.port), DELAY)?;
        routes.push(Endpoint::tcp(Route::TcpDelayed, plain.port(), None));
        proxies.push(plain);
        if let (Some(certs), Some(tls_port)) = (certs, redis.tls_port) {
            let tls = DelayProxy::start(loopback(tls_port), DELAY)?;
            routes.push(Endpoint::tcp(
                Route::TlsDelayed,
                tls.port(),
                Some(&certs.bundle),
            ));
            proxies.push(tls);
        }
        for endpoint in &routes {
            let name = format!("home-{:?}", endpoint.route).to_lowercase();
            let mut routed = Daemon::start(bins, &work.join(name), &endpoint.url, &endpoint.env())?;
            self.phase(clients, endpoint, &routed, &NETWORK_CLIENTS, None)?;
            routed.check_alive()?;
        }
        Ok(())
    }

    /// The daemon itself: one client's round trip, throughput with many clients, many
    /// connections at once, and its memory after all the load.
    fn daemon_cases(
        &mut self,
        bins: &Binaries,
        redis: &RedisServer,
        daemon: &mut Daemon,
        descriptor: &row_fence_contract::Descriptor,
        work: &Path,
    ) -> Result<(), String> {
        let plan = self.results.plan;
        let request = ask_line(bins, &daemon.home, descriptor)?;
        throughput::check_allowed(&daemon.socket, &request)
            .map_err(|why| format!("the in-process clients' ask is not ALLOWED: {why}"))?;
        let pids = (daemon.pid(), redis.pid());
        self.results.single = Some(throughput::asks_per_second(
            &daemon.socket,
            &request,
            1,
            plan.throughput_for.min(Duration::from_secs(2)),
            pids,
        ));
        interrupt::check()?;
        self.profile(bins, redis, daemon, descriptor, work)?;
        interrupt::check()?;
        eprintln!(
            "row-fence-bench: {} clients asking for {:?}",
            plan.throughput_clients, plan.throughput_for
        );
        self.results.throughput = Some(throughput::asks_per_second(
            &daemon.socket,
            &request,
            plan.throughput_clients,
            plan.throughput_for,
            pids,
        ));
        interrupt::check()?;
        eprintln!("row-fence-bench: {} connections at once", plan.connections);
        self.results.connections = Some(throughput::hold_connections(
            &daemon.socket,
            &request,
            plan.connections,
            daemon.pid(),
        )?);
        daemon.check_alive()?;
        std::thread::sleep(Duration::from_secs(1));
        self.results.idle_after_load_kib = rss::current_kib(daemon.pid()).ok();
        Ok(())
    }

    /// Starts redis-server, with TLS when certificates were made; when a TLS start fails
    /// (a redis-server built without TLS), starts it without and notes why.
    fn start_redis(
        &mut self,
        dir: &Path,
        certs: Option<Certs>,
    ) -> Result<(RedisServer, Option<Certs>), String> {
        if let Some(certs) = certs {
            match RedisServer::start(dir, Some(&certs)) {
                Ok(redis) => return Ok((redis, Some(certs))),
                Err(e) => self.note(format!("TLS cases skipped: redis-server with TLS: {e}")),
            }
        }
        Ok((RedisServer::start(dir, None)?, None))
    }

    fn versions(&mut self, bins: &Binaries, redis: &RedisServer) {
        let v = |program: &Path, args: &[&str]| machine::version_of(program, args);
        let mut versions = vec![
            (
                "row-fence-ask".into(),
                v(&bins.path("row-fence-ask"), &["--version"]),
            ),
            (
                "row-fence".into(),
                v(&bins.path("row-fence"), &["--version"]),
            ),
            (
                "row-fence-resident".into(),
                v(&bins.path("row-fence-resident"), &["--version"]),
            ),
            (
                "redis-server".into(),
                v(Path::new("redis-server"), &["--version"]),
            ),
            (
                "redis-cli".into(),
                v(Path::new("redis-cli"), &["--version"]),
            ),
            ("openssl".into(), v(Path::new("openssl"), &["version"])),
            ("rustc".into(), v(Path::new("rustc"), &["-V"])),
        ];
        let root = workspace_root();
        let commit = v(
            Path::new("git"),
            &[
                "-C",
                &root.to_string_lossy(),
                "rev-parse",
                "--short",
                "HEAD",
            ],
        );
        versions.push((
            "source".into(),
            format!("git {commit} (working tree at build time)"),
        ));
        if let Ok(info) = redis.cli(&["INFO", "server"])
            && let Some(mode) = info.lines().find_map(|l| l.strip_prefix("redis_mode:"))
        {
            versions.push(("redis mode".into(), mode.trim().to_string()));
        }
        self.results.versions = versions;
    }

    /// One warm ask (checked ALLOWED) with its `EVALSHA` captured for the generic
    /// clients; `None` (generic cases skipped, with a note) when the daemon's ask is not
    /// one `EVALSHA`.
    fn capture_ask(
        &mut self,
        clients: &Clients,
        unix: &Endpoint,
        daemon: &Daemon,
        redis: &RedisServer,
    ) -> Result<Option<AskScript>, String> {
        let ask = || clients.preflight(Client::Warm, unix, &daemon.home);
        match capture::daemon_ask(&redis.socket, ask) {
            Ok(script) => Ok(Some(script)),
            Err(e) if e.starts_with("saw no EVALSHA") => {
                self.note(format!("cold generic cases skipped: {e}"));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn prepare_python(&mut self, work: &Path) -> Option<PythonClient> {
        if self.options.no_python {
            self.note("Python client skipped: --no-python".into());
            return None;
        }
        let venv = self
            .options
            .venv
            .clone()
            .unwrap_or_else(|| Options::target_dir().join("bench/venv"));
        match PythonClient::prepare(&venv, work) {
            Ok(python) => {
                self.results
                    .versions
                    .push(("Python client".into(), python.version.clone()));
                Some(python)
            }
            Err(e) => {
                self.note(format!("Python client skipped: {e}"));
                None
            }
        }
    }

    /// The peak RSS of the floor, the asker and the cold Rust client, each the largest
    /// of a few runs through the `row-fence-bench-maxrss` launcher.
    fn peak_rss(
        &mut self,
        clients: &Clients,
        unix: &Endpoint,
        daemon: &Daemon,
    ) -> Result<(), String> {
        let launcher = clients.bins.path("row-fence-bench-maxrss");
        for client in [Client::True, Client::Warm, Client::ColdRust] {
            let mut peak = 0;
            for _ in 0..self.results.plan.rss_runs {
                interrupt::check()?;
                let cmd = clients
                    .command(client, unix, &daemon.home)
                    .ok_or("a client disappeared")?;
                peak = peak.max(rss::peak_of_run(&launcher, &cmd)?);
            }
            self.results.peak_rss_kib.push((client, peak));
        }
        Ok(())
    }

    /// One latency phase: `order`'s clients on `endpoint`, interleaved sample by sample,
    /// each spread evenly over the phase; `busy` is the number of busy processes running.
    fn phase(
        &mut self,
        clients: &Clients,
        endpoint: &Endpoint,
        daemon: &Daemon,
        order: &[Client],
        busy: Option<usize>,
    ) -> Result<(), String> {
        let plan = self.results.plan;
        let loaded = busy.is_some();
        let mut phase = Phase {
            route: endpoint.route,
            busy: busy.unwrap_or(0),
            load: (machine::load_average(), String::new()),
            rows: Vec::new(),
            skipped: Vec::new(),
            capped: false,
        };
        eprintln!(
            "row-fence-bench: phase {}{} (load {})",
            endpoint.route.label(),
            if loaded { ", oversubscribed" } else { "" },
            phase.load.0
        );
        let mut measured: Vec<(Client, usize, Vec<crate::sample::Sample>)> = Vec::new();
        for &client in order {
            let count = plan.samples(client, endpoint.route, loaded);
            if count == 0 {
                continue;
            }
            if clients.command(client, endpoint, &daemon.home).is_none() {
                phase
                    .skipped
                    .push((client, "not available (see the notes)".into()));
                continue;
            }
            // Under load a slow answer is a finding, not a broken setup: the unloaded
            // phase on the same daemon already checked these clients answer ALLOWED.
            if loaded {
                measured.push((client, count, Vec::with_capacity(count)));
                continue;
            }
            match clients.preflight(client, endpoint, &daemon.home) {
                Ok(()) => measured.push((client, count, Vec::with_capacity(count))),
                Err(e) if client.is_product() => return Err(e),
                Err(e) => phase.skipped.push((client, e)),
            }
        }
        for (client, _, _) in &measured {
            for _ in 0..plan.warmup {
                if let Some(mut cmd) = clients.command(*client, endpoint, &daemon.home) {
                    self.sampler.time_in(&mut cmd, clients.input(*client))?;
                }
            }
        }
        let rounds = measured.iter().map(|m| m.1).max().unwrap_or(0);
        let until = Instant::now() + plan.phase_cap;
        'rounds: for round in 0..rounds {
            for k in 0..measured.len() {
                let i = (round + k) % measured.len();
                let (client, count, samples) = &mut measured[i];
                // Spread each client's samples evenly over the rounds.
                if (round + 1) * *count / rounds == round * *count / rounds {
                    continue;
                }
                interrupt::check()?;
                if Instant::now() >= until {
                    phase.capped = true;
                    break 'rounds;
                }
                let mut cmd = clients
                    .command(*client, endpoint, &daemon.home)
                    .ok_or("a client disappeared")?;
                samples.push(self.sampler.time_in(&mut cmd, clients.input(*client))?);
            }
        }
        for (client, _, samples) in measured {
            let walls: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
            phase.rows.push(Row {
                client,
                summary: Summary::of(&walls),
                failed: samples
                    .iter()
                    .filter(|s| s.code != client.expected_code())
                    .count(),
                over_budget: walls.iter().filter(|w| **w > BUDGET).count(),
                samples_ms: walls.iter().map(|w| w.as_secs_f64() * 1e3).collect(),
            });
        }
        phase.load.1 = machine::load_average();
        self.results.phases.push(phase);
        Ok(())
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn current_exe_dir() -> Result<PathBuf, String> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .ok_or_else(|| "cannot tell where this program is; pass --bin-dir".into())
}

/// The workspace this bench was built from (for the commit in the report).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Raises this process's open-file limit to its hard limit, so 1,000 connections fit
/// (the daemon inherits it).
fn raise_fd_limit() {
    // SAFETY: plain syscalls with a zeroed out-parameter.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
