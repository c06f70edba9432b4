//! The HTTPS forges' token (ARCHITECTURE.md, "Push proxy"): loaded by the daemon's own uid
//! with the command that loads the forge API's (`row-fence token add`), held in memory
//! only, wiped when replaced. One command for both: with the forge API on, the token goes
//! to both, the forge API's checks and audit line first. Every load and refused attempt
//! is a line of the audit log, never the token.

use super::Https;
use crate::audit::{self, AuditRecord};
use crate::forge_api::admin::MAX_TOKEN_BYTES;
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
    let said = "the push proxy holds a token for its HTTPS forges";
    if forge_api.is_some() {
        let mut answer = crate::forge_api::admin::token_add(forge_api, add, uid);
        if answer.error.is_none() {
            https.hold(token);
            answer.detail = format!("{}; {said}", answer.detail);
        }
        return answer;
    }
    add.token.zeroize();
    if let Err(e) = record(true, "push token for the HTTPS forges".into()) {
        return failed(format!(
            "the audit log cannot be written ({e}); the token was not loaded"
        ));
    }
    https.hold(token);
    tracing::info!("{said}");
    Answer {
        v: PROTOCOL_VERSION,
        detail: said.to_string(),
        ..Answer::default()
    }
}
