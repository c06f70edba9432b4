//! The daemon's socket hygiene, as ssh-agent keeps it (DESIGN.md, "The daemon"; STYLE.md):
//! the directory is created 0700 at creation (never chmod'ed after) and refused when it is
//! a symlink, owned by another uid or group/world writable; the socket is bound 0600 under
//! a restrictive umask; a leftover socket nobody answers is removed only when it is a
//! socket we own; a live daemon on the path leaves it untouched; at exit the socket is
//! unlinked only if its inode is still ours.

use row_fence_ask::paths;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Why the daemon cannot take its socket.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The path is over the platform's limit, the directory is untrusted, or the path is
    /// taken by something that is not our socket.
    #[error("{0}")]
    Refused(String),
    /// A live daemon answers on the path; it was left untouched.
    #[error("already running: a daemon answers on {0}")]
    AlreadyRunning(PathBuf),
    /// The system refused.
    #[error("{0}")]
    Io(String),
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
    paths::check_socket_length(socket).map_err(SocketError::Refused)?;
    let dir = socket.parent().unwrap_or(Path::new("."));
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| SocketError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        Err(e) => return Err(SocketError::Io(format!("{}: {e}", dir.display()))),
        Ok(_) => {}
    }
    paths::check_socket_dir(socket, paths::euid(), false)
        .map_err(|e| SocketError::Refused(format!("refusing to start: {e}")))
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
        _ => SocketError::Io(format!("cannot bind {}: {e}", socket.display())),
    })?;
    let meta = fs::symlink_metadata(socket)
        .map_err(|e| SocketError::Io(format!("{}: {e}", socket.display())))?;
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
        Err(e) => return Err(SocketError::Io(format!("{}: {e}", socket.display()))),
        Ok(meta) => meta,
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::Refused(format!(
            "{} exists and is not a socket; not removing it",
            socket.display()
        )));
    }
    match UnixStream::connect(socket) {
        Ok(_) => Err(SocketError::AlreadyRunning(socket.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            if meta.uid() != paths::euid() {
                return Err(SocketError::Refused(format!(
                    "leftover socket {} is owned by uid {}; not removing it",
                    socket.display(),
                    meta.uid()
                )));
            }
            tracing::info!(path = %socket.display(), "removing a leftover socket nobody answers");
            fs::remove_file(socket)
                .map_err(|e| SocketError::Io(format!("cannot remove {}: {e}", socket.display())))
        }
        Err(e) => Err(SocketError::Io(format!(
            "cannot probe {}: {e}",
            socket.display()
        ))),
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
