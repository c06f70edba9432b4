//! What a lane's processes hold that the key broker cannot take back, for `row-fence
//! doctor` (ARCHITECTURE.md, "Key broker"), read from `/proc` (root sees every uid's):
//!
//! - another ssh agent, in `SSH_AUTH_SOCK` of a process of the lane's uid;
//! - a forge token in its environment (`GH_TOKEN`, `GITHUB_TOKEN` and their enterprise
//!   twins): a route around the daemon's forge API (ARCHITECTURE.md, "Forge API");
//! - an ssh master: an `ssh` whose command line asks for one (`-M`, `-N`, `ControlMaster`
//!   or `ControlPersist` other than `no`), or an `ssh` listening on a control socket. A
//!   process is an `ssh` by what it runs, not by the name it gives itself: its `argv[0]`,
//!   its executable's name, or an executable with the same bytes as an `ssh` client
//!   installed on the system (a copy under another name);
//! - a connection to the forge (any of the remotes' ssh addresses) held by any process of
//!   the lane's uid, or any established TCP connection held by its `ssh`: a session opened
//!   while ALLOWED pushes later with no new signature.

use std::collections::HashMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `ssh`'s options that take an argument (OpenSSH's `ssh.c` getopt string).
const SSH_OPTIONS_WITH_ARGUMENT: &str = "bceilmopBDEFIJLOPQRSwW";

/// One thing found, with the process that holds it.
#[derive(Debug, Default)]
pub struct Held {
    /// `(pid, socket)`: another agent than the broker's.
    pub agents: Vec<(u32, PathBuf)>,
    /// `(pid, variable)`: a forge token in a process's environment.
    pub tokens: Vec<(u32, String)>,
    /// `(pid, why)`: an ssh master.
    pub masters: Vec<(u32, String)>,
    /// `(pid, program, peer)`: a kept connection.
    pub connections: Vec<(u32, String, SocketAddr)>,
    /// A process of the uid whose environment or descriptors could not be read.
    pub hidden: Option<u32>,
}

/// What the processes of `uid` hold. `broker_socket`: the broker's agent socket, which
/// `SSH_AUTH_SOCK` may name; `forges`: the remotes' ssh addresses.
pub fn scan(uid: u32, broker_socket: Option<&Path>, forges: &[SocketAddr]) -> Held {
    let mut held = Held::default();
    let Ok(entries) = fs::read_dir("/proc") else {
        return held;
    };
    let broker = broker_socket.and_then(|s| fs::canonicalize(s).ok());
    let ssh = SshClients::installed();
    let listening = unix_listeners();
    let tcp = established_tcp();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        if fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        match fs::read(dir.join("environ")) {
            Ok(environ) => {
                if let Some(socket) = other_agent(&environ, broker.as_deref())
                    && !held.agents.iter().any(|(_, s)| *s == socket)
                {
                    held.agents.push((pid, socket));
                }
                for var in token_variables(&environ) {
                    if !held.tokens.iter().any(|(_, v)| *v == var) {
                        held.tokens.push((pid, var));
                    }
                }
            }
            // Not allowed to look: said. Anything else (the process ended since it was
            // listed) has nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                held.hidden.get_or_insert(pid);
            }
            Err(_) => continue,
        }
        let argv = fs::read(dir.join("cmdline")).unwrap_or_default();
        let argv: Vec<String> = argv
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_ssh = ssh.runs(&dir, argv.first().map(String::as_str));
        if is_ssh && let Some(why) = master_in(&argv[1..]) {
            held.masters.push((pid, why));
        }
        let Some(sockets) = socket_inodes(&dir, &mut held.hidden, pid) else {
            continue;
        };
        if is_ssh
            && let Some(path) = sockets.iter().find_map(|inode| listening.get(inode))
            && !held.masters.iter().any(|(p, _)| *p == pid)
        {
            held.masters
                .push((pid, format!("listens on the control socket {path}")));
        }
        let program = argv
            .first()
            .and_then(|a| Path::new(a).file_name())
            .map_or("?".to_string(), |n| n.to_string_lossy().into_owned());
        for peer in sockets.iter().filter_map(|inode| tcp.get(inode)) {
            if is_ssh || forges.contains(peer) {
                held.connections.push((pid, program.clone(), *peer));
            }
        }
    }
    held
}

/// The ssh clients installed on this system, by their bytes: a process running a copy of
/// one under another name is an ssh client too.
struct SshClients {
    /// Each one's contents (about 1 MB each; a system has one or two).
    binaries: Vec<Vec<u8>>,
}

impl SshClients {
    /// Where an `ssh` is looked for: doctor's `PATH` and the usual directories.
    fn installed() -> SshClients {
        let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        dirs.extend(
            ["/usr/bin", "/bin", "/usr/local/bin", "/opt/homebrew/bin"]
                .into_iter()
                .map(PathBuf::from),
        );
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut binaries = Vec::new();
        for dir in dirs {
            let Ok(real) = fs::canonicalize(dir.join("ssh")) else {
                continue;
            };
            if seen.contains(&real) {
                continue;
            }
            if let Ok(bytes) = fs::read(&real) {
                binaries.push(bytes);
            }
            seen.push(real);
        }
        SshClients { binaries }
    }

    /// True when the process at `dir` (`/proc/<pid>`) runs ssh: named so in `argv0`, or its
    /// executable named so, or an executable whose bytes are an installed ssh client's.
    fn runs(&self, dir: &Path, argv0: Option<&str>) -> bool {
        let named_ssh = |p: &Path| p.file_name().is_some_and(|n| n == "ssh");
        if argv0.is_some_and(|a| named_ssh(Path::new(a))) {
            return true;
        }
        let exe = dir.join("exe");
        if fs::read_link(&exe).is_ok_and(|target| named_ssh(&target)) {
            return true;
        }
        // Read only when the size matches one: most processes are not compared at all.
        let Ok(len) = fs::metadata(&exe).map(|m| m.len()) else {
            return false;
        };
        if !self.binaries.iter().any(|b| b.len() as u64 == len) {
            return false;
        }
        fs::read(&exe).is_ok_and(|bytes| self.binaries.contains(&bytes))
    }
}

/// The environment variables gh and GitHub's tools take a token from.
pub const TOKEN_VARIABLES: [&str; 4] = [
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
];

/// The [`TOKEN_VARIABLES`] set (non-empty) in an environment (`/proc/<pid>/environ`).
pub fn token_variables(environ: &[u8]) -> Vec<String> {
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let text = std::str::from_utf8(kv).ok()?;
            let (name, value) = text.split_once('=')?;
            (TOKEN_VARIABLES.contains(&name) && !value.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// The `SSH_AUTH_SOCK` in an environment when it names an existing socket other than the
/// broker's.
fn other_agent(environ: &[u8], broker: Option<&Path>) -> Option<PathBuf> {
    let socket = environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"SSH_AUTH_SOCK="))
        .filter(|v| !v.is_empty())?;
    let socket = PathBuf::from(String::from_utf8_lossy(socket).into_owned());
    let real = fs::canonicalize(&socket).ok()?;
    (Some(real.as_path()) != broker).then_some(socket)
}

/// Why an ssh command line (its arguments after `ssh`) makes or keeps a master: `-M`,
/// `-N` (no command: a connection held open), or `-o ControlMaster`/`ControlPersist`
/// other than `no`. Options are read as ssh's getopt reads them (clusters, an option's
/// argument in the same word or the next), up to the destination.
pub fn master_in(args: &[String]) -> Option<String> {
    let mut reasons = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            break; // the destination: what follows is the remote command
        };
        if cluster == "-" {
            break;
        }
        for (at, flag) in cluster.char_indices() {
            if SSH_OPTIONS_WITH_ARGUMENT.contains(flag) {
                let rest = &cluster[at + flag.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).map(String::as_str).unwrap_or("")
                } else {
                    rest
                };
                if flag == 'o' {
                    reasons.extend(master_option(value));
                }
                break;
            }
            match flag {
                'M' => reasons.push("-M".to_string()),
                'N' => reasons.push("-N".to_string()),
                _ => {}
            }
        }
    }
    (!reasons.is_empty()).then(|| format!("runs ssh {}", reasons.join(" ")))
}

fn master_option(value: &str) -> Option<String> {
    let (key, setting) = value.split_once(|c: char| c == '=' || c.is_whitespace())?;
    let setting = setting
        .trim_start_matches(|c: char| c == '=' || c.is_whitespace())
        .trim()
        .to_ascii_lowercase();
    let key = key.to_ascii_lowercase();
    let on = matches!(key.as_str(), "controlmaster" | "controlpersist")
        && !setting.is_empty()
        && setting != "no";
    on.then(|| format!("-o {value}"))
}

/// The inodes of the sockets `dir`'s process holds; `None` (and `hidden` set) when its
/// descriptors cannot be read.
fn socket_inodes(dir: &Path, hidden: &mut Option<u32>, pid: u32) -> Option<Vec<u64>> {
    let fds = match fs::read_dir(dir.join("fd")) {
        Ok(fds) => fds,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            hidden.get_or_insert(pid);
            return None;
        }
        Err(_) => return None,
    };
    Some(
        fds.flatten()
            .filter_map(|fd| fs::read_link(fd.path()).ok())
            .filter_map(|target| {
                let target = target.to_string_lossy().into_owned();
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .collect(),
    )
}

/// Listening Unix sockets with a path, by inode (`/proc/net/unix`).
fn unix_listeners() -> HashMap<u64, String> {
    fs::read_to_string("/proc/net/unix")
        .map(|t| parse_unix(&t))
        .unwrap_or_default()
}

/// `/proc/net/unix`: `Num RefCount Protocol Flags Type St Inode Path`; a listening
/// socket's flags carry `__SO_ACCEPTCON` (0x10000).
pub fn parse_unix(text: &str) -> HashMap<u64, String> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = u64::from_str_radix(fields.get(3)?, 16).ok()?;
            let inode = fields.get(6)?.parse().ok()?;
            let path = fields.get(7)?;
            (flags & 0x10000 != 0).then(|| (inode, path.to_string()))
        })
        .collect()
}

/// Established TCP connections' peers, by inode (`/proc/net/tcp` and `tcp6`).
fn established_tcp() -> HashMap<u64, SocketAddr> {
    let mut all = HashMap::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(file) {
            all.extend(parse_tcp(&text));
        }
    }
    all
}

/// `/proc/net/tcp[6]`: `sl local rem st … inode`, addresses in hex as the kernel stores
/// them (each 32-bit word in host order), state `01` established.
pub fn parse_tcp(text: &str) -> HashMap<u64, SocketAddr> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) != Some(&"01") {
                return None;
            }
            let peer = hex_address(fields.get(2)?)?;
            let inode = fields.get(9)?.parse().ok()?;
            Some((inode, peer))
        })
        .collect()
}

fn hex_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).map(u32::from_be))
        .collect::<Result<_, _>>()
        .ok()?;
    let ip = match words.as_slice() {
        [v4] => IpAddr::V4(Ipv4Addr::from(v4.to_be_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
            }
            let v6 = Ipv6Addr::from(bytes);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The addresses an ssh remote URL connects to: `ssh://[user@]host[:port]/…` or
/// `[user@]host:path` (port 22), the host resolved now (none when it does not resolve).
pub fn ssh_addresses(url: &str) -> Vec<SocketAddr> {
    let (host, port) = if let Some(rest) = url.strip_prefix("ssh://") {
        let authority = rest.split('/').next().unwrap_or("");
        let host_port = authority.rsplit('@').next().unwrap_or("");
        match host_port.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').unwrap_or((v6, ""));
                (
                    host.to_string(),
                    after.strip_prefix(':').and_then(|p| p.parse().ok()),
                )
            }
            None => match host_port.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), port.parse().ok()),
                None => (host_port.to_string(), None),
            },
        }
    } else if let Some((before, _)) = url.split_once(':')
        && !before.contains('/')
    {
        (before.rsplit('@').next().unwrap_or("").to_string(), None)
    } else {
        return Vec::new();
    };
    host_addresses(&host, port.unwrap_or(22))
}

/// The addresses `host` (a name or an address) resolves to now, at `port`; none when it
/// does not resolve.
pub fn host_addresses(host: &str, port: u16) -> Vec<SocketAddr> {
    if host.is_empty() {
        return Vec::new();
    }
    (host, port)
        .to_socket_addrs()
        .map(|addrs| addrs.collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn a_forge_token_in_an_environment_is_found_by_name_never_an_empty_one() {
        let environ = b"PATH=/bin\0GH_TOKEN=ghp_x\0GITHUB_TOKEN=\0XGH_TOKEN=y\0";
        assert_eq!(token_variables(environ), ["GH_TOKEN"]);
    }

    #[test]
    fn a_master_is_told_from_ssh_options_as_getopt_reads_them() {
        assert_eq!(
            master_in(&args("-M -N -f forge")).as_deref(),
            Some("runs ssh -M -N")
        );
        assert_eq!(
            master_in(&args("-fNM -p 22 forge")).as_deref(),
            Some("runs ssh -N -M")
        );
        assert_eq!(
            master_in(&args("-o ControlMaster=yes -oControlPersist=1h forge")).as_deref(),
            Some("runs ssh -o ControlMaster=yes -o ControlPersist=1h")
        );
        // An option's argument is not a flag; a remote command's words are not options.
        assert_eq!(
            master_in(&args("-l M -p 22 forge git-receive-pack -M")),
            None
        );
        assert_eq!(
            master_in(&args("-oControlMaster=no -o ControlPath=none forge")),
            None
        );
        assert_eq!(master_in(&args("-S /tmp/cm -O check forge")), None);
        assert_eq!(
            master_in(&args("-iM forge")),
            None,
            "-i takes M as its file"
        );
    }

    #[test]
    fn proc_net_tables_give_listeners_and_established_peers_by_inode() {
        let unix = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 4242 /home/l/.ssh/cm-abc\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 4343 /run/x.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 4444\n";
        let listening = parse_unix(unix);
        assert_eq!(
            listening.get(&4242).map(String::as_str),
            Some("/home/l/.ssh/cm-abc")
        );
        assert_eq!(listening.len(), 1);
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
               0: 0100007F:9C40 0100007F:0016 01 00000000:00000000 00:00000000 00000000  1001        0 5151 1 0\n\
               1: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5252 1 0\n";
        let peers = parse_tcp(tcp);
        assert_eq!(peers.get(&5151), Some(&"127.0.0.1:22".parse().unwrap()));
        assert!(!peers.contains_key(&5252), "a listener is no connection");
        let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
               0: 00000000000000000000000001000000:9C40 0000000000000000FFFF00000100007F:0016 01 00000000:00000000 00:00000000 00000000  1001        0 6161 1 0\n";
        assert_eq!(
            parse_tcp(tcp6).get(&6161),
            Some(&"127.0.0.1:22".parse().unwrap())
        );
    }

    #[test]
    fn remote_urls_give_their_ssh_addresses() {
        let port = |url: &str| ssh_addresses(url).first().map(|a| a.port());
        assert_eq!(port("ssh://git@127.0.0.1:2222/srv/r.git"), Some(2222));
        assert_eq!(port("git@127.0.0.1:org/r.git"), Some(22));
        assert_eq!(port("ssh://[::1]:2200/r.git"), Some(2200));
        assert_eq!(port("/srv/r.git"), None);
    }
}
