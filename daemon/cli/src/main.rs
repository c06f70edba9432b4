//! `row-fence`: the operator's and the board controller's command line. Thin: `cli::main`.

fn main() {
    std::process::exit(row_fence::main());
}
