//! Keeps file descriptors 0, 1 and 2 open. A hook may start the asker with stdout or
//! stderr closed (`>&-`); the next file or socket opened would then get that number, and
//! a verdict line printed "to stderr" would go into the daemon's socket. Opening
//! `/dev/null` until a descriptor above 2 comes back fills any gap.

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, IntoRawFd};

/// Fills closed standard descriptors with `/dev/null`. Costs one open and one close when
/// all three are open.
pub fn keep_standard_fds_open() {
    loop {
        let Ok(file) = OpenOptions::new().read(true).write(true).open("/dev/null") else {
            return;
        };
        if file.as_raw_fd() > 2 {
            return; // dropped: closed again
        }
        // It took the place of a closed 0, 1 or 2: keep it there for the process's life.
        let _ = file.into_raw_fd();
    }
}
