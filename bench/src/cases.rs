//! The case list: every case the bench knows, in report order, with whether this build
//! measures it. The report prints this list, so a case that is planned but not built
//! shows as such instead of silently missing.
//!
//! To add a case: give it a variant here (with [`Status::Planned`] until it is built),
//! measure it in its own module, call that from [`crate::run`], and give it a table in
//! [`crate::report`]. [`Case::BytesPerChange`] and [`Case::FencedBatchRate`] (issue 3)
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
    /// 5. Cases 2–4 over TLS, and behind a proxy adding 5 ms each way.
    Distance,
    /// 6. Cases 1–3 under 16 busy processes per core; misses of a 5.5 s budget.
    Oversubscribed,
    /// 7. Asks per second with 64 concurrent clients; peak RSS with 1,000 connections.
    Throughput,
    /// 8. The daemon's RSS idle; the asker's max RSS.
    Memory,
    /// Bytes sent to Redis for one single-record change on a board with 5,000 records,
    /// records layout vs document layout.
    BytesPerChange,
    /// Fenced batches per second with 1 and with 16 writers.
    FencedBatchRate,
    /// The agent guard as Claude Code runs it (`sh -c '<installed command>'`, the JSON on
    /// stdin) against `sh -c true`: a harmless command, and a fenced ALLOWED push.
    Guard,
}

/// Whether a case is measured by this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Measured; its figures are in the report.
    Measured,
    /// Named by an issue, not built yet.
    Planned {
        /// The issue that adds it.
        issue: u32,
    },
}

impl Case {
    /// Every case, in report order.
    pub const ALL: [Case; 11] = [
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
            Case::Distance => "warm and cold over TLS, and through a proxy adding 5 ms each way",
            Case::Oversubscribed => {
                "floor, warm, cold Rust under 16 busy processes per core; misses of 5.5 s"
            }
            Case::Throughput => {
                "daemon: asks/s with 64 concurrent clients; peak RSS with 1,000 connections"
            }
            Case::Memory => "memory: daemon RSS idle; asker max RSS",
            Case::BytesPerChange => {
                "bytes sent to Redis for one single-record change on a 5,000-record board, records vs document layout"
            }
            Case::FencedBatchRate => "fenced batches per second with 1 and 16 writers",
            Case::Guard => {
                "agent guard via `sh -c '<installed command>'`: harmless command and fenced ALLOWED push, against `sh -c true`"
            }
        }
    }

    /// Whether this build measures it.
    pub fn status(self) -> Status {
        // Every case the issues name is built; `Planned` is for the next one.
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
            | Case::Guard => Status::Measured,
        }
    }
}
