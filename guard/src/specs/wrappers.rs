//! Wrappers: programs that run their operands as a command after their options (`env`,
//! `timeout`, `sudo`, `flock`…). The inner command is read in turn, in the directory a
//! `chdir` option names and with the variables `env` sets.

use super::{Runs, Spec, Wrapper};

/// The wrappers.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["env"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-i",
                "--ignore-environment",
                "-0",
                "--null",
                "-v",
                "--debug",
                "-",
            ],
            valued: &["-u", "--unset"],
            chdir: &["-C", "--chdir"],
            assigns: true,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["timeout"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "--preserve-status",
                "--foreground",
                "-v",
                "--verbose",
                "-f",
                "-p",
            ],
            valued: &["-s", "--signal", "-k", "--kill-after"],
            operands: 1,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["nice"],
        Runs::Wrapper(Wrapper {
            valued: &["-n", "--adjustment"],
            numeric_option: true,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["nohup"],
        Runs::Wrapper(Wrapper {
            outlives: true,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["setsid"],
        Runs::Wrapper(Wrapper {
            flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
            outlives: true,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["stdbuf"],
        Runs::Wrapper(Wrapper {
            valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["ionice"],
        Runs::Wrapper(Wrapper {
            flags: &["-t", "--ignore"],
            valued: &["-c", "--class", "-n", "--classdata"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["taskset"],
        Runs::Wrapper(Wrapper {
            flags: &["-c", "--cpu-list", "-a", "--all-tasks"],
            operands: 1,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["chrt"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-a",
                "--all-tasks",
                "-b",
                "--batch",
                "-d",
                "--deadline",
                "-f",
                "--fifo",
                "-i",
                "--idle",
                "-o",
                "--other",
                "-r",
                "--rr",
                "-R",
                "--reset-on-fork",
                "-v",
                "--verbose",
                "-m",
                "--max",
            ],
            valued: &[
                "-T",
                "--sched-runtime",
                "-P",
                "--sched-period",
                "-D",
                "--sched-deadline",
            ],
            operands: 1,
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["flock"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-s",
                "--shared",
                "-x",
                "-e",
                "--exclusive",
                "-u",
                "--unlock",
                "-n",
                "--nb",
                "--nonblock",
                "-o",
                "--close",
                "-F",
                "--no-fork",
                "--verbose",
            ],
            valued: &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
            operands: 1,
            code: &["-c", "--command"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["sudo", "doas"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-A",
                "--askpass",
                "-b",
                "--background",
                "-E",
                "--preserve-env",
                "-H",
                "--set-home",
                "-k",
                "--reset-timestamp",
                "-K",
                "-n",
                "--non-interactive",
                "-P",
                "--preserve-groups",
                "-S",
                "--stdin",
                "-N",
                "--no-update",
                "-B",
                "--bell",
                "--",
            ],
            valued: &[
                "-u",
                "--user",
                "-g",
                "--group",
                "-C",
                "--close-from",
                "-h",
                "--host",
                "-p",
                "--prompt",
                "-r",
                "--role",
                "-t",
                "--type",
                "-T",
                "--command-timeout",
                "-U",
                "--other-user",
            ],
            chdir: &["-D", "--chdir"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["runuser"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-l",
                "--login",
                "-m",
                "-p",
                "--preserve-environment",
                "-",
                "-P",
                "--pty",
            ],
            valued: &[
                "-u",
                "--user",
                "-g",
                "--group",
                "-G",
                "--supp-group",
                "-s",
                "--shell",
                "-w",
                "--whitelist-environment",
            ],
            code: &["-c", "--command"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["exec"],
        Runs::Wrapper(Wrapper {
            flags: &["-c", "-l"],
            valued: &["-a"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(
        &["time"],
        Runs::Wrapper(Wrapper {
            flags: &[
                "-p",
                "--portability",
                "-a",
                "--append",
                "-v",
                "--verbose",
                "-q",
                "--quiet",
            ],
            valued: &["-f", "--format", "-o", "--output"],
            ..Wrapper::PLAIN
        }),
    ),
    Spec::new(&["busybox"], Runs::Wrapper(Wrapper::PLAIN)),
    Spec::new(
        &[
            "catchsegv",
            "unbuffer",
            "caffeinate",
            "dbus-run-session",
            "fakeroot",
            "torsocks",
            "proxychains",
            "proxychains4",
            "xvfb-run",
            "nocache",
            "eatmydata",
            "rlwrap",
        ],
        Runs::Wrapper(Wrapper::PLAIN),
    ),
];
