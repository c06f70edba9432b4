//! The daemon's own uid's changes to the key broker, asked on the daemon's control socket
//! (`row-fence keys add|list|remove`, and `lane add|remove`'s reload): ARCHITECTURE.md,
//! "Key broker". Only the daemon's own uid may ask, whatever `ROW_FENCE_ALLOWED_UIDS`
//! lets ask: the peer's uid comes from the socket. Every change and every refused
//! attempt is appended to the audit log (fingerprints, never key material), and a key
//! change whose record cannot be appended is not made.

use super::Shared;
use super::keys::{self, ChangeError};
use crate::audit::{self, AuditRecord};
use crate::sync::{lock, read, write};
use row_fence_contract::paths;
use row_fence_contract::protocol::{Answer, KeysAdd, Op, PROTOCOL_VERSION};
use zeroize::Zeroize;

/// True for the operations answered here.
pub fn is_admin(op: &Op) -> bool {
    matches!(
        op,
        Op::KeysAdd(_) | Op::KeysList | Op::KeysRemove { .. } | Op::LanesReload
    )
}

/// Answers an operation [`is_admin`] for the peer `uid`; `shared` is `None` when the
/// broker is off. The key text in `op` is wiped before this returns.
pub fn answer(shared: Option<&Shared>, op: Op, uid: u32) -> Answer {
    let act = match &op {
        Op::KeysAdd(_) => "keys add",
        Op::KeysList => "keys list",
        Op::KeysRemove { .. } => "keys remove",
        _ => "lanes reload",
    };
    let answer = decide(shared, op, uid, act);
    if let (Some(error), Some(shared)) = (&answer.error, shared)
        && act != "keys list"
    {
        // The refused attempt is recorded; when the record itself failed, the answer
        // already says so.
        if let Some(unrecorded) = shared.refused_audit.admit(uid) {
            let mut record = AuditRecord::new(act, uid, false);
            record.detail = if unrecorded == 0 {
                error.clone()
            } else {
                format!(
                    "{error} (and {unrecorded} earlier refused attempts by uid {uid} not recorded)"
                )
            };
            let _ = audit::append(&shared.home, &record);
        }
    }
    answer
}

fn decide(shared: Option<&Shared>, mut op: Op, uid: u32, act: &str) -> Answer {
    let own = paths::euid();
    let Some(shared) = shared else {
        wipe(&mut op);
        return failed("the key broker is off on this daemon (row-fence-resident --broker-socket)");
    };
    if uid != own {
        wipe(&mut op);
        return failed(&format!(
            "{act}: only the daemon's own uid {own} may change or list the key broker's keys and lanes; uid {uid} asked"
        ));
    }
    match op {
        Op::KeysAdd(mut add) => {
            let answer = add_key(shared, &add, uid);
            add.key.zeroize();
            answer
        }
        Op::KeysList => listed(shared),
        Op::KeysRemove { fingerprint } => remove_key(shared, &fingerprint, uid),
        _ => match shared.reload_lanes() {
            Ok(lanes) => Answer {
                v: PROTOCOL_VERSION,
                lanes: Some(lanes),
                detail: format!(
                    "{lanes} lane bindings read from {}",
                    shared.lanes_path.display()
                ),
                ..Answer::default()
            },
            Err(e) => failed(&format!("{e}; no uid is bound until the file is fixed")),
        },
    }
}

fn add_key(shared: &Shared, add: &KeysAdd, uid: u32) -> Answer {
    let _changing = lock(&shared.changing);
    let key = match keys::parse(&add.key) {
        Ok(key) => key,
        Err(reason) => return failed(&format!("the key: {reason}")),
    };
    let print = keys::fingerprint(key.public_key().key_data());
    if read(&shared.held).holds(&print) {
        return failed(&ChangeError::Held(print).to_string());
    }
    let kind = if add.read { "read" } else { "push" };
    let mut record = AuditRecord::new("keys add", uid, true);
    record.fingerprint = Some(print.clone());
    record.kind = Some(kind.into());
    record.detail = match &add.lane {
        Some(lane) => format!("{} {kind} key of lane {lane}", key.algorithm()),
        None => format!("{} {kind} key", key.algorithm()),
    };
    if let Err(e) = audit::append(&shared.home, &record) {
        return failed(&format!(
            "the audit log cannot be written ({e}); the key was not added"
        ));
    }
    if let Some(lane) = &add.lane
        && let Err(e) = row_fence_contract::descriptor::validate_lane(lane)
    {
        return failed(&format!("the key's lane: {e}"));
    }
    if let Err(e) = write(&shared.held).add_key(key, add.read, add.lane.clone()) {
        return failed(&e.to_string());
    }
    tracing::info!(fingerprint = %print, kind, "the key broker holds a new key");
    Answer {
        detail: format!("added {kind} key {print}"),
        ..listed(shared)
    }
}

fn remove_key(shared: &Shared, print: &str, uid: u32) -> Answer {
    let _changing = lock(&shared.changing);
    if !read(&shared.held).holds(print) {
        return failed(&ChangeError::NotHeld(print.to_string()).to_string());
    }
    let mut record = AuditRecord::new("keys remove", uid, true);
    record.fingerprint = Some(print.to_string());
    if let Err(e) = audit::append(&shared.home, &record) {
        return failed(&format!(
            "the audit log cannot be written ({e}); the key was not removed"
        ));
    }
    if let Err(e) = write(&shared.held).remove(print) {
        return failed(&e.to_string());
    }
    tracing::info!(fingerprint = %print, "the key broker dropped a key");
    Answer {
        detail: format!("removed {print}"),
        ..listed(shared)
    }
}

fn listed(shared: &Shared) -> Answer {
    Answer {
        v: PROTOCOL_VERSION,
        keys: Some(read(&shared.held).listed()),
        ..Answer::default()
    }
}

fn failed(why: &str) -> Answer {
    Answer {
        v: PROTOCOL_VERSION,
        error: Some(why.to_string()),
        ..Answer::default()
    }
}

/// Wipes the key text of an operation that is not carried out.
fn wipe(op: &mut Op) {
    if let Op::KeysAdd(add) = op {
        add.key.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::BrokerStats;
    use crate::broker::keys::Held;
    use crate::broker::lanes::Lanes;
    use std::sync::{Mutex, RwLock};

    fn shared(home: &std::path::Path) -> Shared {
        Shared {
            held: RwLock::new(Held::default()),
            lanes: RwLock::new(Lanes::default()),
            lanes_path: home.join("lanes.toml"),
            lanes_named: false,
            socket: home.join("agent.sock"),
            home: home.to_path_buf(),
            stats: BrokerStats::default(),
            changing: Mutex::new(()),
            refused_audit: Default::default(),
            forges: Default::default(),
            renew_max_ms: crate::broker::lease::DEFAULT_RENEW_MAX_MS,
            daemon_pushes: Default::default(),
        }
    }

    fn key_text(dir: &std::path::Path) -> String {
        let path = dir.join("k");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(made.success());
        std::fs::read_to_string(path).unwrap()
    }

    fn add(text: &str) -> Op {
        Op::KeysAdd(KeysAdd {
            key: text.to_string(),
            read: false,
            lane: None,
        })
    }

    #[test]
    fn only_the_daemons_own_uid_changes_keys_and_every_change_is_audited() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let text = key_text(dir.path());
        let own = paths::euid();
        let other = own.wrapping_add(1);
        let refused = answer(Some(&shared), add(&text), other);
        assert!(refused.error.unwrap().contains("only the daemon's own uid"));
        assert!(read(&shared.held).push.is_empty());
        let listed = answer(Some(&shared), Op::KeysList, other);
        assert!(listed.keys.is_none() && listed.error.is_some());
        let added = answer(Some(&shared), add(&text), own);
        let keys = added.keys.expect("the keys after the change");
        assert_eq!(keys.len(), 1);
        let print = keys[0].fingerprint.clone();
        let removed = answer(
            Some(&shared),
            Op::KeysRemove {
                fingerprint: print.clone(),
            },
            other,
        );
        assert!(removed.error.is_some());
        assert_eq!(read(&shared.held).push.len(), 1);
        let log = audit::read(dir.path()).unwrap();
        let acts: Vec<(&str, bool)> = log.iter().map(|r| (r.act.as_str(), r.ok)).collect();
        assert_eq!(
            acts,
            [
                ("keys add", false),
                ("keys add", true),
                ("keys remove", false)
            ]
        );
        assert_eq!(log[1].fingerprint.as_deref(), Some(print.as_str()));
        let text_on_disk = std::fs::read_to_string(audit::path(dir.path())).unwrap();
        assert!(!text_on_disk.contains("PRIVATE KEY"));
    }

    #[test]
    fn a_uid_refused_in_a_loop_fills_no_disk_and_the_owners_changes_are_still_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let text = key_text(dir.path());
        let other = paths::euid().wrapping_add(1);
        for _ in 0..100 {
            assert!(answer(Some(&shared), add(&text), other).error.is_some());
        }
        let added = answer(Some(&shared), add(&text), paths::euid());
        assert!(added.error.is_none(), "{:?}", added.error);
        let log = audit::read(dir.path()).unwrap();
        let refused = log.iter().filter(|r| !r.ok && r.by_uid == other).count();
        assert_eq!(refused, audit::REFUSED_PER_WINDOW as usize);
        assert_eq!(log.iter().filter(|r| r.ok).count(), 1);
    }

    #[test]
    fn no_broker_changes_nothing_and_says_so() {
        let answer = answer(None, Op::KeysList, paths::euid());
        assert!(answer.error.unwrap().contains("broker is off"));
    }
}
