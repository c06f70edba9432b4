//! The agent guard, round two: new shapes of the first round's kinds found by an adversarial pass
//! over the built guard, each a route the first guard let through (exit 0). Table-driven like
//! `guard.rs`: each shape is denied for a refused lane (exit 2, the remote stays), and for
//! the git shapes a second test runs the shape for real without the guard, in the shell
//! Claude Code's Bash tool would use (bash, or zsh on macOS), and shows the remote moves:
//! the denial is what stops it. Harmless shapes the first guard blocked, or that a fix
//! could block, pass without asking; inputs near the size limit are denied quickly.

use crate::guard::{Case, Cwd, Lane, Remote, bound_worktree, case, program_path};
use crate::util::run;
use std::fs;
use std::path::Path;

/// The shell a shape is run in for the proof that it moves the remote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shell {
    Bash,
    Zsh,
    /// Not run for real (needs an alias of the user's shell, or a network).
    Neither,
}

/// One round-two shape: the kind it belongs to, the program it needs installed to be run
/// for real, the shell, and the case.
struct Round {
    kind: &'static str,
    needs: &'static str,
    shell: Shell,
    case: Case,
}

fn git_shape(
    kind: &'static str,
    needs: &'static str,
    shell: Shell,
    cwd: Cwd,
    shape: &str,
) -> Round {
    Round {
        kind,
        needs,
        shell,
        case: case(shape, cwd, 2, Remote::Stays),
    }
}

fn other_shape(kind: &'static str, shape: &str) -> Round {
    Round {
        kind,
        needs: "",
        shell: Shell::Neither,
        case: case(shape, Cwd::Clone, 2, Remote::NotGit),
    }
}

/// The new shapes. `{tmp}/s` is a symlink to the clone's `sub`; `{git}` is git's path.
fn round_two() -> Vec<Round> {
    use Cwd::{Clone, Tmp, Ws};
    use Shell::{Bash, Neither, Zsh};
    let parse = "quoting/parsing: bash reads `( (…) )` and `((…) )` as subshells";
    let names = "command word not literal: the shell's tables of names";
    let zsh = "command word not literal: zsh's spellings";
    let arith = "code handed to the shell: arithmetic evaluates data";
    let wrapper = "a wrapper the parser did not model";
    let interp = "code handed to an interpreter";
    let dirs = "directory tracking";
    let written = "files written then run";
    vec![
        git_shape(parse, "", Bash, Clone, "((git push --no-verify) )"),
        git_shape(parse, "", Bash, Clone, "( (git push --no-verify) )"),
        git_shape(
            names,
            "",
            Bash,
            Clone,
            "BASH_CMDS[ls]={git}; ls push --no-verify",
        ),
        git_shape(
            names,
            "",
            Bash,
            Clone,
            "declare -A BASH_CMDS=([ls]={git}); ls push --no-verify",
        ),
        git_shape(
            names,
            "",
            Bash,
            Clone,
            "hash -p {git} ls; ls push --no-verify",
        ),
        git_shape(names, "", Zsh, Clone, "hash ls={git}; ls push --no-verify"),
        git_shape(names, "", Neither, Clone, "gp --no-verify"),
        git_shape(names, "", Neither, Clone, "g push --no-verify"),
        git_shape(zsh, "", Zsh, Clone, "=git push --no-verify"),
        git_shape(zsh, "", Zsh, Clone, "noglob git push --no-verify"),
        git_shape(zsh, "", Zsh, Clone, "nocorrect git push --no-verify"),
        git_shape(zsh, "", Zsh, Clone, "repeat 1 git push --no-verify"),
        git_shape(zsh, "", Zsh, Clone, "emulate sh -c 'git push --no-verify'"),
        git_shape(
            zsh,
            "",
            Zsh,
            Clone,
            "functions[f]='git push --no-verify'; f",
        ),
        git_shape(zsh, "", Zsh, Clone, "echo *(e:'git push --no-verify':)"),
        git_shape(arith, "", Bash, Clone, "let 'a[$(git push --no-verify)]'"),
        git_shape(
            arith,
            "",
            Bash,
            Clone,
            "read x <<< 'a[$(git push --no-verify)]'; [[ $x -eq 0 ]]",
        ),
        git_shape(
            wrapper,
            "ssh-agent",
            Bash,
            Clone,
            "ssh-agent git push --no-verify",
        ),
        git_shape(
            wrapper,
            "tar",
            Bash,
            Clone,
            "tar -cf /dev/null file.txt --checkpoint=1 --checkpoint-action=exec='git push --no-verify'",
        ),
        git_shape(
            wrapper,
            "zip",
            Bash,
            Clone,
            "zip -q -T -TT 'git push --no-verify #' {tmp}/z.zip file.txt",
        ),
        git_shape(
            wrapper,
            "socat",
            Bash,
            Clone,
            "socat - EXEC:'git push --no-verify' < /dev/null",
        ),
        git_shape(
            wrapper,
            "sqlite3",
            Bash,
            Clone,
            "sqlite3 :memory: '.shell git push --no-verify'",
        ),
        git_shape(
            wrapper,
            "ed",
            Bash,
            Clone,
            "printf '!git push --no-verify\\nq\\n' | ed",
        ),
        git_shape(
            wrapper,
            "",
            Neither,
            Clone,
            "npm exec -- git push --no-verify",
        ),
        git_shape(wrapper, "", Neither, Clone, "npx -c 'git push --no-verify'"),
        git_shape(
            wrapper,
            "",
            Neither,
            Clone,
            "tar -xf x.tar --to-command='git push --no-verify'",
        ),
        git_shape(
            wrapper,
            "",
            Neither,
            Clone,
            "man -P 'git push --no-verify' git",
        ),
        git_shape(
            interp,
            "sed",
            Bash,
            Clone,
            "echo x | sed 's/.*/git push --no-verify/e'",
        ),
        git_shape(
            interp,
            "sed",
            Bash,
            Clone,
            "sed 's/a/b/' -e '1e git push --no-verify' file.txt",
        ),
        git_shape(
            interp,
            "gawk",
            Bash,
            Clone,
            "gawk --source='BEGIN{system(\"git push --no-verify\")}'",
        ),
        git_shape(
            interp,
            "gawk",
            Bash,
            Clone,
            "gawk 'BEGIN{f=\"sys\" \"tem\"; @f(\"git push --no-verify\")}'",
        ),
        git_shape(
            interp,
            "gawk",
            Bash,
            Clone,
            "gawk -f /dev/stdin <<< 'BEGIN{system(\"git push --no-verify\")}'",
        ),
        git_shape(
            interp,
            "python3",
            Bash,
            Clone,
            "python3 -m asyncio <<< 'import os; os.system(\"git push --no-verify\")'",
        ),
        git_shape(
            interp,
            "",
            Neither,
            Clone,
            "ipython -c 'import os; os.system(\"git push --no-verify\")'",
        ),
        git_shape(
            written,
            "make",
            Bash,
            Clone,
            "printf 'all:\\n\\tgit push --no-verify\\n' > {tmp}/m.mk && make -f {tmp}/m.mk",
        ),
        git_shape(
            written,
            "",
            Neither,
            Clone,
            "git clone -q --template={tmp}/tpl {remote} {tmp}/t2",
        ),
        git_shape(dirs, "", Bash, Tmp, "git -C {tmp}/s/.. push --no-verify"),
        git_shape(
            dirs,
            "env",
            Bash,
            Tmp,
            "env -C {tmp}/s/.. git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "cd -P {tmp}/s/.. && git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "set -P; cd {tmp}/s/..; git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "HOME={clone}; cd && git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "HOME={clone}; cd ~ && git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "cd /; OLDPWD={clone}; cd - && git push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "BASH_CMDS[ls]={git}; ls -C {clone} push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Bash,
            Tmp,
            "shopt -s expand_aliases\nalias p='git -C {clone} push --no-verify'\np",
        ),
        git_shape(
            dirs,
            "ssh-agent",
            Bash,
            Tmp,
            "ssh-agent git -C {clone} push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Zsh,
            Tmp,
            "repeat 1 git -C {clone} push --no-verify",
        ),
        git_shape(
            dirs,
            "",
            Zsh,
            Ws,
            "cd /ws /lane-a-clone && git push --no-verify",
        ),
        other_shape(
            "HTTP writes: clustered options",
            "curl -sX PUT https://api.github.com/repos/o/r/pulls/1/merge",
        ),
        other_shape(
            "HTTP writes: clustered options",
            "curl -fsSLd '{}' https://api.github.com/repos/o/r/pulls",
        ),
        other_shape(
            "HTTP writes: options from a file",
            "curl -K - <<< 'request = \"PUT\"'",
        ),
        other_shape(
            "HTTP writes: options from a file",
            "wget -e post_data=x https://api.github.com/x",
        ),
        other_shape(
            "row-fence writes",
            "row-fence --key-prefix show release board-1 row-1 --lane lane-b --generation 2",
        ),
        other_shape(
            "row-fence writes",
            "row-fence --no-such-option x renew board-1 row-1 --lane lane-b --generation 2",
        ),
        other_shape("gh through a database shell", "psql -c '\\! gh pr merge 1'"),
    ]
}

/// The symlink `{tmp}/s` → the clone's `sub`, which the directory shapes go through.
fn link_sub(lane: &Lane) {
    std::os::unix::fs::symlink(lane.repo.clone.join("sub"), lane.tmp().join("s")).unwrap();
}

fn installed(program: &str) -> bool {
    program.is_empty() || program_path(program).is_file()
}

#[test]
fn round_two_shapes_are_denied_for_a_refused_lane_and_the_remote_stays() {
    let lane = Lane::refused();
    bound_worktree(&lane);
    link_sub(&lane);
    let rounds = round_two();
    assert!(rounds.len() >= 50, "{} shapes", rounds.len());
    for r in &rounds {
        lane.check(&r.case, false);
    }
    // The row-fence shapes did not run: lane-b still holds the row.
    let show = lane.home.cli(&["show", "board-1"]);
    assert!(show.stdout.contains("lane-b"), "{}", show.stdout);
}

#[test]
fn round_two_git_shapes_really_move_the_remote_without_the_guard() {
    let lane = Lane::refused();
    bound_worktree(&lane);
    link_sub(&lane);
    let zsh = installed("zsh");
    let mut proved = 0;
    for r in round_two() {
        let shell = match r.shell {
            Shell::Bash => "bash",
            Shell::Zsh if zsh => "zsh",
            _ => continue,
        };
        if r.case.remote != Remote::Stays || !installed(r.needs) {
            continue;
        }
        lane.reset_remote();
        let shape = lane.fill(&r.case.shape);
        let ran = run(lane
            .home
            .command(shell)
            .args(if shell == "zsh" {
                &["-f", "-c"][..]
            } else {
                &["-c"][..]
            })
            .arg(&shape)
            .current_dir(lane.dir(r.case.cwd)));
        assert_eq!(
            lane.remote_head(),
            lane.repo.local_head(&lane.home),
            "{}: {shape:?} run by {shell} did not move the remote ({}): the case tests nothing",
            r.kind,
            ran.stderr
        );
        proved += 1;
    }
    assert!(proved >= 25, "only {proved} shapes were run for real");
}

/// Shapes a fix could block, and shapes the first guard blocked: exit 0 for a lane that
/// holds its row.
#[test]
fn round_two_harmless_shapes_pass_for_a_held_lane() {
    let lane = Lane::held();
    link_sub(&lane);
    let many_ifs: String = (0..600).map(|k| format!("if x{k}:\n    pass\n")).collect();
    let mut cases = vec![
        // Nested 600 deep only in a here-document body: not deep for the parser.
        case(
            &format!("cat > big.py <<'EOF'\n{many_ifs}EOF"),
            Cwd::Clone,
            0,
            Remote::Stays,
        ),
    ];
    for shape in [
        "awk '/a|b/ {print}' file.txt",
        "awk -F'|' '{print $2}' file.txt",
        "awk '$1 || $2' file.txt",
        "awk '{ print $1/2 }' file.txt",
        "sed -n '1,5p' file.txt",
        "sed -e 's|a|b|' -e '/^#/d' file.txt",
        "sed 's/e/E/gI' file.txt",
        "tar -I 'gzip -9' -cf {tmp}/x.tgz file.txt",
        "git -c core.pager=cat log -n 1",
        "git -c pager.log=false log -n 1",
        "git log --grep='git push' -n 1",
        "(( 1 + 2 ))",
        "((i = 1)); echo $i",
        "( (echo sub) )",
        "cd {tmp}/s && ls",
        "declare -i n=3; echo $n",
        "let 'n = 2 * 3'",
        "[[ 3 -eq 3 ]] && echo same",
    ] {
        cases.push(case(shape, Cwd::Clone, 0, Remote::Stays));
    }
    for c in &cases {
        lane.check(c, false);
    }
}

/// Inputs that made the first guard's walk quadratic or exponential (long `cd` chains,
/// nested loops, functions that call each other twice per level) and nested subshells
/// the parser reads as arithmetic: each gets its verdict (denied, and says why) from the
/// installed binary. Its work is bounded by count in guard/tests/policy.rs; its time is
/// measured in `scripts/bench`, not asserted here.
#[test]
fn round_two_heavy_inputs_get_their_verdict() {
    let lane = Lane::refused();
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
    // The refused lane is quarantined: no shell call runs there.
    for (shape, why) in [
        (cd_chain, "no shell runs in quarantine"),
        (loops, "no shell runs in quarantine"),
        (calls, "no shell runs in quarantine"),
        (peel, "no shell runs in quarantine"),
    ] {
        // A deadline far past the work: this test is about the verdict (the walk's work
        // is bounded by count in guard/tests/policy.rs, its time is in scripts/bench), so
        // a loaded machine does not turn it into a deadline denial.
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c")
            .arg(&lane.hook)
            .current_dir(&lane.repo.clone)
            .env("ROW_FENCE_GUARD_TIMEOUT_MS", "120000");
        let hook = crate::guard::run_with_stdin(
            &mut cmd,
            &serde_json::json!({
                "cwd": &lane.repo.clone,
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_input": {"command": &shape},
            })
            .to_string(),
        );
        let head = &shape[..60.min(shape.len())];
        assert_eq!(hook.code, 2, "{head}…: {}", hook.stderr);
        assert!(hook.stderr.contains(why), "{head}…: {}", hook.stderr);
    }
}

/// A session id that is not a plain token (slashes, spaces, dots, non-ASCII, very long)
/// is bound and judged like any other.
#[test]
fn a_session_with_an_odd_id_is_bound_from_any_directory() {
    let lane = Lane::refused();
    let long = "s".repeat(300);
    for (k, session) in [
        "../../etc/passwd",
        "a b/ü",
        ".hidden",
        long.as_str(),
        "ABC-def_1.2",
    ]
    .into_iter()
    .enumerate()
    {
        // Bound by its first call (a shell call, denied in quarantine).
        let first = lane.hook_in("ls", &lane.repo.clone, Some(session));
        assert_eq!(first.code, 2, "{session:?}: {}", first.stderr);
        assert!(
            first.stderr.contains("QUARANTINED"),
            "{session:?}: {}",
            first.stderr
        );
        let shape = lane.fill(&format!(
            "git clone -q {{clone}} {{tmp}}/odd{k} && cd {{tmp}}/odd{k} && git push -q {{remote}} HEAD:main"
        ));
        let hook = lane.hook_in(&shape, &lane.tmp(), Some(session));
        assert_eq!(hook.code, 2, "{session:?}: {}", hook.stderr);
        assert!(
            hook.stderr.contains("REFUSED (different_holder)"),
            "{session:?}: {}",
            hook.stderr
        );
    }
    assert!(!Path::new("/etc/passwd.json").exists());
    assert!(
        fs::read_dir(lane.home.home.join("sessions"))
            .unwrap()
            .all(|e| e.unwrap().path().parent() == Some(&lane.home.home.join("sessions"))),
        "every binding is under the home's sessions directory"
    );
}
