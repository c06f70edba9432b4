//! The policy on its own, fast: what the walk finds in a command and where, without a
//! daemon (the end-to-end suite runs the same kinds against the real one).

use row_fence_guard::finding::{Dir, Kind};
use row_fence_guard::walk::{Env, Plan, plan};
use std::path::Path;

/// A `PATH` of stand-in programs in a temp dir of its own, removed when dropped, so what
/// the walk finds does not depend on what this machine has installed (a name on no `PATH`
/// directory is opaque) and nothing is left behind.
fn stub_path() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("rf-policy-bin")
        .tempdir()
        .unwrap();
    for name in [
        "git",
        "gh",
        "row-fence",
        "sh",
        "bash",
        "env",
        "timeout",
        "python3",
        "cat",
        "grep",
        "curl",
        "wget",
        "xargs",
        "find",
        "ls",
        "ssh-agent",
        "npm",
        "npx",
        "tar",
        "zip",
        "socat",
        "sqlite3",
        "psql",
        "ed",
        "man",
        "sed",
        "awk",
        "gawk",
        "ipython",
        "lua5.4",
        "mkdir",
        "gzip",
        "nohup",
        "setsid",
        "at",
        "batch",
        "systemd-run",
        "sleep",
        "watch",
        "tmux",
        "screen",
        "crontab",
        "cargo",
        "perl",
        "node",
        "zsh",
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n# a stand-in for {name}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn read(command: &str, cwd: &str) -> Plan {
    let stubs = stub_path();
    let env = Env {
        home: Some("/home/u".into()),
        cdpath: false,
        path: Some(stubs.path().display().to_string()),
    };
    plan(command, Path::new(cwd), &env)
}

/// `F` fenced, `O` opaque, `U` unreadable, `-` nothing, for each finding in order.
fn kinds(p: &Plan) -> String {
    let mut out: String = p
        .findings
        .iter()
        .map(|f| match f.kind {
            Kind::Fenced => 'F',
            Kind::Opaque => 'O',
        })
        .collect();
    if p.unreadable.is_some() {
        out.push('U');
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

/// A wrapper's option that takes a value (`env -u`, `xargs -n`, `watch -n`), written last
/// without one, left the guard slicing past the end of the words (a panic, which blocks):
/// the wrapper runs no inner command, so there is nothing to find; with one, the inner
/// command is read.
#[test]
fn a_wrapper_option_written_last_without_its_value_runs_nothing() {
    for command in [
        "env -u",
        "env --unset",
        "timeout -s",
        "timeout 5 --kill-after",
        "exec -a",
        "xargs -n",
        "xargs --max-procs",
        "watch -n",
    ] {
        assert_eq!(kinds(&read(command, "/w")), "-", "{command}");
    }
    assert_eq!(kinds(&read("env -u X git push", "/w")), "F");
}

#[test]
fn each_kind_is_found_where_it_runs() {
    for (command, cwd, want, place) in [
        ("git push", "/w", "F", Some("/w")),
        ("git -C a -C ../b push", "/w", "F", Some("/w/b")),
        ("cd /x && git push", "/w", "F", Some("/x")),
        ("(cd /tmp); git push", "/w", "F", Some("/w")),
        ("cd /tmp | cat; git push", "/w", "F", Some("/w")),
        ("cd /tmp & git push", "/w", "F", Some("/w")),
        (
            "cd \"my repo\" && gh pr merge 12",
            "/tmp/ws",
            "F",
            Some("/tmp/ws/my repo"),
        ),
        (
            "cd my\\ repo && gh pr merge 12",
            "/tmp/ws",
            "F",
            Some("/tmp/ws/my repo"),
        ),
        ("cd ~/r && git push", "/", "F", Some("/home/u/r")),
        ("cd; git push", "/w", "F", Some("/home/u")),
        ("git --git-dir=/r/.git push", "/w", "F", None),
        ("GIT_DIR=/r/.git git push", "/w", "F", None),
        ("$(echo git) push", "/w", "O", Some("/w")),
        ("git -c alias.p=push p", "/w", "O", Some("/w")),
        ("git p", "/w", "O", Some("/w")),
        ("timeout --signal KILL 5 git push", "/w", "F", Some("/w")),
        ("env -C /x git push", "/w", "F", Some("/x")),
        ("echo 'git push' | sh", "/w", "O", Some("/w")),
        ("sh -c 'cd /x && git push'", "/w", "F", Some("/x")),
        ("python3 -c 'x'", "/w", "O", Some("/w")),
        ("gh pr ready 1", "/w", "F", Some("/w")),
        ("gh repo sync", "/w", "F", Some("/w")),
        ("gh pr view 1", "/w", "-", None),
        ("gh api repos/o/r", "/w", "-", None),
        ("gh api repos/o/r -f a=b", "/w", "F", None),
        ("git commit -m \"fix; git push later\"", "/w", "-", None),
        (
            "grep -E \"git push|gh pr merge\" README.md",
            "/w",
            "-",
            None,
        ),
        ("cat > f <<EOF\ngit push origin main\nEOF", "/w", "-", None),
        ("cat > f <<EOF\n$(git push)\nEOF", "/w", "F", None),
        ("cat > f <<'EOF'\n$(git push)\nEOF", "/w", "-", None),
        ("echo 'unterminated", "/w", "U", None),
        ("f() { git push; }", "/w", "F", None),
        ("x=git; $x push", "/w", "F", None),
        ("row-fence release b r --lane l", "/w", "F", None),
        ("row-fence status", "/w", "-", None),
        ("row-fence show b", "/w", "-", None),
        ("row-fence store check", "/w", "-", None),
        ("row-fence lane list", "/w", "-", None),
        ("row-fence keys list", "/w", "-", None),
        ("row-fence controller show b", "/w", "-", None),
        ("row-fence top", "/w", "-", None),
        ("row-fence man", "/w", "-", None),
        // What changes the fence's own state, and any subcommand it does not know, is
        // fenced: an allowlist of reads.
        ("row-fence stop", "/w", "F", None),
        ("row-fence store accept-regression b", "/w", "F", None),
        ("row-fence store accept-clock b", "/w", "F", None),
        ("row-fence store copy --from a --to b", "/w", "F", None),
        (
            "row-fence lane add x --uid 1 --worktree /w",
            "/w",
            "F",
            None,
        ),
        ("row-fence lane remove x", "/w", "F", None),
        ("row-fence keys add k", "/w", "F", None),
        ("row-fence token add -", "/w", "F", None),
        ("row-fence top --allow-writes", "/w", "F", None),
        ("row-fence man /tmp/pages", "/w", "F", None),
        ("row-fence render systemd --out f", "/w", "F", None),
        ("row-fence controller acquire b", "/w", "F", None),
        ("row-fence a-command-it-gains-later", "/w", "F", None),
        ("export GIT_SSH_COMMAND=ssh", "/w", "O", None),
        ("GIT_PAGER=cat git log", "/w", "-", None),
        ("GIT_PAGER='git push' git log", "/w", "F", None),
        ("git rebase -x 'make' HEAD~3", "/w", "O", None),
        ("git config alias.p push", "/w", "O", None),
        ("git config user.name x", "/w", "-", None),
        ("curl -X POST https://h/x", "/w", "F", None),
        ("curl https://h/x", "/w", "-", None),
        ("xargs -I{} git -C {} push", "/w", "F", None),
        ("find . -execdir git push \\;", "/w", "F", None),
    ] {
        let p = read(command, cwd);
        assert_eq!(kinds(&p), want, "{command:?}: {:?}", p);
        if let Some(place) = place {
            let dirs: Vec<&Dir> = p.findings[0].places.iter().map(|p| &p.dir).collect();
            assert!(
                dirs.contains(&&Dir::Known(place.into())),
                "{command:?} runs in {place}, found {dirs:?}"
            );
        }
    }
}

#[test]
fn a_place_the_text_does_not_name_is_unknown_not_the_parent() {
    for command in [
        "cd \"$X\" && git push",
        "for d in a b; do cd $d; git push; done",
        "eval cd /x; git push",
        "xargs -I{} git -C {} push",
        "find . -execdir git push \\;",
    ] {
        let p = read(command, "/w");
        let push = p
            .findings
            .iter()
            .find(|f| f.action.starts_with("git push"))
            .unwrap();
        assert!(
            push.places
                .iter()
                .any(|pl| matches!(pl.dir, Dir::Unknown(_))),
            "{command:?}: {:?}",
            push.places
        );
    }
}

#[test]
fn a_thousand_clauses_are_each_found() {
    let many: String = (0..1000)
        .map(|k| format!("git -C /tmp/nx/d{k} push; "))
        .collect();
    let p = read(&(many + "git push --no-verify"), "/w");
    assert_eq!(p.findings.len(), 1001);
    assert!(p.unreadable.is_none());
}

/// Round two of the adversarial pass: new shapes of the kinds found before. `F` fenced, `O`
/// opaque, `U` unreadable (as in `kinds`), `FO`/`OF` when both are found. Each is denied
/// for a refused lane; the end-to-end suite runs the git ones against a real remote.
#[test]
fn round_two_shapes_are_found() {
    for (command, want) in [
        // A parser difference: bash reads `( (…) )` and `((…) )` as nested subshells.
        ("( (git push) )", "F"),
        ("((git push) )", "F"),
        ("((i++))", "-"),
        // The shell's tables of names: a name bound to git runs git.
        ("BASH_CMDS[ls]=/usr/bin/git; ls push", "OF"),
        ("declare -A BASH_CMDS=([ls]=/usr/bin/git); ls push", "OF"),
        ("hash -p /usr/bin/git ls; ls push", "F"),
        ("hash ls=/usr/bin/git; ls push", "F"),
        ("alias p='git push'\np --no-verify", "FF"),
        // Names the text does not pin to a program: aliases and functions of the agent's
        // shell, zsh's `=cmd`.
        ("gp --no-verify", "O"),
        ("=git push", "O"),
        // zsh: precommand modifiers, builtins that run code, code in words.
        ("noglob git push", "F"),
        ("nocorrect git push", "F"),
        ("repeat 1 git push", "F"),
        ("emulate sh -c 'git push'", "F"),
        ("functions[f]='git push'; f", "OFF"),
        ("echo *(e:'git push':)", "O"),
        ("read x; echo ${(e)x}", "O"),
        ("print -P '%F{red}$(git push)%f'", "O"),
        // Arithmetic that evaluates data.
        ("let 'a[$(git push)]'", "F"),
        ("read x; [[ $x -eq 0 ]]", "O"),
        ("declare -i n='a[$(git push)]'", "FO"),
        // Programs handed a command.
        ("ssh-agent git push", "OF"),
        ("npm exec -- git push", "OF"),
        ("tar -cf /dev/null --to-command='git push' f", "F"),
        (
            "tar -cf x.tar --checkpoint=1 --checkpoint-action=exec='git push' f",
            "F",
        ),
        ("zip -TT 'git push #' x.zip f", "F"),
        ("socat - EXEC:'git push'", "F"),
        ("sqlite3 :memory: '.shell git push'", "OF"),
        ("psql -c '\\! git push'", "OF"),
        ("printf '!git push\\n' | ed", "O"),
        ("man -P 'git push' ls", "F"),
        ("npx -c 'git push'", "F"),
        // Interpreters: sed's `e`, awk's programs, python's REPL modules.
        ("echo x | sed 's/.*/git push/e'", "O"),
        ("sed 's/a/b/' -e '1e git push' f", "O"),
        ("gawk --source='BEGIN{system(\"git push\")}'", "O"),
        ("gawk 'BEGIN{f=\"sys\" \"tem\"; @f(\"git push\")}'", "O"),
        ("awk -f /dev/stdin <<< 'BEGIN{system(\"git push\")}'", "O"),
        ("python3 -m asyncio <<< 'import os'", "O"),
        ("python3 -m pdb x.py", "O"),
        ("python3 -m", "O"),
        ("python3 -m json.tool f.json", "-"),
        ("ipython -m code", "O"),
        // `-m` runs a module in python's family only: elsewhere it is an option like any
        // other, and the code after it is still found.
        ("perl -m strict -e 'system(\"git push\")'", "O"),
        ("node -m -e 'x'", "O"),
        // The shell's own commands that run their words, handed to a program.
        ("ssh-agent eval 'git push'", "OO"),
        ("ssh-agent command git push", "OF"),
        ("ssh-agent builtin git push", "OF"),
        ("ssh-agent exec git push", "OF"),
        // zsh within a command runs what the guard does not follow.
        ("zsh -c 'git push'", "O"),
        ("ssh-agent zsh -c 'echo hi'", "OO"),
        ("ipython -c 'import os'", "O"),
        ("lua5.4 -e 'os.execute(\"git push\")'", "O"),
        // HTTP writes with clustered or file-borne options.
        (
            "curl -sX PUT https://api.github.com/repos/o/r/pulls/1/merge",
            "F",
        ),
        (
            "curl -fsSLd '{}' https://api.github.com/repos/o/r/pulls",
            "F",
        ),
        ("curl -K - <<< 'request = \"PUT\"'", "F"),
        ("wget -e post_data=x https://api.github.com/x", "F"),
        // row-fence's own options.
        ("row-fence --key-prefix show release b r --lane l", "F"),
        ("row-fence --unknown x release b r --lane l", "F"),
        // git: hooks from a template, code in a pager or editor setting.
        ("git clone --template=/t https://h/r.git d", "O"),
        ("git -c core.pager='git push' log", "F"),
        ("git -c core.pager=cat log", "-"),
    ] {
        let p = read(command, "/w");
        assert_eq!(kinds(&p), want, "{command:?}: {:?}", p);
    }
}

#[test]
fn harmless_round_two_shapes_find_nothing() {
    let many_ifs: String = (0..600).map(|k| format!("if x{k}:\n    pass\n")).collect();
    for command in [
        "awk '/a|b/ {print}' f".to_string(),
        "awk -F'|' '{print $2}' f".into(),
        "awk '$1 || $2' f".into(),
        "awk '{ print $1/2 }' f".into(),
        "sed -i 's/foo/bar/g' f".into(),
        "sed -n '1,5p' f".into(),
        "sed -e 's|a|b|' -e '/^#/d' f".into(),
        "tar -I 'gzip -9' -cf x.tgz f".into(),
        "git -c core.pager=cat log -n 1".into(),
        "git -c pager.log=false log".into(),
        "git log --grep='git push'".into(),
        "curl -fsSL https://example.invalid/x".into(),
        format!("cat > big.py <<'EOF'\n{many_ifs}EOF"),
    ] {
        let p = read(&command, "/w");
        assert_eq!(kinds(&p), "-", "{command:?}: {:?}", p);
    }
}

#[test]
fn physical_moves_follow_symlinks_and_assigned_home_and_oldpwd_are_used() {
    let tmp = std::env::temp_dir().join(format!("rf-policy-{}", std::process::id()));
    let real = tmp.join("repo/sub");
    std::fs::create_dir_all(&real).unwrap();
    let link = tmp.join("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let repo = tmp.join("repo");
    let l = link.display();
    let r = repo.display();
    for command in [
        format!("git -C {l}/.. push"),
        format!("env -C {l}/.. git push"),
        format!("cd -P {l}/.. && git push"),
        format!("set -P; cd {l}/..; git push"),
        format!("HOME={r}; cd && git push"),
        format!("HOME={r}; cd ~ && git push"),
        format!("cd /; OLDPWD={r}; cd - && git push"),
    ] {
        let p = read(&command, "/");
        let dirs: Vec<&Dir> = p
            .findings
            .iter()
            .flat_map(|f| &f.places)
            .map(|p| &p.dir)
            .collect();
        assert!(
            dirs.contains(&&Dir::Known(repo.clone())),
            "{command:?} runs in {r}, found {dirs:?}"
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// Inputs that made the first guard's walk quadratic or exponential (long `cd` chains,
/// nested loops, functions that call each other twice per level, subshells nested 400
/// deep): each gets the right reading, and the walk's work is bounded by count — simple
/// commands read and bytes parsed — not by a clock (their times are in `scripts/bench`).
#[test]
fn heavy_inputs_get_their_reading_with_work_bounded_by_count() {
    use row_fence_guard::walk::MAX_STEPS;
    let cd_chain: String = (0..4000)
        .map(|k| format!("cd d{k} || cd e{k}; "))
        .collect::<String>()
        + "git push --no-verify";
    let loops = format!(
        "{}cd sub; git push --no-verify{}",
        "for a in 1; do ".repeat(60),
        "; done".repeat(60)
    );
    let calls: String = (0..24)
        .map(|k| format!("f{k}() {{ f{}; f{}; }}; ", k + 1, k + 1))
        .collect::<String>()
        + "f24() { git status; }; f0";
    let peel = format!(
        "{}git push --no-verify{}",
        "( ".repeat(400),
        " )".repeat(400)
    );
    // (shape, its reading, the most simple commands the walk may read for it)
    let cases: [(String, &str, usize); 4] = [
        (cd_chain, "F", 8_001 * 2),
        // Loops nested past MAX_LOOP_PASSES that move the directory are not read twice:
        // unreadable, which denies.
        (loops, "FFFFFFFFU", 2 * 64 * 2),
        // 2^25 calls written, a bounded count read: the walk gives up, which denies.
        // (its 49 calls before the bound are opaque: names not yet defined)
        (calls, "…U", MAX_STEPS),
        (peel, "F", 1),
    ];
    for (shape, want, most_steps) in cases {
        let head = shape[..60.min(shape.len())].to_string();
        let read = std::thread::Builder::new()
            .stack_size(row_fence_guard::parse::PARSE_STACK_BYTES)
            .spawn(move || read(&shape, "/w").clone())
            .unwrap()
            .join()
            .unwrap();
        let got = kinds(&read);
        // "…X": ends with X.
        match want.strip_prefix('…') {
            Some(tail) => assert!(got.ends_with(tail), "{head}…: read as {got}"),
            None => assert_eq!(got, want, "{head}…: read as {got}"),
        }
        assert!(
            read.steps <= most_steps,
            "{head}…: {} simple commands read, over {most_steps}",
            read.steps
        );
        assert!(read.parsed_bytes > 0, "{head}…: nothing parsed");
    }
}

/// A fenced write or opaque command that outlives the call is found deferred, with how;
/// the same write in the foreground is not.
#[test]
fn writes_that_outlive_the_call_are_found_deferred() {
    let push = "git push -q origin HEAD:main";
    let deferred = [
        format!("{push} &"),
        format!("{push} & disown"),
        format!("( {push} ) &"),
        format!("{{ {push}; }} &"),
        format!("nohup {push}"),
        format!("nohup {push} >/dev/null 2>&1 &"),
        format!("setsid {push}"),
        format!("setsid -f {push}"),
        format!("nohup sh -c '{push}'"),
        format!("echo '{push}' | at now + 1 minute"),
        "at -f job.sh now".to_string(),
        format!("echo '{push}' | batch"),
        format!("systemd-run --user {push}"),
        format!("tmux new -d '{push}'"),
        format!("screen -dm {push}"),
        format!("watch -n 60 {push}"),
        format!("coproc {push}"),
        format!("sleep 30; {push}"),
        format!("sleep 30 && {push}"),
        format!("(sleep 30; {push})"),
        format!("cargo test; sleep 5; {push}"),
        format!("wait; {push}"),
        format!("for i in 1 2 3; do {push}; sleep 10; done"),
        format!("while true; do sleep 60; {push}; done"),
        "nohup python3 -c 'import os' &".to_string(),
    ];
    for command in &deferred {
        let p = read(command, "/w");
        assert!(!p.findings.is_empty(), "{command}: nothing found");
        assert!(
            p.findings.iter().any(|f| f.deferred.is_some()),
            "{command}: found, but not deferred: {:?}",
            p.findings
        );
    }
    for command in [
        push.to_string(),
        format!("cargo test && {push}"),
        format!("git fetch && git rebase origin/main && {push}"),
        format!("timeout 60 {push}"),
        format!("{push}; sleep 1"),
    ] {
        let p = read(&command, "/w");
        assert!(
            p.findings.iter().all(|f| f.deferred.is_none()),
            "{command}: {:?}",
            p.findings
        );
    }
}

/// A program is known by the file it runs, not the name it was typed as: a name on
/// `PATH` that leads to an editor or interpreter (`editor` → `vim.basic`), a link in the
/// worktree to one, a copy of an interpreter the guard cannot name (a compiled program
/// outside `PATH` no record knows), each as a command word or handed to another program.
/// Scripts and installed programs no record knows stay ordinary.
#[test]
fn a_program_is_read_as_the_file_it_runs_whatever_it_is_called() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let program = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let bin = stub_path();
    let tree = tempfile::Builder::new()
        .prefix("rf-policy-tree")
        .tempdir()
        .unwrap();
    let b = bin.path();
    let t = tree.path();
    program(&b.join("vim.basic"), b"\x7fELF vim");
    program(&b.join("python3.11"), b"\x7fELF python");
    program(&b.join("mytool"), b"\x7fELF an installed tool");
    program(&b.join("sensible"), b"\x7fELF an installed tool");
    for (link, to) in [
        ("editor", "vim.basic"),
        ("ex", "vim.basic"),
        ("py", "python3.11"),
    ] {
        symlink(b.join(to), b.join(link)).unwrap();
    }
    symlink(b.join("vim.basic"), t.join("x")).unwrap();
    symlink(b.join("python3.11"), t.join("y")).unwrap();
    program(&t.join("p"), b"\x7fELF a copy of python");
    program(&t.join("run.sh"), b"#!/bin/sh\necho hi\n");
    std::fs::write(t.join("script.py"), "print(1)\n").unwrap();
    let env = Env {
        home: Some("/home/u".into()),
        cdpath: false,
        path: Some(b.display().to_string()),
    };
    for (command, want) in [
        ("editor -c '!git push' f", "O"),
        ("editor +'!git push' f", "O"),
        ("echo '!git push' | ex", "O"),
        ("py -c 'import os'", "O"),
        ("./x -c '!git push' f", "O"),
        ("./y -c 'import os'", "O"),
        ("env ./x -c '!git push' f", "O"),
        ("./p -c 'import os; os.system(\"git push\")'", "O"),
        ("mytool ./p -c 'import os'", "OO"),
        ("mytool ./y -c 'import os'", "OO"),
        ("editor f", "-"),
        ("./x f", "-"),
        ("./y script.py", "-"),
        ("./run.sh", "-"),
        ("mytool a b", "-"),
        ("sensible f", "-"),
    ] {
        let p = plan(command, t, &env);
        assert_eq!(kinds(&p), want, "{command}: {:?}", p.findings);
    }
}
