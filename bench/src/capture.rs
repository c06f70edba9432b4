//! The daemon's own ask, as Redis saw it: `MONITOR` on the private server while one warm
//! ask runs, keeping the `EVALSHA` line. The generic cold clients replay exactly that
//! (same script SHA, keys and arguments), so they do the same store work as the daemon
//! whatever shape the ask script has this week.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The ask script as the daemon invokes it for the bench's lane: its SHA1 (the script is
/// already in Redis's cache), keys and arguments, captured from the daemon's own ask
/// (here), so a generic client does exactly the daemon's store work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskScript {
    /// The SHA1 `EVALSHA` names.
    pub sha: String,
    /// The keys.
    pub keys: Vec<String>,
    /// The arguments.
    pub args: Vec<String>,
}

impl AskScript {
    /// `EVALSHA sha numkeys keys… args…`.
    pub fn evalsha_args(&self) -> Vec<String> {
        let mut v = vec![
            "EVALSHA".to_string(),
            self.sha.clone(),
            self.keys.len().to_string(),
        ];
        v.extend(self.keys.iter().cloned());
        v.extend(self.args.iter().cloned());
        v
    }
}

/// Runs `ask` (one warm ask) while monitoring the Redis at `socket`, and returns the
/// `EVALSHA` it caused. `Err` when none was seen within 5 s.
pub fn daemon_ask(
    socket: &Path,
    ask: impl FnOnce() -> Result<(), String>,
) -> Result<AskScript, String> {
    let mut monitor =
        UnixStream::connect(socket).map_err(|e| format!("MONITOR {}: {e}", socket.display()))?;
    monitor
        .write_all(b"MONITOR\r\n")
        .map_err(|e| format!("MONITOR: {e}"))?;
    let mut reader = BufReader::new(monitor.try_clone().map_err(|e| format!("MONITOR: {e}"))?);
    let mut ok = String::new();
    reader
        .read_line(&mut ok)
        .map_err(|e| format!("MONITOR: {e}"))?;
    if ok.trim_end() != "+OK" {
        return Err(format!("MONITOR answered {ok:?}"));
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if let Some(script) = parse(&line)
                && tx.send(script).is_err()
            {
                return;
            }
        }
    });
    ask()?;
    let until = Instant::now() + Duration::from_secs(5);
    let found = rx.recv_timeout(until.saturating_duration_since(Instant::now()));
    let _ = monitor.shutdown(std::net::Shutdown::Both);
    found.map_err(|_| "saw no EVALSHA from the daemon's ask within 5 s".to_string())
}

/// An `EVALSHA` from a MONITOR line: `+<ts> [<db> <client>] "EVALSHA" "<sha>" "<n>" …`.
fn parse(line: &str) -> Option<AskScript> {
    let start = line.find("] ")? + 2;
    let tokens = quoted(&line[start..])?;
    let (command, rest) = tokens.split_first()?;
    if !command.eq_ignore_ascii_case("EVALSHA") {
        return None;
    }
    let (sha, rest) = rest.split_first()?;
    let (count, rest) = rest.split_first()?;
    let count: usize = count.parse().ok()?;
    if rest.len() < count {
        return None;
    }
    let (keys, args) = rest.split_at(count);
    Some(AskScript {
        sha: sha.clone(),
        keys: keys.to_vec(),
        args: args.to_vec(),
    })
}

/// The double-quoted tokens of a MONITOR line, unescaped (`\"`, `\\`, `\n`, `\xHH`, …).
fn quoted(text: &str) -> Option<Vec<String>> {
    let mut tokens = Vec::new();
    let mut chars = text.trim().chars();
    loop {
        match chars.next() {
            None => return Some(tokens),
            Some(' ') => continue,
            Some('"') => {}
            Some(_) => return None,
        }
        let mut bytes = Vec::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => bytes.push(b'\n'),
                    'r' => bytes.push(b'\r'),
                    't' => bytes.push(b'\t'),
                    'a' => bytes.push(7),
                    'b' => bytes.push(8),
                    'x' => {
                        let hex: String = [chars.next()?, chars.next()?].iter().collect();
                        bytes.push(u8::from_str_radix(&hex, 16).ok()?);
                    }
                    other => bytes.extend(other.to_string().as_bytes()),
                },
                c => bytes.extend(c.to_string().as_bytes()),
            }
        }
        tokens.push(String::from_utf8_lossy(&bytes).into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_line_gives_the_script_keys_and_args() {
        let line = r#"+1795981980.212865 [0 unix:/tmp/r.sock] "EVALSHA" "9d40" "2" "p:{b}:claims" "p:{b}:asks" "r1" "" "say \"hi\"\\" "\xe2\x9c\x93""#;
        let s = parse(line).expect("an EVALSHA");
        assert_eq!(s.sha, "9d40");
        assert_eq!(s.keys, ["p:{b}:claims", "p:{b}:asks"]);
        assert_eq!(s.args, ["r1", "", "say \"hi\"\\", "✓"]);
        assert!(parse(r#"+1.0 [0 lua] "TIME""#).is_none());
    }
}
