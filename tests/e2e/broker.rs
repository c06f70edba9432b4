//! The key broker with real parts (ARCHITECTURE.md, "Key broker"): lanes as real uids
//! made with `useradd`, a real `sshd` on a loopback port serving a bare repository
//! through `git-shell` with a forced command the way forges do, and the daemon as the
//! lanes' ssh agent holding the only push key. As root (CI runs as root) these tests run
//! and fail when they cannot make users or start sshd: they never pass by skipping.

use crate::util::{Daemon, Home, Ran, free_port, run};

// The forge hook's tests run on this file's `Site` (ARCHITECTURE.md, "Forge hook").
#[path = "forge_hook.rs"]
mod forge_hook;
// The push proxy's tests too (ARCHITECTURE.md, "Push proxy").
#[path = "push_proxy.rs"]
mod push_proxy;
use row_fence_contract::ledger::{self, LedgerRecord};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Users made for one test, removed (`userdel`) when dropped.
struct Users {
    names: Vec<String>,
}

/// One made user.
#[derive(Clone, Debug)]
struct User {
    name: String,
    uid: u32,
    gid: u32,
    /// A private HOME in the test's temp dir, owned by the user.
    home: PathBuf,
}

impl Users {
    fn new() -> Users {
        assert_eq!(
            nix::unistd::geteuid().as_raw(),
            0,
            "the key broker's tests make users and run sshd: run them as root (CI does)"
        );
        Users { names: Vec::new() }
    }

    /// Makes a user `rfb<pid><tag>` whose HOME is `<dir>/<tag>-home`, with a group of its
    /// own (`useradd -U`, as docs/hard-mode.md, "Key broker", makes lanes: a group shared
    /// by lanes lets one write another's git dir). The password field is `*` (no password, not
    /// locked), so sshd lets it log in with a key.
    fn add(&mut self, dir: &Path, tag: &str) -> User {
        self.add_with(dir, tag, &["-U"])
    }

    /// [`Users::add`] with `group` (`-U`: its own; `-N`: the system's default group,
    /// shared by every user made so).
    fn add_with(&mut self, dir: &Path, tag: &str, group: &[&str]) -> User {
        let name = format!("rfb{}{tag}", std::process::id());
        let home = dir.join(format!("{tag}-home"));
        let made = Command::new("useradd")
            .args(group)
            .args(["-M", "-p", "*", "-s", "/bin/sh", "-d"])
            .arg(&home)
            .arg(&name)
            .output()
            .expect("useradd runs");
        assert!(
            made.status.success(),
            "useradd {name} failed: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        self.names.push(name.clone());
        let entry = nix::unistd::User::from_name(&name)
            .expect("getpwnam")
            .expect("the new user exists");
        fs::create_dir(&home).expect("user home");
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).expect("chmod home");
        chown(&home, entry.uid.as_raw(), entry.gid.as_raw());
        User {
            name,
            uid: entry.uid.as_raw(),
            gid: entry.gid.as_raw(),
            home,
        }
    }
}

impl Drop for Users {
    fn drop(&mut self) {
        for name in &self.names {
            remove_user(name);
        }
    }
}

/// Removes a made user and its group. `userdel` refuses while a process of the user still
/// runs (an ssh session exiting, a master a test left) and fails while another `useradd`
/// or `userdel` holds `/etc/passwd`'s lock (tests run in parallel): so the user's processes
/// are killed first and the removal is tried again for up to about 5 s.
fn remove_user(name: &str) {
    for _ in 0..50 {
        let _ = Command::new("pkill").args(["-KILL", "-u", name]).output();
        let gone = Command::new("userdel")
            .arg(name)
            .output()
            .is_ok_and(|o| o.status.success());
        if gone || nix::unistd::User::from_name(name).ok().flatten().is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // userdel removes the user's own group itself where USERGROUPS_ENAB is on;
    // elsewhere it is removed here (a group still in use is left).
    for _ in 0..20 {
        let _ = Command::new("groupdel").arg(name).output();
        if nix::unistd::Group::from_name(name).ok().flatten().is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A group made for one test (`groupadd`), removed when dropped.
struct Group {
    name: String,
    gid: u32,
}

impl Group {
    fn add(tag: &str) -> Group {
        let name = format!("rfg{}{tag}", std::process::id());
        run(Command::new("groupadd").arg(&name)).expect_ok("groupadd");
        let gid = nix::unistd::Group::from_name(&name)
            .expect("getgrnam")
            .expect("the new group exists")
            .gid
            .as_raw();
        Group { name, gid }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let ran = run(Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(path));
    assert_eq!(ran.code, 0, "chown {}: {}", path.display(), ran.stderr);
}

/// A real sshd on 127.0.0.1, its own host key and config, serving `user`'s forced
/// `git-shell`; killed when dropped.
struct Sshd {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Sshd {
    fn start(dir: &Path, user: &User, authorized: &str) -> Sshd {
        let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("sshd is installed (openssh-server): the broker's tests need it");
        // sshd's privilege separation directory (a system path, as the package makes it).
        fs::create_dir_all("/run/sshd").expect("/run/sshd");
        fs::create_dir(dir).expect("sshd dir");
        let host = dir.join("host_key");
        ssh_keygen(&host, "host");
        let keys = dir.join("authorized_keys");
        fs::write(&keys, authorized).expect("authorized_keys");
        let port = free_port();
        let config = dir.join("sshd_config");
        fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\n\
                 AuthorizedKeysFile {keys}\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nAllowUsers {user}\nMaxAuthTries 20\n\
                 LogLevel VERBOSE\n",
                host = host.display(),
                pid = dir.join("pid").display(),
                keys = keys.display(),
                user = user.name,
            ),
        )
        .expect("sshd_config");
        let log = dir.join("sshd.log");
        let child = Command::new(&sshd)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("sshd log"))
            .spawn()
            .expect("sshd starts");
        let sshd = Sshd { child, port, log };
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "sshd did not listen on {port} within 10 s: {}",
                fs::read_to_string(&sshd.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sshd
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ssh_keygen(path: &Path, comment: &str) {
    ssh_keygen_of(path, comment, &["-t", "ed25519"]);
}

fn ssh_keygen_of(path: &Path, comment: &str, kind: &[&str]) {
    let ran = run(Command::new("ssh-keygen")
        .args(kind)
        .args(["-q", "-N", "", "-C", comment, "-f"])
        .arg(path));
    assert_eq!(ran.code, 0, "ssh-keygen: {}", ran.stderr);
}

/// Everything one broker scenario runs on.
struct Site {
    home: Home,
    users: Users,
    server: User,
    sshd: Sshd,
    /// The bare repository sshd serves (owned by `server`).
    remote: PathBuf,
    /// `ssh://server@127.0.0.1:port/<remote>`.
    url: String,
    /// The broker's agent socket.
    agent: PathBuf,
    /// The push key's private half, root's and 0600: no lane can read it.
    key: PathBuf,
    /// An RSA push key (root's, 0600), for the operator to load with `row-fence keys add`.
    rsa_key: PathBuf,
    /// The uid → lane bindings.
    lanes: PathBuf,
}

/// The ssh a lane runs: no config, no known hosts kept, never a prompt.
const SSH: &str = "ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR";

impl Site {
    fn new() -> Site {
        let home = Home::file();
        let root = home.dir.path().to_path_buf();
        // Lanes traverse the temp dir to reach their worktrees and the broker's socket.
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
        let mut users = Users::new();
        let server = users.add(&root, "s");
        let keys = root.join("keys");
        fs::create_dir(&keys).expect("keys dir");
        fs::set_permissions(&keys, fs::Permissions::from_mode(0o700)).expect("chmod keys");
        let key = keys.join("push");
        ssh_keygen(&key, "push");
        let public = fs::read_to_string(keys.join("push.pub")).expect("push.pub");
        let read_key = keys.join("read");
        ssh_keygen(&read_key, "read");
        let read_public = fs::read_to_string(keys.join("read.pub")).expect("read.pub");
        let rsa_key = keys.join("rsa");
        ssh_keygen_of(&rsa_key, "rsa-push", &["-t", "rsa", "-b", "2048"]);
        let rsa_public = fs::read_to_string(keys.join("rsa.pub")).expect("rsa.pub");
        let git_shell = which("git-shell");
        // The forge's rule for the read key: git-upload-pack (fetch) only.
        let fetch_only = root.join("fetch-only.sh");
        fs::write(
            &fetch_only,
            format!(
                "#!/bin/sh\ncase \"$SSH_ORIGINAL_COMMAND\" in\n  \"git-upload-pack \"*) exec {} -c \"$SSH_ORIGINAL_COMMAND\" ;;\nesac\necho 'this key may only fetch' >&2\nexit 1\n",
                git_shell.display()
            ),
        )
        .expect("fetch-only.sh");
        fs::set_permissions(&fetch_only, fs::Permissions::from_mode(0o755)).expect("chmod");
        let options = "no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty";
        let push = format!(
            "command=\"{} -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",{options}",
            git_shell.display()
        );
        let authorized = format!(
            "{push} {public}{push} {rsa_public}command=\"{}\",{options} {read_public}",
            fetch_only.display()
        );
        let sshd = Sshd::start(&root.join("sshd"), &server, &authorized);
        let remote = root.join("remote.git");
        as_root_git(&root, &["init", "-q", "--bare", "-b", "main"], &remote);
        chown(&remote, server.uid, server.gid);
        let url = format!(
            "ssh://{}@127.0.0.1:{}{}",
            server.name,
            sshd.port,
            remote.display()
        );
        let lanes = root.join("lanes.toml");
        Site {
            agent: root.join("broker").join("agent.sock"),
            home,
            users,
            server,
            sshd,
            remote,
            url,
            key,
            rsa_key,
            lanes,
        }
    }

    /// Makes a lane's user with a worktree of one commit whose `origin` is the remote.
    fn lane(&mut self, tag: &str) -> (User, PathBuf) {
        let root = self.home.dir.path().to_path_buf();
        let user = self.users.add(&root, tag);
        let worktree = root.join(format!("{tag}-worktree"));
        fs::create_dir(&worktree).expect("worktree");
        chown(&worktree, user.uid, user.gid);
        let site = &*self;
        site.as_lane(&user, &worktree, "git", &["init", "-q", "-b", "main"])
            .expect_ok("git init");
        site.as_lane(
            &user,
            &worktree,
            "git",
            &["remote", "add", "origin", &site.url],
        )
        .expect_ok("git remote add");
        site.commit(&user, &worktree, "first");
        (user, worktree)
    }

    /// Binds each (uid, descriptor) and starts the daemon with the broker on.
    fn daemon(&self, bindings: &[(&User, &Path)]) -> Daemon {
        let text: String = bindings
            .iter()
            .map(|(user, descriptor)| {
                format!(
                    "[[lane]]\nlane = \"lane-a\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n",
                    user.uid,
                    descriptor.display()
                )
            })
            .collect();
        fs::write(&self.lanes, text).expect("lanes.toml");
        let mut args = vec![
            "--broker-socket".to_string(),
            self.agent.display().to_string(),
            "--broker-key".into(),
            self.key.display().to_string(),
            "--broker-read-key".into(),
            self.key.with_file_name("read").display().to_string(),
            "--broker-lanes".into(),
            self.lanes.display().to_string(),
        ];
        args.extend(self.forge_args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let daemon = self.home.daemon_with(&args, &[]);
        assert!(
            self.agent.exists(),
            "no broker socket: {}",
            daemon.log_text()
        );
        daemon
    }

    /// Starts the daemon with the broker on and nothing loaded: no key, no binding (the
    /// operator adds them with `row-fence keys add` and `row-fence lane add`).
    fn bare_daemon(&self) -> Daemon {
        let mut args = vec![
            "--broker-socket".to_string(),
            self.agent.display().to_string(),
        ];
        args.extend(self.forge_args());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let daemon = self.home.daemon_with(&args, &[]);
        assert!(
            self.agent.exists(),
            "no broker socket: {}",
            daemon.log_text()
        );
        daemon
    }

    /// The daemon's forge allowlist: the sshd's host key and its one user.
    fn forge_args(&self) -> Vec<String> {
        vec![
            "--broker-forge-host-key".into(),
            self.host_key_pub().display().to_string(),
            "--broker-forge-user".into(),
            self.server.name.clone(),
        ]
    }

    /// The sshd's public host key (0644 in a directory every uid traverses).
    fn host_key_pub(&self) -> PathBuf {
        self.home.path("sshd/host_key.pub")
    }

    /// Runs `program args` as `user` in `dir` with a clean environment whose
    /// `SSH_AUTH_SOCK` is the broker's.
    fn as_lane(&self, user: &User, dir: &Path, program: &str, args: &[&str]) -> Ran {
        self.as_lane_env(user, dir, program, args, &[])
    }

    fn as_lane_env(
        &self,
        user: &User,
        dir: &Path,
        program: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Ran {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &user.home)
            .env("USER", &user.name)
            .env("SSH_AUTH_SOCK", &self.agent)
            .env("GIT_SSH_COMMAND", SSH)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", &user.name)
            .env("GIT_AUTHOR_EMAIL", "lane@example.invalid")
            .env("GIT_COMMITTER_NAME", &user.name)
            .env("GIT_COMMITTER_EMAIL", "lane@example.invalid")
            .envs(envs.iter().copied())
            .current_dir(dir)
            .args(args)
            .uid(user.uid)
            // std drops root's supplementary groups when it sets the uid.
            .gid(user.gid);
        run(&mut cmd)
    }

    fn commit(&self, user: &User, worktree: &Path, message: &str) -> String {
        fs::write(worktree.join(format!("{message}.txt")), message).expect("file");
        chown(worktree, user.uid, user.gid);
        self.as_lane(user, worktree, "git", &["add", "-A"])
            .expect_ok("git add");
        self.as_lane(user, worktree, "git", &["commit", "-q", "-m", message])
            .expect_ok("git commit");
        self.as_lane(user, worktree, "git", &["rev-parse", "HEAD"])
            .stdout
            .trim()
            .to_string()
    }

    /// The remote's `branch`, or `None` when it does not exist.
    fn remote_ref(&self, branch: &str) -> Option<String> {
        let ran = run(Command::new("git")
            .args(["-c", "safe.directory=*", "--git-dir"])
            .arg(&self.remote)
            .args(["rev-parse", "--verify", "-q"])
            .arg(format!("refs/heads/{branch}")));
        (ran.code == 0).then(|| ran.stdout.trim().to_string())
    }

    /// The ledger's records for `lane` whose action names ssh, waiting (≤ 5 s) for at
    /// least `at_least` of them: the ledger is written off the hot path.
    fn ssh_refusals(&self, lane: &str, at_least: usize) -> Vec<LedgerRecord> {
        let path = row_fence_contract::paths::ledger(&self.home.home);
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let found: Vec<LedgerRecord> = ledger::read(&path)
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r.lane.as_deref() == Some(lane) && r.action.starts_with("ssh "))
                .collect();
            if found.len() >= at_least || Instant::now() > until {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

trait ExpectOk {
    fn expect_ok(self, what: &str) -> Ran;
}

impl ExpectOk for Ran {
    fn expect_ok(self, what: &str) -> Ran {
        assert_eq!(
            self.code, 0,
            "{what} failed: {}{}",
            self.stdout, self.stderr
        );
        self
    }
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

fn as_root_git(dir: &Path, args: &[&str], target: &Path) {
    let ran = run(Command::new("git").current_dir(dir).args(args).arg(target));
    assert_eq!(ran.code, 0, "git {args:?}: {}", ran.stderr);
}

/// Sends one SSH2_AGENTC_SIGN_REQUEST (13) for the key in argv[2] (a `.pub` file) to the
/// agent socket argv[1], flags rsa-sha2-512 (4; Ed25519 ignores them); exits 0 on
/// SSH2_AGENT_SIGN_RESPONSE (14), 1 otherwise.
const RAW_SIGN_REQUEST: &str = r#"
import base64, socket, struct, sys
blob = base64.b64decode(open(sys.argv[2]).read().split()[1])
pack = lambda b: struct.pack(">I", len(b)) + b
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(pack(bytes([13]) + pack(blob) + pack(b"data to sign") + struct.pack(">I", 4)))
head = b""
while len(head) < 4:
    more = s.recv(4 - len(head))
    if not more:
        sys.exit(1)
    head += more
n = struct.unpack(">I", head)[0]
body = b""
while len(body) < n:
    more = s.recv(n - len(body))
    if not more:
        sys.exit(1)
    body += more
sys.exit(0 if body[:1] == bytes([14]) else 1)
"#;

/// Sends each file named after the socket (argv[1]) as one agent message on ONE
/// connection, and prints the answer's type byte for each (`none` once it closed): what a
/// lane's own agent client sees.
const SEND_FRAMES: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def read(n):
    got = b""
    while len(got) < n:
        more = s.recv(n - len(got))
        if not more:
            return None
        got += more
    return got
answers = []
for name in sys.argv[2:]:
    body = open(name, "rb").read()
    s.sendall(struct.pack(">I", len(body)) + body)
    head = read(4)
    reply = head and read(struct.unpack(">I", head)[0])
    answers.append(str(reply[0]) if reply else "none")
print(" ".join(answers))
"#;

/// An ssh string: its length (4 bytes, big-endian), then its bytes.
fn ssh_string(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// `session-bind@openssh.com` (SSH_AGENTC_EXTENSION, 27): `host` signs `session`.
fn bind_message(host: &ssh_key::PrivateKey, session: &[u8], forwarding: bool) -> Vec<u8> {
    let signature = row_fence_resident::broker::keys::sign(host, session, 0).expect("sign");
    let mut out = vec![27];
    out.extend(ssh_string(b"session-bind@openssh.com"));
    out.extend(ssh_string(
        &host.public_key().to_bytes().expect("host blob"),
    ));
    out.extend(ssh_string(session));
    out.extend(ssh_string(
        &Vec::<u8>::try_from(signature).expect("signature blob"),
    ));
    out.push(u8::from(forwarding));
    out
}

/// A publickey userauth request for `key` as `user` in `session`, as ssh asks its agent to
/// sign it.
fn login_data(session: &[u8], user: &str, key: &ssh_key::PublicKey) -> Vec<u8> {
    let mut out = ssh_string(session);
    out.push(50);
    out.extend(ssh_string(user.as_bytes()));
    out.extend(ssh_string(b"ssh-connection"));
    out.extend(ssh_string(b"publickey"));
    out.push(1);
    out.extend(ssh_string(key.algorithm().as_str().as_bytes()));
    out.extend(ssh_string(&key.to_bytes().expect("key blob")));
    out
}

/// SSH2_AGENTC_SIGN_REQUEST (13) for `key` over `data`.
fn sign_message(key: &ssh_key::PublicKey, data: &[u8]) -> Vec<u8> {
    let mut out = vec![13];
    out.extend(ssh_string(&key.to_bytes().expect("key blob")));
    out.extend(ssh_string(data));
    out.extend(0u32.to_be_bytes());
    out
}

/// `row-fence ARGS` as the operator (the daemon's uid), asserting success.
fn operator(site: &Site, args: &[&str]) -> Ran {
    site.home
        .cli(args)
        .expect_ok(&format!("row-fence {args:?}"))
}

/// `row-fence acquire` writing the descriptor into a lane's git dir.
fn grant(site: &Site, lane: &str, tree: &Path, extra: &[&str]) {
    let path = tree
        .join(".git")
        .join("row-fence.json")
        .display()
        .to_string();
    let mut args = vec![
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        lane,
        "--write-descriptor",
        &path,
    ];
    args.extend_from_slice(extra);
    operator(site, &args);
}

/// `ssh-keygen -lf` of a key: its `SHA256:…` fingerprint.
fn fingerprint_of(key: &Path) -> String {
    let ran = run(Command::new("ssh-keygen").arg("-lf").arg(key));
    assert_eq!(ran.code, 0, "ssh-keygen -lf: {}", ran.stderr);
    ran.stdout
        .split_whitespace()
        .nth(1)
        .expect("fingerprint")
        .to_string()
}

#[test]
fn a_lane_pushes_while_allowed_and_after_a_takeover_no_route_gets_a_signature() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (b, b_tree) = site.lane("b");
    grant(&site, "lane-a", &a_tree, &[]);
    // The operator's acts on a running daemon: keys into its memory (an RSA push key from
    // its file, the read key on stdin), lanes bound by uid and worktree.
    let _daemon = site.bare_daemon();
    let rsa = site.rsa_key.display().to_string();
    let added = operator(&site, &["keys", "add", &rsa]);
    let rsa_print = fingerprint_of(&site.rsa_key);
    assert!(added.stderr.contains(&rsa_print), "{}", added.stderr);
    let ran = run(site
        .home
        .command("sh")
        .args(["-c", "exec \"$0\" keys add --read - < \"$1\""])
        .arg(crate::util::bin("row-fence"))
        .arg(site.key.with_file_name("read")));
    ran.expect_ok("keys add --read - (stdin)");
    let a_tree_text = a_tree.display().to_string();
    let bound = operator(
        &site,
        &[
            "lane",
            "add",
            "lane-a",
            "--uid",
            &a.name,
            "--worktree",
            &a_tree_text,
            "--board",
            "board-1",
            "--row",
            "row-1",
        ],
    );
    assert!(
        bound
            .stderr
            .contains("the daemon read them: 1 lane bindings"),
        "{}",
        bound.stderr
    );
    let b_uid = b.uid.to_string();
    let b_tree_text = b_tree.display().to_string();
    operator(
        &site,
        &[
            "lane",
            "add",
            "lane-b",
            "--uid",
            &b_uid,
            "--worktree",
            &b_tree_text,
            "--board",
            "board-1",
            "--row",
            "row-1",
        ],
    );
    let listed = operator(&site, &["keys", "list", "--json"]).json();
    let kinds: Vec<(&str, &str, &str)> = listed
        .as_array()
        .expect("a key list")
        .iter()
        .map(|k| {
            (
                k["fingerprint"].as_str().unwrap_or(""),
                k["algorithm"].as_str().unwrap_or(""),
                k["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 2, "{listed}");
    assert_eq!(
        kinds[0],
        (rsa_print.as_str(), "ssh-rsa", "push"),
        "{listed}"
    );
    assert_eq!(kinds[1].2, "read", "{listed}");
    let lanes = operator(&site, &["lane", "list", "--json"]).json();
    assert_eq!(lanes.as_array().map(Vec::len), Some(2), "{lanes}");
    let reloaded = operator(&site, &["lane", "reload"]);
    assert!(
        reloaded.stderr.contains("2 lane bindings"),
        "{}",
        reloaded.stderr
    );

    // ALLOWED: lane A's push is signed (RSA, rsa-sha2-512) and lands.
    let first = site
        .as_lane(&a, &a_tree, "git", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    site.as_lane(
        &a,
        &a_tree,
        "git",
        &["push", "-q", "origin", "HEAD:refs/heads/main"],
    )
    .expect_ok("lane A's push while ALLOWED");
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));
    // The operator removes the push key: ALLOWED or not, nothing is signed; added again,
    // lane A pushes again.
    operator(&site, &["keys", "remove", &rsa_print]);
    site.commit(&a, &a_tree, "while-keyless");
    let keyless = site.as_lane(
        &a,
        &a_tree,
        "git",
        &["push", "origin", "HEAD:refs/heads/main"],
    );
    assert_ne!(
        keyless.code, 0,
        "pushed with the key removed: {}",
        keyless.stderr
    );
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));
    operator(&site, &["keys", "add", &rsa]);
    site.as_lane(
        &a,
        &a_tree,
        "git",
        &["push", "-q", "origin", "HEAD:refs/heads/main"],
    )
    .expect_ok("lane A's push once the key is back");
    let first = site
        .as_lane(&a, &a_tree, "git", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));
    // Lane A renews its own lease through the daemon: no store credentials, no token in
    // the request (the daemon reads lane A's descriptor itself).
    let renewed = site.as_lane(
        &a,
        &a_tree,
        &crate::util::bin("row-fence").display().to_string(),
        &["renew", "--via-daemon", "--ttl", "1h", "--json"],
    );
    renewed.expect_ok("lane A's renew --via-daemon");
    // A script of the lane's own that opens its own connection to the agent socket and
    // sends a sign request for the push key (its public half is public) over bytes of its
    // choosing: refused even while ALLOWED, since it is no login to the forge.
    let public = a.home.join("push.pub");
    fs::copy(site.rsa_key.with_extension("pub"), &public).expect("copy rsa.pub");
    chown(&public, a.uid, a.gid);
    let agent = site.agent.display().to_string();
    let public_text = public.display().to_string();
    let sign_direct = |site: &Site| {
        site.as_lane(
            &a,
            &a.home,
            "python3",
            &["-c", RAW_SIGN_REQUEST, &agent, &public_text],
        )
    };
    let chosen = sign_direct(&site);
    assert_ne!(
        chosen.code, 0,
        "chosen bytes were signed while ALLOWED: {}",
        chosen.stderr
    );

    // Lane B takes the row over; lane A's next push has no signature by any route.
    grant(&site, "lane-b", &b_tree, &["--takeover"]);
    site.commit(&a, &a_tree, "second");
    let receive = format!("git-receive-pack '{}'", site.remote.display());
    let target = format!("{}@127.0.0.1", site.server.name);
    let port = site.sshd.port.to_string();
    let key = site.key.display().to_string();
    let ssh_args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = SSH.split(' ').skip(1).map(String::from).collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["-p".into(), port.clone(), target.clone(), receive.clone()]);
        args
    };
    let direct = ssh_args(&[]);
    let with_key = ssh_args(&["-i", &key]);
    let attempts: Vec<(&str, Ran)> = vec![
        (
            "git push",
            site.as_lane(
                &a,
                &a_tree,
                "git",
                &["push", "origin", "HEAD:refs/heads/main"],
            ),
        ),
        (
            "git push --no-verify --force",
            site.as_lane(
                &a,
                &a_tree,
                "git",
                &["push", "--no-verify", "--force", "origin", "HEAD:main"],
            ),
        ),
        (
            "git send-pack",
            site.as_lane(
                &a,
                &a_tree,
                "git",
                &["send-pack", &site.url, "HEAD:refs/heads/main"],
            ),
        ),
        (
            "git -c core.sshCommand=ssh push (no GIT_SSH_COMMAND)",
            site.as_lane_env(
                &a,
                &a_tree,
                "env",
                &[
                    "-u",
                    "GIT_SSH_COMMAND",
                    "git",
                    "-c",
                    &format!("core.sshCommand={SSH}"),
                    "push",
                    "origin",
                    "HEAD:main",
                ],
                &[],
            ),
        ),
        (
            "ssh git-receive-pack directly",
            site.as_lane(
                &a,
                &a_tree,
                "ssh",
                &direct.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
        ),
        (
            "ssh -i the broker's key file",
            site.as_lane(
                &a,
                &a_tree,
                "ssh",
                &with_key.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
        ),
    ];
    for (what, ran) in &attempts {
        assert_ne!(
            ran.code, 0,
            "{what} as refused lane A succeeded: {}",
            ran.stderr
        );
        assert_eq!(
            site.remote_ref("main").as_deref(),
            Some(first.as_str()),
            "{what} moved the remote ref"
        );
    }
    let signed = sign_direct(&site);
    assert_ne!(
        signed.code, 0,
        "a direct sign request was answered after the takeover"
    );
    // Even lane B's whole descriptor, token included (as if it had leaked), put where lane
    // A's binding points makes lane A no other lane: the binding names lane-a.
    let a_descriptor = a_tree.join(".git").join("row-fence.json");
    let own = fs::read(&a_descriptor).expect("lane A's descriptor");
    fs::copy(b_tree.join(".git").join("row-fence.json"), &a_descriptor).expect("copy");
    let borrowed = site.as_lane(&a, &a_tree, "git", &["push", "origin", "HEAD:main"]);
    assert_ne!(
        borrowed.code, 0,
        "lane A pushed as lane B: {}",
        borrowed.stderr
    );
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));
    fs::write(&a_descriptor, own).expect("lane A's descriptor back");
    let refused = site.ssh_refusals("lane-a", 1);
    assert!(
        !refused.is_empty() && refused.iter().all(|r| r.verdict.is_denial()),
        "no refusal of lane A's signing in the ledger: {refused:?}"
    );

    // Refused, lane A still fetches: the broker signs with the read key, which the
    // forge lets only fetch.
    site.as_lane(&a, &a_tree, "git", &["fetch", "-q", "origin"])
        .expect_ok("lane A's fetch with the read key after the takeover");

    // Lane A cannot change what the broker holds: remove-all and add are refused.
    let own_key = a.home.join("own");
    site.as_lane(
        &a,
        &a_tree,
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &own_key.display().to_string(),
        ],
    )
    .expect_ok("lane A's own key");
    let removed = site.as_lane(&a, &a_tree, "ssh-add", &["-D"]);
    assert_ne!(
        removed.code, 0,
        "ssh-add -D was accepted: {}",
        removed.stderr
    );
    let added = site.as_lane(&a, &a_tree, "ssh-add", &[&own_key.display().to_string()]);
    assert_ne!(
        added.code, 0,
        "ssh-add of a lane's key was accepted: {}",
        added.stderr
    );
    let askpass = a.home.join("askpass");
    fs::write(&askpass, "#!/bin/sh\necho lock-password\n").expect("askpass");
    fs::set_permissions(&askpass, fs::Permissions::from_mode(0o755)).expect("chmod");
    chown(&askpass, a.uid, a.gid);
    let askpass_text = askpass.display().to_string();
    let locked = site.as_lane_env(
        &a,
        &a_tree,
        "ssh-add",
        &["-x"],
        &[
            ("SSH_ASKPASS", &askpass_text),
            ("SSH_ASKPASS_REQUIRE", "force"),
            ("DISPLAY", ":0"),
        ],
    );
    assert_ne!(
        locked.code, 0,
        "ssh-add -x (lock) was accepted: {}",
        locked.stderr
    );
    // Refused, lane A cannot renew through the daemon either: the store says no.
    let renewed = site.as_lane(
        &a,
        &a_tree,
        &crate::util::bin("row-fence").display().to_string(),
        &["renew", "--via-daemon"],
    );
    assert_eq!(
        renewed.code, 3,
        "lane A renewed after the takeover: {}",
        renewed.stderr
    );

    // Lane B, ALLOWED now, still pushes through the same broker.
    let b_head = site
        .as_lane(&b, &b_tree, "git", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    site.as_lane(
        &b,
        &b_tree,
        "git",
        &["push", "-q", "origin", "HEAD:refs/heads/lane-b"],
    )
    .expect_ok("lane B's push after its takeover");
    assert_eq!(site.remote_ref("lane-b").as_deref(), Some(b_head.as_str()));
    // Lane B releases its row through the daemon; its next push is refused at signing.
    site.as_lane(
        &b,
        &b_tree,
        &crate::util::bin("row-fence").display().to_string(),
        &["release", "--via-daemon"],
    )
    .expect_ok("lane B's release --via-daemon");
    site.commit(&b, &b_tree, "after-release");
    let pushed = site.as_lane(
        &b,
        &b_tree,
        "git",
        &["push", "origin", "HEAD:refs/heads/lane-b"],
    );
    assert_ne!(
        pushed.code, 0,
        "lane B pushed after its release: {}",
        pushed.stderr
    );
    assert_eq!(site.remote_ref("lane-b").as_deref(), Some(b_head.as_str()));

    // The audit log has every key and lane change, by fingerprint, and no key material.
    let audit = fs::read_to_string(site.home.home.join("audit.jsonl")).expect("audit log");
    let acts: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("an audit line is JSON"))
        .collect();
    let did = |act: &str| {
        acts.iter()
            .filter(|r| r["act"] == act && r["ok"] == true)
            .count()
    };
    assert_eq!(
        (did("keys add"), did("keys remove"), did("lane add")),
        (3, 1, 2),
        "{audit}"
    );
    assert!(
        acts.iter()
            .any(|r| r["act"] == "keys remove" && r["fingerprint"] == rsa_print.as_str()),
        "{audit}"
    );
    let private = fs::read_to_string(&site.rsa_key).expect("rsa key");
    let body_line = private.lines().nth(1).expect("a key body line");
    assert!(
        !audit.contains("PRIVATE KEY") && !audit.contains(body_line),
        "{audit}"
    );
    // Refused signatures are counted for Prometheus too.
    let metrics = site.home.cli(&["health", "--prometheus"]).stdout;
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("row_fence_broker_sign_refused_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no refused-signature counter: {metrics}"));
    assert!(refused >= 1, "{metrics}");

    // `status` counts what the broker signed and refused.
    let status = crate::util::status(&site.home.socket());
    let broker = &status["broker"];
    assert!(broker["signed"].as_u64().unwrap_or(0) >= 3, "{status}");
    assert!(
        broker["sign_refused"].as_u64().unwrap_or(0) >= 1,
        "{status}"
    );
    assert_eq!(broker["lanes"], 2, "{status}");
}

#[test]
fn a_uid_with_no_lane_gets_no_push_key_and_a_stopped_daemon_signs_nothing() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (c, c_tree) = site.lane("c");
    let (_, a_descriptor) = site.home.acquire("board-1", "row-1", "lane-a", &[]);
    let mut daemon = site.daemon(&[(&a, &a_descriptor)]);

    // Uid C is bound to no lane: the broker lists it the read key at most and signs
    // nothing it could push with.
    let push_public = fs::read_to_string(site.key.with_extension("pub")).expect("push.pub");
    let push_blob = push_public.split_whitespace().nth(1).expect("key blob");
    let listed = site.as_lane(&c, &c_tree, "ssh-add", &["-L"]);
    assert!(
        !listed.stdout.contains(push_blob),
        "uid C was listed the push key: {}",
        listed.stdout
    );
    let pushed = site.as_lane(&c, &c_tree, "git", &["push", "origin", "HEAD:refs/heads/c"]);
    assert_ne!(pushed.code, 0, "uid C pushed: {}", pushed.stderr);
    assert_eq!(site.remote_ref("c"), None);

    // Lane A is ALLOWED and lists the push key; once the daemon is down it pushes nothing.
    let listed = site.as_lane(&a, &a_tree, "ssh-add", &["-L"]);
    assert!(
        listed.stdout.contains(push_blob),
        "lane A was not listed the push key: {}{}",
        listed.stdout,
        listed.stderr
    );
    daemon.stop();
    assert!(
        !site.agent.exists(),
        "the broker socket outlived the daemon"
    );
    let pushed = site.as_lane(&a, &a_tree, "git", &["push", "origin", "HEAD:refs/heads/a"]);
    assert_ne!(
        pushed.code, 0,
        "lane A pushed with the daemon down: {}",
        pushed.stderr
    );
    assert_eq!(site.remote_ref("a"), None);
}

/// An agent message on `stream` (length prefix, then `body`), ignoring a write the
/// daemon refused by closing.
fn send_frame(stream: &mut std::os::unix::net::UnixStream, body: &[u8]) {
    use std::io::Write;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    let _ = stream.write_all(&frame);
}

/// What the daemon sends back within 5 s: `Some(bytes)` of one read, `None` for a
/// closed connection (EOF or reset).
fn answer_of(stream: &mut std::os::unix::net::UnixStream) -> Option<Vec<u8>> {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut bytes = [0u8; 4096];
    match stream.read(&mut bytes) {
        Ok(0) => None,
        Ok(n) => Some(bytes[..n].to_vec()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
        Err(e) => panic!("the daemon neither answered nor closed within 5 s: {e}"),
    }
}

/// `SSH_AGENTC_REQUEST_IDENTITIES`.
const REQUEST_IDENTITIES: [u8; 1] = [11];

#[test]
fn a_peer_that_floods_the_broker_costs_the_others_no_signature() {
    use std::os::unix::net::UnixStream;
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (_, a_descriptor) = site.home.acquire("board-1", "row-1", "lane-a", &[]);
    let daemon = site.daemon(&[(&a, &a_descriptor)]);

    // A message announcing 4 GiB is not buffered: the peer is disconnected at once.
    let mut huge = UnixStream::connect(&site.agent).expect("connect");
    {
        use std::io::Write;
        let _ = huge.write_all(&u32::MAX.to_be_bytes());
        let _ = huge.write_all(&vec![0u8; 64 * 1024]);
    }
    assert_eq!(answer_of(&mut huge), None, "a 4 GiB message was read on");
    // A frame that does not decode is answered SSH_AGENT_FAILURE (5), and the connection
    // goes on serving.
    let mut odd = UnixStream::connect(&site.agent).expect("connect");
    send_frame(&mut odd, &[200, 1, 2, 3]);
    assert_eq!(answer_of(&mut odd), Some(vec![0, 0, 0, 1, 5]));
    send_frame(&mut odd, &REQUEST_IDENTITIES);
    let listed = answer_of(&mut odd).expect("an identities answer");
    assert_eq!(
        listed.get(4),
        Some(&12),
        "not an identities answer: {listed:?}"
    );
    drop(odd);

    // One uid (here the daemon's own, root) holds at most 32 connections; one more is
    // closed at accept, and the others' pushes are signed meanwhile.
    let mut held = Vec::new();
    for _ in 0..32 {
        let mut stream = UnixStream::connect(&site.agent).expect("connect");
        send_frame(&mut stream, &REQUEST_IDENTITIES);
        assert!(
            answer_of(&mut stream).is_some(),
            "connection {} was refused",
            held.len() + 1
        );
        held.push(stream);
    }
    let mut extra = UnixStream::connect(&site.agent).expect("connect");
    send_frame(&mut extra, &REQUEST_IDENTITIES);
    assert_eq!(
        answer_of(&mut extra),
        None,
        "a 33rd connection of one uid was served"
    );
    let pushed = site.as_lane(&a, &a_tree, "git", &["push", "origin", "HEAD:refs/heads/a"]);
    assert_eq!(pushed.code, 0, "lane A did not push: {}", pushed.stderr);
    assert!(site.remote_ref("a").is_some());

    // Closed connections give their places back.
    drop(held);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = UnixStream::connect(&site.agent).expect("connect");
        send_frame(&mut again, &REQUEST_IDENTITIES);
        if answer_of(&mut again).is_some() {
            break;
        }
        assert!(
            Instant::now() < until,
            "the uid's places were never given back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !daemon.log_text().contains("panicked"),
        "{}",
        daemon.log_text()
    );
}

/// The ledger's records whose action starts with `action` and whose detail holds `text`,
/// waiting (≤ 5 s) for one: the ledger is written off the hot path.
fn ledger_has(site: &Site, action: &str, text: &str) -> Vec<LedgerRecord> {
    let path = row_fence_contract::paths::ledger(&site.home.home);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let found: Vec<LedgerRecord> = ledger::read(&path)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.action.starts_with(action) && r.detail.contains(text))
            .collect();
        if !found.is_empty() || Instant::now() > until {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `row-fence show BOARD ROW --json` as the operator: the lease's holder and expiry.
fn lease_of(site: &Site, board: &str, row: &str) -> (String, u64) {
    let shown = operator(site, &["show", board, row, "--json"]).json();
    let lease = &shown[0];
    (
        lease["holder"].as_str().unwrap_or("").to_string(),
        lease["expires_at_ms"].as_u64().unwrap_or(0),
    )
}

#[test]
fn a_binding_acts_for_its_own_lease_only_and_follows_no_link_to_another() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (_, b_tree) = site.lane("b");
    // Lane A's row: its descriptor in its own git dir (written by the operator), the
    // binding pinned to board-1/row-1. Lane A also holds another lease under the same
    // lane name, board-2/row-7, whose descriptor only the daemon's uid can read.
    grant(&site, "lane-a", &a_tree, &[]);
    let (_, other) = site
        .home
        .acquire("board-2", "row-7", "lane-a", &["--ttl", "2h"]);
    let descriptor = a_tree.join(".git").join("row-fence.json");
    let _daemon = site.daemon(&[(&a, &descriptor)]);
    let push = |site: &Site| {
        site.as_lane(
            &a,
            &a_tree,
            "git",
            &["push", "-q", "origin", "HEAD:refs/heads/main"],
        )
    };
    let head = site.commit(&a, &a_tree, "a-1");
    push(&site).expect_ok("lane A's push while ALLOWED");
    assert_eq!(site.remote_ref("main").as_deref(), Some(head.as_str()));
    let rf = crate::util::bin("row-fence").display().to_string();
    let via_daemon = |site: &Site, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--via-daemon", "--json"]);
        site.as_lane(&a, &a_tree, &rf, &all)
    };
    // A renew through the daemon is capped by the operator (12 h unless set), never a
    // year.
    let long = via_daemon(&site, &["renew", "--ttl", "366d"]);
    assert_eq!(long.code, 1, "{}{}", long.stdout, long.stderr);
    assert!(
        long.stderr.contains("--broker-renew-max"),
        "{}",
        long.stderr
    );
    via_daemon(&site, &["renew", "--ttl", "1h"]).expect_ok("renew for 1h");

    // The same descriptor with the binding unpinned: the lane can change it (its own git
    // dir), so the daemon refuses it, ALLOWED or not.
    let pinned = fs::read_to_string(&site.lanes).expect("lanes.toml");
    let unpinned: String = pinned
        .lines()
        .filter(|l| !l.starts_with("board") && !l.starts_with("row"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&site.lanes, &unpinned).expect("lanes.toml");
    operator(&site, &["lane", "reload"]);
    let head = site.commit(&a, &a_tree, "a-unpinned");
    assert_ne!(push(&site).code, 0, "pushed through an unpinned binding");
    assert_ne!(site.remote_ref("main").as_deref(), Some(head.as_str()));
    assert!(
        !ledger_has(&site, "ssh ", "pins no lease and the lane can change").is_empty(),
        "no ledger record of the unpinned binding"
    );
    // `lane add` refuses such a binding before writing anything.
    let c_user = site.users.add(site.home.dir.path(), "c");
    let spare = site.home.path("spare-lanes.toml").display().to_string();
    let a_tree_text = a_tree.display().to_string();
    let c_uid = c_user.uid.to_string();
    let added = site.home.cli(&[
        "lane",
        "add",
        "lane-c",
        "--uid",
        &c_uid,
        "--worktree",
        &a_tree_text,
        "--lanes",
        &spare,
    ]);
    assert_eq!(
        added.code, 0,
        "a uid that cannot change the descriptor: {}",
        added.stderr
    );
    let refused = site.home.cli(&[
        "lane",
        "add",
        "lane-a2",
        "--uid",
        &a.name,
        "--worktree",
        &a_tree_text,
        "--lanes",
        &spare,
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--board and --row"),
        "{}",
        refused.stderr
    );

    // Unpinned, its descriptor in a directory only the daemon's uid may write by the
    // permission bits: it stands. Then an ACL entry opens the directory to the lane (which
    // could then rename another lease's descriptor over its own): refused at the next read,
    // and by `lane add`, though the bits still say no one else writes there.
    let acl_dir = site.home.path("desc-acl");
    fs::create_dir(&acl_dir).expect("desc-acl");
    fs::set_permissions(&acl_dir, fs::Permissions::from_mode(0o700)).expect("chmod");
    let acl_descriptor = acl_dir.join("a.json");
    fs::copy(&descriptor, &acl_descriptor).expect("a copy of lane A's descriptor");
    let unpinned_acl = unpinned.replace(
        &descriptor.display().to_string(),
        &acl_descriptor.display().to_string(),
    );
    fs::write(&site.lanes, &unpinned_acl).expect("lanes.toml");
    operator(&site, &["lane", "reload"]);
    push(&site).expect_ok("lane A's push, unpinned, its descriptor out of its reach");
    let user_entry = format!("u:{}:rwx", a.name);
    run(Command::new("setfacl")
        .args(["-m", &user_entry])
        .arg(&acl_dir))
    .expect_ok("setfacl");
    site.as_lane(
        &a,
        &a_tree,
        "touch",
        &[&acl_dir.join("x").display().to_string()],
    )
    .expect_ok("the ACL lets lane A write the directory");
    let head = site.commit(&a, &a_tree, "a-acl");
    assert_ne!(
        push(&site).code,
        0,
        "pushed through an unpinned binding whose descriptor an ACL lets the lane replace"
    );
    assert_ne!(site.remote_ref("main").as_deref(), Some(head.as_str()));
    assert!(
        !ledger_has(&site, "ssh ", "an ACL entry names it").is_empty(),
        "no ledger record naming the ACL"
    );
    let acl_text = acl_descriptor.display().to_string();
    let refused = site.home.cli(&[
        "lane",
        "add",
        "lane-a3",
        "--uid",
        &a.name,
        "--worktree",
        &a_tree_text,
        "--descriptor",
        &acl_text,
        "--lanes",
        &spare,
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("ACL entry"), "{}", refused.stderr);

    fs::write(&site.lanes, &pinned).expect("lanes.toml");
    operator(&site, &["lane", "reload"]);
    push(&site).expect_ok("lane A's push, pinned again");

    // Taken over: lane A points its descriptor at board-2's (a symlink: it cannot even
    // read the file). Nothing is signed for it, and the other lease is neither renewed
    // nor released.
    grant(&site, "lane-b", &b_tree, &["--takeover"]);
    let before = lease_of(&site, "board-2", "row-7");
    assert_eq!(before.0, "lane-a");
    let link = |site: &Site, target: &Path| {
        site.as_lane(
            &a,
            &a_tree,
            "ln",
            &["-sf", &target.display().to_string(), ".git/row-fence.json"],
        )
        .expect_ok("ln -s")
    };
    link(&site, &other);
    let stale = site.commit(&a, &a_tree, "a-after-takeover");
    assert_ne!(
        push(&site).code,
        0,
        "pushed through another lease's descriptor"
    );
    assert_ne!(site.remote_ref("main").as_deref(), Some(stale.as_str()));
    for act in [&["renew", "--ttl", "2h"][..], &["release"]] {
        let ran = via_daemon(&site, act);
        assert_ne!(ran.code, 0, "{act:?} through the link: {}", ran.stdout);
        assert!(
            ran.stderr.contains("descriptor_unreadable"),
            "{}",
            ran.stderr
        );
    }
    // A descriptor the lane writes itself, naming board-2/row-7: refused by the pin
    // before the store is asked.
    site.as_lane(&a, &a_tree, "rm", &["-f", ".git/row-fence.json"])
        .expect_ok("rm");
    fs::write(
        &descriptor,
        r#"{"board":"board-2","row":"row-7","lane":"lane-a","generation":1}"#,
    )
    .expect("a forged descriptor");
    chown(&descriptor, a.uid, a.gid);
    for act in [&["renew", "--ttl", "2h"][..], &["release"]] {
        let ran = via_daemon(&site, act);
        assert_ne!(
            ran.code, 0,
            "{act:?} of a descriptor naming board-2: {}",
            ran.stdout
        );
        assert!(ran.stderr.contains("peer_refused"), "{}", ran.stderr);
    }
    assert_ne!(push(&site).code, 0);
    assert_eq!(
        lease_of(&site, "board-2", "row-7"),
        before,
        "the other lease changed"
    );
    assert!(
        !ledger_has(
            &site,
            "renew@row-fence",
            "a binding acts for its own lease only"
        )
        .is_empty(),
        "no ledger record of the pin"
    );

    // A link to a file only the daemon's uid reads: the daemon does not open it, so
    // neither the lane nor the ledger learns a word of it.
    let secret = site.key.with_file_name("secret.json");
    fs::write(
        &secret,
        r#"{"board":"TOPSECRET","row":"r","lane":"lane-a","generation":1}"#,
    )
    .expect("secret.json");
    link(&site, &secret);
    let probed = via_daemon(&site, &["renew"]);
    let said = format!("{}{}", probed.stdout, probed.stderr);
    assert_ne!(probed.code, 0, "renewed: {said}");
    assert!(said.contains("descriptor_unreadable"), "{said}");
    assert!(!said.contains("TOPSECRET"), "the lane was told: {said}");
    assert!(
        !ledger_has(&site, "renew@row-fence", "symbolic link").is_empty(),
        "the ledger does not name the link"
    );
    let ledger_text =
        fs::read_to_string(row_fence_contract::paths::ledger(&site.home.home)).unwrap_or_default();
    assert!(
        !ledger_text.contains("TOPSECRET"),
        "the daemon read through the link"
    );
}

#[test]
fn an_allowed_lane_gets_a_signature_for_a_login_to_the_allowlisted_forge_and_nothing_else() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    grant(&site, "lane-a", &a_tree, &[]);
    let _daemon = site.daemon(&[(&a, &a_tree.join(".git").join("row-fence.json"))]);
    let head = site.commit(&a, &a_tree, "a-1");
    site.as_lane(
        &a,
        &a_tree,
        "git",
        &["push", "-q", "origin", "HEAD:refs/heads/main"],
    )
    .expect_ok("lane A's push while ALLOWED (a login to the allowlisted sshd)");
    assert_eq!(site.remote_ref("main").as_deref(), Some(head.as_str()));

    // An sshsig over bytes of its choosing, and a commit signed with the push key: neither
    // is a login, so no signature, ALLOWED as the lane is.
    let public = a.home.join("push.pub");
    fs::copy(site.key.with_extension("pub"), &public).expect("push.pub");
    let message = a.home.join("msg.txt");
    fs::write(&message, "release v9 approved by the push key\n").expect("msg.txt");
    chown(&a.home, a.uid, a.gid);
    let public_text = public.display().to_string();
    let sshsig = site.as_lane(
        &a,
        &a.home,
        "ssh-keygen",
        &[
            "-Y",
            "sign",
            "-f",
            &public_text,
            "-n",
            "file",
            &message.display().to_string(),
        ],
    );
    assert_ne!(
        sshsig.code, 0,
        "ssh-keygen -Y sign through the broker: {}",
        sshsig.stderr
    );
    assert!(
        !a.home.join("msg.txt.sig").exists(),
        "an sshsig was written"
    );
    let signing = format!("user.signingkey={public_text}");
    let signed_commit = site.as_lane(
        &a,
        &a_tree,
        "git",
        &[
            "-c",
            "gpg.format=ssh",
            "-c",
            &signing,
            "commit",
            "-q",
            "-S",
            "--allow-empty",
            "-m",
            "signed",
        ],
    );
    assert_ne!(
        signed_commit.code, 0,
        "a commit was signed with the push key"
    );
    let still = site.as_lane(&a, &a_tree, "git", &["rev-parse", "HEAD"]);
    assert_eq!(still.stdout.trim(), head, "a signed commit was made");

    // Raw agent messages, one connection each, as the lane: only a login in the session an
    // allowlisted host bound, as the forge's user, is signed.
    let push_key =
        ssh_key::PublicKey::read_openssh_file(&site.key.with_extension("pub")).expect("push.pub");
    let forge = ssh_key::PrivateKey::read_openssh_file(&site.home.path("sshd/host_key"))
        .expect("the sshd's host key");
    let made_up = ssh_key::PrivateKey::from(ssh_key::private::Ed25519Keypair::from_seed(&[7; 32]));
    let made_up_print = made_up
        .public_key()
        .fingerprint(Default::default())
        .to_string();
    let session = [0x5a; 32];
    let user = site.server.name.clone();
    let login = login_data(&session, &user, &push_key);
    let frames = site.home.path("frames");
    fs::create_dir(&frames).expect("frames dir");
    let script = frames.join("send.py");
    fs::write(&script, SEND_FRAMES).expect("send.py");
    let mut n = 0;
    let mut send = |site: &Site, messages: &[Vec<u8>]| -> String {
        let mut args = vec![
            script.display().to_string(),
            site.agent.display().to_string(),
        ];
        for message in messages {
            n += 1;
            let file = frames.join(format!("{n}.bin"));
            fs::write(&file, message).expect("frame");
            fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).expect("chmod");
            args.push(file.display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        site.as_lane(&a, &a.home, "python3", &args)
            .expect_ok("send.py")
            .stdout
            .trim()
            .to_string()
    };
    let bind = bind_message(&forge, &session, false);
    // 6: SSH_AGENT_SUCCESS, 5: SSH_AGENT_FAILURE, 14: SSH2_AGENT_SIGN_RESPONSE.
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        (
            "chosen bytes, no bind",
            vec![sign_message(&push_key, b"any bytes at all")],
            "5",
        ),
        (
            "a login with no bind",
            vec![sign_message(&push_key, &login)],
            "5",
        ),
        (
            "a bind from a made-up host, then a login",
            vec![
                bind_message(&made_up, &session, false),
                sign_message(&push_key, &login),
            ],
            "5 5",
        ),
        (
            "a login as another user",
            vec![
                bind.clone(),
                sign_message(&push_key, &login_data(&session, "root", &push_key)),
            ],
            "6 5",
        ),
        (
            "a login for another session",
            vec![
                bind.clone(),
                sign_message(&push_key, &login_data(&[0x33; 32], &user, &push_key)),
            ],
            "6 5",
        ),
        (
            "a second bind",
            vec![bind.clone(), bind.clone(), sign_message(&push_key, &login)],
            "6 5 5",
        ),
        (
            "a bind for forwarding",
            vec![bind_message(&forge, &session, true)],
            "5",
        ),
        (
            "chosen bytes after a good bind",
            vec![
                bind.clone(),
                sign_message(&push_key, b"SSHSIG\0\0\0\x04file"),
            ],
            "6 5",
        ),
        (
            "the login, in the bound session, as the forge's user",
            vec![bind.clone(), sign_message(&push_key, &login)],
            "6 14",
        ),
    ];
    for (what, messages, expected) in &cases {
        assert_eq!(send(&site, messages), *expected, "{what}");
    }
    // The ledger names the host the made-up bind verified, refused, and files it under the
    // lane's uid.
    let refused = ledger_has(&site, "ssh session-bind", &made_up_print);
    let record = refused
        .first()
        .expect("no ledger record names the made-up host");
    assert!(
        record
            .action
            .contains(&format!("host {made_up_print} (refused)")),
        "{record:?}"
    );
    assert_eq!(
        record.verdict.reason().map(|r| r.as_str()),
        Some("destination_refused")
    );
    assert_eq!(record.uid, Some(a.uid), "{record:?}");

    // Taken over: not even the login is signed.
    site.home
        .acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    assert_eq!(
        send(&site, &[bind.clone(), sign_message(&push_key, &login)]),
        "6 5"
    );
}

/// Asks the daemon on argv[1] as this uid, each ask on a connection of its own, with
/// argv[2] as the session and fields of argv[3] bytes each; with argv[4] seconds given, in
/// a loop for that long. The stamp is no build's: every ask is a COULD NOT READ
/// (stale_code) the daemon records, with no store call. Prints how many it sent.
const ASK_FLOOD: &str = r#"
import json, socket, sys, time
path, session, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
least = float(sys.argv[4]) if len(sys.argv) > 4 else 0
line = (json.dumps({"v": 1, "op": "ask", "stamp": "no-build", "deadline_ms": 2000,
    "descriptor": {"board": "board-1", "row": "row-1", "lane": "lane-x", "generation": 1},
    "action": "git push " + "a" * size,
    "caller": {"session": session + "x" * size, "cwd": "/" + "c" * size}}) + "\n").encode()
start, sent = time.time(), 0
while True:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    try:
        s.sendall(line)
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    s.close()
    sent += 1
    spent = time.time() - start
    if spent >= least:
        break
print(sent)
"#;

#[test]
fn a_uid_flooding_refusals_leaves_another_uids_refusal_in_the_ledger_and_in_status() {
    let home = Home::file();
    let root = home.dir.path().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
    let mut users = Users::new();
    let quiet = users.add(&root, "q");
    let flood = users.add(&root, "f");
    // The socket where both uids reach it, and both served (ROW_FENCE_ALLOWED_UIDS).
    let dir = root.join("sock");
    fs::create_dir(&dir).expect("socket dir");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711)).expect("chmod");
    let socket = dir.join("sock").display().to_string();
    let allowed = format!("{},{}", quiet.uid, flood.uid);
    let _daemon = home.daemon_with(
        &[],
        &[
            ("ROW_FENCE_SOCKET", socket.as_str()),
            ("ROW_FENCE_ALLOWED_UIDS", allowed.as_str()),
        ],
    );
    // The daemon binds its socket 0600; the operator opens it to the uids it serves.
    fs::set_permissions(&socket, fs::Permissions::from_mode(0o666)).expect("chmod socket");
    let script = root.join("asks.py");
    fs::write(&script, ASK_FLOOD).expect("asks.py");
    let ask_as = |user: &User, args: &[&str]| {
        let mut cmd = Command::new("python3");
        cmd.arg(&script)
            .arg(&socket)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(&user.home)
            .uid(user.uid)
            .gid(user.gid);
        run(&mut cmd)
    };
    ask_as(&quiet, &["the-quiet-uid", "10"]).expect_ok("the quiet uid's one ask");

    // The flood: 1 s at a time, for at least 2 s and until the ledger was written over
    // past both its files (at most 30 s), so a plain rotation would have lost the quiet
    // uid's record.
    let ledger = row_fence_contract::paths::ledger(&home.home);
    let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let settled = || {
        // The ledger's writer is off the ask path: wait until the files stop growing.
        let mut last = (u64::MAX, u64::MAX);
        loop {
            let now = (size(&ledger), size(&ledger::rotated(&ledger)));
            if now == last {
                return;
            }
            last = now;
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let started = Instant::now();
    let written = loop {
        ask_as(&flood, &["flood", "5000", "1"]).expect_ok("the flood");
        settled();
        let status = crate::util::status(Path::new(&socket));
        let records = status["counts"]["asks"].as_u64().unwrap_or(0)
            - status["ledger_dropped"].as_u64().unwrap_or(0);
        let line = fs::read_to_string(&ledger)
            .ok()
            .and_then(|t| t.lines().last().map(|l| l.len() as u64 + 1))
            .unwrap_or(0);
        let written = records * line;
        if started.elapsed() >= Duration::from_secs(2)
            && written > 2 * row_fence_contract::ledger::MAX_LEDGER_BYTES + line
        {
            break written;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "30 s of flooding wrote only {written} bytes to the ledger"
        );
    };
    let mut all = ledger::read(&ledger::rotated(&ledger)).unwrap_or_default();
    all.extend(ledger::read(&ledger).unwrap_or_default());
    assert!(
        size(&ledger) + size(&ledger::rotated(&ledger)) < written,
        "the ledger kept all {written} bytes"
    );
    let kept: Vec<&LedgerRecord> = all
        .iter()
        .filter(|r| r.session.as_deref() == Some("the-quiet-uidxxxxxxxxxx"))
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "the quiet uid's refusal is not in the ledger"
    );
    assert_eq!(kept[0].uid, Some(quiet.uid));
    let status = crate::util::status(Path::new(&socket));
    let recent = status["recent_refusals"]
        .as_array()
        .expect("recent refusals");
    assert!(
        recent.iter().any(|r| r["session"]
            .as_str()
            .is_some_and(|s| s.starts_with("the-quiet-uid"))),
        "the quiet uid's refusal is not in status: {status}"
    );
    assert!(
        recent.iter().filter(|r| r["uid"] == flood.uid).count() > 1,
        "{status}"
    );
}

/// A daemon started as `user` with the broker on, stopped (SIGTERM) when dropped.
struct UserDaemon {
    child: Child,
    log: PathBuf,
}

impl Drop for UserDaemon {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// True when `user` can open `path` for reading.
fn can_open(site: &Site, user: &User, path: &Path) -> bool {
    let script = format!("exec 3<'{}'", path.display());
    site.as_lane(user, &user.home, "sh", &["-c", &script]).code == 0
}

#[test]
fn a_daemon_under_its_own_uid_holds_the_key_where_neither_a_lane_nor_its_own_uid_can_read_it() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let root = site.home.dir.path().to_path_buf();
    let fence = site.users.add(&root, "f");
    // Lanes traverse the daemon's HOME to its broker socket; they cannot list it.
    fs::set_permissions(&fence.home, fs::Permissions::from_mode(0o711)).expect("chmod");
    let key = fence.home.join("push");
    fs::copy(&site.key, &key).expect("copy the push key");
    chown(&key, fence.uid, fence.gid);
    let rf_home = fence.home.join("rf");
    let agent = fence.home.join("broker").join("agent.sock");
    let env = |cmd: &mut Command| {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &fence.home)
            .env("ROW_FENCE_HOME", &rf_home)
            .env("ROW_FENCE_STORE", "file")
            .current_dir(&fence.home)
            .uid(fence.uid)
            .gid(fence.gid);
    };
    // The operator (the daemon's uid) grants lane A its row.
    let descriptor = fence.home.join("lane-a.json");
    let mut acquire = Command::new(crate::util::bin("row-fence"));
    env(&mut acquire);
    acquire.args([
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--write-descriptor",
    ]);
    acquire.arg(&descriptor);
    run(&mut acquire).expect_ok("acquire as the daemon's uid");
    fs::write(
        &site.lanes,
        format!(
            "[[lane]]\nlane = \"lane-a\"\nuid = {}\ndescriptor = \"{}\"\n",
            a.uid,
            descriptor.display()
        ),
    )
    .expect("lanes.toml");
    let log = root.join("fence-daemon.log");
    let mut cmd = Command::new(crate::util::bin("row-fence-resident"));
    env(&mut cmd);
    cmd.arg("--broker-socket")
        .arg(&agent)
        .arg("--broker-key")
        .arg(&key)
        .arg("--broker-lanes")
        .arg(&site.lanes)
        .args(site.forge_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).expect("log"));
    let daemon = UserDaemon {
        child: cmd.spawn().expect("spawn the daemon as its own uid"),
        log,
    };
    let until = Instant::now() + Duration::from_secs(10);
    while !agent.exists() {
        assert!(
            Instant::now() < until,
            "no broker socket within 10 s: {}",
            fs::read_to_string(&daemon.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The daemon's own uid lists the key it holds over the control socket; root, another
    // uid, is refused before anything is sent (the socket's directory is not root's).
    let mut list = Command::new(crate::util::bin("row-fence"));
    env(&mut list);
    list.args(["keys", "list", "--json"]);
    let listed = run(&mut list)
        .expect_ok("keys list as the daemon's uid")
        .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let as_root = run(Command::new(crate::util::bin("row-fence"))
        .env("ROW_FENCE_HOME", &rf_home)
        .args(["keys", "list"]));
    assert_eq!(as_root.code, 1, "keys list as root: {}", as_root.stderr);

    // The broker works under its own uid: ALLOWED lane A pushes.
    let head = site
        .as_lane(&a, &a_tree, "git", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    site.as_lane_env(
        &a,
        &a_tree,
        "git",
        &["push", "-q", "origin", "HEAD:refs/heads/main"],
        &[("SSH_AUTH_SOCK", &agent.display().to_string())],
    )
    .expect_ok("lane A's push through a broker under its own uid");
    assert_eq!(site.remote_ref("main").as_deref(), Some(head.as_str()));

    // Undumpable: its /proc files are root's, so neither a lane's uid nor the daemon's own
    // uid can open its memory; and it writes no core file.
    let proc = PathBuf::from(format!("/proc/{}", daemon.child.id()));
    use std::os::unix::fs::MetadataExt;
    let mem = proc.join("mem");
    assert_eq!(
        fs::metadata(&mem).expect("stat mem").uid(),
        0,
        "the daemon is dumpable: its memory is its uid's"
    );
    assert!(
        !can_open(&site, &fence, &mem),
        "the daemon's own uid opened its memory"
    );
    assert!(
        !can_open(&site, &a, &mem),
        "a lane's uid opened the daemon's memory"
    );
    assert!(
        !can_open(&site, &a, &key),
        "a lane's uid opened the push key file"
    );
    let limits = fs::read_to_string(proc.join("limits")).expect("limits");
    let core = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .expect("core limit line");
    assert_eq!(
        core.split_whitespace().nth(4),
        Some("0"),
        "core files are on: {core}"
    );
}

/// `row-fence install broker ARGS` run as `user` in `dir`, on the site's home.
fn install_broker(site: &Site, user: &User, dir: &Path, args: &[&str]) -> Ran {
    let home = site.home.home.display().to_string();
    let mut all = vec!["install", "broker", "--repo", "."];
    all.extend_from_slice(args);
    site.as_lane_env(
        user,
        dir,
        &crate::util::bin("row-fence").display().to_string(),
        &all,
        &[("ROW_FENCE_HOME", &home), ("ROW_FENCE_STORE", "file")],
    )
}

#[test]
fn install_broker_makes_git_sign_through_the_daemon_with_no_agent_in_the_environment() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (_, a_descriptor) = site.home.acquire("board-1", "row-1", "lane-a", &[]);
    let _daemon = site.daemon(&[(&a, &a_descriptor)]);
    // The push key's public half, where lanes can read it; the sshd's host key in the
    // lane's known_hosts (the broker's ssh runs with the lane's own ssh settings after its
    // options).
    let public = site.home.path("push.pub");
    fs::copy(site.key.with_extension("pub"), &public).expect("push.pub");
    fs::set_permissions(&public, fs::Permissions::from_mode(0o644)).expect("chmod");
    let host = fs::read_to_string(site.home.path("sshd/host_key.pub")).expect("host key");
    let ssh_dir = a.home.join(".ssh");
    fs::create_dir(&ssh_dir).expect(".ssh");
    fs::write(
        ssh_dir.join("known_hosts"),
        format!("[127.0.0.1]:{} {host}", site.sshd.port),
    )
    .expect("known_hosts");
    chown(&a.home, a.uid, a.gid);
    let config = a_tree.join(".git/config");
    let before = fs::read(&config).expect("config");

    let agent = site.agent.display().to_string();
    let public_text = public.display().to_string();
    let bin_dir = crate::util::bin_dir().display().to_string();
    let installed = install_broker(
        &site,
        &a,
        &a_tree,
        &[
            "--broker-socket",
            &agent,
            "--key-pub",
            &public_text,
            "--bin-dir",
            &bin_dir,
            "--json",
        ],
    )
    .expect_ok("install broker");
    assert_eq!(
        installed.json()["done"],
        "installed",
        "{}",
        installed.stdout
    );
    let command = site
        .as_lane(&a, &a_tree, "git", &["config", "core.sshCommand"])
        .expect_ok("git config core.sshCommand")
        .stdout;
    for option in [
        format!("-o IdentityAgent={agent}"),
        "-o IdentitiesOnly=yes".into(),
        format!("-o IdentityFile={public_text}"),
        "-o ControlMaster=no".into(),
        "-o ControlPath=none".into(),
    ] {
        assert!(command.contains(&option), "{option} not in {command}");
    }
    assert!(
        command.contains("--git-ssh"),
        "not the gate's wrapper: {command}"
    );

    // No SSH_AUTH_SOCK, no GIT_SSH_COMMAND: git runs the config's one ssh command, which
    // reaches the broker, and the ALLOWED lane's push lands.
    let push = |site: &Site| {
        site.as_lane(
            &a,
            &a_tree,
            "env",
            &[
                "-u",
                "SSH_AUTH_SOCK",
                "-u",
                "GIT_SSH_COMMAND",
                "git",
                "push",
                "-q",
                "origin",
                "HEAD:refs/heads/main",
            ],
        )
    };
    let first = site.commit(&a, &a_tree, "wired");
    push(&site).expect_ok("lane A's push through install broker's ssh command");
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));

    // Taken over, the same route gets no signature.
    site.home
        .acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    site.commit(&a, &a_tree, "after takeover");
    let refused = push(&site);
    assert_ne!(
        refused.code, 0,
        "pushed after the takeover: {}",
        refused.stderr
    );
    assert_eq!(site.remote_ref("main").as_deref(), Some(first.as_str()));

    // Rollback: the config byte for byte, the broker's files gone.
    let rolled = install_broker(&site, &a, &a_tree, &["--rollback", "--json"])
        .expect_ok("install broker --rollback");
    assert_eq!(rolled.json()["done"], "rolled back", "{}", rolled.stdout);
    assert_eq!(fs::read(&config).expect("config"), before);
    assert!(!a_tree.join(".git/row-fence.gitconfig").exists());
    assert!(!a_tree.join(".git/row-fence-broker.json").exists());
}

#[test]
fn the_broker_and_the_transport_gate_compose_and_each_rolls_back_alone() {
    let home = Home::file();
    let repo = home.path("repo");
    let git = |args: &[&str]| run(home.command("git").current_dir(&repo).args(args));
    fs::create_dir(&repo).expect("repo dir");
    git(&["init", "-q", "-b", "main"]).expect_ok("git init");
    let key = home.path("push");
    ssh_keygen(&key, "push");
    let config = repo.join(".git/config");
    let include = repo.join(".git/row-fence.gitconfig");
    let bin_dir = crate::util::bin_dir().display().to_string();
    let agent = home.path("agent.sock").display().to_string();
    let public = home.path("push.pub").display().to_string();
    let cli = |args: &[&str]| {
        run(home
            .command(crate::util::bin("row-fence"))
            .current_dir(&repo)
            .args(args))
    };
    let broker = |rollback: bool| {
        let mut args = vec!["install", "broker", "--repo", "."];
        if rollback {
            args.push("--rollback");
        } else {
            args.extend([
                "--broker-socket",
                &agent,
                "--key-pub",
                &public,
                "--bin-dir",
                &bin_dir,
            ]);
        }
        cli(&args).expect_ok("install broker");
    };
    let gate = |rollback: bool| {
        let mut args = vec!["install", "git-hook", "--repo", "."];
        if rollback {
            args.push("--rollback");
        } else {
            args.extend(["--bin-dir", &bin_dir]);
        }
        cli(&args).expect_ok("install git-hook");
    };
    let ssh_command = || git(&["config", "core.sshCommand"]).stdout;
    let gate_helper = || {
        git(&["config", "--get-all", "credential.helper"])
            .stdout
            .contains("--git-credential")
    };
    let original = fs::read(&config).expect("config");

    // Broker, then gate: one ssh command carries both; the gate's helper is there.
    broker(false);
    let broker_only = fs::read(&include).expect("include");
    let broker_config = fs::read(&config).expect("config");
    let doctor = cli(&["doctor", "--json"]).json();
    assert_eq!(
        doctor["repositories"][0]["broker"]["agent"], agent,
        "doctor does not show the broker: {doctor}"
    );
    // The gate's rollback finds no gate, and leaves the broker's wiring as it is.
    gate(true);
    assert_eq!(fs::read(&include).expect("include"), broker_only);
    assert_eq!(fs::read(&config).expect("config"), broker_config);
    assert!(
        ssh_command().contains("IdentityAgent="),
        "{}",
        ssh_command()
    );
    assert!(!gate_helper());
    gate(false);
    assert!(ssh_command().contains("IdentityAgent=") && ssh_command().contains("--git-ssh"));
    assert!(gate_helper());
    // The gate goes, the broker stays: the included file is the broker's alone again.
    gate(true);
    assert_eq!(fs::read(&include).expect("include"), broker_only);
    assert!(ssh_command().contains("IdentityAgent="));
    broker(true);
    assert_eq!(fs::read(&config).expect("config"), original);
    assert!(!include.exists());
    assert!(!repo.join(".git/row-fence-broker.json").exists());

    // Gate, then broker: the broker goes, the gate stays as it was.
    gate(false);
    let gate_only = fs::read(&include).expect("include");
    broker(false);
    assert!(ssh_command().contains("IdentityAgent=") && gate_helper());
    broker(true);
    assert_eq!(fs::read(&include).expect("include"), gate_only);
    gate(true);
    assert_eq!(fs::read(&config).expect("config"), original);

    // A repository with an ssh command of its own is refused, and nothing is written.
    git(&["config", "core.sshCommand", "ssh -i /nowhere"]).expect_ok("git config");
    let own = fs::read(&config).expect("config");
    let refused = cli(&[
        "install",
        "broker",
        "--repo",
        ".",
        "--broker-socket",
        &agent,
        "--key-pub",
        &public,
        "--bin-dir",
        &bin_dir,
    ]);
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("own ssh command"),
        "{}",
        refused.stderr
    );
    assert_eq!(fs::read(&config).expect("config"), own);
    assert!(!include.exists());
    assert!(!repo.join(".git/row-fence-broker.json").exists());
    // A private key given as --key-pub is refused before anything is written.
    let refused = cli(&[
        "install",
        "broker",
        "--broker-socket",
        &agent,
        "--key-pub",
        &key.display().to_string(),
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("private key"), "{}", refused.stderr);
}

#[test]
fn doctor_warns_of_each_way_a_lane_uid_reaches_a_push_without_the_broker() {
    let home = Home::file();
    let root = home.dir.path().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
    let mut users = Users::new();
    let a = users.add(&root, "d");
    let repo = root.join("repo");
    fs::create_dir(&repo).expect("repo");
    run(home.command("git").current_dir(&repo).args(["init", "-q"])).expect_ok("git init");
    let lanes = root.join("lanes.toml");
    fs::write(
        &lanes,
        format!(
            "[[lane]]\nlane = \"lane-d\"\nuid = {}\ndescriptor = \"{}\"\n",
            a.uid,
            root.join("lane-d.json").display()
        ),
    )
    .expect("lanes.toml");
    let broker_socket = root.join("agent.sock");
    let _broker = std::os::unix::net::UnixListener::bind(&broker_socket).expect("broker socket");
    let doctor = || {
        let ran = run(home
            .command(crate::util::bin("row-fence"))
            .current_dir(&repo)
            .args(["doctor", "--json", "--broker-lanes"])
            .arg(&lanes)
            .arg("--broker-socket")
            .arg(&broker_socket));
        let json = ran.json();
        assert_eq!(
            json["lanes"][0]["uid"], a.uid,
            "{}{}",
            ran.stdout, ran.stderr
        );
        json["lanes"][0]["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .map(|w| w.as_str().unwrap_or("").to_string())
            // Only what this test made: the machine's own /etc/ssh settings are not its to
            // change, and a process another test left with a uid since reused is not its.
            .filter(|w| w.contains(&root.display().to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        doctor(),
        Vec::<String>::new(),
        "a clean lane uid has warnings"
    );

    // A private key the lane's uid can read.
    let ssh_dir = a.home.join(".ssh");
    fs::create_dir(&ssh_dir).expect(".ssh");
    let key = ssh_dir.join("id_ed25519");
    ssh_keygen(&key, "own");
    chown(&a.home, a.uid, a.gid);
    let warned = doctor();
    assert!(
        warned.len() == 1 && warned[0].contains(&key.display().to_string()),
        "{warned:?}"
    );
    // The same file, root's and 0600: not the lane's to read.
    chown(&key, 0, 0);
    assert_eq!(doctor(), Vec::<String>::new());

    // A process of the lane's uid whose SSH_AUTH_SOCK names another agent; one naming the
    // broker's is fine.
    let other = root.join("other-agent.sock");
    let _other = std::os::unix::net::UnixListener::bind(&other).expect("other agent socket");
    let spawn_sleep = |socket: &Path| {
        Command::new("sleep")
            .arg("30")
            .env_clear()
            .env("SSH_AUTH_SOCK", socket)
            .uid(a.uid)
            .gid(a.gid)
            .spawn()
            .expect("sleep as the lane")
    };
    let mut with_broker = spawn_sleep(&broker_socket);
    assert_eq!(doctor(), Vec::<String>::new());
    let mut with_other = spawn_sleep(&other);
    let warned = doctor();
    let _ = with_other.kill();
    let _ = with_other.wait();
    let _ = with_broker.kill();
    let _ = with_broker.wait();
    assert!(
        warned.len() == 1
            && warned[0].contains(&format!("SSH_AUTH_SOCK={}", other.display()))
            && warned[0].contains(&with_other.id().to_string()),
        "{warned:?}"
    );

    // Multiplexing in the lane's ssh config: one warning a line.
    fs::write(
        ssh_dir.join("config"),
        "Host *\n    ControlMaster auto\n    ControlPersist=10m\n    ControlPath ~/.ssh/%C\n",
    )
    .expect("ssh config");
    let warned = doctor();
    // Doctor run by a uid that cannot look (not root, not the lane): it says so, and never
    // reports a clean lane.
    let other = users.add(&root, "o");
    // Git reads a repository of another uid only when told it is safe.
    fs::write(other.home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").expect("gitconfig");
    let unseen = run(home
        .command(crate::util::bin("row-fence"))
        .current_dir(&repo)
        .env("HOME", &other.home)
        .args(["doctor", "--json", "--broker-lanes"])
        .arg(&lanes)
        .uid(other.uid)
        .gid(other.gid));
    assert!(unseen.stdout.starts_with('{'), "{}", unseen.stderr);
    let unseen_text = unseen.json()["lanes"][0]["warnings"].to_string();
    assert!(
        unseen_text.contains(&format!("cannot read {}", ssh_dir.display()))
            && unseen_text.contains("run doctor as root"),
        "{}{}",
        unseen.stdout,
        unseen.stderr
    );
    assert_ne!(unseen.code, 0);
    assert!(
        warned.len() == 2
            && warned[0].contains("ControlMaster auto")
            && warned[1].contains("ControlPersist=10m")
            && warned
                .iter()
                .all(|w| w.contains("MaxSessions does not stop it")),
        "{warned:?}"
    );
    // A setting in a file the config includes (relative to ~/.ssh, globbed) is ssh's too.
    fs::create_dir(ssh_dir.join("config.d")).expect("config.d");
    fs::write(ssh_dir.join("config"), "Include config.d/*.conf\n").expect("ssh config");
    fs::write(
        ssh_dir.join("config.d").join("forge.conf"),
        "Host forge\n    ControlPersist 1h\n",
    )
    .expect("included config");
    chown(&ssh_dir.join("config"), a.uid, a.gid);
    chown(&ssh_dir.join("config.d"), a.uid, a.gid);
    let warned = doctor();
    assert!(
        warned.len() == 1 && warned[0].contains("forge.conf sets ControlPersist 1h"),
        "{warned:?}"
    );
    // So is one it includes by a user's name (`~name/`, which ssh expands too).
    fs::write(
        ssh_dir.join("config"),
        format!("Include ~{}/.ssh/config.d/forge.conf\n", a.name),
    )
    .expect("ssh config");
    let warned = doctor();
    assert!(
        warned.len() == 1 && warned[0].contains("forge.conf sets ControlPersist 1h"),
        "{warned:?}"
    );
    fs::remove_file(ssh_dir.join("config")).expect("rm ssh config");

    // Kept connections that hide what they are. The forge is a listener here, named by
    // the daemon's forge host keys file as ssh-keyscan writes it; the repository has no
    // remote at all (a lane can point its own remotes anywhere).
    let forge = std::net::TcpListener::bind("127.0.0.1:0").expect("a forge port");
    let port = forge.local_addr().expect("port").port();
    let host_keys = root.join("forge_host_keys");
    fs::write(
        &host_keys,
        format!(
            "[127.0.0.1]:{port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
        ),
    )
    .expect("forge_host_keys");
    let warnings_of = |pid: u32, host_keys: Option<&Path>| -> Vec<String> {
        let mut cmd = home.command(crate::util::bin("row-fence"));
        cmd.current_dir(&repo)
            .args(["doctor", "--json", "--broker-lanes"])
            .arg(&lanes);
        if let Some(file) = host_keys {
            cmd.arg("--broker-forge-host-key").arg(file);
        }
        let process = format!("process {pid} ");
        run(&mut cmd).json()["lanes"][0]["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .filter_map(|w| w.as_str())
            .filter(|w| w.contains(&process))
            .map(str::to_string)
            .collect()
    };
    let until_connected = |pid: u32| {
        let until = Instant::now() + Duration::from_secs(10);
        while !fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten()
                    .filter_map(|fd| fs::read_link(fd.path()).ok())
                    .any(|t| t.to_string_lossy().starts_with("socket:"))
            })
            .unwrap_or(false)
        {
            assert!(Instant::now() < until, "process {pid} did not connect");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // A copy of ssh under another name, started with argv[0] `kworker`: a master waiting
    // on the forge. Its bytes are ssh's: doctor names it a master and its connection one
    // to the forge.
    let bin = a.home.join("bin");
    fs::create_dir(&bin).expect("bin");
    let tunnel = bin.join("tunnel");
    fs::copy(which("ssh"), &tunnel).expect("copy ssh");
    chown(&bin, a.uid, a.gid);
    let mut master = Command::new(&tunnel)
        .arg0("kworker")
        .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-M", "-N", "-S"])
        .arg(a.home.join("cm"))
        .args([
            "-o",
            "ControlPersist=1h",
            "-p",
            &port.to_string(),
            "127.0.0.1",
        ])
        .env_clear()
        .env("HOME", &a.home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid(a.uid)
        .gid(a.gid)
        .spawn()
        .expect("the copied ssh as the lane");
    until_connected(master.id());
    let warned = warnings_of(master.id(), Some(&host_keys));
    let _ = master.kill();
    let _ = master.wait();
    assert!(
        warned.len() == 2
            && warned[0].contains("runs an ssh master")
            && warned[0].contains("-M -N")
            && warned[1].contains(&format!(
                "(kworker) holds a connection to the forge at 127.0.0.1:{port}"
            )),
        "{warned:#?}"
    );
    // Any program holding a connection to the forge: told by the host keys file, not by
    // the lane's remotes.
    let hold = format!(
        "import socket, time\ns = socket.create_connection(('127.0.0.1', {port}))\ntime.sleep(30)\n"
    );
    let mut held = Command::new("python3")
        .args(["-c", &hold])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .uid(a.uid)
        .gid(a.gid)
        .spawn()
        .expect("python3 as the lane");
    until_connected(held.id());
    let named = warnings_of(held.id(), Some(&host_keys));
    let unnamed = warnings_of(held.id(), None);
    let _ = held.kill();
    let _ = held.wait();
    assert!(
        named.len() == 1
            && named[0].contains(&format!(
                "holds a connection to the forge at 127.0.0.1:{port}"
            )),
        "{named:#?}"
    );
    assert_eq!(
        unnamed,
        Vec::<String>::new(),
        "no remote and no host keys file"
    );
    drop(forge);
}

/// `git init --shared=group` in a worktree of `user`'s own: its git dir group-writable.
fn shared_worktree(root: &Path, user: &User, tag: &str) -> PathBuf {
    let tree = root.join(format!("{tag}-tree"));
    fs::create_dir(&tree).expect("worktree");
    chown(&tree, user.uid, user.gid);
    let ran = run(Command::new("git")
        .args(["init", "-q", "--shared=group"])
        .current_dir(&tree)
        .env("HOME", &user.home)
        .uid(user.uid)
        .gid(user.gid));
    ran.expect_ok("git init --shared=group");
    tree
}

/// Tries, as `user`, to write a pre-commit hook into `tree`'s git dir; true when it is
/// there afterwards.
fn plants_hook(user: &User, tree: &Path) -> bool {
    let hook = tree.join(".git/hooks/pre-commit");
    let script = format!(
        "printf '#!/bin/sh\\ngit push -q origin HEAD:refs/heads/planted\\n' > '{}' && chmod +x '{}'",
        hook.display(),
        hook.display()
    );
    let _ = run(Command::new("sh")
        .args(["-c", &script])
        .current_dir(&user.home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .uid(user.uid)
        .gid(user.gid));
    hook.exists()
}

#[test]
fn a_lane_plants_no_hook_in_another_lanes_git_dir_unless_they_share_a_group_which_doctor_reports() {
    let home = Home::file();
    let root = home.dir.path().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
    let mut users = Users::new();
    let repo = root.join("repo");
    fs::create_dir(&repo).expect("repo");
    run(home.command("git").current_dir(&repo).args(["init", "-q"])).expect_ok("git init");
    let doctor = |lanes: &[(&User, &Path)]| {
        let file = root.join("lanes.toml");
        let text: String = lanes
            .iter()
            .enumerate()
            .map(|(i, (user, tree))| {
                format!(
                    "[[lane]]\nlane = \"lane-{i}\"\nuid = {}\nworktree = \"{}\"\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-{i}\"\n",
                    user.uid,
                    tree.display(),
                    tree.join(".git/row-fence.json").display()
                )
            })
            .collect();
        fs::write(&file, text).expect("lanes.toml");
        let ran = run(home
            .command(crate::util::bin("row-fence"))
            .current_dir(&repo)
            .args(["doctor", "--broker-lanes"])
            .arg(&file));
        let found: Vec<String> = ran
            .stdout
            .lines()
            .filter(|l| l.contains("can be changed by lane"))
            .map(str::to_string)
            .collect();
        (ran.code, found)
    };

    // As docs/hard-mode.md, "Key broker", makes lanes: a group each (useradd -U). Even a
    // git dir made group-writable is then the lane's alone: lane B, refused or not, cannot
    // plant a hook in lane A's.
    let a = users.add(&root, "ga");
    let b = users.add(&root, "gb");
    let a_tree = shared_worktree(&root, &a, "ga");
    let b_tree = shared_worktree(&root, &b, "gb");
    assert!(
        !plants_hook(&b, &a_tree),
        "lane B planted a hook in lane A's git dir"
    );
    let (_, found) = doctor(&[(&a, &a_tree), (&b, &b_tree)]);
    assert_eq!(
        found,
        Vec::<String>::new(),
        "a group each, and doctor warns"
    );
    let a_hooks = a_tree.join(".git/hooks");
    let changed_by_b = format!("{} can be changed by lane uid {}", a_hooks.display(), b.uid);

    // An ACL entry is write access the permission bits do not show: lane A gives lane B
    // a named entry on its hooks (as any owner may), lane B plants a hook, and doctor
    // names the entry.
    let entry = format!("u:{}:rwx", b.name);
    run(Command::new("setfacl").args(["-m", &entry]).arg(&a_hooks)).expect_ok("setfacl");
    let (code, found) = doctor(&[(&a, &a_tree), (&b, &b_tree)]);
    assert_eq!(code, 1, "{found:#?}");
    assert!(
        found
            .iter()
            .any(|l| l.contains(&changed_by_b) && l.contains("an ACL entry names it")),
        "{found:#?}"
    );
    assert!(
        plants_hook(&b, &a_tree),
        "the ACL entry did not let lane B write"
    );
    fs::remove_file(a_hooks.join("pre-commit")).expect("rm the planted hook");
    run(Command::new("setfacl").arg("-b").arg(&a_hooks)).expect_ok("setfacl -b");
    assert_eq!(
        doctor(&[(&a, &a_tree), (&b, &b_tree)]).1,
        Vec::<String>::new()
    );

    // A group a process of lane B still holds after /etc/group stopped listing lane B in
    // it: the kernel checks the process's groups, so doctor counts them too.
    let shared = Group::add("s");
    run(Command::new("chgrp").arg(&shared.name).arg(&a_hooks)).expect_ok("chgrp");
    run(Command::new("usermod").args(["-aG", &shared.name, &b.name])).expect_ok("usermod");
    let mut kept = Command::new("setpriv")
        .args([
            "--reuid",
            &b.name,
            "--regid",
            &b.name,
            "--init-groups",
            "sleep",
            "30",
        ])
        .stdin(Stdio::null())
        .spawn()
        .expect("a process of lane B");
    let until = Instant::now() + Duration::from_secs(5);
    while !fs::read_to_string(format!("/proc/{}/status", kept.id()))
        .is_ok_and(|s| s.contains(&format!("Uid:\t{}", b.uid)))
    {
        assert!(Instant::now() < until, "setpriv did not become lane B");
        std::thread::sleep(Duration::from_millis(20));
    }
    run(Command::new("gpasswd").args(["-d", &b.name, &shared.name])).expect_ok("gpasswd -d");
    let (code, found) = doctor(&[(&a, &a_tree), (&b, &b_tree)]);
    let _ = kept.kill();
    let _ = kept.wait();
    assert_eq!(code, 1, "{found:#?}");
    assert!(
        found.iter().any(|l| l.contains(&changed_by_b)
            && l.contains(&format!("group {} (gid {})", shared.name, shared.gid))),
        "{found:#?}"
    );
    assert_eq!(
        doctor(&[(&a, &a_tree), (&b, &b_tree)]).1,
        Vec::<String>::new()
    );
    run(Command::new("chgrp").arg(&a.name).arg(&a_hooks)).expect_ok("chgrp back");

    // The hooks lane A's git runs are where its config says (core.hooksPath, at any level,
    // through any include): a directory lane B owns is lane B's to fill. Doctor asks lane
    // A's own git.
    let b_hooks = root.join("gb-hooks");
    fs::create_dir(&b_hooks).expect("lane B's hooks");
    chown(&b_hooks, b.uid, b.gid);
    let set_hooks_path = |value: &str| {
        run(Command::new("git")
            .args(["config", "core.hooksPath", value])
            .current_dir(&a_tree)
            .env("HOME", &a.home)
            .uid(a.uid)
            .gid(a.gid))
        .expect_ok("git config core.hooksPath")
    };
    set_hooks_path(&b_hooks.display().to_string());
    let (code, found) = doctor(&[(&a, &a_tree), (&b, &b_tree)]);
    assert_eq!(code, 1, "{found:#?}");
    let by_b = format!("{} can be changed by lane uid {}", b_hooks.display(), b.uid);
    assert!(
        found
            .iter()
            .any(|l| l.contains(&by_b) && l.contains("it owns it")),
        "{found:#?}"
    );
    set_hooks_path(".git/hooks");
    assert_eq!(
        doctor(&[(&a, &a_tree), (&b, &b_tree)]).1,
        Vec::<String>::new()
    );

    // Lanes made with useradd -N share the system's default group: lane D plants a hook
    // in lane C's group-writable git dir, and doctor says so (exit 1), naming the group.
    let c = users.add_with(&root, "gc", &["-N"]);
    let d = users.add_with(&root, "gd", &["-N"]);
    assert_eq!(c.gid, d.gid, "useradd -N gave the lanes different groups");
    let c_tree = shared_worktree(&root, &c, "gc");
    let d_tree = shared_worktree(&root, &d, "gd");
    let (code, found) = doctor(&[(&c, &c_tree), (&d, &d_tree)]);
    assert_eq!(code, 1);
    let hooks = format!(
        "{}/.git/hooks can be changed by lane uid {}",
        c_tree.display(),
        d.uid
    );
    assert!(
        found
            .iter()
            .any(|l| l.contains(&hooks) && l.contains("which it is in")),
        "{found:#?}"
    );
    assert!(
        plants_hook(&d, &c_tree),
        "the shared group did not let lane D write"
    );
}

/// `scripts/demo --hard` on the debug binaries: its own users, sshd and daemon pushing for
/// the lanes; every step as the demo says, every route refused, and nothing left behind.
#[test]
fn the_hard_demo_runs_on_the_debug_binaries_and_leaves_no_user_behind() {
    let _root = Users::new();
    let ran = run(Command::new(crate::util::repo_root().join("scripts/demo"))
        .arg("--hard")
        .env("ROW_FENCE_BIN_DIR", crate::util::bin_dir()));
    assert_eq!(
        ran.code, 0,
        "scripts/demo --hard failed:\n{}\n{}",
        ran.stdout, ran.stderr
    );
    assert!(
        ran.stdout.contains(
            "the hard boundary held: lane-a's pushes landed through the daemon, every push of lane-b's after the takeover was refused"
        ),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("FAIL"), "{}", ran.stdout);
    // The allowed pushes landed through the daemon; the refused lane's plain push is
    // rejected with the daemon's verdict, and its master never started.
    for line in [
        "ok   git push (through the daemon)                              exit 0",
        "ok   git push (a fast-forward of lane-b's work)                 exit 0",
        "ok   git push                                                   exit 0",
        "ok   git push (through the daemon)                              exit 1",
        "| remote: row-fence: REFUSED (different_holder)",
        "|  ! [remote rejected] HEAD -> main (row-fence: REFUSED (different_holder))",
        "no master: the broker signs no push login with the push socket on",
    ] {
        assert!(ran.stdout.contains(line), "{line}: {}", ran.stdout);
    }
    // Every route has its line, and each is refused, with the daemon's verdict where one
    // was given.
    for route in [
        "route an ssh master started while ALLOWED                REFUSED",
        "route a push session opened while ALLOWED                REFUSED  (its pack sent after the takeover) daemon: REFUSED (different_holder)",
        "route its descriptor pointed at another lease            REFUSED",
        "route a hook planted in lane-a's git dir                 REFUSED",
        "route a push outside the row's refs                      REFUSED  (a new branch, not main) daemon: REFUSED (outside_scope)",
        "route a force push (its main, another lane's branch)     REFUSED",
        "route a tag moved                                        REFUSED",
        "route a branch deleted                                   REFUSED",
        "routes: 8 refused, 0 landed",
    ] {
        assert!(ran.stdout.contains(route), "{route}: {}", ran.stdout);
    }
    let routes: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("   route "))
        .collect();
    assert_eq!(routes.len(), 8, "{}", ran.stdout);
    assert!(
        routes.iter().all(|l| !l.contains("LANDED")),
        "{}",
        ran.stdout
    );
    // Its temp dir is gone, and no process names it (the daemon, its ssh master, sshd).
    let work = ran
        .stdout
        .split_whitespace()
        .find_map(|w| w.strip_suffix("/remote.git"))
        .expect("the demo names its forge's repository");
    assert!(!Path::new(work).exists(), "the demo left {work} behind");
    let ps = run(Command::new("ps").args(["-eo", "args"]));
    assert!(
        !ps.stdout.lines().any(|l| l.contains(work)),
        "the demo left a process behind:\n{}",
        ps.stdout
    );
    let passwd = fs::read_to_string("/etc/passwd").expect("passwd");
    assert!(
        !passwd.lines().any(|l| l.starts_with("rfh")),
        "the demo left a user behind"
    );
    let groups = fs::read_to_string("/etc/group").expect("group");
    assert!(
        !groups.lines().any(|l| l.starts_with("rfh")),
        "the demo left a group behind"
    );
}

#[test]
fn lane_and_key_commands_refuse_bad_input_and_change_nothing() {
    let home = Home::file();
    let tree = home.path("tree");
    fs::create_dir(&tree).expect("tree");
    let tree_text = tree.display().to_string();
    let lanes = home.home.join("broker").join("lanes.toml");
    // Not a worktree, a bad lane name, root's uid, no such user, no such directory.
    for args in [
        vec![
            "lane",
            "add",
            "lane-x",
            "--uid",
            "54321",
            "--worktree",
            &tree_text,
        ],
        vec![
            "lane",
            "add",
            "a b",
            "--uid",
            "54321",
            "--worktree",
            &tree_text,
        ],
        vec![
            "lane",
            "add",
            "lane-x",
            "--uid",
            "0",
            "--worktree",
            &tree_text,
        ],
        vec![
            "lane",
            "add",
            "lane-x",
            "--uid",
            "no-such-user-rf",
            "--worktree",
            &tree_text,
        ],
        vec![
            "lane",
            "add",
            "lane-x",
            "--uid",
            "54321",
            "--worktree",
            "/no/such/dir",
        ],
    ] {
        let ran = home.cli(&args);
        assert_eq!(ran.code, 2, "{args:?}: {}{}", ran.stdout, ran.stderr);
        assert!(!lanes.exists(), "{args:?} wrote the bindings");
    }
    let ran = run(Command::new("git").args(["init", "-q"]).arg(&tree));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    // No daemon runs: the binding is written and the command says the daemon reads it
    // when it starts.
    let added = home
        .cli(&[
            "lane",
            "add",
            "lane-x",
            "--uid",
            "54321",
            "--worktree",
            &tree_text,
        ])
        .expect_ok("lane add");
    assert!(
        added.stderr.contains("reads them when it starts"),
        "{}",
        added.stderr
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(&lanes).expect("lanes").mode() & 0o777, 0o600);
    assert_eq!(
        fs::metadata(lanes.parent().unwrap()).expect("dir").mode() & 0o777,
        0o700
    );
    let written = fs::read(&lanes).expect("lanes");
    let listed = home
        .cli(&["lane", "list", "--json"])
        .expect_ok("lane list")
        .json();
    assert_eq!(listed[0]["lane"], "lane-x", "{listed}");
    assert_eq!(listed[0]["uid"], 54321, "{listed}");
    let descriptor = listed[0]["descriptor"].as_str().unwrap_or("");
    assert!(descriptor.ends_with(".git/row-fence.json"), "{listed}");
    // The same uid or lane again: refused, the file as it was.
    for args in [
        vec![
            "lane",
            "add",
            "lane-y",
            "--uid",
            "54321",
            "--worktree",
            &tree_text,
        ],
        vec![
            "lane",
            "add",
            "lane-x",
            "--uid",
            "54322",
            "--worktree",
            &tree_text,
        ],
    ] {
        assert_eq!(home.cli(&args).code, 2, "{args:?}");
        assert_eq!(fs::read(&lanes).expect("lanes"), written, "{args:?}");
    }
    home.cli(&["lane", "remove", "lane-x"])
        .expect_ok("lane remove");
    assert_eq!(home.cli(&["lane", "remove", "lane-x"]).code, 2);
    let audit = fs::read_to_string(home.home.join("audit.jsonl")).expect("audit log");
    assert_eq!(audit.lines().count(), 2, "{audit}");
    // A key others may read is refused before anything is sent; no daemon is exit 1.
    let key = home.path("key");
    ssh_keygen(&key, "k");
    fs::set_permissions(&key, fs::Permissions::from_mode(0o640)).expect("chmod");
    let key_text = key.display().to_string();
    assert_eq!(home.cli(&["keys", "add", &key_text]).code, 2);
    fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).expect("chmod");
    let ran = home.cli(&["keys", "add", &key_text]);
    assert_eq!(ran.code, 1, "keys add with no daemon: {}", ran.stderr);
}

// The push proxy's HTTPS arm runs on this file's `Site` too (ARCHITECTURE.md, "Push proxy").
#[path = "push_https.rs"]
mod push_https;
