//! The broker's keys: OpenSSH private keys held only in the daemon's memory
//! (ARCHITECTURE.md, "Key broker"), loaded at start from files (`--broker-key`) or at run
//! time by the operator (`row-fence keys add`, over the control socket). A key file must be
//! the daemon's own and private to it (no group or other bits), the way OpenSSH refuses a
//! private key others can read: a key a lane's uid could read would be a push route the
//! broker never sees. Nothing here writes a key anywhere; the parsed keys wipe themselves
//! when dropped (ssh-key zeroizes private key material), and the text's bytes are wiped
//! once parsed. Ed25519 and RSA keys are held (an allowlist of algorithms); RSA signs with
//! SHA-2 only, as the client's flags ask.

use ssh_agent_lib::proto::{Identity, PublicCredential};
use ssh_key::public::KeyData;
use ssh_key::{Algorithm, HashAlg, PrivateKey, Signature};
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// A key file is refused above this size: an OpenSSH Ed25519 key is under 1 KiB, an RSA
/// 8192-bit one under 7 KiB.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The agent protocol's sign flag asking for an `rsa-sha2-256` signature.
pub const RSA_SHA2_256: u32 = 2;

/// The agent protocol's sign flag asking for an `rsa-sha2-512` signature.
pub const RSA_SHA2_512: u32 = 4;

/// Why a key file was not loaded; the daemon does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The file could not be opened, stat'ed or read.
    #[error("push key {path}: {source}")]
    Read {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not the daemon's own, or others may read or write it.
    #[error(
        "push key {path}: owned by uid {owner} with mode {mode:03o}; it must be owned by the daemon's uid {uid} with no group or other bits (chmod 600)"
    )]
    NotPrivate {
        /// The key file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode bits.
        mode: u32,
        /// The daemon's uid.
        uid: u32,
    },
    /// The file is too large to be a key.
    #[error("push key {path}: over {MAX_KEY_FILE_BYTES} bytes, not a private key")]
    TooLarge {
        /// The key file.
        path: PathBuf,
    },
    /// The file is not an OpenSSH private key, is encrypted, or is of an algorithm the
    /// broker does not hold.
    #[error("push key {path}: {reason}")]
    Unusable {
        /// The key file (`-` for a key sent by `row-fence keys add`).
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        reason: UnusableKey,
    },
    /// One key is given both as a push key and as a read key: read keys are signed for
    /// every peer, so it would push for a refused lane.
    #[error(
        "key {fingerprint} is given both as a push key and as a read key; a read key is signed for every lane, so it must be a key the forge lets only fetch"
    )]
    BothKinds {
        /// The key's `SHA256:…` fingerprint.
        fingerprint: String,
    },
}

/// What changing the held keys at run time answers.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// The text is no key the broker can hold (its reason).
    #[error(transparent)]
    Unusable(#[from] UnusableKey),
    /// The key is held already (as a push key or a read key).
    #[error("the broker holds {0} already")]
    Held(String),
    /// No key with this fingerprint is held.
    #[error("the broker holds no key {0}")]
    NotHeld(String),
}

/// A set of keys the broker signs with: the push keys (ALLOWED lanes only) or the read
/// keys (every peer). A push key may belong to one lane (`--broker-lane-key`, `keys add
/// --lane`): it is listed and signed for that lane's uid only, so a forge that maps each
/// key to its lane (a forced command setting `ROW_FENCE_LANE`) knows who pushes
/// (ARCHITECTURE.md, "Forge hook"). A key of no lane is any ALLOWED lane's.
#[derive(Default)]
pub struct PushKeys {
    keys: Vec<PrivateKey>,
    /// `keys[i]`'s lane, if it belongs to one.
    lanes: Vec<Option<String>>,
}

/// Everything the broker holds, changed only by the daemon's own uid.
#[derive(Default)]
pub struct Held {
    /// Signed with only for a lane judged ALLOWED at the moment of signing.
    pub push: PushKeys,
    /// Signed with for every peer (fetch only, as the forge enforces).
    pub read: PushKeys,
}

impl Held {
    /// The keys loaded at start; a key that is both a push and a read key is refused, as
    /// [`Held::add`] refuses it at run time.
    pub fn loaded(push: PushKeys, read: PushKeys) -> Result<Held, KeyError> {
        let held = Held {
            push,
            read: PushKeys::default(),
        };
        if let Some(both) = read
            .keys
            .iter()
            .map(|key| fingerprint(key.public_key().key_data()))
            .find(|print| held.holds(print))
        {
            return Err(KeyError::BothKinds { fingerprint: both });
        }
        Ok(Held { read, ..held })
    }

    /// Adds a key parsed from OpenSSH text; one held already (in either set) is refused,
    /// so a key is never both a push and a read key. Returns its fingerprint.
    pub fn add(&mut self, text: &str, read: bool) -> Result<String, ChangeError> {
        let key = parse(text).map_err(ChangeError::Unusable)?;
        self.add_key(key, read, None)
    }

    /// [`Held::add`] of a parsed key, a push key of `lane` when one is named (a read key
    /// belongs to no lane: it is signed for every peer).
    pub fn add_key(
        &mut self,
        key: PrivateKey,
        read: bool,
        lane: Option<String>,
    ) -> Result<String, ChangeError> {
        let print = fingerprint(key.public_key().key_data());
        if self.holds(&print) {
            return Err(ChangeError::Held(print));
        }
        if read && lane.is_some() {
            return Err(ChangeError::Unusable(UnusableKey::ReadKeyForLane));
        }
        let set = if read { &mut self.read } else { &mut self.push };
        set.keys.push(key);
        set.lanes.push(lane);
        Ok(print)
    }

    /// True when a key with this fingerprint is held (push or read).
    pub fn holds(&self, print: &str) -> bool {
        [&self.push, &self.read]
            .iter()
            .flat_map(|set| set.keys.iter())
            .any(|key| fingerprint(key.public_key().key_data()) == print)
    }

    /// Drops the key whose fingerprint is `print` (its memory is wiped as it drops);
    /// returns whether it was a read key.
    pub fn remove(&mut self, print: &str) -> Result<bool, ChangeError> {
        for (set, read) in [(&mut self.push, false), (&mut self.read, true)] {
            if let Some(i) = set
                .keys
                .iter()
                .position(|key| fingerprint(key.public_key().key_data()) == print)
            {
                set.keys.remove(i);
                set.lanes.remove(i);
                return Ok(read);
            }
        }
        Err(ChangeError::NotHeld(print.to_string()))
    }

    /// What `keys list` shows: fingerprints, algorithms, comments, push or read.
    pub fn listed(&self) -> Vec<row_fence_contract::protocol::BrokerKey> {
        let listed = |set: &PushKeys, kind: &str| -> Vec<row_fence_contract::protocol::BrokerKey> {
            set.keys
                .iter()
                .zip(&set.lanes)
                .map(|(key, lane)| row_fence_contract::protocol::BrokerKey {
                    fingerprint: fingerprint(key.public_key().key_data()),
                    algorithm: key.algorithm().as_str().to_string(),
                    comment: key.comment().to_string(),
                    kind: kind.to_string(),
                    lane: lane.clone(),
                })
                .collect()
        };
        let mut all = listed(&self.push, "push");
        all.extend(listed(&self.read, "read"));
        all
    }
}

impl PushKeys {
    /// Loads every file in `paths`; any file that is not a private, unencrypted Ed25519
    /// OpenSSH key of the daemon's own uid refuses the whole load.
    pub fn load(paths: &[PathBuf], uid: u32) -> Result<PushKeys, KeyError> {
        let keys = paths
            .iter()
            .map(|path| load_one(path, uid))
            .collect::<Result<Vec<_>, _>>()?;
        let lanes = vec![None; keys.len()];
        Ok(PushKeys { keys, lanes })
    }

    /// Loads each `(lane, file)` as a push key of that lane, by [`PushKeys::load`]'s rules.
    pub fn load_for_lanes(pairs: &[(String, PathBuf)], uid: u32) -> Result<PushKeys, KeyError> {
        let mut keys = PushKeys::default();
        for (lane, path) in pairs {
            keys.keys.push(load_one(path, uid)?);
            keys.lanes.push(Some(lane.clone()));
        }
        Ok(keys)
    }

    /// Moves `other`'s keys into this set; a key given twice is refused.
    pub fn extend(&mut self, other: PushKeys) -> Result<(), KeyError> {
        for (key, lane) in other.keys.into_iter().zip(other.lanes) {
            let print = fingerprint(key.public_key().key_data());
            if self.find(key.public_key().key_data()).is_some() {
                return Err(KeyError::Unusable {
                    path: PathBuf::from("-"),
                    reason: UnusableKey::GivenTwice(print),
                });
            }
            self.keys.push(key);
            self.lanes.push(lane);
        }
        Ok(())
    }

    /// The public halves `lane` may use: its own keys and the keys of no lane.
    pub fn identities_for(&self, lane: Option<&str>) -> Vec<Identity> {
        self.keys
            .iter()
            .zip(&self.lanes)
            .filter(|(_, owner)| owner.is_none() || owner.as_deref() == lane)
            .map(|(key, _)| Identity {
                credential: PublicCredential::Key(key.public_key().key_data().clone()),
                comment: key.comment().to_string(),
            })
            .collect()
    }

    /// The lane the key whose public half is `public` belongs to (`None`: no lane, or
    /// no such key).
    pub fn lane_of(&self, public: &KeyData) -> Option<&str> {
        let i = self
            .keys
            .iter()
            .position(|key| key.public_key().key_data() == public)?;
        self.lanes[i].as_deref()
    }

    /// How many keys are loaded.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is loaded (the broker then signs nothing).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The public halves, as an identities answer lists them.
    pub fn identities(&self) -> Vec<Identity> {
        self.keys
            .iter()
            .map(|key| Identity {
                credential: PublicCredential::Key(key.public_key().key_data().clone()),
                comment: key.comment().to_string(),
            })
            .collect()
    }

    /// The key whose public half is `public`.
    pub fn find(&self, public: &KeyData) -> Option<&PrivateKey> {
        self.keys
            .iter()
            .find(|key| key.public_key().key_data() == public)
    }
}

/// Signs `data` with `key`. Ed25519 ignores `flags`; RSA signs `rsa-sha2-512` or
/// `rsa-sha2-256` as `flags` ask ([`RSA_SHA2_512`], [`RSA_SHA2_256`]) and refuses a
/// request for neither: an `ssh-rsa` (SHA-1) signature is one OpenSSH servers no longer
/// accept by default, and the broker makes none.
pub fn sign(key: &PrivateKey, data: &[u8], flags: u32) -> Result<Signature, signature::Error> {
    use signature::{SignatureEncoding, Signer};
    let ssh_key::private::KeypairData::Rsa(pair) = key.key_data() else {
        return key.try_sign(data);
    };
    let private = rsa_private(pair).map_err(signature::Error::from_source)?;
    let (hash, bytes) = if flags & RSA_SHA2_512 != 0 {
        let signer = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha512>::new(private);
        (HashAlg::Sha512, signer.try_sign(data)?.to_vec())
    } else if flags & RSA_SHA2_256 != 0 {
        let signer = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha256>::new(private);
        (HashAlg::Sha256, signer.try_sign(data)?.to_vec())
    } else {
        return Err(signature::Error::from_source(
            "an ssh-rsa (SHA-1) signature was asked for; the broker signs RSA with SHA-2 only",
        ));
    };
    Signature::new(Algorithm::Rsa { hash: Some(hash) }, bytes)
        .map_err(signature::Error::from_source)
}

/// The `rsa` crate's private key from ssh-key's RSA keypair, built from its parts: ssh-key
/// 0.6.7's own conversion passes the prime `p` twice where `p, q` are meant, which makes
/// every signature fail (as does its own RSA `Signer`, which goes through it).
fn rsa_private(pair: &ssh_key::private::RsaKeypair) -> Result<rsa::RsaPrivateKey, RsaParts> {
    let big = |m: &ssh_key::Mpint| rsa::BigUint::try_from(m).map_err(RsaParts::Number);
    rsa::RsaPrivateKey::from_components(
        big(&pair.public.n)?,
        big(&pair.public.e)?,
        big(&pair.private.d)?,
        vec![big(&pair.private.p)?, big(&pair.private.q)?],
    )
    .map_err(RsaParts::Key)
}

/// Why an RSA key's parts make no `rsa` private key (a signature then fails with it).
#[derive(Debug, thiserror::Error)]
enum RsaParts {
    /// A part is no unsigned number.
    #[error("{0}")]
    Number(#[source] ssh_key::Error),
    /// The parts make no valid key.
    #[error("{0}")]
    Key(#[source] rsa::Error),
}

/// Parses an unencrypted OpenSSH private key of an algorithm the broker holds (Ed25519,
/// RSA).
///
/// # Errors
///
/// [`UnusableKey`]: the reason, for the operator.
pub fn parse(text: &str) -> Result<PrivateKey, UnusableKey> {
    let key = PrivateKey::from_openssh(text.as_bytes()).map_err(UnusableKey::NotOpenSsh)?;
    if key.is_encrypted() {
        return Err(UnusableKey::Encrypted);
    }
    match key.algorithm() {
        Algorithm::Ed25519 | Algorithm::Rsa { .. } => Ok(key),
        other => Err(UnusableKey::Algorithm(other)),
    }
}

/// Why a key is none the broker holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnusableKey {
    /// Not an OpenSSH private key (ssh-key's reason).
    #[error("not an OpenSSH private key ({0})")]
    NotOpenSsh(#[source] ssh_key::Error),
    /// Encrypted: the broker cannot ask for a passphrase.
    #[error("encrypted; the broker loads unencrypted keys only (it cannot ask for a passphrase)")]
    Encrypted,
    /// An algorithm the broker does not sign with.
    #[error("{0} key; the broker holds Ed25519 and RSA keys only (ssh-keygen -t ed25519)")]
    Algorithm(Algorithm),
    /// A read key named for a lane: read keys are signed for every peer.
    #[error("a read key is signed for every peer; it cannot belong to a lane")]
    ReadKeyForLane,
    /// The same key twice (its fingerprint).
    #[error("key {0} is given twice")]
    GivenTwice(String),
}

/// The SHA-256 fingerprint of a public key, as `ssh-keygen -l` prints it.
pub fn fingerprint(public: &KeyData) -> String {
    public.fingerprint(HashAlg::Sha256).to_string()
}

fn load_one(path: &Path, uid: u32) -> Result<PrivateKey, KeyError> {
    let read_error = |source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    let mode = meta.mode() & 0o777;
    if meta.uid() != uid || mode & 0o077 != 0 {
        return Err(KeyError::NotPrivate {
            path: path.to_path_buf(),
            owner: meta.uid(),
            mode,
            uid,
        });
    }
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(KeyError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let mut text = Zeroizing::new(String::new());
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_error)?;
    parse(&text).map_err(|reason| KeyError::Unusable {
        path: path.to_path_buf(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fresh Ed25519 key made by the system's ssh-keygen (no key is kept in the source).
    fn key_file(dir: &Path, mode: u32) -> PathBuf {
        key_file_of(dir, mode, &["-t", "ed25519"])
    }

    fn key_file_of(dir: &Path, mode: u32, kind: &[&str]) -> PathBuf {
        let path = dir.join("push");
        let made = std::process::Command::new("ssh-keygen")
            .args(kind)
            .args(["-q", "-N", "", "-C", "push", "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(made.success());
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_key_given_as_both_push_and_read_key_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), 0o600);
        let uid = row_fence_contract::paths::euid();
        let load = || PushKeys::load(std::slice::from_ref(&path), uid).unwrap();
        let refused = Held::loaded(load(), load());
        assert!(matches!(refused, Err(KeyError::BothKinds { .. })));
        let held = Held::loaded(load(), PushKeys::default()).unwrap();
        assert_eq!((held.push.len(), held.read.len()), (1, 0));
    }

    #[test]
    fn a_private_key_of_the_daemons_uid_loads_and_signs() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), 0o600);
        let keys = PushKeys::load(&[path], row_fence_contract::paths::euid()).unwrap();
        let listed = keys.identities();
        assert_eq!(listed.len(), 1);
        let public = listed[0].credential.key_data();
        let key = keys.find(public).expect("found by its public half");
        let signature = sign(key, b"data", 0).unwrap();
        assert_eq!(signature.algorithm(), Algorithm::Ed25519);
        assert!(fingerprint(public).starts_with("SHA256:"));
    }

    #[test]
    fn a_key_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), 0o640);
        let err = PushKeys::load(&[path], row_fence_contract::paths::euid())
            .err()
            .expect("refused");
        assert!(
            matches!(err, KeyError::NotPrivate { mode: 0o640, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_key_of_another_uid_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file(dir.path(), 0o600);
        let other = row_fence_contract::paths::euid().wrapping_add(1);
        let err = PushKeys::load(&[path], other).err().expect("refused");
        assert!(matches!(err, KeyError::NotPrivate { .. }), "{err}");
    }

    #[test]
    fn a_file_that_is_not_a_key_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("push");
        fs::write(&path, "not a key").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = PushKeys::load(&[path], row_fence_contract::paths::euid())
            .err()
            .expect("refused");
        assert!(matches!(err, KeyError::Unusable { .. }), "{err}");
    }

    #[test]
    fn an_rsa_key_signs_with_the_sha2_hash_asked_for_and_never_sha1() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_file_of(dir.path(), 0o600, &["-t", "rsa", "-b", "2048"]);
        let keys = PushKeys::load(&[path], row_fence_contract::paths::euid()).unwrap();
        let public = keys.identities()[0].credential.key_data().clone();
        let key = keys.find(&public).unwrap();
        for (flags, hash) in [
            (RSA_SHA2_256, HashAlg::Sha256),
            (RSA_SHA2_512, HashAlg::Sha512),
        ] {
            let signature = sign(key, b"data", flags).unwrap();
            assert_eq!(signature.algorithm(), Algorithm::Rsa { hash: Some(hash) });
            use signature::Verifier;
            public.verify(b"data", &signature).expect("verifies");
        }
        assert!(
            sign(key, b"data", 0).is_err(),
            "an ssh-rsa (SHA-1) signature was made"
        );
    }

    #[test]
    fn held_keys_are_added_once_listed_by_fingerprint_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let text = fs::read_to_string(key_file(dir.path(), 0o600)).unwrap();
        let mut held = Held::default();
        let print = held.add(&text, false).unwrap();
        assert!(matches!(held.add(&text, true), Err(ChangeError::Held(p)) if p == print));
        let listed = held.listed();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].fingerprint.as_str(), listed[0].kind.as_str()),
            (print.as_str(), "push")
        );
        assert!(!listed[0].algorithm.is_empty());
        assert!(matches!(
            held.add("not a key", false),
            Err(ChangeError::Unusable(_))
        ));
        assert_eq!(held.remove(&print), Ok(false));
        assert!(held.push.is_empty());
        assert!(matches!(held.remove(&print), Err(ChangeError::NotHeld(_))));
    }

    #[test]
    fn a_lanes_key_is_listed_for_that_lane_only() {
        let dir = tempfile::tempdir().unwrap();
        let text = fs::read_to_string(key_file(dir.path(), 0o600)).unwrap();
        let key = parse(&text).unwrap();
        let public = key.public_key().key_data().clone();
        let mut held = Held::default();
        assert!(matches!(
            held.add_key(key.clone(), true, Some("lane-a".into())),
            Err(ChangeError::Unusable(_))
        ));
        held.add_key(key, false, Some("lane-a".into())).unwrap();
        assert_eq!(held.push.identities_for(Some("lane-a")).len(), 1);
        assert!(held.push.identities_for(Some("lane-b")).is_empty());
        assert!(held.push.identities_for(None).is_empty());
        assert_eq!(held.push.lane_of(&public), Some("lane-a"));
        assert_eq!(held.listed()[0].lane.as_deref(), Some("lane-a"));
    }
}
