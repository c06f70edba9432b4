//! The case list: every case the bench knows, in report order, with whether this build
//! measures it. The report prints this list, so a case that is planned but not built
//! shows as such instead of silently missing.
//!
//! To add a case: give it a variant here (with [`Status::Planned`] until it is built),
//! measure it in its own module, call that from [`crate::run`], and give it a table in
//! [`crate::report`]. [`Case::BytesPerChange`] and [`Case::FencedBatchRate`]
//! are measured by [`crate::records`].

/// One case of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// 1. `/bin/true`, and a minimal binary doing one Unix-socket echo round trip.
    Floor,
    /// 2. `row-fence-ask` → the warm daemon → Redis.
    Warm,
    /// 3. `row-fence check`: the same gate, connecting to Redis in each new process.
    ColdRust,
    /// 4. `redis-cli EVALSHA` of the ask script, and the Python `redis` client.
    ColdGeneric,
    /// 5. Cases 2–4 over TLS, and behind a proxy adding 5 ms each way; also the echo
    ///    floor's one round trip over the same delayed link.
    Distance,
    /// 6. Cases 1–3 under 16 busy processes per core; misses of a 5.5 s budget.
    Oversubscribed,
    /// 7. Asks per second with 64 concurrent clients; peak RSS with 1,000 connections.
    Throughput,
    /// 8. The daemon's RSS idle; the asker's max RSS.
    Memory,
    /// Bytes sent to and received from Redis for one single-record change on boards of
    /// 100, 5,000 and 100,000 records; records layout vs document layout at 5,000.
    BytesPerChange,
    /// Fenced batches per second with 1 and with 16 writers.
    FencedBatchRate,
    /// The agent guard as Claude Code runs it (`sh -c '<installed command>'`, the JSON on
    /// stdin) against `sh -c true`: a harmless command, and a fenced ALLOWED push.
    Guard,
    /// Every harness's hook (`install agent-hook --agent NAME`) run the way that harness
    /// runs it, against `sh -c /bin/true`: unbound, row-bound ALLOWED, a 100 KB command.
    AgentHooks,
    /// `etcdctl get` against a private etcd: a lease service's own client, cold.
    Etcd,
    /// The daemon's and redis-server's CPU per ask with one in-process client.
    CpuPerAsk,
    /// A CPU profile of the daemon's ask path (`perf record -g`), by kind of work.
    Profile,
    /// The file store's ask p50 on boards of 10, 1,000 and 10,000 rows.
    FileStoreBoards,
    /// The ask on a standalone durable Redis (a pure read) and on a primary with one
    /// replica (with its read barrier), one client and 16 at once.
    ReadBarrier,
    /// A `git push` over loopback ssh signed by the key broker ÷ by a plain ssh-agent
    /// holding the same key (`--only broker`, as root).
    Broker,
    /// `row-fence top` watching 1,000 rows: idle CPU, CPU per refresh, event to screen
    /// (`--only top`).
    Top,
}

/// Whether a case is measured by this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Measured; its figures are in the report.
    Measured,
    /// Measured in a run of its own, with its own report.
    Alone {
        /// The command that measures it.
        by: &'static str,
    },
    /// Named among the cases, not built yet.
    Planned {
        /// What will measure it, e.g. `the etcd store`.
        by: &'static str,
    },
}

impl Case {
    /// Every case, in report order.
    pub const ALL: [Case; 19] = [
        Case::Floor,
        Case::Warm,
        Case::ColdRust,
        Case::ColdGeneric,
        Case::Distance,
        Case::Oversubscribed,
        Case::Throughput,
        Case::Memory,
        Case::BytesPerChange,
        Case::FencedBatchRate,
        Case::Guard,
        Case::AgentHooks,
        Case::Etcd,
        Case::CpuPerAsk,
        Case::Profile,
        Case::FileStoreBoards,
        Case::ReadBarrier,
        Case::Broker,
        Case::Top,
    ];

    /// One line saying what the case measures.
    pub fn title(self) -> &'static str {
        match self {
            Case::Floor => {
                "floor: `/bin/true`; one Unix-socket echo round trip (`row-fence-bench-echo`)"
            }
            Case::Warm => "warm: `row-fence-ask` → `row-fence-resident` → Redis",
            Case::ColdRust => "cold Rust: `row-fence check` (same gate, connects per process)",
            Case::ColdGeneric => {
                "cold generic: `redis-cli EVALSHA` of the ask script; Python `redis` client"
            }
            Case::Distance => {
                "warm and cold over TLS, and through a proxy adding 5 ms each way; the echo floor over the same delayed link"
            }
            Case::Oversubscribed => {
                "floor, warm, cold Rust under 16 busy processes per core; misses of 5.5 s"
            }
            Case::Throughput => {
                "daemon: asks/s with 64 concurrent clients; peak RSS with 1,000 connections"
            }
            Case::Memory => "memory: daemon RSS idle; asker max RSS",
            Case::BytesPerChange => {
                "bytes sent and received for one single-record change on boards of 100, 5,000 and 100,000 records; records vs document layout"
            }
            Case::FencedBatchRate => "fenced batches per second with 1 and 16 writers",
            Case::Guard => {
                "agent guard via `sh -c '<installed command>'`: harmless command and fenced ALLOWED push, against `sh -c true`"
            }
            Case::AgentHooks => {
                "agent hooks of Claude Code, Codex, Gemini CLI and Cursor as each runs them, against `sh -c /bin/true`: unbound, row-bound ALLOWED, a 100 KB command"
            }
            Case::Etcd => "lease service: `etcdctl get` against a private etcd, cold",
            Case::CpuPerAsk => "CPU per ask of the daemon and redis-server, one in-process client",
            Case::Profile => {
                "CPU profile of the daemon's ask path (`perf record -g`), by kind of work"
            }
            Case::FileStoreBoards => "file store ask p50 on boards of 10, 1,000 and 10,000 rows",
            Case::Broker => {
                "key broker: `git push` over loopback ssh signed by the daemon's agent ÷ by a plain `ssh-agent`, p50 ≤ 1.2×"
            }
            Case::Top => {
                "operator's console: `row-fence top` on 1,000 rows, idle CPU ≤ 1 % of a core, CPU per refresh ≤ 5 ms, event to screen under tmux"
            }
            Case::ReadBarrier => {
                "read barrier: the ask on a standalone durable Redis and on a primary with one replica, 1 and 16 clients"
            }
        }
    }

    /// Whether this build measures it.
    pub fn status(self) -> Status {
        // Every case named is built; `Planned` is for the next one.
        match self {
            Case::Floor
            | Case::Warm
            | Case::ColdRust
            | Case::ColdGeneric
            | Case::Distance
            | Case::Oversubscribed
            | Case::Throughput
            | Case::Memory
            | Case::BytesPerChange
            | Case::FencedBatchRate
            | Case::Guard
            | Case::AgentHooks
            | Case::Etcd
            | Case::CpuPerAsk
            | Case::Profile
            | Case::FileStoreBoards
            | Case::ReadBarrier => Status::Measured,
            // It needs root (sshd, a daemon under a uid of its own): a run of its own.
            Case::Broker => Status::Alone {
                by: "scripts/bench --only broker (as root; report broker.md)",
            },
            // A terminal of its own and a window of idle time: a run of its own.
            Case::Top => Status::Alone {
                by: "scripts/bench --only top (report top.md)",
            },
        }
    }
}
