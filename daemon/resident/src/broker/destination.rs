//! Where one broker connection's signature may be used (ARCHITECTURE.md, "Key broker"):
//! the rule of OpenSSH's destination constraints (`ssh-add -h`; `ssh-agent.c`'s
//! `process_ext_session_bind` and `identity_permitted`). An ssh client binds its agent
//! connection to the server it is logging in to with `session-bind@openssh.com`: the
//! server's host key, the session id, and the host's signature over the session id. The
//! broker signs only when that bind verified, named a host key on the daemon's allowlist
//! ([`Forges`]), was the connection's only one and not for forwarding, and the bytes to
//! sign are a publickey login ([`userauth`]) in that same session, as an allowed user. So
//! what it signs can only log in to the allowed forge, in the session the lane opened just
//! now: no sshsig, no commit signature, no login for later or for another host.

use super::forges::Forges;
use super::keys::fingerprint;
use super::userauth;
use ssh_agent_lib::proto::extension::SessionBind;
use ssh_key::public::KeyData;

/// The longest session id a bind may carry, as OpenSSH's agent (`AGENT_MAX_SID_LEN`): a
/// key exchange's hash is at most 64 bytes.
const MAX_SESSION_ID: usize = 128;

/// One connection's bind.
#[derive(Debug, Default)]
pub enum Destination {
    /// No bind yet: nothing is signed.
    #[default]
    Unbound,
    /// Bound to an allowed forge.
    Bound {
        /// The server's host key, verified.
        host_key: KeyData,
        /// Its `SHA256:` fingerprint.
        print: String,
        /// The session id it signed.
        session_id: Vec<u8>,
    },
    /// A bind was refused (or came second): nothing more is signed on this connection,
    /// as OpenSSH's agent refuses a connection whose bind failed.
    Spoiled {
        /// The host the refused bind verified, if its signature did.
        print: Option<String>,
    },
}

/// Why a bind or a signature was refused: the refusal's detail.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl Destination {
    /// Takes a `session-bind@openssh.com`; refused (and the connection spoiled): a second
    /// bind, a bind for forwarding, one whose signature does not verify, a session id
    /// over 128 bytes, a host key not on the allowlist.
    pub fn bind(&mut self, bind: &SessionBind, forges: &Forges) -> Result<(), Refused> {
        let verified = bind.verify_signature().is_ok();
        let print = verified.then(|| fingerprint(&bind.host_key));
        let refused = match (&*self, verified) {
            (Destination::Bound { .. } | Destination::Spoiled { .. }, _) => Some(
                "a second session-bind on one connection: one agent connection is one login"
                    .to_string(),
            ),
            (_, false) => Some(
                "a session-bind whose host signature does not verify: no host proved itself"
                    .to_string(),
            ),
            _ if bind.is_forwarding => {
                Some("a session-bind for agent forwarding: the broker is never forwarded".into())
            }
            _ if bind.session_id.is_empty() || bind.session_id.len() > MAX_SESSION_ID => {
                Some(format!(
                    "a session-bind with a session id of {} bytes",
                    bind.session_id.len()
                ))
            }
            _ => match forges.host(&bind.host_key) {
                Some(_) => None,
                None => Some(format!(
                    "a session-bind from host {}, whose key is not on the daemon's allowlist of forge host keys (--broker-forge-host-key)",
                    print.as_deref().unwrap_or("?")
                )),
            },
        };
        if let Some(why) = refused {
            let print = match &*self {
                Destination::Bound { print, .. } => Some(print.clone()),
                Destination::Spoiled { print } => print.clone(),
                Destination::Unbound => print,
            };
            *self = Destination::Spoiled { print };
            return Err(Refused(why));
        }
        *self = Destination::Bound {
            host_key: bind.host_key.clone(),
            print: print.unwrap_or_default(),
            session_id: bind.session_id.clone(),
        };
        Ok(())
    }

    /// Whether `data` may be signed with `key` on this connection: a publickey login in
    /// the bound session, as an allowed user, naming the bound host key if it names one.
    pub fn permits(&self, data: &[u8], key: &KeyData, forges: &Forges) -> Result<(), Refused> {
        let (host_key, session_id) = match self {
            Destination::Bound {
                host_key,
                session_id,
                ..
            } => (host_key, session_id),
            Destination::Unbound => {
                return Err(Refused(
                    "no session-bind@openssh.com on this connection: the broker signs only a login whose server proved its host key (OpenSSH 8.9 or later binds by itself)".into(),
                ));
            }
            Destination::Spoiled { .. } => {
                return Err(Refused(
                    "this connection's session-bind was refused: it signs nothing".into(),
                ));
            }
        };
        let login = userauth::parse(data, key).map_err(|e| Refused(e.0))?;
        if login.session_id != *session_id {
            return Err(Refused(
                "a login for another ssh session than the one this connection bound".into(),
            ));
        }
        if login.host_key.as_ref().is_some_and(|k| k != host_key) {
            return Err(Refused(
                "a login naming another host key than the one this connection bound".into(),
            ));
        }
        if !forges.allows_user(&login.user) {
            return Err(Refused(format!(
                "a login as user {:?}; the forge's user is {}",
                login.user,
                forges.users().join(" or ")
            )));
        }
        Ok(())
    }

    /// The host for the ledger: the fingerprint of the host key a bind verified (never a
    /// name the lane could choose), else `host unknown`.
    pub fn host(&self) -> String {
        match self {
            Destination::Bound { print, .. } => format!("host {print}"),
            Destination::Spoiled { print: Some(print) } => format!("host {print} (refused)"),
            Destination::Spoiled { print: None } | Destination::Unbound => {
                "host unknown".to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::userauth::{PUBLICKEY, PUBLICKEY_HOSTBOUND, login};
    use ssh_key::PrivateKey;
    use ssh_key::private::Ed25519Keypair;

    fn host(seed: u8) -> PrivateKey {
        PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
    }

    fn bind_of(host: &PrivateKey, sid: &[u8], forwarding: bool) -> SessionBind {
        SessionBind {
            host_key: host.public_key().key_data().clone(),
            session_id: sid.to_vec(),
            signature: crate::broker::keys::sign(host, sid, 0).unwrap(),
            is_forwarding: forwarding,
        }
    }

    fn forges(allowed: &PrivateKey) -> Forges {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("host.pub");
        std::fs::write(&file, allowed.public_key().to_openssh().unwrap()).unwrap();
        Forges::load(&[file], &[]).unwrap()
    }

    #[test]
    fn only_a_login_in_the_session_a_verified_allowed_host_bound_is_permitted() {
        let forge = host(1);
        let forges = forges(&forge);
        let lane_key = host(9).public_key().key_data().clone();
        let forge_key = forge.public_key().key_data().clone();
        let mut dest = Destination::default();
        let sid = b"session one";
        let ok = login(sid, "git", PUBLICKEY, &lane_key, None);
        assert!(dest.permits(&ok, &lane_key, &forges).is_err(), "unbound");
        assert_eq!(dest.host(), "host unknown");
        dest.bind(&bind_of(&forge, sid, false), &forges).unwrap();
        assert!(dest.host().starts_with("host SHA256:"));
        assert_eq!(dest.permits(&ok, &lane_key, &forges), Ok(()));
        let hostbound = login(sid, "git", PUBLICKEY_HOSTBOUND, &lane_key, Some(&forge_key));
        assert_eq!(dest.permits(&hostbound, &lane_key, &forges), Ok(()));
        let other_host = host(2).public_key().key_data().clone();
        for (what, data) in [
            (
                "another session",
                login(b"session two", "git", PUBLICKEY, &lane_key, None),
            ),
            (
                "another user",
                login(sid, "root", PUBLICKEY, &lane_key, None),
            ),
            (
                "another host key in the login",
                login(
                    sid,
                    "git",
                    PUBLICKEY_HOSTBOUND,
                    &lane_key,
                    Some(&other_host),
                ),
            ),
            ("chosen bytes", b"release v9 approved".to_vec()),
        ] {
            assert!(dest.permits(&data, &lane_key, &forges).is_err(), "{what}");
        }
        // A second bind, even of the same host, spoils the connection.
        assert!(dest.bind(&bind_of(&forge, sid, false), &forges).is_err());
        assert!(dest.permits(&ok, &lane_key, &forges).is_err());
    }

    #[test]
    fn a_bind_from_an_unlisted_or_unverified_host_or_for_forwarding_is_refused() {
        let forge = host(1);
        let forges = forges(&forge);
        let made_up = host(3);
        let mut dest = Destination::default();
        let why = dest
            .bind(&bind_of(&made_up, b"sid", false), &forges)
            .unwrap_err();
        let print = fingerprint(made_up.public_key().key_data());
        assert!(why.0.contains(&print), "{}", why.0);
        assert_eq!(dest.host(), format!("host {print} (refused)"));
        // A signature by another key than the one named: no host proved itself, and the
        // named key is never put in the ledger.
        let mut forged = bind_of(&made_up, b"sid", false);
        forged.host_key = forge.public_key().key_data().clone();
        let mut dest = Destination::default();
        assert!(dest.bind(&forged, &forges).is_err());
        assert_eq!(dest.host(), "host unknown");
        let mut dest = Destination::default();
        assert!(dest.bind(&bind_of(&forge, b"sid", true), &forges).is_err());
        let mut dest = Destination::default();
        assert!(
            dest.bind(&bind_of(&forge, &[7; 129], false), &forges)
                .is_err()
        );
    }
}
