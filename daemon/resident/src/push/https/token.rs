//! The HTTPS forges' tokens (ARCHITECTURE.md, "Push proxy"): loaded by the daemon's own uid
//! with the command that loads the forge API's (`row-fence token add [--forge URL]`), held
//! in memory only, one per forge origin, wiped when replaced. A token goes to the forge it
//! was loaded for and no other: without `--forge` it is the forge API's (when on) and the
//! push proxy's only when it has one HTTPS forge. Every load and refused attempt is a line
//! of the audit log, never the token.

use super::Https;
use crate::audit::{self, AuditRecord};
use crate::forge_api::admin::MAX_TOKEN_BYTES;
use crate::push::target::{Forge, Scheme};
use row_fence_contract::paths;
use row_fence_contract::protocol::{Answer, ForgeTokenAdd, PROTOCOL_VERSION};
use zeroize::{Zeroize, Zeroizing};

/// Answers `forge_token_add` for the peer `uid`: `https` is `None` when no HTTPS forge is
/// configured (then only the forge API takes it, as before), `forge_api` when it is off.
pub fn token_add(
    https: Option<&Https>,
    forge_api: Option<&crate::forge_api::Shared>,
    mut add: ForgeTokenAdd,
    uid: u32,
) -> Answer {
    let Some(https) = https else {
        return crate::forge_api::admin::token_add(forge_api, add, uid);
    };
    let failed = |why: String| Answer {
        v: PROTOCOL_VERSION,
        error: Some(why),
        ..Answer::default()
    };
    let own = paths::euid();
    let record = |ok: bool, detail: String| {
        let mut record = AuditRecord::new("token add", uid, ok);
        record.detail = detail;
        audit::append(&https.home, &record)
    };
    if uid != own {
        add.token.zeroize();
        let why = format!(
            "token add: only the daemon's own uid {own} may load the forges' token; uid {uid} asked"
        );
        let _ = record(false, why.clone());
        return failed(why);
    }
    let token = Zeroizing::new(add.token.trim().to_string());
    if token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        add.token.zeroize();
        let why = "token add: the token is empty, too long or not printable ASCII".to_string();
        let _ = record(false, why.clone());
        return failed(why);
    }
    // Which forge the token is for: named, or the only one.
    let origin = match add.forge.as_deref() {
        Some(named) => match Forge::parse(named) {
            Ok(f) if f.scheme == Scheme::Https && https.origins().contains(&f.origin()) => {
                Some(f.origin())
            }
            _ => {
                add.token.zeroize();
                let why = format!(
                    "token add: --forge {named:?} is none of the daemon's HTTPS forges ({}): nothing was loaded",
                    https.origins().join(", ")
                );
                let _ = record(false, why.clone());
                return failed(why);
            }
        },
        None if https.origins().len() == 1 => https.origins().first().cloned(),
        None => None,
    };
    let Some(origin) = origin else {
        // Several HTTPS forges and none named: never a guess at which forge gets it.
        let several = format!(
            "the daemon has {} HTTPS forges ({}): name the one this token is for with --forge",
            https.origins().len(),
            https.origins().join(", ")
        );
        if forge_api.is_some() {
            let mut answer = crate::forge_api::admin::token_add(forge_api, add, uid);
            if answer.error.is_none() {
                answer.detail = format!(
                    "{}; the push proxy took none of it: {several}",
                    answer.detail
                );
            }
            return answer;
        }
        add.token.zeroize();
        let why = format!("token add: {several}; nothing was loaded");
        let _ = record(false, why.clone());
        return failed(why);
    };
    let said = format!("the push proxy holds a token for {origin}");
    if forge_api.is_some() && add.forge.is_none() {
        let mut answer = crate::forge_api::admin::token_add(forge_api, add, uid);
        if answer.error.is_none() {
            https.hold(&origin, token);
            answer.detail = format!("{}; {said}", answer.detail);
        }
        return answer;
    }
    add.token.zeroize();
    if let Err(e) = record(true, format!("push token for {origin}")) {
        return failed(format!(
            "the audit log cannot be written ({e}); the token was not loaded"
        ));
    }
    https.hold(&origin, token);
    tracing::info!("{said}");
    Answer {
        v: PROTOCOL_VERSION,
        detail: said,
        ..Answer::default()
    }
}
