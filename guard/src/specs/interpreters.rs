//! Interpreters: the options whose value is inline code (`python -c`, `node -e`), the
//! options that take a value, and for python's family the modules whose `-m` runs code;
//! without a script operand they read code from stdin.

use super::{Interpreter, Runs, Spec};

/// The modules that, run by python's `-m` (and IPython's), read code from stdin or run
/// code they are handed (a REPL, a debugger, a profiler, `runpy`, `pickle`'s loads).
const PYTHON_CODE_MODULES: Option<&[&str]> = Some(&[
    "code",
    "pdb",
    "timeit",
    "IPython",
    "runpy",
    "trace",
    "cProfile",
    "profile",
    "asyncio",
    "pickle",
    "ipdb",
    "pudb",
    "bpdb",
    "ptpython",
    "bpython",
    "_pyrepl",
    "idlelib",
    "idle",
    "doctest",
    "IPython.terminal",
]);

/// The interpreters.
pub const SPECS: &[Spec] = &[
    Spec::new(
        &["python", "python2", "python3", "pypy", "pypy3"],
        Runs::Interpreter(Interpreter {
            code: &["-c"],
            valued: &["-W", "-X", "-Q"],
            modules: PYTHON_CODE_MODULES,
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
            modules: None,
        }),
    ),
    Spec::new(
        &["bun", "deno"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "--eval", "-p", "--print", "eval"],
            valued: &[],
            modules: None,
        }),
    ),
    Spec::new(
        &["perl"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "-E"],
            valued: &["-I", "-M", "-m", "-x", "-0", "-l", "-i", "-C"],
            modules: None,
        }),
    ),
    Spec::new(
        &["ruby", "irb"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &["-I", "-r", "-C", "-E", "-x"],
            modules: None,
        }),
    ),
    Spec::new(
        &["php"],
        Runs::Interpreter(Interpreter {
            code: &["-r", "-R", "-B", "-E"],
            valued: &["-c", "-d", "-z"],
            modules: None,
        }),
    ),
    Spec::new(
        &["lua", "luajit"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &["-l"],
            modules: None,
        }),
    ),
    Spec::new(
        &["Rscript", "R"],
        Runs::Interpreter(Interpreter {
            code: &["-e"],
            valued: &[],
            modules: None,
        }),
    ),
    Spec::new(
        &["ipython", "ipython3"],
        Runs::Interpreter(Interpreter {
            code: &["-c"],
            valued: &[],
            modules: PYTHON_CODE_MODULES,
        }),
    ),
    Spec::new(
        &["julia"],
        Runs::Interpreter(Interpreter {
            code: &["-e", "--eval", "-E", "--print"],
            valued: &[],
            modules: None,
        }),
    ),
    Spec::new(
        &[
            "tclsh", "wish", "jshell", "guile", "racket", "sbcl", "ghci", "scala", "groovy",
        ],
        Runs::Interpreter(Interpreter {
            code: &["-e", "-c", "--eval", "-eval"],
            valued: &[],
            modules: None,
        }),
    ),
];
