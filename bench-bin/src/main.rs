//! `row-fence-bench`: runs every case, writes the report (default
//! `target/bench/report.md`) and prints it. Exit 0 when the run completed (missed targets
//! included: they are findings, not failures), 1 when it stopped early, 2 on bad flags.
//! `scripts/bench` builds the release binaries and runs this.

use clap::Parser;
use row_fence_bench::options::{Only, Options};
use row_fence_bench::run::Runner;
use row_fence_bench::{load, plots, report};
use std::time::Duration;

fn main() {
    let options = Options::parse();
    if let Some(ms) = options.busy_for_ms {
        load::spin_for(Duration::from_millis(ms));
        return;
    }
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| Options::target_dir().join("bench/report.md"));
    let command = command_line(&options);
    if options.only == Some(Only::Broker) {
        only_broker(&options, &out, &command);
        return;
    }
    if options.only == Some(Only::Top) {
        only_top(&options, &out, &command);
        return;
    }
    if options.only == Some(Only::Push) {
        only_push(&options, &out, &command);
        return;
    }
    if options.only == Some(Only::ForgeApi) {
        only_forge_api(&options, &out, &command);
        return;
    }
    let mut runner = Runner::new(options, row_fence_stamp::VERSION);
    runner.run();
    let dir = out.parent().map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    );
    let made = std::fs::create_dir_all(&dir);
    // The pictures go beside the report, which links them by file name.
    let pictures = plots::draw(&runner.results, &dir);
    let text = report::render(&runner.results, &pictures, &command);
    let written = made.and_then(|_| std::fs::write(&out, &text));
    println!("{text}");
    match written {
        Ok(()) => eprintln!("row-fence-bench: report written to {}", out.display()),
        Err(e) => {
            eprintln!("row-fence-bench: cannot write {}: {e}", out.display());
            std::process::exit(1);
        }
    }
    if let Some(failure) = &runner.results.failure {
        eprintln!("row-fence-bench: the run stopped early: {failure}");
        std::process::exit(1);
    }
}

/// The directory of the binaries under test, absolute: a case run alone starts them from
/// directories of its own.
fn absolute_bin_dir(options: &Options) -> Option<std::path::PathBuf> {
    options
        .bin_dir
        .clone()
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
        })
        .and_then(|dir| std::path::absolute(dir).ok())
}

/// `--only broker`: the key broker's case alone, its report `broker.md` beside `out`.
fn only_broker(options: &Options, out: &std::path::Path, command: &str) {
    let measured = match absolute_bin_dir(options) {
        Some(dir) => row_fence_bench::broker::run(options, &dir),
        None => Err("cannot tell where this program is; pass --bin-dir".to_string()),
    };
    let text = match &measured {
        Ok(figures) => row_fence_bench::broker::report(Some(figures), None, command),
        Err(e) => row_fence_bench::broker::report(None, Some(e), command),
    };
    write_alone(out, "broker.md", &text, measured.err());
}

/// `--only forge-api`: the forge API endpoint's case alone, its report `forge-api.md`.
fn only_forge_api(options: &Options, out: &std::path::Path, command: &str) {
    let measured = match absolute_bin_dir(options) {
        Some(dir) => row_fence_bench::forge_api::run(options, &dir),
        None => Err("cannot tell where this program is; pass --bin-dir".to_string()),
    };
    let text = match &measured {
        Ok(figures) => row_fence_bench::forge_api::report(Some(figures), None, command),
        Err(e) => row_fence_bench::forge_api::report(None, Some(e), command),
    };
    write_alone(out, "forge-api.md", &text, measured.err());
}

/// `--only push`: the daemon's push case alone, its report `push.md` beside `out`.
fn only_push(options: &Options, out: &std::path::Path, command: &str) {
    let measured = match absolute_bin_dir(options) {
        Some(dir) => row_fence_bench::push::run(options, &dir),
        None => Err("cannot tell where this program is; pass --bin-dir".to_string()),
    };
    let text = match &measured {
        Ok(figures) => row_fence_bench::push::report(Some(figures), None, command),
        Err(e) => row_fence_bench::push::report(None, Some(e), command),
    };
    write_alone(out, "push.md", &text, measured.err());
}

/// `--only top`: the operator's console alone, its report `top.md` beside `out`.
fn only_top(options: &Options, out: &std::path::Path, command: &str) {
    let measured = match absolute_bin_dir(options) {
        Some(dir) => row_fence_bench::top::run(options, &dir),
        None => Err("cannot tell where this program is; pass --bin-dir".to_string()),
    };
    let text = match &measured {
        Ok(figures) => row_fence_bench::top::report(Some(figures), None, command),
        Err(e) => row_fence_bench::top::report(None, Some(e), command),
    };
    write_alone(out, "top.md", &text, measured.err());
}

/// Writes a case's own report `name` beside `out`, prints it, and exits 1 when the case
/// did not run (`error`) or the report cannot be written.
fn write_alone(out: &std::path::Path, name: &str, text: &str, error: Option<String>) {
    let path = out.with_file_name(name);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&path, text));
    println!("{text}");
    match written {
        Ok(()) => eprintln!("row-fence-bench: report written to {}", path.display()),
        Err(e) => {
            eprintln!("row-fence-bench: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
    }
    if let Some(e) = error {
        eprintln!("row-fence-bench: the case did not run: {e}");
        std::process::exit(1);
    }
}

/// The command that reproduces this run, for the report.
fn command_line(options: &Options) -> String {
    let mut command = "scripts/bench".to_string();
    if options.quick {
        command.push_str(" --quick");
    }
    if options.smoke {
        command.push_str(" --smoke");
    }
    if options.no_python {
        command.push_str(" --no-python");
    }
    match options.only {
        Some(Only::Broker) => command.push_str(" --only broker"),
        Some(Only::Top) => command.push_str(" --only top"),
        Some(Only::ForgeApi) => command.push_str(" --only forge-api"),
        Some(Only::Push) => command.push_str(" --only push"),
        None => {}
    }
    command
}
