//! The forge API's token, loaded by the daemon's own uid over the control socket
//! (`row-fence token add`, as `row-fence keys add` loads a push key): docs/forge-api.md,
//! "Design". Held in memory only; a restart loses it and the forge API answers 503
//! until an operator loads it again. Every load and every refused attempt is a line of
//! the audit log, never the token.

use super::Shared;
use crate::audit::{self, AuditRecord};
use crate::sync::write;
use row_fence_contract::paths;
use row_fence_contract::protocol::{Answer, ForgeTokenAdd, PROTOCOL_VERSION};
use zeroize::{Zeroize, Zeroizing};

/// The longest token accepted (GitHub's are under 300 bytes).
pub const MAX_TOKEN_BYTES: usize = 4096;

/// Answers `forge_token_add` for the peer `uid`; `shared` is `None` when the forge API is
/// off. The token in `add` is wiped before this returns, unless it is now the one held.
pub fn token_add(shared: Option<&Shared>, mut add: ForgeTokenAdd, uid: u32) -> Answer {
    let failed = |why: String| Answer {
        v: PROTOCOL_VERSION,
        error: Some(why),
        ..Answer::default()
    };
    let Some(shared) = shared else {
        add.token.zeroize();
        return failed(
            "the forge API is off on this daemon (row-fence-resident --forge-api-socket)".into(),
        );
    };
    let own = paths::euid();
    let refused = |why: String, home: &std::path::Path| {
        let mut record = AuditRecord::new("token add", uid, false);
        record.detail = why.clone();
        let _ = audit::append(home, &record);
        failed(why)
    };
    if uid != own {
        add.token.zeroize();
        return refused(
            format!(
                "token add: only the daemon's own uid {own} may load the forge token; uid {uid} asked"
            ),
            &shared.home,
        );
    }
    let token = Zeroizing::new(std::mem::take(&mut add.token).trim().to_string());
    if token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return refused(
            "token add: the token is empty, too long or not printable ASCII".into(),
            &shared.home,
        );
    }
    let mut record = AuditRecord::new("token add", uid, true);
    record.detail = format!("forge API token for {}", shared.settings.host);
    if let Err(e) = audit::append(&shared.home, &record) {
        return failed(format!(
            "the audit log cannot be written ({e}); the token was not loaded"
        ));
    }
    *write(&shared.token) = Some(token);
    tracing::info!(host = %shared.settings.host, "the forge API holds a token");
    Answer {
        v: PROTOCOL_VERSION,
        detail: format!("the forge API holds a token for {}", shared.settings.host),
        ..Answer::default()
    }
}
