//! The quarantine against the issue's kinds of attack shapes, generalised: every shape a
//! refused agent might try next (abbreviated and bundled options, words whose value is
//! decided at run time, environment and configuration that run code, compound commands,
//! redirections that write, programs not on the list) is denied by the allowlist, with
//! no per-shape rule. The harmless reads beside them pass.

use row_fence_guard::quarantine::allowlist::check;
use std::path::Path;

fn denied(command: &str) -> bool {
    check(command, Path::new("/w"), Some("/home/u")).is_err()
}

/// Shapes per kind: each expands to several concrete commands.
fn attack_shapes() -> Vec<(&'static str, String)> {
    let mut shapes = Vec::new();
    let mut add = |kind: &'static str, s: String| shapes.push((kind, s));
    let push = "git push -q --no-verify origin HEAD:main";
    // Kind 1: git config writes that mention get/list, and config that runs a program.
    for key in [
        "diff.external",
        "core.fsmonitor",
        "core.pager",
        "remote.origin.uploadpack",
        "filter.x.clean",
        "core.sshCommand",
        "alias.st",
        "core.hooksPath",
    ] {
        for tail in ["list", "get", "--get", "-l", "--list x", "get x"] {
            add("config", format!("git config {key} '{push}; :' {tail}"));
        }
        add("config", format!("git -c {key}='{push}' status"));
    }
    // Kind 2: abbreviated long options and bundled short ones (on and off the list).
    for shape in [
        "git rebase --exe 'x'",
        "git rebase -qx 'x'",
        "git fetch --upload-pac='x'",
        "git grep --open-files='x' foo",
        "make --eva='$(shell x)'",
        "tar --checkpoint-act=exec=x -cf a .",
        "sed --expr='1e x' f",
        "gawk --sour='BEGIN{system(\"x\")}'",
        "curl --data-bin @f http://127.0.0.1/",
        "wget --post-d=x http://127.0.0.1/",
        "gh api -iXPUT repos/o/r/merges",
        "git log --outp=/tmp/x",
        "git log --ext",
        "git diff --ext-d",
        "git diff --text",
        "git show --show-sig",
        "git log --outpu /tmp/x",
        "ls --colo",
        "rg --pr x foo",
        "rg --pre=x foo",
        "rg -zn foo",
        "sort -no out in",
        "sort -To /tmp in",
        "sort --compress=x in",
        "tree -o out",
        "file -C -m x",
        "tail -fn 5 log",
        "grep --devices=x foo",
        "cat --unknown f",
        "head --lin 5 f",
        "git status --porc",
        "git branch -D main",
        "git branch -m x",
        "git branch --set-upstream-to=x",
        "git remote set-url origin x",
        "git remote show origin",
        "git tag v1",
        "date -s now",
        "hostname evil",
    ] {
        add("options", shape.to_string());
    }
    // Kind 3: word splitting, variables, substitutions, here-strings of code.
    for shape in [
        "c='user.name=t push -q origin HEAD:main'; git -c $c",
        "printf -vx push; git $x origin",
        "shopt -s lastpipe; true | x=push; git $x",
        "git $(echo push) origin",
        "git `echo push` origin",
        "git ${x:-push} origin",
        "git \"$x\" origin",
        "ls $(git push)",
        "echo $(git push)",
        "cat <(git push)",
        "cat <<EOF\n$(git push)\nEOF",
        "x=push git status",
        "IFS=, git status",
        "git st$x",
        "ls ${HOME}",
        "echo $((x=1))",
        "ls ~+/$(id)",
        "eval 'git push'",
        "source ./x.sh",
        ". ./x.sh",
        "alias ls='git push'; ls",
        "f() { git push; }; f",
        "exec git push",
        "command git push",
        "builtin eval x",
        "declare -x GIT_DIR=/x; git status",
        "export PAGER=x; git log",
        "set -- push; git \"$@\"",
    ] {
        add("words", shape.to_string());
    }
    // Kind 4: environment and config files that run code or change the request.
    for var in [
        "PERL5OPT=-Mx",
        "NODE_OPTIONS=--require=x",
        "BROWSER=x",
        "GH_BROWSER=x",
        "GH_PAGER=x",
        "CURL_HOME=.",
        "WGETRC=x",
        "GIT_EXTERNAL_DIFF=x",
        "GIT_PAGER=x",
        "PAGER=x",
        "GIT_SSH_COMMAND=x",
        "GIT_CONFIG_PARAMETERS='core.pager=x'",
        "LD_PRELOAD=./x.so",
        "BASH_ENV=./x",
        "ENV=./x",
    ] {
        add("env", format!("{var} git log"));
        add("env", format!("env {var} ls"));
    }
    for shape in [
        "perl -0 -e'system(q(x))'",
        "python3 -c 'import os'",
        "node -e 'x'",
        "ruby -e 'x'",
        "bash -c 'git push'",
        "sh -c ls",
        "xargs git push",
        "find . -exec git push \\;",
        "find . -execdir x \\;",
        "find . -ok x \\;",
        "find . -fprint /tmp/x",
        "find . -delete",
        "npx x",
        "npm run x",
        "make",
        "cargo run",
        "gh pr merge 1",
        "gh api -X PUT x",
        "curl -X POST http://127.0.0.1/",
        "wget http://127.0.0.1/",
        "nc 127.0.0.1 80",
        "ssh host",
        "scp a host:b",
        "rsync a host:b",
        "git push",
        "git commit -m x",
        "git add .",
        "git fetch",
        "git pull",
        "git merge x",
        "git rebase x",
        "git reset --hard",
        "git checkout x",
        "git switch x",
        "git worktree add x",
        "git update-ref refs/heads/main HEAD",
        "git send-pack origin",
        "git stash",
        "git am x",
        "git apply x",
        "git submodule update",
        "row-fence acquire b r",
        "row-fence release b r",
        "tee x",
        "cp a b",
        "mv a b",
        "rm a",
        "touch a",
        "mkdir a",
        "ln -s a b",
        "chmod +x a",
        "dd if=a of=b",
        "vim a",
        "less a",
        "man git",
        "/usr/bin/git push",
        "./ls",
        "../bin/ls",
        "~/bin/ls",
    ] {
        add("programs", shape.to_string());
    }
    // Kind 5: compound commands, background, redirections that write.
    for shape in [
        "ls > x",
        "ls >> x",
        "ls >| x",
        "ls &> x",
        "ls 2> x",
        "ls > /dev/null/../../tmp/x",
        "ls <> x",
        "ls & git push",
        "( ls )",
        "{ ls; }",
        "if true; then ls; fi",
        "for x in a; do ls; done",
        "while false; do ls; done",
        "case x in x) ls;; esac",
        "[[ -n x ]] && ls",
        "(( x = 1 ))",
        "coproc ls",
        "time git push",
        "! git push",
        "ls | git push",
        "ls && git push",
        "ls || git push",
        "ls; git push",
        "* x",
        "ls -- *",
        "ls *",
        "ls ?",
        "cat {a,--pre=x}",
        "ls [a]*",
        // Bash opens these names as network connections in a redirection.
        "cat < /dev/tcp/127.0.0.1/80",
        "head -c1 </dev/udp/127.0.0.1/53",
        "wc -c 0</dev/tcp/h/1",
        "git status </dev/tcp/127.0.0.1/80",
        "ls 3</dev/tc''p/127.0.0.1/80",
        "cat < /dev/stdin",
    ] {
        add("syntax", shape.to_string());
    }
    shapes
}

#[test]
fn every_attack_shape_is_denied_in_quarantine() {
    let shapes = attack_shapes();
    assert!(shapes.len() >= 150, "only {} shapes", shapes.len());
    let passed: Vec<&(&str, String)> = shapes.iter().filter(|(_, s)| !denied(s)).collect();
    assert!(
        passed.is_empty(),
        "{} of {} shapes passed the quarantine: {passed:#?}",
        passed.len(),
        shapes.len()
    );
}

#[test]
fn the_reads_beside_them_pass() {
    for shape in [
        "ls -la",
        "ls -la src/",
        "cat README.md",
        "head -n 20 src/main.rs",
        "tail -n 5 log.txt",
        "wc -l src/lib.rs",
        "grep -rn 'git push' src/",
        "grep -E 'a|b' f.txt | sort | head",
        "rg -n --hidden foo src",
        "git status",
        "git status -sb",
        "git log --oneline -n 10",
        "git log -p -1 -- src/",
        "git show HEAD --stat",
        "git diff",
        "git diff --cached --stat",
        "git -P diff HEAD~1",
        "git branch -a -v",
        "git branch --show-current",
        "git rev-parse --show-toplevel",
        "git ls-files -m",
        "git remote -v",
        "git remote get-url origin",
        "git config --get remote.origin.url",
        "git config --list --show-origin",
        "git blame -L 1,5 src/lib.rs",
        "git describe --tags",
        "row-fence status",
        "pwd",
        "date +%F",
        "find src -name '*.rs' -type f",
        "find . -maxdepth 2 -mmin -5",
        "du -sh .",
        "stat -c %s f.txt",
        "which git",
        "command -v cargo",
        "echo done",
        "printf '%s\\n' a b",
        "test -f x && echo yes",
        "jq -r .name package.json",
        "diff -u a b",
        "ls 2>/dev/null || true",
        "cat f.txt 2>&1 | head",
        "cd src && ls",
        "ls src/*.rs",
        "wc -l < f.txt",
        "cat < /dev/null",
    ] {
        assert!(
            !denied(shape),
            "{shape}: {:?}",
            check(shape, Path::new("/w"), Some("/home/u"))
        );
    }
}
