//! The router's memory of which boards are still in the document layout (issue 11,
//! "Migration routing leaves the hot path"): learned from the first call that meets the
//! board's document, so later asks, reads and writes go to the document directly instead
//! of through a records script that answers "this board is a document".
//!
//! Only ever a shortcut, never a verdict: a board moves document → records once, and the
//! move rewrites the document with `moved_to` in the same script that writes the records.
//! A call on a board remembered as a document reads the document, and a document that
//! says it moved, or that is gone (a store restored from an older snapshot, a flushed
//! server), is answered `NotThisLayout` by the routed document adapter: the router then
//! forgets the board and asks the records scripts, which check the layout atomically
//! themselves. A board not remembered is asked through those scripts. So a memory that
//! became wrong costs one extra round trip and never yields ALLOWED.

use crate::meta::Layout;
use std::collections::HashSet;
use std::sync::Mutex;

/// Boards remembered at most; past it the memory starts over (a forgotten board costs one
/// extra round trip on its next call).
pub const MAX_BOARDS: usize = 4096;

/// The boards last seen in the document layout.
#[derive(Debug, Default)]
pub struct Layouts {
    documents: Mutex<HashSet<String>>,
}

impl Layouts {
    /// The layout to try first for `board`: [`Layout::Document`] when it was last seen
    /// there, else [`Layout::Records`].
    pub fn first(&self, board: &str) -> Layout {
        let documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        if documents.contains(board) {
            Layout::Document
        } else {
            Layout::Records
        }
    }

    /// Remembers that `board` was just served from `layout`.
    pub fn learn(&self, board: &str, layout: Layout) {
        let mut documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        match layout {
            Layout::Document => {
                if !documents.contains(board) {
                    if documents.len() >= MAX_BOARDS {
                        documents.clear();
                    }
                    documents.insert(board.to_string());
                }
            }
            Layout::Records => {
                documents.remove(board);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_is_a_document_only_while_last_seen_as_one_and_the_memory_is_bounded() {
        let layouts = Layouts::default();
        assert_eq!(layouts.first("b"), Layout::Records);
        layouts.learn("b", Layout::Document);
        assert_eq!(layouts.first("b"), Layout::Document);
        layouts.learn("b", Layout::Records);
        assert_eq!(layouts.first("b"), Layout::Records);
        for i in 0..MAX_BOARDS + 10 {
            layouts.learn(&format!("b{i}"), Layout::Document);
        }
        assert!(layouts.documents.lock().unwrap().len() <= MAX_BOARDS);
    }
}
