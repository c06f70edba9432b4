//! Shells and runners: the shells taking `-c` code, and programs that run a
//! command in a way the guard does not follow (on another host, in a container, under a
//! debugger, later), opaque once they are given one.

use super::{EnvVars, Runner, Runs, ShellCode, Spec};

/// The shell's variables that run code (a startup file, a prompt, an imported function)
/// or change what a command runs (`cd`'s `CDPATH`): the agent's shell's and the next
/// one's.
const SHELL_ENV: EnvVars = EnvVars {
    opaque: &[
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
    ],
    opaque_prefixes: &["BASH_FUNC_"],
    code: &[],
};

/// The shells and runners.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["sh", "bash", "dash", "ash", "rbash"],
        Runs::Shell(ShellCode::Read),
    )
    .with_env(SHELL_ENV),
    Spec::new(&["zsh"], Runs::Shell(ShellCode::ToolOnly)),
    // Debuggers, sandboxes and launchers that run the command they are given.
    Spec::new(
        &[
            "strace",
            "ltrace",
            "valgrind",
            "gdb",
            "perf",
            "firejail",
            "bwrap",
            "unshare",
            "nsenter",
            "setpriv",
            "faketime",
            "parallel",
            "hyperfine",
            "entr",
            "newgrp",
            "numactl",
            "prlimit",
            "cpulimit",
            "pkexec",
            "osascript",
            "watchexec",
            "nodemon",
        ],
        Runs::Runner(Runner {
            operands: 1,
            always: false,
            deferred: false,
        }),
    ),
    // Runners whose first operand is a place (a host, a container, a root, a group):
    // `ssh HOST` alone is a login.
    Spec::new(
        &["ssh", "chroot", "docker", "podman", "kubectl", "sg"],
        Runs::Runner(Runner {
            operands: 2,
            always: false,
            deferred: false,
        }),
    ),
    // Shells the guard does not read, and programs that read what they run from stdin or
    // a terminal.
    Spec::new(
        &[
            "su",
            "script",
            "expect",
            "ksh",
            "mksh",
            "fish",
            "csh",
            "tcsh",
            "yash",
            "posh",
            "pwsh",
            "powershell",
        ],
        Runs::Runner(Runner {
            operands: 1,
            always: true,
            deferred: false,
        }),
    ),
    // Queues that read the command from stdin and run it later.
    Spec::new(
        &["at", "batch", "crontab"],
        Runs::Runner(Runner {
            operands: 1,
            always: true,
            deferred: true,
        }),
    ),
    // Service managers, queues and detached terminals: the command starts apart from the
    // call.
    Spec::new(
        &[
            "systemd-run",
            "tmux",
            "screen",
            "nohup-run",
            "daemonize",
            "start-stop-daemon",
            "pueue",
            "tsp",
            "nq",
            "dtach",
            "abduco",
            "sem",
            "zellij",
            "byobu",
            "launchctl",
        ],
        Runs::Runner(Runner {
            operands: 1,
            always: false,
            deferred: true,
        }),
    ),
];
