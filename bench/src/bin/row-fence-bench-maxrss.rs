//! `row-fence-bench-maxrss PROGRAM ARGS…`: runs PROGRAM once (stdin, stdout and stderr on
//! /dev/null, this environment) and prints `<exit code> <peak RSS in KiB>`.
//!
//! Why a separate tiny launcher: on Linux a child's `ru_maxrss` also counts the memory
//! of the process it was spawned from (the spawner's high-water mark is kept at `exec`),
//! so a child of the bench would report at least the bench's own RSS. Spawned from this
//! process, whose own peak is about that of `/bin/true`, the figure is the program's.

use std::process::{Command, Stdio};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: row-fence-bench-maxrss PROGRAM ARGS…");
        std::process::exit(2);
    };
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let code = match status {
        Ok(status) => status.code().unwrap_or(-1),
        Err(e) => {
            eprintln!("row-fence-bench-maxrss: {e}");
            std::process::exit(1);
        }
    };
    // SAFETY: plain syscall with a zeroed out-parameter; the one child has been waited for.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    println!("{code} {}", usage.ru_maxrss);
}
