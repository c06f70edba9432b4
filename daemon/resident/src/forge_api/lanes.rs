//! The forge API's lanes (ARCHITECTURE.md, "Forge API"): which repository each lane's
//! row is in, and, in the same-uid mode, the placeholder token that names the lane. The
//! file is an operator's act (`row-fence install gh`), the daemon's own (or root's) and
//! writable by no one else, read again at every request (a lane added is served at once,
//! one removed is refused at once).
//!
//! ```toml
//! [[lane]]
//! lane = "lane-a"
//! repo = "o/r"                                  # the row's repository
//! placeholder_sha256 = "…"                      # same-uid mode: the lane's gh token's hash
//! descriptor = "/srv/lanes/a/.git/row-fence.json"  # same-uid mode: read at every write
//! ```
//!
//! Which lane asks: a peer of another uid than the daemon's is the lane the broker's
//! bindings bind to that uid (the hard mode, `broker::bound`); a peer of the daemon's own
//! uid is the lane whose placeholder the request's `Authorization` carries (the same-uid
//! mode: a check at the write, not a boundary, since that uid can read every lane's file).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file is refused above this size.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// `<home>/forge-api/lanes.toml`, where `row-fence install gh` registers a lane.
pub fn default_path(home: &Path) -> PathBuf {
    home.join("forge-api").join("lanes.toml")
}

/// One lane the forge API serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeLane {
    /// The lane's name (its descriptor must name it).
    pub lane: String,
    /// The row's repository, `owner/name`: the only one a write may touch.
    pub repo: String,
    /// Same-uid mode: the SHA-256 (hex) of the placeholder token in the lane's gh config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder_sha256: Option<String>,
    /// Same-uid mode: the lane's descriptor (absolute), read at every write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<PathBuf>,
}

/// The whole file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeLanes {
    /// The lanes, each name once.
    #[serde(default)]
    pub lane: Vec<ForgeLane>,
}

/// Why the registrations text is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// Not registrations TOML.
    #[error(transparent)]
    NotToml(#[from] toml::de::Error),
    /// One lane's registration is refused.
    #[error("lane {lane}{why}")]
    Lane {
        /// The lane.
        lane: String,
        /// What is wrong with it.
        why: Refused,
    },
}

/// What is wrong with one lane's registration (its sentence follows the lane's name).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// Registered twice.
    #[error(" is registered twice")]
    Twice,
    /// A repository not `owner/name`.
    #[error(": repo {0:?} is not owner/name")]
    Repo(String),
    /// Its placeholder's hash is another lane's.
    #[error(": its placeholder is another lane's")]
    SharedPlaceholder,
    /// A relative descriptor path.
    #[error(": the descriptor path is relative")]
    RelativeDescriptor,
}

/// Why the registrations file is not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// It could not be opened, stat'ed or read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Someone other than the daemon's uid or root owns it, or others may write it.
    #[error(
        "{}: owned by uid {owner} with mode {mode:03o}; it must be the daemon's (uid {uid}) or root's and writable by no one else",
        path.display()
    )]
    Untrusted {
        /// The file.
        path: std::path::PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode bits.
        mode: u32,
        /// The daemon's uid.
        uid: u32,
    },
    /// Its text is refused.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: RegistrationError,
    },
}

impl ForgeLanes {
    /// Parses the file's text: a lane named twice, a placeholder hash used twice, a
    /// repository not `owner/name` or a relative descriptor is an error.
    pub fn parse(text: &str) -> Result<ForgeLanes, RegistrationError> {
        let lanes: ForgeLanes = toml::from_str(text)?;
        let mut names = std::collections::BTreeSet::new();
        let mut hashes = std::collections::BTreeSet::new();
        for lane in &lanes.lane {
            let refused = |why: Refused| RegistrationError::Lane {
                lane: lane.lane.clone(),
                why,
            };
            if !names.insert(lane.lane.as_str()) {
                return Err(refused(Refused::Twice));
            }
            if !valid_repo(&lane.repo) {
                return Err(refused(Refused::Repo(lane.repo.clone())));
            }
            if let Some(hash) = &lane.placeholder_sha256
                && !hashes.insert(hash.as_str())
            {
                return Err(refused(Refused::SharedPlaceholder));
            }
            if lane.descriptor.as_ref().is_some_and(|d| !d.is_absolute()) {
                return Err(refused(Refused::RelativeDescriptor));
            }
        }
        Ok(lanes)
    }

    /// Loads `path`, checking only `uid` (the daemon's) or root can have written it. A
    /// missing file registers no lane.
    pub fn load(path: &Path, uid: u32) -> Result<ForgeLanes, LoadError> {
        let read = |source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(ForgeLanes::default());
            }
            Err(e) => return Err(read(e)),
        };
        let meta = file.metadata().map_err(read)?;
        if (meta.uid() != uid && meta.uid() != 0) || meta.mode() & 0o022 != 0 {
            return Err(LoadError::Untrusted {
                path: path.to_path_buf(),
                owner: meta.uid(),
                mode: meta.mode() & 0o777,
                uid,
            });
        }
        let mut text = String::new();
        file.take(MAX_FILE_BYTES)
            .read_to_string(&mut text)
            .map_err(read)?;
        ForgeLanes::parse(&text).map_err(|source| LoadError::Invalid {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The lane named `lane`.
    pub fn by_lane(&self, lane: &str) -> Option<&ForgeLane> {
        self.lane.iter().find(|l| l.lane == lane)
    }

    /// The lane whose placeholder is `token` (compared by hash).
    pub fn by_placeholder(&self, token: &str) -> Option<&ForgeLane> {
        let hash = placeholder_hash(token);
        self.lane
            .iter()
            .find(|l| l.placeholder_sha256.as_deref() == Some(hash.as_str()))
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("forge lanes always serialize")
    }
}

/// The SHA-256 (lowercase hex) of a placeholder token, as the file keeps it.
pub fn placeholder_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `owner/name`, each of letters, digits, `-`, `_`, `.` (GitHub's own alphabet).
pub fn valid_repo(repo: &str) -> bool {
    let ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 100
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(repo.split_once('/'), Some((owner, name)) if ok(owner) && ok(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_or_placeholder_registered_twice_is_refused() {
        let one = "[[lane]]\nlane = \"a\"\nrepo = \"o/r\"\nplaceholder_sha256 = \"x\"\n";
        assert!(ForgeLanes::parse(one).is_ok());
        let twice = format!("{one}{one}");
        let err = ForgeLanes::parse(&twice).unwrap_err();
        assert!(matches!(
            &err,
            RegistrationError::Lane {
                why: Refused::Twice,
                ..
            }
        ));
        assert_eq!(err.to_string(), "lane a is registered twice");
        let shared =
            format!("{one}[[lane]]\nlane = \"b\"\nrepo = \"o/r\"\nplaceholder_sha256 = \"x\"\n");
        assert_eq!(
            ForgeLanes::parse(&shared).unwrap_err().to_string(),
            "lane b: its placeholder is another lane's"
        );
        assert_eq!(
            ForgeLanes::parse("[[lane]]\nlane = \"a\"\nrepo = \"o\"\n")
                .unwrap_err()
                .to_string(),
            "lane a: repo \"o\" is not owner/name"
        );
        assert!(ForgeLanes::parse("[[lane]]\nlane = \"a\"\nrepo = \"o/r\"\nx = 1\n").is_err());
    }

    #[test]
    fn a_placeholder_names_its_lane_by_hash() {
        let hash = placeholder_hash("secret-placeholder");
        let lanes = ForgeLanes::parse(&format!(
            "[[lane]]\nlane = \"a\"\nrepo = \"o/r\"\nplaceholder_sha256 = \"{hash}\"\n"
        ))
        .unwrap();
        assert_eq!(
            lanes.by_placeholder("secret-placeholder").unwrap().lane,
            "a"
        );
        assert!(lanes.by_placeholder("other").is_none());
    }
}
