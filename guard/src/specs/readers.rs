//! Programs with a reader of their own: the fenced programs (git, gh, row-fence), and
//! programs whose syntax says what they run (xargs, find, watch, sed, awk, curl, make,
//! socat…). Each record names its reader; the reader holds the program's own vocabulary
//! (git's subcommands, gh's read-only verbs).

use super::{EnvVars, Runs, Spec};
use crate::readers;

/// git's variables that make it run code or change what it runs (docs/git-layer.md,
/// "Git's own layer": `GIT_SSH_COMMAND` overrides the transport gate's
/// `core.sshCommand`).
const GIT_ENV: EnvVars = EnvVars {
    opaque: &[
        "GIT_SSH_COMMAND",
        "GIT_SSH",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_EXEC_PATH",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_PROXY_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_TEMPLATE_DIR",
        "GIT_ALLOW_PROTOCOL",
    ],
    opaque_prefixes: &["GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"],
    code: &["GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER"],
};

/// The programs with a reader of their own.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["git"],
        Runs::Fenced(|_, args, ctx, depth| crate::git::classify(args, ctx, depth)),
    )
    .dashed()
    .with_env(GIT_ENV),
    Spec::new(
        &["gh"],
        Runs::Fenced(|_, args, ctx, _| crate::gh::classify(args, ctx)),
    ),
    Spec::new(
        &["row-fence"],
        Runs::Fenced(|_, args, ctx, _| crate::row_fence::classify(args, ctx)),
    ),
    // git with more verbs.
    Spec::new(
        &["hub"],
        Runs::Reader {
            read: |_, args, ctx, depth| crate::git::classify(args, ctx, depth),
            takes_commands: true,
        },
    ),
    Spec::new(
        &["xargs"],
        Runs::Reader {
            read: readers::xargs,
            takes_commands: true,
        },
    ),
    Spec::new(
        &["find"],
        Runs::Reader {
            read: readers::find,
            takes_commands: true,
        },
    ),
    Spec::new(
        &["watch"],
        Runs::Reader {
            read: readers::watch,
            takes_commands: true,
        },
    ),
    Spec::new(
        &["sed"],
        Runs::Reader {
            read: |_, args, ctx, _| crate::sed::classify(args, ctx),
            takes_commands: true,
        },
    ),
    // GNU's names for them on other systems: read alike, not looked for among another
    // program's words.
    Spec::new(
        &["gxargs"],
        Runs::Reader {
            read: readers::xargs,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["gfind"],
        Runs::Reader {
            read: readers::find,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["gsed"],
        Runs::Reader {
            read: |_, args, ctx, _| crate::sed::classify(args, ctx),
            takes_commands: false,
        },
    ),
    // Awk's program is code: it runs commands through `system()` and `|`.
    Spec::new(
        &["awk", "gawk", "mawk", "nawk"],
        Runs::Reader {
            read: |program, args, ctx, _| crate::awk::classify(program, args, ctx),
            takes_commands: true,
        },
    ),
    // HTTP clients: a request that writes is fenced.
    Spec::new(
        &["curl"],
        Runs::Reader {
            read: crate::http::curl_request,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["wget"],
        Runs::Reader {
            read: crate::http::wget_request,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["http", "https", "xh", "xhs"],
        Runs::Reader {
            read: crate::http::httpie_request,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["scp", "sftp"],
        Runs::Reader {
            read: readers::remote_copy,
            takes_commands: false,
        },
    ),
    Spec::new(
        &["rsync"],
        Runs::Reader {
            read: readers::rsync,
            takes_commands: false,
        },
    )
    .handing(&[("-e", ""), ("--rsh", ""), ("--rsync-path", "")]),
    Spec::new(
        &["make", "gmake", "bmake"],
        Runs::Reader {
            read: readers::make,
            takes_commands: false,
        },
    ),
    // `EXEC:cmd` and `SYSTEM:cmd` addresses.
    Spec::new(&["socat"], Runs::Handed(readers::socat)),
];
