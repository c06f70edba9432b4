//! The lane bindings: which uid is which lane, and where that lane's descriptor is
//! (ARCHITECTURE.md, "Key broker"). Who asks is not the lane's word: the broker takes the
//! peer's uid from the socket and reads the bound descriptor itself. The bindings file is
//! an operator's act (`row-fence lane add`, or written by hand), so it must be the
//! daemon's own (or root's) and writable by no one else; a file a lane could write would
//! let it bind itself to another lane.
//!
//! A binding pins the lease, not a name ([`super::bound`]): it names its lane, and either
//! the lease's board and row (a descriptor naming another lease is refused, wherever it
//! sits) or a descriptor the lane's uid cannot change (a directory only the daemon's user
//! writes). The daemon reads the descriptor with its own rights and follows no link in its
//! path, so a lane cannot point it at another lease's descriptor, even one held under the
//! same lane name, or at any other file the daemon may read.
//!
//! ```toml
//! [[lane]]
//! lane = "lane-a"                              # the descriptor must name it
//! uid = 1001
//! worktree = "/srv/lanes/a"                    # optional: what `lane list` shows
//! descriptor = "/srv/lanes/a/.git/row-fence.json"
//! board = "board-1"                            # the lease it may act for: the
//! row = "row-1"                                # descriptor must name this one
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A bindings file is refused above this size (a thousand lanes is under 100 KiB).
pub const MAX_LANES_FILE_BYTES: u64 = 1024 * 1024;

/// The bindings `row-fence lane add` keeps and the daemon reads when no `--broker-lanes`
/// names another file: `<home>/broker/lanes.toml` (the directory 0700, the file 0600,
/// both the daemon's).
pub fn default_path(home: &Path) -> PathBuf {
    home.join("broker").join("lanes.toml")
}

/// Why the bindings were not loaded; the daemon does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LanesError {
    /// The file could not be opened, stat'ed or read.
    #[error("lane bindings {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Someone other than the daemon's uid or root owns it, or others may write it.
    #[error(
        "lane bindings {path}: owned by uid {owner} with mode {mode:03o}; it must be owned by the daemon's uid {uid} or root and writable by no one else"
    )]
    Untrusted {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode bits.
        mode: u32,
        /// The daemon's uid.
        uid: u32,
    },
    /// The file is not valid bindings.
    #[error("lane bindings {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        reason: BindingError,
    },
}

/// One lane bound to a uid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The lane's name: a descriptor naming another lane is refused. Required (a binding
    /// without one is refused by [`Lanes::add`]); an `Option` only for the file's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The lane's uid: sign requests from this uid are judged as this lane.
    pub uid: u32,
    /// The lane's worktree, as the operator named it (shown, not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    /// The lane's descriptor (absolute), read by the daemon at every sign request.
    pub descriptor: PathBuf,
    /// The board of the one lease this lane acts for (with `row`): a descriptor naming
    /// another is refused. Without it the descriptor must sit where the lane's uid cannot
    /// change it, checked at every read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// The row of that lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
}

impl Binding {
    /// The board and row this binding pins, if it pins one.
    pub fn pinned(&self) -> Option<(&str, &str)> {
        Some((self.board.as_deref()?, self.row.as_deref()?))
    }
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    lane: Vec<Binding>,
}

/// Why bindings text, or one binding, is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// Not bindings TOML (an unknown field among them).
    #[error(transparent)]
    NotToml(#[from] toml::de::Error),
    /// A relative descriptor path.
    #[error("uid {uid}: the descriptor path {} is not absolute", descriptor.display())]
    RelativeDescriptor {
        /// The uid bound.
        uid: u32,
        /// The path given.
        descriptor: PathBuf,
    },
    /// No lane named.
    #[error(
        "uid {uid}: the binding names no lane (lane = \"…\"): the daemon reads the descriptor with its own rights, so a descriptor naming any lane (a symlink to another lane's) would be judged as this uid's"
    )]
    NoLane {
        /// The uid bound.
        uid: u32,
    },
    /// A lane, board or row name that is not valid.
    #[error(transparent)]
    Name(#[from] row_fence_contract::descriptor::InvalidName),
    /// A board without a row, or a row without a board.
    #[error("lane {lane}: a binding pins a lease by board and row together, or by neither")]
    HalfPinned {
        /// The lane.
        lane: String,
    },
    /// One lane bound to two uids.
    #[error("lane {lane} is bound twice (uids {first} and {second})")]
    LaneTwice {
        /// The lane.
        lane: String,
        /// The uid bound first.
        first: u32,
        /// The uid bound again.
        second: u32,
    },
    /// One uid bound twice.
    #[error("uid {uid} is bound twice ({} and {})", first.display(), second.display())]
    UidTwice {
        /// The uid.
        uid: u32,
        /// The descriptor bound first.
        first: PathBuf,
        /// The descriptor bound again.
        second: PathBuf,
    },
}

/// The bindings by uid.
#[derive(Clone, Debug, Default)]
pub struct Lanes {
    by_uid: BTreeMap<u32, Binding>,
}

impl Lanes {
    /// Parses bindings text; a uid bound twice, a relative descriptor path or an unknown
    /// field is an error (never a guess at which binding was meant).
    pub fn parse(text: &str) -> Result<Lanes, BindingError> {
        let file: File = toml::from_str(text)?;
        let mut lanes = Lanes::default();
        for binding in file.lane {
            lanes.add(binding)?;
        }
        Ok(lanes)
    }

    /// Adds a binding. Refused: a relative descriptor path, an invalid lane name, a uid
    /// bound already, a lane name bound already (one lane, one uid).
    pub fn add(&mut self, binding: Binding) -> Result<(), BindingError> {
        if !binding.descriptor.is_absolute() {
            return Err(BindingError::RelativeDescriptor {
                uid: binding.uid,
                descriptor: binding.descriptor.clone(),
            });
        }
        let Some(lane) = &binding.lane else {
            return Err(BindingError::NoLane { uid: binding.uid });
        };
        row_fence_contract::descriptor::validate_lane(lane)?;
        match (&binding.board, &binding.row) {
            (Some(board), Some(row)) => {
                row_fence_contract::descriptor::validate_board(board)?;
                row_fence_contract::descriptor::validate_row(row)?;
            }
            (None, None) => {}
            _ => return Err(BindingError::HalfPinned { lane: lane.clone() }),
        }
        if let Some(other) = self.by_lane(lane) {
            return Err(BindingError::LaneTwice {
                lane: lane.clone(),
                first: other.uid,
                second: binding.uid,
            });
        }
        if let Some(earlier) = self.by_uid.get(&binding.uid) {
            return Err(BindingError::UidTwice {
                uid: binding.uid,
                first: earlier.descriptor.clone(),
                second: binding.descriptor.clone(),
            });
        }
        self.by_uid.insert(binding.uid, binding);
        Ok(())
    }

    /// Removes the binding of `lane` (a lane name, or a uid as digits); the removed one.
    pub fn remove(&mut self, lane: &str) -> Option<Binding> {
        let uid = self
            .by_lane(lane)
            .map(|b| b.uid)
            .or_else(|| lane.parse().ok())?;
        self.by_uid.remove(&uid)
    }

    /// The binding named `lane`.
    pub fn by_lane(&self, lane: &str) -> Option<&Binding> {
        self.by_uid
            .values()
            .find(|b| b.lane.as_deref() == Some(lane))
    }

    /// Every binding, by uid.
    pub fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.by_uid.values()
    }

    /// The bindings as the file holds them (what [`Lanes::parse`] reads back).
    pub fn to_toml(&self) -> String {
        let file = File {
            lane: self.by_uid.values().cloned().collect(),
        };
        toml::to_string(&file).expect("bindings always serialize")
    }

    /// Loads `path`, checking that only the daemon's uid (or root) can have written it.
    pub fn load(path: &Path, uid: u32) -> Result<Lanes, LanesError> {
        let read_error = |source| LanesError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = fs::File::open(path).map_err(read_error)?;
        let meta = file.metadata().map_err(read_error)?;
        let mode = meta.mode() & 0o777;
        if (meta.uid() != uid && meta.uid() != 0) || mode & 0o022 != 0 {
            return Err(LanesError::Untrusted {
                path: path.to_path_buf(),
                owner: meta.uid(),
                mode,
                uid,
            });
        }
        let mut text = String::new();
        file.take(MAX_LANES_FILE_BYTES)
            .read_to_string(&mut text)
            .map_err(read_error)?;
        Lanes::parse(&text).map_err(|reason| LanesError::Invalid {
            path: path.to_path_buf(),
            reason,
        })
    }

    /// The lane bound to `uid`, if any.
    pub fn lane_of(&self, uid: u32) -> Option<&Binding> {
        self.by_uid.get(&uid)
    }

    /// How many uids are bound.
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// True when no uid is bound.
    pub fn is_empty(&self) -> bool {
        self.by_uid.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_uid_names_its_descriptor() {
        let lanes = Lanes::parse(
            "[[lane]]\nlane = \"a\"\nuid = 1001\ndescriptor = \"/a/row-fence.json\"\n\
             [[lane]]\nlane = \"b\"\nuid = 1002\ndescriptor = \"/b/row-fence.json\"\n",
        )
        .unwrap();
        assert_eq!(lanes.len(), 2);
        assert_eq!(
            lanes.lane_of(1002).unwrap().descriptor,
            PathBuf::from("/b/row-fence.json")
        );
        assert!(lanes.lane_of(1003).is_none());
    }

    #[test]
    fn a_pin_is_a_board_and_a_row_together_both_valid() {
        let pinned = "[[lane]]\nlane = \"a\"\nuid = 1\ndescriptor = \"/a\"\nboard = \"board-1\"\nrow = \"row-1\"\n";
        let lanes = Lanes::parse(pinned).unwrap();
        assert_eq!(
            lanes.lane_of(1).unwrap().pinned(),
            Some(("board-1", "row-1"))
        );
        for half in [
            "board = \"b\"\n",
            "row = \"r\"\n",
            "board = \"B A D\"\nrow = \"r\"\n",
        ] {
            let text = format!("[[lane]]\nlane = \"a\"\nuid = 1\ndescriptor = \"/a\"\n{half}");
            assert!(Lanes::parse(&text).is_err(), "{half}");
        }
    }

    #[test]
    fn a_uid_bound_twice_is_an_error() {
        let err = Lanes::parse(
            "[[lane]]\nlane = \"a\"\nuid = 1\ndescriptor = \"/a\"\n[[lane]]\nlane = \"b\"\nuid = 1\ndescriptor = \"/b\"\n",
        )
        .unwrap_err();
        assert!(
            matches!(err, BindingError::UidTwice { uid: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("bound twice"), "{err}");
    }

    #[test]
    fn a_relative_descriptor_or_an_unknown_field_is_an_error() {
        assert!(Lanes::parse("[[lane]]\nuid = 1\ndescriptor = \"a.json\"\n").is_err());
        assert!(Lanes::parse("[[lane]]\nuid = 1\ndescriptor = \"/a\"\nlanes = \"x\"\n").is_err());
        assert!(Lanes::parse("[[lanes]]\nuid = 1\n").is_err());
    }

    /// A binding without its lane would let the lane's uid be judged as whichever lane its
    /// descriptor (read with the daemon's rights, through a symlink) names.
    #[test]
    fn a_binding_without_its_lane_is_an_error() {
        let err = Lanes::parse("[[lane]]\nuid = 1\ndescriptor = \"/a\"\n").unwrap_err();
        assert!(matches!(err, BindingError::NoLane { uid: 1 }), "{err}");
        assert!(err.to_string().contains("names no lane"), "{err}");
    }

    #[test]
    fn a_file_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lanes.toml");
        fs::write(&path, "").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        let err = Lanes::load(&path, row_fence_contract::paths::euid()).unwrap_err();
        assert!(matches!(err, LanesError::Untrusted { .. }), "{err}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            Lanes::load(&path, row_fence_contract::paths::euid())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_named_binding_round_trips_and_is_removed_by_name_or_uid() {
        let mut lanes = Lanes::default();
        let binding = Binding {
            lane: Some("lane-a".into()),
            uid: 1001,
            worktree: Some("/w/a".into()),
            descriptor: "/w/a/.git/row-fence.json".into(),
            board: Some("board-1".into()),
            row: Some("row-1".into()),
        };
        lanes.add(binding.clone()).unwrap();
        let again = Binding {
            uid: 1002,
            ..binding.clone()
        };
        assert!(matches!(
            lanes.add(again).unwrap_err(),
            BindingError::LaneTwice {
                first: 1001,
                second: 1002,
                ..
            }
        ));
        let bad = Binding {
            lane: Some("a b".into()),
            uid: 1003,
            ..binding.clone()
        };
        assert!(lanes.add(bad).is_err());
        let back = Lanes::parse(&lanes.to_toml()).unwrap();
        assert_eq!(back.lane_of(1001), Some(&binding));
        let mut back2 = back.clone();
        assert_eq!(back2.remove("lane-a"), Some(binding.clone()));
        assert!(back2.is_empty());
        let mut back3 = back;
        assert_eq!(back3.remove("1001"), Some(binding));
        assert_eq!(back3.remove("lane-a"), None);
    }
}
