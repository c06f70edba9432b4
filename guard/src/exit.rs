//! The guard's two answers, as exit codes every harness reads the same way (Cursor's JSON
//! answer is printed beside them: [`crate::harness::answer`], which every exit gives).

/// The tool call runs (exit 0).
pub const ALLOW: i32 = 0;

/// The tool call is blocked and stderr is shown to the agent (exit 2): the only exit
/// every harness reads as a block, so every denial is this one.
pub const DENY: i32 = 2;
