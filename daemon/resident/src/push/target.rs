//! Where a push goes (ARCHITECTURE.md, "Push proxy"): the URL the lane's git passed is
//! resolved against the forges in the daemon's own configuration (`--push-forge`), never
//! dialled as given: the `row-fence::<url>` remote is the lane's to write. A URL of no
//! configured forge is refused before anything is dialled.

pub mod https;

use url::Url;

/// One configured forge: `ssh://USER@HOST[:PORT]/[PATH-PREFIX/]` (or, for the HTTPS arm,
/// `https://[USER@]HOST[:PORT]/[PATH-PREFIX/]`: [`super::https`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forge {
    /// How the forge is dialled. Added for the HTTPS arm (ARCHITECTURE.md, "Push proxy").
    pub scheme: Scheme,
    /// The user logged in as (over HTTPS, the basic-auth user).
    pub user: String,
    /// The host, as configured (a name or an address).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The repositories' path prefix, ending in `/`.
    pub prefix: String,
}

/// How a forge is dialled (the HTTPS arm: [`super::https`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// OpenSSH to `git-receive-pack` ([`super::forge`]).
    Ssh,
    /// Smart HTTP over TLS ([`super::https`]).
    Https,
}

/// A push's resolved destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The forge.
    pub forge: Forge,
    /// The repository's path on the forge, as `git-receive-pack` is given it and the
    /// row's scope names it.
    pub repository: String,
}

/// Why a URL is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// A configured forge that is not an ssh URL the daemon can dial.
    #[error(
        "--push-forge {0:?} is not ssh://USER@HOST[:PORT]/[PATH/] nor https://[USER@]HOST[:PORT]/[PATH/]"
    )]
    Config(String),
    /// The lane's URL does not parse as one the daemon pushes to.
    #[error(
        "the push URL {0:?} is not an ssh:// or https:// URL (row-fence install broker --repo wires ssh://USER@HOST/PATH)"
    )]
    Url(String),
    /// No configured forge covers it.
    #[error(
        "the push URL {0:?} is on no forge the daemon pushes to (its --push-forge list): refused, nothing dialled"
    )]
    NotConfigured(String),
    /// A repository path the daemon will not pass to the forge's shell.
    #[error(
        "the repository path {0:?} has characters the daemon does not pass to the forge (quotes, spaces, controls, `..`)"
    )]
    Path(String),
}

impl Forge {
    /// Parses a `--push-forge` value.
    pub fn parse(text: &str) -> Result<Forge, TargetError> {
        // The HTTPS arm parses its own forges (ARCHITECTURE.md, "Push proxy").
        if text.starts_with("https:") {
            return https::parse_forge(text);
        }
        let bad = || TargetError::Config(text.to_string());
        let url = Url::parse(text).map_err(|_| bad())?;
        if url.scheme() != "ssh" || url.username().is_empty() || url.password().is_some() {
            return Err(bad());
        }
        let host = url.host_str().ok_or_else(bad)?.to_string();
        let mut prefix = url.path().to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad());
        }
        Ok(Forge {
            scheme: Scheme::Ssh,
            user: url.username().to_string(),
            host,
            port: url.port().unwrap_or(22),
            prefix,
        })
    }

    /// `https://HOST:PORT`: what a token is held for (every path on one origin shares it).
    pub fn origin(&self) -> String {
        format!("https://{}:{}", self.host, self.port)
    }

    /// The host as a known_hosts line names it (`host`, or `[host]:port`).
    pub fn known_hosts_name(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }
}

/// Resolves the lane's `url` against `forges`.
pub fn resolve(forges: &[Forge], url: &str) -> Result<Target, TargetError> {
    // An https:// URL is resolved against the HTTPS forges only (ARCHITECTURE.md, "Push proxy").
    if url.starts_with("https:") {
        return https::resolve(forges, url);
    }
    let parsed = Url::parse(url).map_err(|_| TargetError::Url(url.to_string()))?;
    if parsed.scheme() != "ssh"
        || parsed.password().is_some()
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        return Err(TargetError::Url(url.to_string()));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| TargetError::Url(url.to_string()))?;
    let port = parsed.port().unwrap_or(22);
    // The path as git sends it: percent-decoding is refused outright (a path git would
    // not write this way is none of the lane's).
    let path = parsed.path();
    if path.contains('%') {
        return Err(TargetError::Path(path.to_string()));
    }
    let forge = forges
        .iter()
        .find(|f| {
            f.scheme == Scheme::Ssh
                && f.user == parsed.username()
                && f.host == host
                && f.port == port
                && path.starts_with(&f.prefix)
        })
        .ok_or_else(|| TargetError::NotConfigured(url.to_string()))?;
    // git's own rule for ssh URLs: `/~` starts a path relative to the user's home.
    let repository = match path.strip_prefix("/~") {
        Some(rest) => format!("~{rest}"),
        None => path.to_string(),
    };
    check_path(&repository)?;
    Ok(Target {
        forge: forge.clone(),
        repository,
    })
}

/// A path passed inside single quotes to the forge's `git-receive-pack`.
fn check_path(path: &str) -> Result<(), TargetError> {
    let fine = path.len() > 1
        && path.len() <= 1024
        && path.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~' | b'+' | b'@')
        })
        && !path.split('/').any(|c| c == "..");
    if fine {
        Ok(())
    } else {
        Err(TargetError::Path(path.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_configured_forge_is_resolved() {
        let forges = vec![Forge::parse("ssh://git@127.0.0.1:2222/srv/git/").unwrap()];
        let t = resolve(&forges, "ssh://git@127.0.0.1:2222/srv/git/app.git").unwrap();
        assert_eq!(t.repository, "/srv/git/app.git");
        assert_eq!(t.forge.known_hosts_name(), "[127.0.0.1]:2222");
        for refused in [
            "ssh://git@127.0.0.1:2223/srv/git/app.git",
            "ssh://root@127.0.0.1:2222/srv/git/app.git",
            "ssh://git@127.0.0.2:2222/srv/git/app.git",
            "ssh://git@127.0.0.1:2222/srv/other/app.git",
            "ssh://git@127.0.0.1:2222/srv/git/../x.git",
            "ssh://git@127.0.0.1:2222/srv/git/a'b.git",
            "ssh://git@127.0.0.1:2222/srv/git/a%20b.git",
            "git@127.0.0.1:srv/git/app.git",
            "https://127.0.0.1/srv/git/app.git",
            "ext::sh -c touch% /tmp/x",
        ] {
            assert!(resolve(&forges, refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn a_home_relative_path_keeps_its_tilde() {
        let forges = vec![Forge::parse("ssh://git@forge/").unwrap()];
        let t = resolve(&forges, "ssh://git@forge/~/app.git").unwrap();
        assert_eq!(t.repository, "~/app.git");
        assert_eq!(t.forge.port, 22);
        assert_eq!(t.forge.known_hosts_name(), "forge");
    }

    #[test]
    fn a_forge_must_be_an_ssh_url_with_a_user() {
        // (https://forge/ is the HTTPS arm's: push::https's tests.)
        for bad in ["ssh://forge/", "forge:/x", "ssh://git:pw@forge/"] {
            assert!(Forge::parse(bad).is_err(), "{bad}");
        }
    }
}
