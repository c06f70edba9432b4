//! What an ssh client asks its agent to sign when it logs in: a publickey
//! `SSH2_MSG_USERAUTH_REQUEST` (RFC 4252 §7), prefixed by the session id of the connection
//! it authenticates (ARCHITECTURE.md, "Key broker"). The broker signs nothing else: not an
//! sshsig (`ssh-keygen -Y sign`, a git commit signature), not chosen bytes. Parsed the way
//! OpenSSH's agent parses it (`parse_userauth_request` in `ssh-agent.c`): every field in
//! order, the method `publickey` or `publickey-hostbound-v00@openssh.com` (which adds the
//! server's host key), nothing after the last field.

use ssh_agent_lib::ssh_encoding::{Decode, Reader};
use ssh_key::public::KeyData;

/// `SSH2_MSG_USERAUTH_REQUEST`.
const USERAUTH_REQUEST: u8 = 50;

/// The service a login asks for.
const SERVICE: &str = "ssh-connection";

/// The plain publickey method.
pub(crate) const PUBLICKEY: &str = "publickey";

/// OpenSSH's publickey method that also names the server's host key (OpenSSH 8.9+).
pub(crate) const PUBLICKEY_HOSTBOUND: &str = "publickey-hostbound-v00@openssh.com";

/// A parsed login request.
#[derive(Debug)]
pub struct UserAuth {
    /// The session id of the connection it authenticates (the key exchange's hash).
    pub session_id: Vec<u8>,
    /// The user it logs in as.
    pub user: String,
    /// The key it authenticates with.
    pub key: KeyData,
    /// The server's host key, for `publickey-hostbound-v00@openssh.com`.
    pub host_key: Option<KeyData>,
}

/// Why bytes are not a login request; a sentence for the refusal's detail.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotALogin(pub String);

/// Parses `data` as a publickey login request for `expected` (the key asked to sign).
pub fn parse(data: &[u8], expected: &KeyData) -> Result<UserAuth, NotALogin> {
    if data.starts_with(b"SSHSIG") {
        return Err(NotALogin(
            "an sshsig signature (ssh-keygen -Y sign, a signed git commit or tag), not a login"
                .into(),
        ));
    }
    let not = |what: &str| NotALogin(format!("not an ssh login request: {what}"));
    let mut reader = data;
    let session_id = Vec::<u8>::decode(&mut reader).map_err(|_| not("no session id"))?;
    if session_id.is_empty() {
        return Err(not("an empty session id"));
    }
    let kind = u8::decode(&mut reader).map_err(|_| not("no message type"))?;
    if kind != USERAUTH_REQUEST {
        return Err(not(&format!(
            "message type {kind}, not 50 (userauth request)"
        )));
    }
    let text = |reader: &mut &[u8], what: &str| {
        String::decode(reader).map_err(|_| not(&format!("no {what}")))
    };
    let user = text(&mut reader, "user")?;
    let service = text(&mut reader, "service")?;
    let method = text(&mut reader, "method")?;
    let signs = u8::decode(&mut reader).map_err(|_| not("no signature flag"))?;
    let algorithm = text(&mut reader, "algorithm")?;
    let key = reader
        .read_prefixed(KeyData::decode)
        .map_err(|_| not("no public key"))?;
    if signs != 1 {
        return Err(not("a query without a signature"));
    }
    if service != SERVICE {
        return Err(not(&format!("service {service:?}, not {SERVICE:?}")));
    }
    if key != *expected {
        return Err(not("it names another key than the one asked to sign"));
    }
    if !algorithm_fits(&algorithm, &key) {
        return Err(not(&format!(
            "algorithm {algorithm:?} is not the key's ({})",
            key.algorithm()
        )));
    }
    let host_key = match method.as_str() {
        PUBLICKEY => None,
        PUBLICKEY_HOSTBOUND => Some(
            reader
                .read_prefixed(KeyData::decode)
                .map_err(|_| not("no host key after the hostbound method"))?,
        ),
        other => return Err(not(&format!("method {other:?}, not publickey"))),
    };
    if !reader.is_empty() {
        return Err(not("bytes after the last field"));
    }
    Ok(UserAuth {
        session_id,
        user,
        key,
        host_key,
    })
}

/// True when a login's algorithm name is one the key signs with: its own, or for RSA the
/// SHA-2 names (`rsa-sha2-256`, `rsa-sha2-512`) as well as `ssh-rsa`.
fn algorithm_fits(name: &str, key: &KeyData) -> bool {
    let own = key.algorithm().to_string();
    name == own || (own == "ssh-rsa" && matches!(name, "rsa-sha2-256" | "rsa-sha2-512"))
}

/// A login request as OpenSSH's ssh builds it (for tests here and in [`super::destination`]).
#[cfg(test)]
pub(crate) fn login(
    sid: &[u8],
    user: &str,
    method: &str,
    key: &KeyData,
    host: Option<&KeyData>,
) -> Vec<u8> {
    use ssh_agent_lib::ssh_encoding::Encode;
    let mut out = Vec::new();
    sid.encode(&mut out).unwrap();
    USERAUTH_REQUEST.encode(&mut out).unwrap();
    user.encode(&mut out).unwrap();
    SERVICE.encode(&mut out).unwrap();
    method.encode(&mut out).unwrap();
    1u8.encode(&mut out).unwrap();
    key.algorithm().as_str().encode(&mut out).unwrap();
    key.encode_prefixed(&mut out).unwrap();
    if let Some(host) = host {
        host.encode_prefixed(&mut out).unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssh_agent_lib::ssh_encoding::Encode;

    fn key() -> KeyData {
        ssh_key::PublicKey::from_openssh(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
        )
        .unwrap()
        .key_data()
        .clone()
    }

    #[test]
    fn a_login_in_either_method_parses_with_its_session_user_and_host() {
        let key = key();
        let plain = parse(&login(b"sid", "git", PUBLICKEY, &key, None), &key).unwrap();
        assert_eq!(
            (plain.session_id.as_slice(), plain.user.as_str()),
            (&b"sid"[..], "git")
        );
        assert!(plain.host_key.is_none());
        let bound = parse(
            &login(b"sid", "git", PUBLICKEY_HOSTBOUND, &key, Some(&key)),
            &key,
        )
        .unwrap();
        assert_eq!(bound.host_key, Some(key.clone()));
    }

    #[test]
    fn anything_but_a_login_for_the_key_asked_is_not_one() {
        let key = key();
        let good = login(b"sid", "git", PUBLICKEY, &key, None);
        let mut trailing = good.clone();
        trailing.push(0);
        let mut other_service = Vec::new();
        b"sid".as_slice().encode(&mut other_service).unwrap();
        USERAUTH_REQUEST.encode(&mut other_service).unwrap();
        "git".encode(&mut other_service).unwrap();
        "ssh-userauth".encode(&mut other_service).unwrap();
        for (what, data) in [
            ("chosen bytes", b"any bytes the lane likes".to_vec()),
            ("an sshsig", b"SSHSIG\x00\x00\x00\x04file".to_vec()),
            ("trailing bytes", trailing),
            ("another service", other_service),
            ("an empty session", login(b"", "git", PUBLICKEY, &key, None)),
            (
                "a password method",
                login(b"sid", "git", "password", &key, None),
            ),
            ("empty", Vec::new()),
        ] {
            assert!(parse(&data, &key).is_err(), "{what} parsed as a login");
        }
        let other = ssh_key::PublicKey::from_openssh(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIuQpOPXX/gtYZBmTsQ8TJFKVH0wEjwJrmEvIzy+YCIF",
        )
        .unwrap()
        .key_data()
        .clone();
        assert!(parse(&good, &other).is_err(), "a login for another key");
    }
}
