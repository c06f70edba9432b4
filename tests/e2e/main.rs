//! End-to-end tests across row-fence's binaries: real `git`, a real `redis-server` started
//! by each test on a private Unix socket, real processes. One test binary, many modules.

mod util;

/// Runs each named scenario `fn name(redis: Option<&Redis>)` as two tests: `file::name`
/// on the embedded file store and `redis::name` on a private redis-server.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod file {
            $( #[test] fn $name() { super::$name(None) } )*
        }
        mod redis {
            $( #[test] fn $name() { let r = crate::util::Redis::start(); super::$name(Some(&r)) } )*
        }
    };
}

mod agent_hooks;
mod architecture;
mod asker;
mod bench_smoke;
mod checker;
// Lanes as real users (useradd) and a real sshd: Linux, as root.
#[cfg(target_os = "linux")]
mod broker;
mod cli_contract;
mod clock_floor;
mod cluster;
mod contract;
mod daemon;
mod demo;
mod deploy;
mod descriptor;
mod doctor_truth;
mod durability;
mod etcd;
mod etcd_cluster;
mod etcd_daemon;
mod etcd_members;
mod failover;
mod fencing;
mod figures;
mod file_store;
mod floor_identity;
mod forge_api;
mod forge_standin;
mod gated;
mod git_layer;
mod guard;
mod guard_quarantine;
mod guard_round_two;
mod hard_mode;
mod history;
mod http_git;
mod imports;
mod install_json;
mod lease_token;
mod location;
mod margin;
mod migrate;
mod model;
mod one_client;
mod partition;
mod paths_options;
mod paths_owners;
mod push;
mod quarantine_corpus;
mod quarantine_globs;
mod quarantine_opaque;
mod quarantine_readings;
mod quarantine_shapes;
mod readme;
mod rebuilds;
mod records_cli;
mod refusal_log;
mod repro_broker;
mod shim_walk;
mod spelling;
mod split_brain;
mod stamp;
mod store_copy;
mod store_health;
mod top;
mod transport_gate;
mod typed_errors;
mod verdicts;
mod write_truth;
