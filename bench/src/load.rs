//! CPU oversubscription: busy processes, a fixed number per core, each spinning at normal
//! priority like a neighbour's build or a fleet of agent sessions. Each is the bench's own
//! binary in its hidden `--busy-for-ms` mode, so it is bounded three ways: it stops by
//! itself after its time, it dies with the bench (`PR_SET_PDEATHSIG`), and the bench
//! SIGKILLs it when the case ends ([`Oversubscription`] is dropped).

use crate::children::Owned;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The busy processes while they run.
pub struct Oversubscription {
    /// The processes; SIGKILLed when dropped.
    busy: Vec<Owned>,
}

impl Oversubscription {
    /// Starts `per_core × cores` busy processes that stop by themselves after `limit`.
    pub fn start(
        per_core: usize,
        cores: usize,
        limit: Duration,
    ) -> Result<Oversubscription, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
        let mut busy = Vec::with_capacity(per_core * cores);
        for _ in 0..per_core * cores {
            let mut cmd = Command::new(&exe);
            cmd.arg("--busy-for-ms")
                .arg(limit.as_millis().to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            busy.push(Owned::spawn(&mut cmd, "busy process", Duration::ZERO)?);
        }
        Ok(Oversubscription { busy })
    }

    /// How many are running.
    pub fn count(&self) -> usize {
        self.busy.len()
    }
}

/// The busy process itself: spins until `limit` has passed.
pub fn spin_for(limit: Duration) {
    let until = Instant::now() + limit;
    let mut x: u64 = 1;
    while Instant::now() < until {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
}
