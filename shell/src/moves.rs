//! Where `cd`, `pushd` and `popd` lead: the state after the move succeeded and after it
//! failed, from the directories, the variables (`HOME`, `OLDPWD`, `CDPATH`) and the
//! `pushd` stack the walk knows. A move to a directory that does not exist now may fail
//! and leave the shell where it was, so both states go on.

use crate::dir::Dir;
use crate::effect::Move;
use crate::state::{State, resolve, resolve_physical};
use crate::words::Value;
use std::path::Path;

/// `cd`, `pushd`, `popd`: the states after success and after failure. `origin`: the
/// hook's working directory (which exists); `home`: the hook's `$HOME`; `cdpath`: the
/// hook's environment sets `CDPATH`.
pub fn moved(
    m: Move,
    state: &State,
    origin: &Path,
    home: Option<&str>,
    cdpath: bool,
) -> (State, State) {
    let mut ok = state.clone();
    let target = |value: &Value, physical: bool, state: &State| -> Vec<Dir> {
        match value {
            Value::Literal(t)
                if (cdpath
                    || state.vars.contains_key("CDPATH")
                    || state.vars.contains_key("cdpath"))
                    && !t.starts_with(['/', '.']) =>
            {
                vec![Dir::Unknown(format!("`cd {t}` searches CDPATH"))]
            }
            other => {
                // A relative move from a directory that does not exist yet (made by the
                // command, if the move succeeds) leads somewhere only the run decides.
                let from: Vec<Dir> = state
                    .dirs
                    .iter()
                    .map(|d| match d {
                        Dir::Known(p)
                            if !other.text().starts_with('/') && p != origin && !p.is_dir() =>
                        {
                            Dir::Unknown(format!("{}, which does not exist yet", p.display()))
                        }
                        known => known.clone(),
                    })
                    .collect();
                if physical || state.physical {
                    resolve_physical(&from, other)
                } else {
                    resolve(&from, other)
                }
            }
        }
    };
    // `cd` alone goes to `$HOME` and `cd -` to `$OLDPWD`: the values assigned in the
    // command when it assigns them.
    let named = |name: &str| -> Option<Vec<Dir>> {
        state.vars.get(name).map(|v| match v {
            Some(path) => resolve(&state.dirs, &Value::Literal(path.clone())),
            None => vec![Dir::Unknown(format!(
                "`${name}` is only known when it runs"
            ))],
        })
    };
    match m {
        Move::Cd { to: None, .. } => {
            let home = named("HOME").unwrap_or_else(|| {
                vec![match home {
                    Some(home) => Dir::Known(home.into()),
                    None => Dir::Unknown("`cd` goes to $HOME, which is not set".into()),
                }]
            });
            ok.move_to(home);
        }
        Move::Cd {
            to: Some(Value::Literal(dash)),
            ..
        } if dash == "-" => {
            let back = named("OLDPWD").unwrap_or_else(|| state.oldpwd.clone());
            ok.move_to(back);
        }
        Move::Cd {
            to: Some(value),
            physical,
        } => {
            let to = target(&value, physical, state);
            ok.move_to(to);
        }
        Move::Pushd {
            to: Some(value),
            physical,
        } => {
            let to = target(&value, physical, state);
            if let Some(stack) = ok.stack.as_mut() {
                stack.push(state.dirs.clone());
            }
            ok.move_to(to);
        }
        Move::Pushd { to: None, .. } => ok.move_to(vec![Dir::Unknown(
            "`pushd` swaps to the directory stack".into(),
        )]),
        Move::AutoCd(value) => {
            let to = target(&value, false, state);
            ok.move_to(to);
            ok.vars.remove("OLDPWD");
            return (ok, state.clone());
        }
        Move::Popd => {
            let top = ok.stack.as_mut().and_then(Vec::pop);
            let to = top.unwrap_or_else(|| {
                vec![Dir::Unknown(
                    "`popd` returns to the agent shell's directory stack".into(),
                )]
            });
            ok.move_to(to);
        }
    }
    // The shell keeps `OLDPWD` itself from here on.
    ok.vars.remove("OLDPWD");
    // A move to directories that all exist now succeeds; otherwise it may fail and
    // leave the shell where it was.
    let certain = ok
        .dirs
        .iter()
        .all(|d| matches!(d, Dir::Known(p) if p.is_dir()));
    let failed = if certain { ok.clone() } else { state.clone() };
    (ok, failed)
}
