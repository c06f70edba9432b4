//! The daemon's socket hygiene, as ssh-agent keeps it (ARCHITECTURE.md, "The daemon"):
//! the directory is created 0700 at creation (never chmod'ed after) and refused when it is
//! a symlink, owned by another uid or group/world writable; the socket is bound 0600 under
//! a restrictive umask; a leftover socket nobody answers is removed only when it is a
//! socket we own; a live daemon on the path leaves it untouched; at exit the socket is
//! unlinked only if its inode is still ours.

use row_fence_contract::paths;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why the daemon cannot take its socket. [`SocketError::is_refused`]: the path or its
/// directory is not one the daemon may use (nothing was touched); else the system failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocketError {
    /// The path is over the platform's limit (the sentence names path, length and limit).
    #[error("{0}")]
    TooLong(paths::SocketPathTooLong),
    /// The socket's directory is not to be trusted.
    #[error("refusing to start: {0}")]
    Untrusted(paths::Untrusted),
    /// Something that is not a socket holds the path.
    #[error("{} exists and is not a socket; not removing it", .0.display())]
    NotASocket(PathBuf),
    /// A leftover socket nobody answers belongs to another uid.
    #[error("leftover socket {} is owned by uid {uid}; not removing it", path.display())]
    ForeignLeftover {
        /// The socket.
        path: PathBuf,
        /// Its owner.
        uid: u32,
    },
    /// A live daemon answers on the path; it was left untouched.
    #[error("already running: a daemon answers on {0}")]
    AlreadyRunning(PathBuf),
    /// The socket's directory could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The directory or the socket could not be looked at.
    #[error("{}: {source}", path.display())]
    Stat {
        /// The directory or socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Binding failed (other than a daemon answering there).
    #[error("cannot bind {}: {source}", path.display())]
    Bind {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A leftover socket could not be probed for a live daemon.
    #[error("cannot probe {}: {source}", path.display())]
    Probe {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A leftover socket of ours could not be removed.
    #[error("cannot remove {}: {source}", path.display())]
    Remove {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl SocketError {
    /// True when the daemon refused the path or its directory (too long, untrusted, held
    /// by something else, or a live daemon there); false when the system failed.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            SocketError::TooLong(_)
                | SocketError::Untrusted(_)
                | SocketError::NotASocket(_)
                | SocketError::ForeignLeftover { .. }
                | SocketError::AlreadyRunning(_)
        )
    }
}

/// The socket file we bound, remembered by inode so only our own file is ever unlinked.
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    id: (u64, u64),
}

/// Creates the socket's directory 0700 if missing, then checks it as the asker does, but
/// without accepting root's directories: the daemon's directory must be its own.
pub fn prepare_dir(socket: &Path) -> Result<(), SocketError> {
    paths::check_socket_length(socket).map_err(SocketError::TooLong)?;
    let dir = socket.parent().unwrap_or(Path::new("."));
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| SocketError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        Err(source) => {
            return Err(SocketError::Stat {
                path: dir.to_path_buf(),
                source,
            });
        }
        Ok(_) => {}
    }
    paths::check_socket_dir(socket, paths::euid(), false).map_err(SocketError::Untrusted)
}

/// Binds `socket` with mode 0600, clearing a leftover socket nobody answers. Returns the
/// listener (std; the server converts it inside its runtime) and the guard that unlinks it.
pub fn bind(socket: &Path) -> Result<(UnixListener, SocketGuard), SocketError> {
    clear_leftover(socket)?;
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(socket);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => SocketError::AlreadyRunning(socket.to_path_buf()),
        _ => SocketError::Bind {
            path: socket.to_path_buf(),
            source: e,
        },
    })?;
    let meta = fs::symlink_metadata(socket).map_err(|source| SocketError::Stat {
        path: socket.to_path_buf(),
        source,
    })?;
    Ok((
        listener,
        SocketGuard {
            path: socket.to_path_buf(),
            id: (meta.dev(), meta.ino()),
        },
    ))
}

fn clear_leftover(socket: &Path) -> Result<(), SocketError> {
    let meta = match fs::symlink_metadata(socket) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SocketError::Stat {
                path: socket.to_path_buf(),
                source,
            });
        }
        Ok(meta) => meta,
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(socket.to_path_buf()));
    }
    match UnixStream::connect(socket) {
        Ok(_) => Err(SocketError::AlreadyRunning(socket.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            if meta.uid() != paths::euid() {
                return Err(SocketError::ForeignLeftover {
                    path: socket.to_path_buf(),
                    uid: meta.uid(),
                });
            }
            tracing::info!(path = %socket.display(), "removing a leftover socket nobody answers");
            fs::remove_file(socket).map_err(|source| SocketError::Remove {
                path: socket.to_path_buf(),
                source,
            })
        }
        Err(source) => Err(SocketError::Probe {
            path: socket.to_path_buf(),
            source,
        }),
    }
}

impl SocketGuard {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unlinks the socket if the path still names the inode we bound (another daemon may
    /// have taken the path since).
    pub fn remove_if_ours(&self) {
        let ours = fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.id)
            .unwrap_or(false);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_on_the_socket_path_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        fs::write(&path, "mine").unwrap();
        let refused = bind(&path).unwrap_err();
        assert!(matches!(&refused, SocketError::NotASocket(p) if p == &path));
        assert!(refused.is_refused());
        assert_eq!(
            refused.to_string(),
            format!(
                "{} exists and is not a socket; not removing it",
                path.display()
            )
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "mine");
    }

    #[test]
    fn a_socket_path_over_the_limit_is_refused_before_anything_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(paths::SOCKET_PATH_LIMIT));
        let refused = prepare_dir(&deep.join("sock")).unwrap_err();
        assert!(matches!(refused, SocketError::TooLong(_)) && refused.is_refused());
        assert!(!deep.exists());
    }
}
