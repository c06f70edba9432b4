//! Interpreters: the options whose value is inline code (`python -c`, `node -e`), the
//! options that take a value; without a script operand they read code from stdin.

use super::{Interpreter, Runs, Spec};

/// The interpreters.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["python", "python2", "python3", "pypy", "pypy3"],
        Runs::Interpreter(Interpreter {
            code: &["-c"],
            valued: &["-W", "-X", "-Q"],
        }),
    ),
    Spec::new(
        &["node", "nodejs"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "--eval", "-p", "--print"],
            valued: &[
                "-r",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "--input-type",
                "-C",
                "--conditions",
            ],
        }),
    ),
    Spec::new(
        &["bun", "deno"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "--eval", "-p", "--print", "eval"],
            valued: &[],
        }),
    ),
    Spec::new(
        &["perl"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "-E"],
            valued: &["-I", "-M", "-m", "-x", "-0", "-l", "-i", "-C"],
        }),
    ),
    Spec::new(
        &["ruby", "irb"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &["-I", "-r", "-C", "-E", "-x"],
        }),
    ),
    Spec::new(
        &["php"],
        Runs::Interpreter(Interpreter {
            code: &["-r", "-R", "-B", "-E"],
            valued: &["-c", "-d", "-z"],
        }),
    ),
    Spec::new(
        &["lua", "luajit"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &["-l"],
        }),
    ),
    Spec::new(
        &["Rscript", "R"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &[],
        }),
    ),
    Spec::new(
        &["ipython", "ipython3"],
        Runs::Interpreter(Interpreter {
            code: &["-c"],
            valued: &[],
        }),
    ),
    Spec::new(
        &["julia"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "--eval", "-E", "--print"],
            valued: &[],
        }),
    ),
    Spec::new(
        &[
            "tclsh", "wish", "jshell", "guile", "racket", "sbcl", "ghci", "scala", "groovy",
        ],
        Runs::Interpreter(Interpreter {
            code: &["-e", "-c", "--eval", "-eval"],
            valued: &[],
        }),
    ),
];
