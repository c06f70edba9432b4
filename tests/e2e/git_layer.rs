//! Git's own layer in every place git looks: the pre-push hook in every worktree's hooks
//! directory (a relative `core.hooksPath` included), worktrees added after install,
//! submodules (nested ones too) that resolve their superproject's descriptor, a push that
//! names its git dir from elsewhere, a rollback that gives the config back byte for byte,
//! and a hook that asks the daemon's own home and asker from any shell.

use crate::gated::{World, allowed, refused};
use crate::util::{Home, bin, run};
use row_fence::git_hook::is_fence;
use std::fs;
use std::path::{Path, PathBuf};

const REFUSED: &str = "row-fence: REFUSED (different_holder)";

fn hook_in(dir: &Path) -> String {
    fs::read_to_string(dir.join("pre-push")).unwrap_or_default()
}

/// Reproduction 3: `core.hooksPath=.husky` (relative) and linked worktrees.
#[test]
fn every_worktree_with_a_relative_hooks_path_is_fenced_and_one_added_later_is_caught() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let main = world.clone(&world.ssh_url(&remote), "main");
    world.git_ok(&main, &["push", "-q", "origin", "main"]);
    world.git_ok(&main, &["config", "core.hooksPath", ".husky"]);
    let linked = world.worktree(&main, "linked");

    let installed = world.install(&linked, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    for dir in [main.join(".husky"), linked.join(".husky")] {
        assert!(
            is_fence(&hook_in(&dir)),
            "{} holds the fence",
            dir.display()
        );
        assert!(
            installed
                .stderr
                .contains(&dir.join("pre-push").display().to_string()),
            "install names {}:\n{}",
            dir.display(),
            installed.stderr
        );
    }
    let doctor = world
        .home
        .cli(&["doctor", "--repo", main.to_str().unwrap()]);
    assert_eq!(doctor.code, 0, "{}{}", doctor.stdout, doctor.stderr);

    // A worktree added after install: its .husky has no hook, but the gate is in the
    // shared config.
    let later = world.worktree(&main, "later");
    let later_git_dir = main.join(".git/worktrees/later");
    world.bind(&later_git_dir, "row-2", "lane-l");
    let _daemon = world.home.daemon();
    world.commit(&later, "later one");
    world.git_ok(&later, &["push", "-q", "origin", "later"]);
    let before = world.main_of(&remote);
    world.take_over("row-2", "lane-m");
    world.commit(&later, "later two");
    let push = world.git(&later, &["push", "origin", "later:main"]);
    refused(&push, &before, &world.main_of(&remote), REFUSED);
    assert!(
        !later.join(".husky/pre-push").exists(),
        "no hook there: the gate refused it"
    );

    let doctor = world
        .home
        .cli(&["doctor", "--repo", main.to_str().unwrap()]);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains(&format!(
            "{} lacks the fence's pre-push hook",
            later.join(".husky").display()
        )),
        "{}",
        doctor.stdout
    );
    let json = world
        .home
        .cli(&["doctor", "--json", "--repo", main.to_str().unwrap()]);
    assert_eq!(json.code, 1);
    let later_report = json.json()["repositories"][0]["worktrees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["path"] == later.display().to_string())
        .cloned()
        .unwrap();
    assert_eq!(later_report["hook"], "missing");
    assert!(
        later_report["descriptor"]
            .as_str()
            .unwrap()
            .ends_with("later/row-fence.json")
    );

    let again = world.install(&main, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(is_fence(&hook_in(&later.join(".husky"))));
    let doctor = world
        .home
        .cli(&["doctor", "--repo", main.to_str().unwrap()]);
    assert_eq!(doctor.code, 0, "{}", doctor.stdout);
}

#[test]
fn a_worktree_that_is_gone_is_named_and_nothing_is_installed() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let main = world.clone(&world.ssh_url(&remote), "main");
    world.git_ok(&main, &["config", "core.hooksPath", ".husky"]);
    let linked = world.worktree(&main, "linked");
    fs::remove_dir_all(&linked).unwrap();
    let config = fs::read(main.join(".git/config")).unwrap();
    let ran = world.install(&main, &[]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains(&linked.display().to_string()),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("nothing was installed"),
        "{}",
        ran.stderr
    );
    assert_eq!(fs::read(main.join(".git/config")).unwrap(), config);
    assert!(!main.join(".husky/pre-push").exists());
}

/// A superproject with submodule `sub`, which has submodule `inner`, every remote over ssh.
struct Super {
    world: World,
    top: PathBuf,
    remotes: [PathBuf; 3],
}

fn superproject() -> Super {
    let world = World::new();
    let inner_remote = world.bare("inner.git");
    let inner_seed = world.clone(&world.ssh_url(&inner_remote), "inner-seed");
    world.git_ok(&inner_seed, &["push", "-q", "origin", "main"]);
    let sub_remote = world.bare("sub.git");
    let sub_seed = world.clone(&world.ssh_url(&sub_remote), "sub-seed");
    world.git_ok(
        &sub_seed,
        &[
            "submodule",
            "add",
            "-q",
            &world.ssh_url(&inner_remote),
            "inner",
        ],
    );
    world.git_ok(&sub_seed, &["commit", "-q", "-m", "inner"]);
    world.git_ok(&sub_seed, &["push", "-q", "origin", "main"]);
    let top_remote = world.bare("top.git");
    let top = world.clone(&world.ssh_url(&top_remote), "top");
    world.git_ok(
        &top,
        &["submodule", "add", "-q", &world.ssh_url(&sub_remote), "sub"],
    );
    world.git_ok(
        &top,
        &["submodule", "update", "-q", "--init", "--recursive"],
    );
    world.git_ok(&top, &["commit", "-q", "-m", "sub"]);
    world.git_ok(&top, &["push", "-q", "origin", "main"]);
    for dir in [top.join("sub"), top.join("sub/inner")] {
        world.git_ok(&dir, &["checkout", "-q", "-B", "main", "origin/main"]);
    }
    Super {
        world,
        top,
        remotes: [top_remote, sub_remote, inner_remote],
    }
}

/// Reproduction 4: a push from a submodule of a refused superproject.
#[test]
fn a_push_from_a_submodule_or_a_nested_one_of_a_refused_superproject_is_refused() {
    let s = superproject();
    let world = &s.world;
    let installed = world.install(&s.top, &["--recurse-submodules"]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    for module in ["modules/sub", "modules/sub/modules/inner"] {
        let git_dir = s.top.join(".git").join(module);
        assert!(is_fence(&hook_in(&git_dir.join("hooks"))), "{module}");
        assert!(git_dir.join("row-fence.gitconfig").exists(), "{module}");
    }
    world.bind(&s.top.join(".git"), "row-1", "lane-a");
    let _daemon = world.home.daemon();
    let sub = s.top.join("sub");
    let inner = sub.join("inner");
    world.commit(&sub, "sub while held");
    let push = world.git(&sub, &["push", "origin", "main"]);
    allowed(&push);

    world.take_over("row-1", "lane-b");
    for (dir, remote) in [(&sub, &s.remotes[1]), (&inner, &s.remotes[2])] {
        world.commit(dir, "after the takeover");
        let before = world.main_of(remote);
        for args in [
            &["push", "origin", "main"][..],
            &["push", "--no-verify", "origin", "main"][..],
        ] {
            let push = world.git(dir, args);
            refused(&push, &before, &world.main_of(remote), REFUSED);
            assert!(!push.stderr.contains("UNFENCED"), "{}", push.stderr);
        }
    }
    let asked = run(world
        .command(bin("row-fence-ask"), &inner)
        .args(["--action", "git push"]));
    asked.expect(3, REFUSED);
    let check = run(world.command(bin("row-fence"), &inner).args(["check"]));
    check.expect(3, REFUSED);
}

#[test]
fn submodules_installed_without_recursing_are_named_by_doctor() {
    let s = superproject();
    let installed = s.world.install(&s.top, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let doctor = s
        .world
        .home
        .cli(&["doctor", "--repo", s.top.to_str().unwrap()]);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    for module in ["modules/sub", "modules/sub/modules/inner"] {
        let config = s.top.join(".git").join(module).join("config");
        assert!(
            doctor.stdout.contains(&format!(
                "no transport gate in {}",
                fs::canonicalize(&config).unwrap().display()
            )),
            "{module}:\n{}",
            doctor.stdout
        );
    }
}

#[test]
fn a_clone_inside_a_row_bound_worktree_answers_as_that_lane() {
    let s = superproject();
    let world = &s.world;
    world.bind(&s.top.join(".git"), "row-1", "lane-a");
    let _daemon = world.home.daemon();
    let nested = world.home.path("top/vendor/nested");
    world.git_ok(
        world.home.dir.path(),
        &[
            "clone",
            "-q",
            s.remotes[1].to_str().unwrap(),
            nested.to_str().unwrap(),
        ],
    );
    let asked = run(world
        .command(bin("row-fence-ask"), &nested)
        .args(["--action", "git push"]));
    asked.expect(0, "row-fence: ALLOWED");
    world.take_over("row-1", "lane-b");
    let asked = run(world
        .command(bin("row-fence-ask"), &nested)
        .args(["--action", "git push"]));
    asked.expect(3, REFUSED);
}

/// A push that names its git dir from outside the worktree: git clears GIT_DIR for its
/// ssh command, so the gate finds the lane from the repository it was installed in.
#[test]
fn a_push_naming_its_git_dir_from_elsewhere_gets_the_lanes_verdict_from_the_gate() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    assert_eq!(world.install(&clone, &[]).code, 0);
    world.bind(&clone.join(".git"), "row-1", "lane-a");
    let _daemon = world.home.daemon();
    let elsewhere = world.home.path("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let git_dir = clone.join(".git");
    let flag = format!("--git-dir={}", git_dir.display());
    let push = world.git(
        &elsewhere,
        &[&flag, "push", "--no-verify", "origin", "main"],
    );
    allowed(&push);

    world.take_over("row-1", "lane-b");
    world.commit(&clone, "after the takeover");
    let before = world.main_of(&remote);
    let push = world.git(
        &elsewhere,
        &[&flag, "push", "--no-verify", "origin", "main"],
    );
    refused(&push, &before, &world.main_of(&remote), REFUSED);
    let push = run(world
        .command("git", &elsewhere)
        .env("GIT_DIR", &git_dir)
        .args(["push", "--no-verify", "origin", "main"]));
    refused(&push, &before, &world.main_of(&remote), REFUSED);

    // Two row-bound worktrees: from outside, the gate cannot tell which one pushes.
    world.worktree(&clone, "linked");
    world.bind(&git_dir.join("worktrees/linked"), "row-2", "lane-c");
    let push = world.git(
        &elsewhere,
        &[&flag, "push", "--no-verify", "origin", "main"],
    );
    refused(
        &push,
        &before,
        &world.main_of(&remote),
        "row-fence: COULD NOT READ (descriptor_unreadable)",
    );
    assert!(push.stderr.contains("cannot tell which"), "{}", push.stderr);
}

#[test]
fn rollback_gives_back_a_config_with_its_own_ssh_command_and_helpers_byte_for_byte() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let linked = world.worktree(&clone, "linked");
    world.git_ok(&clone, &["config", "extensions.worktreeConfig", "true"]);
    world.git_ok(
        &linked,
        &["config", "--worktree", "credential.helper", "worktree-own"],
    );
    fs::write(
        world.home.dir.path().join(".gitconfig"),
        "[credential]\n\thelper = global-first\n\thelper =\n\thelper = global-kept\n",
    )
    .unwrap();
    let config_path = clone.join(".git/config");
    let mut config = fs::read_to_string(&config_path).unwrap();
    config.push_str(
        "[core]\n\tsshCommand = ssh -o BatchMode=yes\n\tgitProxy = /nonexistent/proxy for example.invalid\n[credential]\n\thelper = store --file=/nonexistent/creds\n[credential \"https://example.invalid\"]\n\thelper = \"!f() { echo \\\"x\\\"; }; f\"\n# no newline at the end",
    );
    fs::write(&config_path, &config).unwrap();
    let worktree_config = fs::read(clone.join(".git/worktrees/linked/config.worktree")).unwrap();

    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert!(
        installed
            .stderr
            .contains("git://: not gated, the repository's own core.gitProxy"),
        "{}",
        installed.stderr
    );
    assert_ne!(fs::read_to_string(&config_path).unwrap(), config);
    let helpers = world.git_ok(&linked, &["config", "--get-all", "credential.helper"]);
    let helpers: Vec<&str> = helpers.lines().collect();
    let gate = helpers
        .iter()
        .position(|h| h.contains("--git-credential"))
        .unwrap();
    assert_eq!(helpers[gate - 1], "", "a reset puts the gate first");
    assert_eq!(
        &helpers[gate + 1..],
        &[
            "global-kept",
            "store --file=/nonexistent/creds",
            "worktree-own"
        ],
        "the user's helpers run after the gate's, in git's order"
    );
    let url_helper = world.git_ok(
        &clone,
        &[
            "config",
            "--get-urlmatch",
            "credential.helper",
            "https://example.invalid/r.git",
        ],
    );
    assert_eq!(url_helper.trim(), "!f() { echo \"x\"; }; f");
    let push = world.git(&clone, &["push", "--no-verify", "origin", "main"]);
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        world.ssh_log().contains("-o BatchMode=yes"),
        "the repository's own ssh command ran after the gate: {}",
        world.ssh_log()
    );

    let back = world.install(&clone, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert_eq!(
        fs::read_to_string(&config_path).unwrap(),
        config,
        "byte for byte"
    );
    assert_eq!(
        fs::read(clone.join(".git/worktrees/linked/config.worktree")).unwrap(),
        worktree_config
    );
    assert!(!clone.join(".git/row-fence.gitconfig").exists());
    assert!(!clone.join(".git/row-fence-git-proxy").exists());
    assert!(!clone.join(".git/hooks/pre-push").exists());
    let again = world.install(&clone, &["--rollback"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(fs::read_to_string(&config_path).unwrap(), config);
}

#[test]
fn a_worktrees_own_ssh_command_after_the_gate_is_refused_and_nothing_is_written() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let linked = world.worktree(&clone, "linked");
    world.git_ok(&clone, &["config", "extensions.worktreeConfig", "true"]);
    world.git_ok(&linked, &["config", "--worktree", "core.sshCommand", "ssh"]);
    let config = fs::read(clone.join(".git/config")).unwrap();
    let ran = world.install(&clone, &[]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("config.worktree"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("nothing was installed"),
        "{}",
        ran.stderr
    );
    assert_eq!(fs::read(clone.join(".git/config")).unwrap(), config);
    assert!(!clone.join(".git/row-fence.gitconfig").exists());
    assert!(!clone.join(".git/hooks/pre-push").exists());
}

/// Issue 12, item 5: the hook carries the daemon's asker, home and socket.
#[test]
fn the_installed_hook_asks_the_daemons_home_from_a_shell_with_another_home_and_path() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(remote.to_str().unwrap(), "lane-a");
    assert_eq!(world.install(&clone, &[]).code, 0);
    world.bind(&clone.join(".git"), "row-1", "lane-a");
    let _daemon = world.home.daemon();
    let elsewhere = world.home.path("another-home");
    // A shell whose PATH has git but no row-fence-ask.
    let path = "/usr/local/bin:/usr/bin:/bin";
    let found = run(world
        .command("sh", &clone)
        .env("PATH", path)
        .args(["-c", "command -v row-fence-ask"]));
    assert_ne!(
        found.code, 0,
        "row-fence-ask is on {path}: {}",
        found.stdout
    );
    let push = run(world
        .command("git", &clone)
        .env("ROW_FENCE_HOME", &elsewhere)
        .env_remove("ROW_FENCE_BIN_DIR")
        .env("PATH", path)
        .args(["push", "origin", "main"]));
    allowed(&push);
    assert!(
        push.stderr
            .contains(&format!("asking {}", world.home.socket().display())),
        "{}",
        push.stderr
    );
    assert_eq!(world.main_of(&remote), world.head_of(&clone));
    assert!(
        !elsewhere.exists(),
        "nothing was written under the shell's home"
    );
}

/// Issue 12, item 5: a stamp mismatch that comes from the registry says so.
#[test]
fn a_stamp_mismatch_from_another_homes_registry_names_both_registries() {
    let home = Home::file();
    fs::create_dir_all(home.home.join("registry")).unwrap();
    fs::write(home.home.join("registry/boards.toml"), "[boards]\n").unwrap();
    let (_, lane) = home.acquire("board-1", "row-1", "lane-a", &[]);
    let _daemon = home.daemon();
    let other = home.path("other-home");
    let ran = run(home
        .command(bin("row-fence-ask"))
        .env("ROW_FENCE_HOME", &other)
        .env("ROW_FENCE_SOCKET", home.socket())
        .arg("--descriptor")
        .arg(&lane));
    ran.expect(1, "row-fence: COULD NOT READ (stale_code)");
    let line = ran.verdict_line();
    assert!(line.contains("same build, other registry"), "{line}");
    assert!(
        line.contains(&format!("{}/registry", other.display())),
        "{line}"
    );
    assert!(
        line.contains(&format!("{}/registry", home.home.display())),
        "{line}"
    );
    assert!(!line.contains("runs other code"), "{line}");
}

/// The lines README.md shows install appending are the ones it appends.
#[test]
fn the_config_lines_install_appends_are_the_readmes() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let before = fs::read_to_string(clone.join(".git/config")).unwrap();
    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let readme = fs::read_to_string(crate::util::repo_root().join("README.md")).unwrap();
    let block = readme
        .split("```text\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .find(|block| block.contains("transport gate"))
        .expect("README.md shows the appended lines");
    assert_eq!(
        fs::read_to_string(clone.join(".git/config")).unwrap(),
        format!("{before}{block}\n")
    );
}
