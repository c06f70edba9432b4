//! `install broker`'s check that the lane whose git will sign through the key broker can
//! connect to its agent socket at all (`row_fence_resident::socket_reach`): git there
//! runs as the repository's owner (or as whoever runs install, when that is not root),
//! and a socket it cannot reach makes every push fail with "Permission denied" after an
//! install that said it was done. Refused before anything is written, naming the
//! directory and the fix.

use row_fence_contract::exit::Failure;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `Ok` when the uid that pushes from the repository at `common_dir` can connect to
/// `socket`.
pub fn reachable(common_dir: &Path, socket: &Path) -> Result<(), Failure> {
    let me = row_fence_contract::paths::euid();
    let pusher = if me == 0 {
        std::fs::metadata(common_dir).map_or(me, |m| m.uid())
    } else {
        me
    };
    row_fence_resident::socket_reach::check(pusher, socket).map_err(|e| {
        Failure::could_not(format!(
            "git in {} runs as uid {pusher} and would sign through a socket it cannot reach; nothing was written: {e}",
            common_dir.display()
        ))
    })
}
