//! The row fence's contract: what every program agrees on, spelled once.
//!
//! Every other crate depends on this one and it depends on none of them: the wire
//! protocol, the descriptor and how a lane's descriptor is found, the verdicts, their
//! reasons and exit codes, the home's paths, the daemon's status and the refusal ledger's
//! records, the code stamp's run-time half, and the one client through which the asker,
//! the agent guard, git's transport gate and `row-fence status` ask the daemon. It links
//! only std, serde/serde_json, sha2 and nix, so the programs that start once per fenced
//! write start in about a millisecond (ARCHITECTURE.md, "Code map").
//!
//! # Layout
//!
//! - [`verdict`]: the four verdicts, every reason's spelling, the exit codes.
//! - [`descriptor`]: the descriptor format, its validation and its resolution.
//! - [`lease_token`]: the lease token a grant creates and an ask presents.
//! - [`no_follow`]: opening a file with no symbolic link anywhere in its path.
//! - [`harness`]: the agent harnesses hooked, one name and one parser each.
//! - [`git_layout`]: git dirs as git lays them out (worktrees' common dir, submodules').
//! - [`protocol`]: request and answer lines on the socket.
//! - [`push`]: the push socket's request header (`git-remote-row-fence` to the daemon).
//! - [`client`]: one exchange with the daemon within one deadline.
//! - [`paths`]: the home directory's files; socket path and directory checks.
//! - [`stamp`]: the code stamp's run-time half (registry digest, combine, foreign detail).
//! - [`quarantine`]: the quarantine's records and denial log, counted.
//! - [`ledger`]: the refusal ledger, one JSON line per denial ([`ledger::LedgerRecord`]).
//! - [`status`]: the daemon's status object ([`status::Status`]).
//! - [`report`]: the verdict line and the `--json` object.
//! - [`scope`]: a row's scope (its refs and repositories) and the judgement of a push.
//! - [`spelling`]: the name allowlist, the look-alike skeleton, the escape of quoted text.
//! - [`stdio`]: keeps fds 0–2 open so a socket never lands on them.

pub mod client;
pub mod descriptor;
pub mod git_layout;
pub mod harness;
pub mod lease_token;
pub mod ledger;
pub mod no_follow;
pub mod paths;
pub mod protocol;
pub mod push;
pub mod quarantine;
pub mod report;
pub mod scope;
pub mod spelling;
pub mod stamp;
pub mod status;
pub mod stdio;
pub mod verdict;

pub use descriptor::Descriptor;
pub use lease_token::LeaseToken;
pub use verdict::{Reason, Verdict, exit};
