//! `https://` forges and URLs (ARCHITECTURE.md, "Push proxy"): the HTTPS arm's half of
//! [`super`]'s resolution, kept beside it so the dialling arm depends on the resolution and
//! not the other way.

use super::{Forge, Scheme, Target, TargetError};
use url::Url;

/// The basic-auth user when the forge's URL names none (GitHub's name for a token's user;
/// forges that check only the token accept any).
pub const DEFAULT_USER: &str = "x-access-token";

/// Parses an `https://` `--push-forge` value.
pub fn parse_forge(text: &str) -> Result<Forge, TargetError> {
    let bad = || TargetError::Config(text.to_string());
    let url = Url::parse(text).map_err(|_| bad())?;
    if url.scheme() != "https"
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || url.username().contains('%')
    {
        return Err(bad());
    }
    let host = url.host_str().ok_or_else(bad)?.to_string();
    let mut prefix = url.path().to_string();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    let user = match url.username() {
        "" => DEFAULT_USER.to_string(),
        user => user.to_string(),
    };
    Ok(Forge {
        scheme: Scheme::Https,
        user,
        host,
        port: url.port_or_known_default().unwrap_or(443),
        prefix,
    })
}

/// Resolves the lane's `https://` URL against the HTTPS forges among `forges`. A user in
/// the lane's URL is ignored (the daemon's configuration names it); a password refuses it.
pub fn resolve(forges: &[Forge], url: &str) -> Result<Target, TargetError> {
    let bad = || TargetError::Url(url.to_string());
    let parsed = Url::parse(url).map_err(|_| bad())?;
    if parsed.scheme() != "https"
        || parsed.password().is_some()
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        return Err(bad());
    }
    let host = parsed.host_str().ok_or_else(bad)?;
    let port = parsed.port_or_known_default().unwrap_or(443);
    let path = parsed.path();
    if path.contains('%') {
        return Err(TargetError::Path(path.to_string()));
    }
    let forge = forges
        .iter()
        .find(|f| {
            f.scheme == Scheme::Https
                && f.host == host
                && f.port == port
                && path.starts_with(&f.prefix)
        })
        .ok_or_else(|| TargetError::NotConfigured(url.to_string()))?;
    let repository = path.trim_end_matches('/').to_string();
    let fine = repository.len() > 1
        && repository.len() <= 1024
        && repository.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~' | b'+' | b'@')
        })
        && !repository.split('/').any(|c| c == "..");
    if !fine {
        return Err(TargetError::Path(repository));
    }
    Ok(Target {
        forge: forge.clone(),
        repository,
    })
}
