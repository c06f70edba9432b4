//! The board registry, `$ROW_FENCE_HOME/registry/boards.toml`: which tenant each board
//! belongs to, for the location fence, and a board's own margin (ARCHITECTURE.md,
//! "Margin"), in place of the install's. Part of the code stamp (the whole registry
//! directory is), so a daemon that loaded an older registry restarts on the new one.
//!
//! ```toml
//! [boards.board-1]
//! tenant = "acme"
//! margin = "30s"
//!
//! # A row's scope (ARCHITECTURE.md, "Forge hook"); absent: any ref of any repository.
//! [boards.board-1.scope]
//! refs = ["refs/heads/feature/{row}", "refs/heads/feature/{row}/*"]
//! repositories = ["/srv/git/app.git"]   # optional
//! allow_delete = false                  # the three default to false
//! allow_force = false
//! allow_tags = false
//! ```
//!
//! A file that does not parse stops the daemon at start, naming the line.

use crate::config::parse_margin;
use row_fence_contract::descriptor::{validate_board, validate_tenant};
use row_fence_contract::paths;
use row_fence_contract::scope::Scope;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the registry could not be loaded; the daemon does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The file exists but cannot be read.
    #[error("cannot read the registry {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a registry: TOML's message with its line and column, or an invalid
    /// board name.
    #[error("the registry{} does not parse: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Parse {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// What is wrong, where.
        message: String,
    },
}

/// The registry file's name inside the registry directory.
pub const FILE: &str = "boards.toml";

/// Board → its tenant and margin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    boards: BTreeMap<String, Board>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Board {
    tenant: Option<String>,
    margin_ms: Option<u64>,
    scope: Option<Scope>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    #[serde(default)]
    boards: BTreeMap<String, BoardEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BoardEntry {
    tenant: Option<String>,
    /// A duration (`30s`, `2m`), as `--margin` takes it.
    margin: Option<String>,
    /// The refs and repositories a row's holder may update.
    scope: Option<Scope>,
}

/// `<home>/registry/boards.toml`.
pub fn path(home: &Path) -> PathBuf {
    paths::registry(home).join(FILE)
}

impl Registry {
    /// Loads the registry under `home`; a missing file is an empty registry. The error
    /// names the file and the line.
    pub fn load(home: &Path) -> Result<Registry, RegistryError> {
        let path = path(home);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Registry::default()),
            Err(source) => return Err(RegistryError::Read { path, source }),
        };
        Registry::parse(&text).map_err(|e| match e {
            RegistryError::Parse { message, .. } => RegistryError::Parse {
                path: Some(path),
                message,
            },
            other => other,
        })
    }

    /// Parses registry text; the error gives the line and column.
    pub fn parse(text: &str) -> Result<Registry, RegistryError> {
        let invalid = |message: String| RegistryError::Parse {
            path: None,
            message,
        };
        let file: RegistryFile = toml::from_str(text)
            // TOML's own lines, kept: its caret points under the column on the line above.
            .map_err(|e| invalid(format!("\n{}", e.to_string().trim_end())))?;
        let mut boards = BTreeMap::new();
        for (board, entry) in file.boards {
            validate_board(&board).map_err(|e| invalid(e.to_string()))?;
            let tenant = entry.tenant.filter(|t| !t.trim().is_empty());
            if let Some(tenant) = &tenant {
                validate_tenant(tenant).map_err(|e| invalid(format!("board {board}: {e}")))?;
            }
            let margin_ms = entry
                .margin
                .as_deref()
                .map(parse_margin)
                .transpose()
                .map_err(|e| invalid(format!("board {board}: {e}")))?;
            if let Some(scope) = &entry.scope {
                scope
                    .validate()
                    .map_err(|e| invalid(format!("board {board}: {e}")))?;
            }
            boards.insert(
                board,
                Board {
                    tenant,
                    margin_ms,
                    scope: entry.scope,
                },
            );
        }
        Ok(Registry { boards })
    }

    /// The boards the registry names, sorted.
    pub fn boards(&self) -> impl Iterator<Item = &str> {
        self.boards.keys().map(String::as_str)
    }

    /// The board's tenant, if the registry names one.
    pub fn tenant(&self, board: &str) -> Option<&str> {
        self.boards.get(board)?.tenant.as_deref()
    }

    /// The board's scope, if the registry gives one (none: any ref of any repository).
    pub fn scope(&self, board: &str) -> Option<&Scope> {
        self.boards.get(board)?.scope.as_ref()
    }

    /// The margin in ms an ask on `board` is judged with: the board's own `margin`, else
    /// `install` (`--margin`, `ROW_FENCE_MARGIN`, or the default).
    pub fn margin_ms(&self, board: &str, install: u64) -> u64 {
        self.boards
            .get(board)
            .and_then(|b| b.margin_ms)
            .unwrap_or(install)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_map_to_tenants() {
        let r = Registry::parse("[boards.b1]\ntenant = \"acme\"\n\n[boards.b2]\n").unwrap();
        assert_eq!(r.tenant("b1"), Some("acme"));
        assert_eq!(r.tenant("b2"), None);
        assert_eq!(r.tenant("b3"), None);
        assert_eq!(Registry::parse("").unwrap(), Registry::default());
        let r = Registry::parse("[boards.b1]\nmargin = \"30s\"\n").unwrap();
        assert_eq!(r.margin_ms("b1", 5000), 30_000);
        assert_eq!(r.margin_ms("b2", 5000), 5000);
        for margin in ["soon", "2h"] {
            let err = Registry::parse(&format!("[boards.b1]\nmargin = \"{margin}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("board b1: margin"), "{err}");
        }
    }

    #[test]
    fn a_board_carries_its_scope() {
        let r = Registry::parse(
            "[boards.b1.scope]\nrefs = [\"refs/heads/feature/{row}\"]\nallow_tags = true\n\n[boards.b2]\n",
        )
        .unwrap();
        let scope = r.scope("b1").unwrap();
        assert_eq!(scope.refs, ["refs/heads/feature/{row}"]);
        assert!(scope.allow_tags && !scope.allow_force && !scope.allow_delete);
        assert!(r.scope("b2").is_none());
        for bad in [
            "refs = []",
            "refs = [\"refs/*\"]",
            "refs = [\"refs/heads/x\"]\nallow_everything = true",
            "refs = [\"refs/heads/x\"]\nrepositories = [\"app.git\"]",
        ] {
            let err = Registry::parse(&format!("[boards.b1.scope]\n{bad}\n")).unwrap_err();
            assert!(
                err.to_string().contains("b1") || err.to_string().contains("line"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_registry_that_does_not_parse_names_the_line() {
        let err = Registry::parse("[boards.b1]\ntenant = \"acme\"\ntenant = oops\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
        let err = Registry::parse("[boards.b1]\ntennant = \"acme\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(Registry::parse("[boards.\"Bad Board\"]\ntenant = \"x\"\n").is_err());
        // A tenant has the rows' one spelling: no zero-width, bidi or non-ASCII character.
        for tenant in ["acme\u{200b}", "ac\u{202e}me", "\u{430}cme", "acme corp"] {
            let err = Registry::parse(&format!("[boards.b1]\ntenant = \"{tenant}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("tenant"), "{err}");
        }
    }
}
