//! Git's own layer in every place git looks: the pre-push hook in every worktree's hooks
//! directory (a relative `core.hooksPath` included), worktrees added after install,
//! submodules (nested ones too) that resolve their superproject's descriptor, a push that
//! names its git dir from elsewhere, a rollback that gives the config back byte for byte,
//! and a hook that asks the daemon's own home and asker from any shell.

use crate::gated::{World, allowed, refused};
use crate::util::{Home, bin, run};
use row_fence_install::git_hook::is_fence;
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
    let foreach = world.git(
        &s.top,
        &[
            "submodule",
            "foreach",
            "--recursive",
            "git push --no-verify origin main",
        ],
    );
    assert_ne!(foreach.code, 0, "{}", foreach.stderr);
    assert!(foreach.stderr.contains(REFUSED), "{}", foreach.stderr);
    for (dir, remote) in [(&sub, &s.remotes[1]), (&inner, &s.remotes[2])] {
        assert_ne!(
            world.main_of(remote),
            world.head_of(dir),
            "{}",
            dir.display()
        );
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

/// The hook carries the daemon's asker, home and socket.
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

/// A stamp mismatch that comes from the registry says so.
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

/// The lines docs/git-layer.md shows install appending are the ones it appends.
#[test]
fn the_config_lines_install_appends_are_the_ones_the_docs_show() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let before = fs::read_to_string(clone.join(".git/config")).unwrap();
    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let block = crate::util::doc_blocks("text")
        .into_iter()
        .find(|block| block.contains("transport gate"))
        .expect("the docs show the appended lines");
    assert_eq!(
        fs::read_to_string(clone.join(".git/config")).unwrap(),
        format!("{before}{block}\n")
    );
}

/// A config without a final line break, then a section `git config` appends after the
/// gate's lines: rollback took out the line break install had added with its lines, and
/// the user's last line and the new section's header ran together (`st = status[user]`),
/// so `user.name` became `alias.name`.
#[test]
fn rollback_keeps_a_section_git_appended_after_the_gate_on_a_line_of_its_own() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let config_path = clone.join(".git/config");
    let mut config = fs::read_to_string(&config_path).unwrap();
    config.push_str("[alias]\n\tst = status");
    fs::write(&config_path, &config).unwrap();
    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    world.git_ok(&clone, &["config", "user.name", "someone"]);

    let back = world.install(&clone, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert_eq!(
        fs::read_to_string(&config_path).unwrap(),
        format!("{config}\n[user]\n\tname = someone\n")
    );
    assert_eq!(
        world.git_ok(&clone, &["config", "alias.st"]).trim(),
        "status"
    );
    assert_eq!(
        world.git_ok(&clone, &["config", "user.name"]).trim(),
        "someone"
    );
}

/// Rollback gives back, byte for byte, a config git reads as written: CRLF line ends,
/// an include, sections with subsections, comments of both kinds, a value continued on
/// the next line, no final line break; and keeps what `git config` changed in between.
#[test]
fn rollback_gives_back_an_odd_config_byte_for_byte_with_the_edits_made_since() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let git_dir = clone.join(".git");
    fs::write(
        git_dir.join("extra.inc"),
        "[credential]\n\thelper = included\n",
    )
    .unwrap();
    let config_path = git_dir.join("config");
    let mut config = fs::read_to_string(&config_path).unwrap();
    config.push_str(
        "; a comment\r\n[include]\r\n\tpath = extra.inc\r\n[remote \"up\"]\r\n\turl = ssh://host/x.git # trailing\r\n[url \"ssh://host/\"]\r\n\tinsteadOf = lane:\r\n[alias]\r\n\tlong = \"!echo \\\r\n  continued\"\r\n# the end, no line break",
    );
    fs::write(&config_path, &config).unwrap();
    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let helpers = world.git_ok(&clone, &["config", "--get-all", "credential.helper"]);
    assert!(
        helpers.trim_end().ends_with("\nincluded"),
        "the included helper runs after the gate's: {helpers}"
    );
    world.git_ok(&clone, &["config", "alias.long", "changed"]);
    world.git_ok(&clone, &["config", "--unset", "remote.up.url"]);
    // Git writes a new include under the last [include]: the gate's.
    fs::write(
        git_dir.join("more.inc"),
        "[user]\n\temail = more@example.invalid\n",
    )
    .unwrap();
    world.git_ok(&clone, &["config", "--add", "include.path", "more.inc"]);

    let back = world.install(&clone, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    let after = fs::read_to_string(&config_path).unwrap();
    let mut expected = config.clone();
    // Git drops a section it emptied.
    expected = expected.replace(
        "[remote \"up\"]\r\n\turl = ssh://host/x.git # trailing\r\n",
        "",
    );
    expected = expected.replace(
        "\tlong = \"!echo \\\r\n  continued\"\r\n",
        "\tlong = changed\n",
    );
    expected.push_str("\n[include]\n\tpath = more.inc\n");
    assert_eq!(after, expected);
    assert_eq!(
        world.git_ok(&clone, &["config", "user.email"]).trim(),
        "more@example.invalid"
    );
    assert_eq!(
        world.git_ok(&clone, &["config", "--get-all", "credential.helper"]),
        "included\n"
    );
}

/// A config kept elsewhere and symlinked (a dotfiles habit): git writes through the
/// link; install replaced the link with a file, and rollback left that file.
#[test]
fn a_symlinked_config_stays_a_symlink_and_its_file_gets_the_gate_and_gives_it_back() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    let kept = world.home.path("kept-config");
    let link = clone.join(".git/config");
    fs::rename(&link, &kept).unwrap();
    std::os::unix::fs::symlink(&kept, &link).unwrap();
    let before = fs::read(&kept).unwrap();

    let installed = world.install(&clone, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        world
            .git_ok(&clone, &["config", "core.sshCommand"])
            .contains("--git-ssh"),
        "git runs the gate through the link"
    );
    world.bind(&clone.join(".git"), "row-1", "lane-a");
    let _daemon = world.home.daemon();
    world.take_over("row-1", "lane-b");
    let push = world.git(&clone, &["push", "--no-verify", "origin", "main"]);
    refused(&push, "", &world.main_of(&remote), REFUSED);

    let back = world.install(&clone, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&kept).unwrap(), before, "byte for byte");
}

/// A linked worktree locked on a drive that is not mounted: git keeps it, and it shares
/// the repository's hooks directory and config. Install refused everything and told the
/// user to prune it; now it installs, and only a relative `core.hooksPath` (a directory
/// inside the missing worktree) is refused.
#[test]
fn a_locked_worktree_on_a_missing_drive_does_not_block_install_unless_its_hooks_went_with_it() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let main = world.clone(&world.ssh_url(&remote), "main");
    let away = world.worktree(&main, "away");
    world.git_ok(
        &main,
        &[
            "worktree",
            "lock",
            "--reason",
            "usb drive",
            away.to_str().unwrap(),
        ],
    );
    fs::rename(&away, world.home.path("unmounted")).unwrap();

    let installed = world.install(&main, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    assert!(is_fence(&hook_in(&main.join(".git/hooks"))));
    let doctor = world
        .home
        .cli(&["doctor", "--json", "--repo", main.to_str().unwrap()]);
    assert_eq!(doctor.code, 0, "{}{}", doctor.stdout, doctor.stderr);
    let back = world.install(&main, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);

    world.git_ok(&main, &["config", "core.hooksPath", ".husky"]);
    let config = fs::read(main.join(".git/config")).unwrap();
    let refused_install = world.install(&main, &[]);
    assert_eq!(refused_install.code, 1, "{}", refused_install.stderr);
    assert!(
        refused_install.stderr.contains(&format!(
            "the worktree {} is gone and its core.hooksPath is relative",
            away.display()
        )) && refused_install.stderr.contains("it is locked"),
        "{}",
        refused_install.stderr
    );
    assert_eq!(fs::read(main.join(".git/config")).unwrap(), config);
}

/// Doctor's report goes to terminals and logs: a token in a push URL is shown redacted.
/// A remote with credentials in its URL is gated by nothing, a remote handed to a helper
/// of its own (`remote.<name>.vcs`) is not gated, and what this shell exports that git
/// runs instead of the gate is named. A gate older than the config is a note.
#[test]
fn doctor_redacts_tokens_and_names_foreign_helpers_shell_overrides_and_a_stale_gate() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    assert_eq!(world.install(&clone, &[]).code, 0);
    let repo = clone.to_str().unwrap();
    let clean = world.home.cli(&["doctor", "--repo", repo]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    assert!(!clean.stdout.contains("note:"), "{}", clean.stdout);

    world.git_ok(
        &clone,
        &["remote", "add", "tok", "https://example.invalid/r.git"],
    );
    world.git_ok(
        &clone,
        &[
            "config",
            "remote.tok.pushurl",
            "https://x-access-token:ghp_s3cret@example.invalid/r.git",
        ],
    );
    world.git_ok(
        &clone,
        &["remote", "add", "hg", "https://example.invalid/h"],
    );
    world.git_ok(&clone, &["config", "remote.hg.vcs", "hg"]);
    world.git_ok(&clone, &["config", "core.sshCommand", "ssh -i newkey"]);
    let doctor = run(world
        .command(bin("row-fence"), &clone)
        .env("GIT_SSH_COMMAND", "ssh -i deploy")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "credential.helper")
        .env("GIT_CONFIG_VALUE_0", "")
        .args(["doctor", "--json"]));
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(!doctor.stdout.contains("ghp_s3cret"), "{}", doctor.stdout);
    let json = doctor.json();
    let repo_report = &json["repositories"][0];
    let remotes = repo_report["remotes"].as_array().unwrap();
    let tok = remotes.iter().find(|r| r["name"] == "tok").unwrap();
    assert_eq!(
        tok["url"],
        "https://x-access-token:<redacted>@example.invalid/r.git"
    );
    assert_eq!(tok["gated_by"], "nothing");
    let hg = remotes.iter().find(|r| r["name"] == "hg").unwrap();
    assert_eq!(
        (&hg["transport"], &hg["gated_by"]),
        (&"hg".into(), &"nothing".into())
    );
    let environment: Vec<String> = json["environment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert!(
        environment.iter().any(|p| p.contains("GIT_SSH_COMMAND"))
            && environment
                .iter()
                .any(|p| p.contains("sets credential.helper")),
        "{environment:?}"
    );
    assert!(
        repo_report["notes"][0]
            .as_str()
            .unwrap()
            .contains("changed since install"),
        "{repo_report}"
    );
    assert_eq!(
        json["problems"],
        repo_report["problems"].as_array().unwrap().len() + 2
    );
    let text = world.home.cli(&["doctor", "--repo", repo]);
    assert!(!text.stdout.contains("ghp_s3cret"), "{}", text.stdout);
    assert!(
        text.stdout.contains("note: ") && text.stdout.contains("rerun row-fence install git-hook"),
        "{}",
        text.stdout
    );
}

/// A repository moved (`mv`) after install: the gate named a git dir that was not there,
/// and every push over ssh, from a row-bound lane or an unbound one, failed COULD NOT
/// READ. Git runs the gate from the moved config, so where git runs is the repository:
/// the lane's verdict, and an unbound repository pushes. From elsewhere it still fails
/// closed, and doctor says the gate wants a reinstall.
#[test]
fn a_repository_moved_after_install_is_judged_where_git_runs_it() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let clone = world.clone(&world.ssh_url(&remote), "lane-a");
    assert_eq!(world.install(&clone, &[]).code, 0);
    world.bind(&clone.join(".git"), "row-1", "lane-a");
    let free_remote = world.bare("free.git");
    let free = world.clone(&world.ssh_url(&free_remote), "free");
    assert_eq!(world.install(&free, &[]).code, 0);
    let _daemon = world.home.daemon();
    let moved = world.home.path("moved/lane-a");
    let free_moved = world.home.path("moved/free");
    fs::create_dir_all(moved.parent().unwrap()).unwrap();
    fs::rename(&clone, &moved).unwrap();
    fs::rename(&free, &free_moved).unwrap();

    allowed(&world.git(&moved, &["push", "--no-verify", "origin", "main"]));
    assert_eq!(world.main_of(&remote), world.head_of(&moved));
    let push = world.git(&free_moved, &["push", "--no-verify", "origin", "main"]);
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: UNFENCED"),
        "{}",
        push.stderr
    );
    assert_eq!(world.main_of(&free_remote), world.head_of(&free_moved));

    world.take_over("row-1", "lane-b");
    world.commit(&moved, "after the takeover");
    let before = world.main_of(&remote);
    let push = world.git(&moved, &["push", "--no-verify", "origin", "main"]);
    refused(&push, &before, &world.main_of(&remote), REFUSED);
    let elsewhere = world.home.path("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let flag = format!("--git-dir={}", moved.join(".git").display());
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
    let doctor = world
        .home
        .cli(&["doctor", "--repo", moved.to_str().unwrap()]);
    assert!(
        doctor.stdout.contains("note: ") && doctor.stdout.contains("the repository moved"),
        "{}",
        doctor.stdout
    );
}
