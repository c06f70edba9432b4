//! Resident memory of a running process, from `/proc/<pid>/status`, in KiB.

/// `VmRSS`: resident now, in KiB.
pub fn current_kib(pid: u32) -> Result<u64, String> {
    field(pid, "VmRSS:")
}

/// `VmHWM`: the peak resident set since start or since [`reset_peak`], in KiB.
pub fn peak_kib(pid: u32) -> Result<u64, String> {
    field(pid, "VmHWM:")
}

/// Resets `VmHWM` to the current RSS (`clear_refs` 5, Linux ≥ 4.0), so a peak can be
/// taken over one case only. `Err` when the kernel does not allow it.
pub fn reset_peak(pid: u32) -> Result<(), String> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .map_err(|e| format!("cannot reset the peak RSS of {pid}: {e}"))
}

fn field(pid: u32, name: &str) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .ok_or_else(|| format!("{path} has no {name}"))
}

/// KiB as MB (10^6 bytes), the unit the targets use.
pub fn kib_to_mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

/// Runs `cmd` once through the `row-fence-bench-maxrss` launcher at `launcher` (same
/// program, arguments and explicit environment; the rest of the environment cleared) and
/// returns the program's peak RSS in KiB. `Err` when it does not exit 0.
pub fn peak_of_run(launcher: &std::path::Path, cmd: &std::process::Command) -> Result<u64, String> {
    let mut wrapped = std::process::Command::new(launcher);
    wrapped
        .env_clear()
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            wrapped.env(key, value);
        }
    }
    let out = wrapped
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", launcher.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace().map(|f| f.parse::<i64>().ok());
    match (fields.next().flatten(), fields.next().flatten()) {
        (Some(0), Some(kib)) => Ok(kib.max(0) as u64),
        (Some(code), _) => Err(format!("{:?} exited {code}", cmd.get_program())),
        _ => Err(format!(
            "{} printed {text:?}: {}",
            launcher.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}
