//! The bench's flags and the sample plan of each profile: the full run (under 15
//! minutes), `--quick` (under 2 minutes) and `--smoke` (a handful of samples per case, to
//! show the bench works; it judges nothing).

use crate::agent_hooks::{Call, Harness};
use crate::clients::{Client, Route};
use std::path::PathBuf;
use std::time::Duration;

/// `row-fence-bench [--quick] [--smoke] [--out FILE] [--bin-dir DIR] [--venv DIR] [--no-python] [--only broker|top|forge-api]`
#[derive(clap::Parser, Debug)]
#[command(
    name = "row-fence-bench",
    about = "Benchmarks the warm ask against the physical floor and the cold paths, under load, over TLS and distance"
)]
pub struct Options {
    /// Fewer samples: the whole run in under 2 minutes
    #[arg(long)]
    pub quick: bool,
    /// A handful of samples per case: checks the bench works, judges nothing
    #[arg(long)]
    pub smoke: bool,
    /// The report [default: <target>/bench/report.md]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Where row-fence-ask, row-fence, row-fence-resident and row-fence-bench-echo are [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The Python venv of the cold generic client, made when missing [default: <target>/bench/venv]
    #[arg(long, value_name = "DIR")]
    pub venv: Option<PathBuf>,
    /// Skip the Python client (no venv, no pip)
    #[arg(long)]
    pub no_python: bool,
    /// A row-fence-resident built from the same source with symbols kept, for the CPU profile only [default: the daemon under test]
    #[arg(long, value_name = "FILE")]
    pub profile_daemon: Option<PathBuf>,
    /// Run this one case alone and write its report beside the main one (`broker`: a push through the key broker ÷ through a plain ssh-agent, as root; report `broker.md`; `forge-api`: gh through the daemon's forge API ÷ through a plain relay; report `forge-api.md`)
    #[arg(long, value_enum, value_name = "CASE")]
    pub only: Option<Only>,
    /// Internal: be one busy process of the oversubscription case for this many ms
    #[arg(long, hide = true, value_name = "MS")]
    pub busy_for_ms: Option<u64>,
}

/// A case `--only` runs alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// The key broker: a push signed by the daemon's agent ÷ by a plain ssh-agent.
    Broker,
    /// The operator's console: `row-fence top` on 1,000 rows.
    Top,
    /// The forge API endpoint: `gh api` through the daemon ÷ through a plain relay.
    ForgeApi,
    /// The daemon pushing for the lane: `git push` through it ÷ straight to sshd, and to
    /// lighttpd over HTTPS.
    Push,
}

impl Options {
    /// The sample plan these flags ask for.
    pub fn plan(&self) -> Plan {
        match (self.smoke, self.quick) {
            (true, _) => Plan::SMOKE,
            (false, true) => Plan::QUICK,
            (false, false) => Plan::FULL,
        }
    }

    /// The directory `target/` (the parent of this program's directory), for the default
    /// report and venv paths.
    pub fn target_dir() -> PathBuf {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent()?.parent().map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("target"))
    }
}

/// How many samples each case takes and how long the timed cases run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// `full`, `quick` or `smoke`.
    pub name: &'static str,
    /// Per client on the Unix-socket route, unloaded: [true, echo, asker start, warm,
    /// cold Rust, redis-cli, Python, etcdctl, sh -c true, sh -c /bin/true, guard
    /// harmless, guard push].
    pub local: [usize; 12],
    /// Per agent hook sample, on the Unix-socket route, unloaded: [unbound, row-bound
    /// ALLOWED, 100 KB command], for every harness alike.
    pub agent: [usize; 3],
    /// Per client on each network route (TLS, +5 ms): [warm, cold Rust, redis-cli,
    /// Python, echo over the link (on the delayed routes only)].
    pub network: [usize; 5],
    /// Per client under oversubscription: [true, echo, warm, cold Rust].
    pub loaded: [usize; 4],
    /// A latency phase stops taking samples after this long (its counts then fall short
    /// evenly across its clients; the report shows the counts).
    pub phase_cap: Duration,
    /// Busy processes per core in the oversubscription case.
    pub busy_per_core: usize,
    /// How long the concurrent clients ask.
    pub throughput_for: Duration,
    /// Concurrent in-process clients.
    pub throughput_clients: usize,
    /// Connections held open at once for the peak-RSS case.
    pub connections: usize,
    /// Each client runs this many times untimed before a phase.
    pub warmup: usize,
    /// Runs per client for its peak RSS.
    pub rss_runs: usize,
    /// Records on the boards of the bytes-per-change case (records layout), ascending.
    pub record_boards: [usize; 3],
    /// Records on the document-layout board of the same case.
    pub document_board: usize,
    /// Rows on the file store's boards, ascending.
    pub file_boards: [usize; 3],
    /// Asks per file store board.
    pub file_asks: usize,
    /// Asks per store in the read barrier's case (one client, interleaved).
    pub barrier_asks: usize,
    /// How long `perf record` samples the daemon while one client asks.
    pub profile_for: Duration,
}

impl Plan {
    /// The full run: under 15 minutes on 2 cores.
    pub const FULL: Plan = Plan {
        name: "full",
        local: [
            3000, 3000, 3000, 3000, 1000, 1000, 200, 1000, 1000, 1000, 1000, 1000,
        ],
        agent: [1000, 1000, 100],
        network: [1000, 400, 400, 60, 1000],
        loaded: [300, 300, 300, 300],
        phase_cap: Duration::from_secs(150),
        busy_per_core: 16,
        throughput_for: Duration::from_secs(10),
        throughput_clients: 64,
        connections: 1000,
        warmup: 10,
        rss_runs: 20,
        record_boards: [100, 5_000, 100_000],
        document_board: 5_000,
        file_boards: [10, 1_000, 10_000],
        file_asks: 2000,
        barrier_asks: 2000,
        profile_for: Duration::from_secs(10),
    };

    /// `--quick`: under 2 minutes; the 500 warm asks and 500 `/bin/true` of the first benchmark.
    pub const QUICK: Plan = Plan {
        name: "quick",
        local: [500, 500, 500, 500, 200, 200, 30, 200, 300, 300, 300, 300],
        agent: [200, 200, 20],
        network: [150, 60, 60, 10, 150],
        loaded: [40, 40, 40, 40],
        phase_cap: Duration::from_secs(20),
        busy_per_core: 16,
        throughput_for: Duration::from_secs(3),
        throughput_clients: 64,
        connections: 1000,
        warmup: 5,
        rss_runs: 10,
        record_boards: [100, 5_000, 100_000],
        document_board: 5_000,
        file_boards: [10, 1_000, 10_000],
        file_asks: 300,
        barrier_asks: 300,
        profile_for: Duration::from_secs(4),
    };

    /// `--smoke`: a handful of samples per case, one busy process per core (so a test
    /// suite running beside it is not starved).
    pub const SMOKE: Plan = Plan {
        name: "smoke",
        local: [5, 5, 5, 5, 5, 5, 2, 3, 3, 3, 3, 3],
        agent: [3, 3, 2],
        network: [5, 3, 3, 2, 3],
        loaded: [3, 3, 3, 3],
        phase_cap: Duration::from_secs(20),
        busy_per_core: 1,
        throughput_for: Duration::from_millis(500),
        throughput_clients: 64,
        connections: 1000,
        warmup: 1,
        rss_runs: 2,
        record_boards: [20, 200, 2_000],
        document_board: 200,
        file_boards: [10, 100, 1_000],
        file_asks: 5,
        barrier_asks: 5,
        profile_for: Duration::from_secs(1),
    };

    /// Samples of `client` on `route`, loaded or not (0: not measured there).
    pub fn samples(&self, client: Client, route: Route, loaded: bool) -> usize {
        let index = |order: &[Client]| order.iter().position(|c| *c == client);
        match (loaded, route) {
            (false, Route::Unix) if matches!(client, Client::Agent(..)) => match client {
                Client::Agent(_, Call::Unbound) => self.agent[0],
                Client::Agent(_, Call::Allowed | Call::Quarantined) => self.agent[1],
                _ => self.agent[2],
            },
            (true, _) => index(&LOADED_CLIENTS).map_or(0, |i| self.loaded[i]),
            (false, Route::Unix) => index(&LOCAL_CLIENTS).map_or(0, |i| self.local[i]),
            // One round trip over the link means something only where there is distance.
            (false, Route::Tls) if client == Client::EchoLink => 0,
            (false, _) => index(&NETWORK_CLIENTS).map_or(0, |i| self.network[i]),
        }
    }
}

/// The clients of the unloaded Unix-socket phase, in [`Plan::local`]'s order.
pub const LOCAL_CLIENTS: [Client; 12] = [
    Client::True,
    Client::Echo,
    Client::AskerStart,
    Client::Warm,
    Client::ColdRust,
    Client::RedisCli,
    Client::Python,
    Client::Etcdctl,
    Client::HookTrue,
    Client::HookExecTrue,
    Client::GuardHarmless,
    Client::GuardPush,
];

/// The agent hook samples, measured in the unloaded Unix-socket phase beside its
/// yardstick `sh -c /bin/true` (interleaved with it).
pub fn agent_clients() -> Vec<Client> {
    let mut clients = vec![Client::HookExecTrue];
    for harness in Harness::ALL {
        for call in [Call::Unbound, Call::Allowed, Call::Large, Call::Quarantined] {
            clients.push(Client::Agent(harness, call));
        }
    }
    clients
}

/// The clients of each network phase, in [`Plan::network`]'s order.
pub const NETWORK_CLIENTS: [Client; 5] = [
    Client::Warm,
    Client::ColdRust,
    Client::RedisCli,
    Client::Python,
    Client::EchoLink,
];

/// The clients of the oversubscription phase, in [`Plan::loaded`]'s order.
pub const LOADED_CLIENTS: [Client; 4] =
    [Client::True, Client::Echo, Client::Warm, Client::ColdRust];
