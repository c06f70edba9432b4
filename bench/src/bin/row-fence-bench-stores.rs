//! etcd beside Redis alone (the same figures `row-fence-bench` reports, etcd with a member
//! down and what the home's floors cost an ask included): starts a durable redis-server
//! and a 3-member etcd in a temp dir, prints the report's section.
//! usage: row-fence-bench-stores [SAMPLES]

fn main() {
    let samples = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().expect("a temp dir");
    match row_fence_bench::stores::run(dir.path(), samples) {
        Ok(figures) => print!("{}", row_fence_bench::stores::markdown(&figures)),
        Err(e) => {
            eprintln!("row-fence-bench-stores: {e}");
            std::process::exit(1);
        }
    }
}
