//! The push keys: OpenSSH private key files loaded once at start into the daemon's memory
//! (ARCHITECTURE.md, "Key broker"). A key file must be the daemon's own and private to it
//! (no group or other bits), the way OpenSSH refuses a private key others can read: a key
//! a lane's uid could read would be a push route the broker never sees. Nothing here
//! writes a key anywhere; the parsed keys wipe themselves when dropped (ssh-key zeroizes
//! private key material), and the file's bytes are wiped once parsed.

use ssh_agent_lib::proto::{Identity, PublicCredential};
use ssh_key::public::KeyData;
use ssh_key::{Algorithm, HashAlg, PrivateKey, Signature};
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// A key file is refused above this size: an OpenSSH Ed25519 key is under 1 KiB.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

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
    /// The file is not an OpenSSH private key, is encrypted, or is not Ed25519.
    #[error("push key {path}: {reason}")]
    Unusable {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// The keys the broker signs with for ALLOWED lanes.
#[derive(Default)]
pub struct PushKeys {
    keys: Vec<PrivateKey>,
}

impl PushKeys {
    /// Loads every file in `paths`; any file that is not a private, unencrypted Ed25519
    /// OpenSSH key of the daemon's own uid refuses the whole load.
    pub fn load(paths: &[PathBuf], uid: u32) -> Result<PushKeys, KeyError> {
        let keys = paths
            .iter()
            .map(|path| load_one(path, uid))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PushKeys { keys })
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

/// Signs `data` with `key` (Ed25519: the agent's flags do not apply).
pub fn sign(key: &PrivateKey, data: &[u8]) -> Result<Signature, signature::Error> {
    use signature::Signer;
    key.try_sign(data)
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
    let unusable = |reason: String| KeyError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    let key = PrivateKey::from_openssh(text.as_bytes())
        .map_err(|e| unusable(format!("not an OpenSSH private key ({e})")))?;
    if key.is_encrypted() {
        return Err(unusable(
            "encrypted; the daemon loads unencrypted keys only (it cannot ask for a passphrase)"
                .into(),
        ));
    }
    if key.algorithm() != Algorithm::Ed25519 {
        return Err(unusable(format!(
            "{} key; the broker signs with Ed25519 keys only (ssh-keygen -t ed25519)",
            key.algorithm()
        )));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fresh Ed25519 key made by the system's ssh-keygen (no key is kept in the source).
    fn key_file(dir: &Path, mode: u32) -> PathBuf {
        let path = dir.join("push");
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "push", "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(made.success());
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
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
        let signature = sign(key, b"data").unwrap();
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
}
