//! The row fence's asker and its contract.
//!
//! `row-fence-ask` runs once per fenced write (a `git push`, a pull request): it reads the
//! lane's descriptor itself, asks the resident daemon over a Unix socket whether the lane
//! still holds its board row, prints exactly one verdict line and exits 0 (ALLOWED or
//! UNFENCED), 3 (REFUSED) or 1 (COULD NOT READ). It fails closed: "I could not find out"
//! is never "yes".
//!
//! This crate is also the contract the daemon depends on: the protocol, verdict and
//! reason types, paths and the code stamp are spelled once, here. It links only std,
//! serde/serde_json, sha2 and lexopt, so the asker starts in about a millisecond.
//!
//! # Layout
//!
//! - [`verdict`]: the four verdicts, every reason's spelling, the exit codes.
//! - [`descriptor`]: the descriptor format, its validation and its resolution.
//! - [`protocol`]: request and answer lines on the socket.
//! - [`client`]: one exchange with the daemon within one deadline.
//! - [`paths`]: the home directory's files; socket path and directory checks.
//! - [`stamp`]: the code stamp (build digest + registry digest).
//! - [`ledger`]: the refusal ledger, one JSON line per denial ([`ledger::LedgerRecord`]).
//! - [`status`]: the daemon's status object ([`status::Status`]).
//! - [`report`]: the verdict line and the `--json` object.
//! - [`ask`]: the asker's flow, from descriptor to exit code.
//! - [`stdio`]: keeps fds 0–2 open so a socket never lands on them.

pub mod ask;
pub mod client;
pub mod descriptor;
pub mod ledger;
pub mod paths;
pub mod protocol;
pub mod report;
pub mod stamp;
pub mod status;
pub mod stdio;
pub mod verdict;

pub use descriptor::Descriptor;
pub use verdict::{Reason, Verdict, exit};
