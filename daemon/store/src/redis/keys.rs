//! Redis key names (docs/stores.md, "Redis key layout"; the table in [`super`]). Every key of
//! a board carries the hash tag `{<board>}` so one script touches them all, also on Redis
//! Cluster; the document layout's shared hash does not (it is one hash for every board, as
//! the source keeps it).

/// The keys of one board, under prefix `P`: `P:board:{B}:fence:<part>`.
#[derive(Clone, Debug)]
pub struct BoardKeys {
    /// `P:board:{B}:fence:`
    base: String,
}

impl BoardKeys {
    /// The keys of `board` under `prefix`.
    pub fn new(prefix: &str, board: &str) -> BoardKeys {
        BoardKeys {
            base: format!("{prefix}:board:{{{board}}}:fence:"),
        }
    }
    /// A section's hash (`meta` included).
    pub fn section(&self, name: &str) -> String {
        format!("{}{name}", self.base)
    }
    /// The board revision counter.
    pub fn revision(&self) -> String {
        self.section("revision")
    }
    /// The fence log stream.
    pub fn log(&self) -> String {
        self.section("log")
    }
    /// The asks stream.
    pub fn asks(&self) -> String {
        self.section("asks")
    }
    /// The set of section names the board has records in (for `row-fence records`).
    pub fn sections(&self) -> String {
        self.section("sections")
    }
    /// Every key of the board that row-fence may create, for tests and operators.
    pub fn all(&self, sections: &[&str]) -> Vec<String> {
        let mut keys = vec![
            self.revision(),
            self.log(),
            self.asks(),
            self.sections(),
            self.section(super::super::META),
        ];
        keys.extend(sections.iter().map(|s| self.section(s)));
        keys
    }
}

/// The document layout's keys, shared by every board under prefix `P`.
#[derive(Clone, Debug)]
pub struct StateKeys {
    prefix: String,
}

impl StateKeys {
    /// The state keys under `prefix`.
    pub fn new(prefix: &str) -> StateKeys {
        StateKeys {
            prefix: prefix.to_string(),
        }
    }
    /// `P:state:fencing:current`: field `<board>` holds the board's whole document; field
    /// `<board>:records` the revision of the newest records batch.
    pub fn current(&self) -> String {
        format!("{}:state:fencing:current", self.prefix)
    }
    /// `P:state:fencing:history:<board>`: the previous copies of a board's document,
    /// newest first, the last 2 kept.
    pub fn history(&self, board: &str) -> String {
        format!("{}:state:fencing:history:{board}", self.prefix)
    }
    /// `P:store-id`: the identity the store carries ([`crate::identity`]), set once with
    /// `NX`.
    pub fn identity(&self) -> String {
        format!("{}:{}", self.prefix, crate::identity::KEY)
    }
    /// The field of `current` stamped by every committed records batch.
    pub fn records_field(board: &str) -> String {
        format!("{board}:records")
    }
}

/// How many previous copies of a document the history list keeps.
pub const HISTORY: isize = 2;
