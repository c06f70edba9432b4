//! The board's scalars (section [`crate::META`]) and the layouts a board can be in: one
//! spelling each, used by Rust and handed to the Lua scripts from here
//! (`redis::names`), so a script and its caller cannot disagree on a key or a layout name.

/// Key of the controller lease record in the meta section.
pub const LEASE: &str = "lease";

/// Key of the controller epoch counter in the meta section.
pub const EPOCH: &str = "epoch";

/// Key of the layout marker in the meta section (`"records"` once a board is migrated).
pub const LAYOUT: &str = "layout";

/// Every key of the meta section row-fence writes (refused as user records).
pub const ALL: [&str; 3] = [LEASE, EPOCH, LAYOUT];

/// Where a board's records live on a Redis store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Per-record keys: the production layout, and the only one a board moves to.
    Records,
    /// The whole board as one JSON document (a board not yet migrated).
    Document,
}

impl Layout {
    /// Every layout, for the scripts' name table and the tests that tie names to it.
    pub const ALL: [Layout; 2] = [Layout::Records, Layout::Document];

    /// The stored spelling: `records` or `document` (the meta marker's value, a moved
    /// document's `moved_to`, what `layout()` answers).
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Records => "records",
            Layout::Document => "document",
        }
    }

    /// Reads a stored spelling; anything else is `None`.
    pub fn parse(text: &str) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
