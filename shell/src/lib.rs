//! The row fence's shell reader: turns a command's text into what bash would run, with
//! no policy in it (ARCHITECTURE.md, "The agent guard's policy"). It parses the command
//! with a real bash parser (brush-parser), reads each word's value where the text decides
//! it, and walks the syntax tree with bash's scoping, tracking the directories each simple
//! command may run in. What a program does is not known here: the caller says it, through
//! [`walk::Programs`], one simple command at a time, in the shell's own terms
//! ([`effect::Effect`]: code to read, a move, a call, an assignment…) plus notes of its
//! own that the walk keeps in order.
//!
//! # Layout
//!
//! - [`parse`]: brush-parser within bounds (size, nesting).
//! - [`words`]: a word's value (literal or dynamic) and the code it runs.
//! - [`dir`]: a directory a command runs in, known or not.
//! - [`state`]: the directories, `pushd` stack and variables at a point of the command.
//! - [`effect`]: what a simple command does to the shell, as the caller says it.
//! - [`walk`]: the tree walk, bash's scoping, and the plan it produces.
//! - [`moves`]: where `cd`, `pushd` and `popd` lead.
//! - [`source`]: a parsed text's spans, and `((…))` told apart.
//! - [`lookup`]: which file a command word runs (the shell's own commands, `PATH`).

pub mod dir;
pub mod effect;
pub mod lookup;
pub mod moves;
pub mod parse;
pub mod source;
pub mod state;
pub mod walk;
pub mod words;
