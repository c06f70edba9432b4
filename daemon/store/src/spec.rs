//! `ROW_FENCE_STORE`: which store to open. `file` (the embedded default, under
//! `$ROW_FENCE_HOME/store/`), `file:DIR`, or a Redis URL: `redis://…`, `rediss://…`
//! (TLS), `redis+unix://…` / `unix://…`, a Redis Cluster node: `redis+cluster://…`,
//! `rediss+cluster://…`, or the sentinels that elect the primary:
//! `redis+sentinel://host:port[,host:port…]/<master-name>`, or an etcd cluster:
//! `etcd://host:port[,host:port…]`, `etcds://…` (TLS). Redis and etcd URLs also carry
//! row-fence's own options (`redis::url`, `etcd::url`).

use std::fmt;
use std::path::PathBuf;

/// Why a store specification is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not `file`, `file:DIR` or a Redis URL (the text, password redacted).
    #[error(
        "store {0:?} is not one of: file, file:DIR, redis://…, rediss://…, redis+unix://…, redis+cluster://…, rediss+cluster://…, redis+sentinel://…, etcd://…, etcds://…"
    )]
    NotAStore(String),
    /// `file:DIR` with a relative DIR (other than a leading `~/`, expanded from an absolute
    /// `HOME` as the home is): each directory a program runs from would open a store of its
    /// own, and two worktrees would both be granted the row.
    #[error(
        "store file:{0}: the directory is relative: give an absolute path (a leading ~/ is expanded), or each directory it is used from gets its own store"
    )]
    RelativeDir(String),
    /// A Redis URL whose options or address cannot be read (the URL redacted, and why):
    /// found here, before anything opens, so every such mistake is a usage error (exit 2).
    #[error("store {0}: {1}")]
    BadUrl(String, String),
    /// A Redis or etcd URL with a `#` fragment (the URL up to it, redacted; the fragment
    /// when it follows the host, `None` when the `#` is inside the user name or password).
    /// A fragment is no option here: the Redis client would read `#insecure` as "skip
    /// certificate verification", which row-fence never does. Found before anything
    /// connects, so nothing was sent.
    #[error("store {0}: {why}; nothing was sent", why = fragment_sentence(.1))]
    Fragment(String, Option<String>),
}

/// Why a `#` in a store URL is refused, naming the fragment only when no password can be
/// in it.
fn fragment_sentence(fragment: &Option<String>) -> String {
    match fragment {
        Some(fragment) => format!(
            "`#{fragment}` is not an option: a store URL takes no #fragment, and row-fence always verifies the server's certificate (trust a private CA with SSL_CERT_FILE, or cacert=PATH on etcds://)"
        ),
        None => "a `#` before the host ends the URL early: write a `#` in a user name or password as %23".to_string(),
    }
}

/// Refuses a `#` in a Redis or etcd URL ([`SpecError::Fragment`]).
fn refuse_fragment(text: &str) -> Result<(), SpecError> {
    let Some(hash) = text.find('#') else {
        return Ok(());
    };
    let shown = match text.rfind('@') {
        Some(at) if at > hash => None,
        _ => Some(text[hash + 1..].to_string()),
    };
    let before = match &shown {
        Some(_) => redact(&text[..hash]),
        // Everything after the scheme may be a password's part.
        None => format!("{}://***", text.split("://").next().unwrap_or_default()),
    };
    Err(SpecError::Fragment(before, shown))
}

/// A parsed store specification.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded file store; `None` means `$ROW_FENCE_HOME/store/`.
    File(Option<PathBuf>),
    /// A Redis URL, kept verbatim (it may hold a password: print it with
    /// [`StoreSpec::redacted`]).
    Redis(String),
    /// An etcd URL (`etcd://…`, `etcds://…`), kept verbatim (it may hold a password:
    /// print it with [`StoreSpec::redacted`]).
    Etcd(String),
}

impl StoreSpec {
    /// Parses a specification; the error names what is accepted.
    pub fn parse(text: &str) -> Result<StoreSpec, SpecError> {
        let text = text.trim();
        if text.is_empty() || text == "file" {
            return Ok(StoreSpec::File(None));
        }
        if let Some(dir) = text.strip_prefix("file:") {
            let dir = dir.strip_prefix("//").unwrap_or(dir);
            if dir.is_empty() {
                return Ok(StoreSpec::File(None));
            }
            // One rule for every path the operator gives (ARCHITECTURE.md, "Invariants").
            let dir = row_fence_contract::paths::absolute_path(
                std::path::Path::new(dir),
                row_fence_contract::paths::HomeError::Relative,
            )
            .map_err(|_| SpecError::RelativeDir(dir.to_string()))?;
            return Ok(StoreSpec::File(Some(dir)));
        }
        const SCHEMES: &[&str] = &[
            "redis://",
            "rediss://",
            "redis+unix://",
            "unix://",
            "redis+cluster://",
            "rediss+cluster://",
            "redis+sentinel://",
        ];
        if SCHEMES.iter().any(|s| text.starts_with(s)) {
            refuse_fragment(text)?;
            let bad = |why: String| {
                SpecError::BadUrl(redact(&crate::redis::url::without_options(text)), why)
            };
            crate::redis::url::StoreUrl::parse(text).map_err(|e| bad(e.to_string()))?;
            if text.starts_with("redis://") || text.starts_with("rediss://") {
                // The address as the Redis client will read it: a port that is not a
                // number is the same kind of mistake as a bad option.
                ::url::Url::parse(&crate::redis::url::without_options(text))
                    .map_err(|e| bad(e.to_string()))?;
            }
            return Ok(StoreSpec::Redis(text.to_string()));
        }
        if text.starts_with("etcd://") || text.starts_with("etcds://") {
            refuse_fragment(text)?;
            // Read here too, so an etcd URL's mistake is a usage error (exit 2) as a Redis
            // URL's is, before anything opens.
            crate::etcd::url::EtcdUrl::parse(text)
                .map_err(|e| SpecError::BadUrl(redact(text), e.to_string()))?;
            return Ok(StoreSpec::Etcd(text.to_string()));
        }
        Err(SpecError::NotAStore(redact(text)))
    }

    /// The specification with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        match self {
            StoreSpec::File(None) => "file".to_string(),
            StoreSpec::File(Some(dir)) => format!("file:{}", dir.display()),
            StoreSpec::Redis(url) | StoreSpec::Etcd(url) => redact(url),
        }
    }
}

impl fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Replaces the password of a URL's userinfo (`user:pass@`; a lone `token@` is taken as
/// a password) and any `pass=`, `password=`, `sentinel_password=` or `key=` query value with
/// `***`, parsed with the `url`
/// crate. A text it cannot parse as one URL (a sentinel URL's host list,
/// `h1:26379,h2:26379`) is redacted by [`redact_unparsed`].
pub fn redact(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        return redact_unparsed(text);
    };
    // A password holding an unescaped `?`, `/` or `#` ends the authority early: the
    // rest of it, and its `@`, are then read as the path, query or fragment.
    let after_authority = [Some(url.path()), url.query(), url.fragment()];
    if after_authority
        .into_iter()
        .flatten()
        .any(|part| part.contains('@'))
    {
        return redact_unparsed(text);
    }
    let redacted = if url.password().is_some() {
        url.set_password(Some("***"))
    } else if !url.username().is_empty() {
        url.set_username("***")
    } else {
        Ok(())
    };
    if redacted.is_err() {
        return redact_unparsed(text);
    }
    if let Some(query) = url.query().map(redact_query) {
        url.set_query(Some(&query));
    }
    url.to_string()
}

/// `pass=`, `password=` and `sentinel_password=` values, and an etcd URL's client key path
/// (`key=`), replaced by `***`; every other pair kept as written.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if matches!(k, "pass" | "password" | "sentinel_password" | "key") => {
                format!("{k}=***")
            }
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// For what the `url` crate cannot parse as written: everything between the scheme and
/// the text's last `@` becomes `***` (never a password printed, even one holding `?`, `/`
/// or `#`, at the price of a user name, or of a query path holding an `@`), and the query
/// as [`redact_query`] does.
fn redact_unparsed(text: &str) -> String {
    let text = match text.split_once("://") {
        Some((scheme, rest)) => match rest.rfind('@') {
            Some(at) => format!("{scheme}://***{}", &rest[at..]),
            None => text.to_string(),
        },
        None => text.to_string(),
    };
    let (head, query) = match text.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (text.as_str(), None),
    };
    let mut out = head.to_string();
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_query(query));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(StoreSpec::parse("file").unwrap(), StoreSpec::File(None));
        assert_eq!(StoreSpec::parse("").unwrap(), StoreSpec::File(None));
        assert_eq!(
            StoreSpec::parse("file:/x/y").unwrap(),
            StoreSpec::File(Some("/x/y".into()))
        );
        assert!(matches!(
            StoreSpec::parse("redis+unix:///tmp/r.sock").unwrap(),
            StoreSpec::Redis(_)
        ));
        assert!(StoreSpec::parse("postgres://x").is_err());
        assert_eq!(
            StoreSpec::parse("file:///x/y").unwrap(),
            StoreSpec::File(Some("/x/y".into()))
        );
        assert_eq!(
            StoreSpec::parse("etcd://h1:2379,h2:2379").unwrap(),
            StoreSpec::Etcd("etcd://h1:2379,h2:2379".into())
        );
    }

    /// A relative `file:` directory would be a store per working directory: refused, in
    /// every spelling of the URL.
    #[test]
    fn a_fragment_is_no_option_and_nothing_is_sent() {
        for (text, shown) in [
            ("rediss://127.0.0.1:6380/#insecure", "#insecure"),
            ("rediss://127.0.0.1:6380#insecure", "#insecure"),
            (
                "rediss://127.0.0.1:6380/?protocol=resp3#insecure",
                "#insecure",
            ),
            ("redis://h:1/0#", "`#`"),
            ("etcds://h1:2379,h2:2379#insecure", "#insecure"),
            ("redis+sentinel://h1:26379/mymaster#x", "#x"),
        ] {
            let err = StoreSpec::parse(text).unwrap_err();
            assert!(matches!(err, SpecError::Fragment(..)), "{text}: {err}");
            let said = err.to_string();
            assert!(
                said.contains(shown) && said.contains("nothing was sent"),
                "{said}"
            );
        }
        // A `#` inside a password is not quoted.
        let err = StoreSpec::parse("redis://u:se#cret@h:6379/0")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("cret") && err.contains("%23"), "{err}");
    }

    #[test]
    fn a_relative_file_store_directory_is_refused() {
        for spec in [
            "file:rel",
            "file:./x",
            "file:../x",
            "file://rel/x",
            "file:~user/x",
        ] {
            assert!(
                matches!(StoreSpec::parse(spec), Err(SpecError::RelativeDir(_))),
                "{spec}"
            );
        }
    }

    #[test]
    fn passwords_never_print() {
        assert_eq!(
            redact("redis://:s3cret@host:6379/0"),
            "redis://:***@host:6379/0"
        );
        assert_eq!(
            redact("rediss://user:s3cret@host/"),
            "rediss://user:***@host/"
        );
        assert_eq!(redact("redis://token@host"), "redis://***@host");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=1&pass=s3cret"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(
            redact("etcds://u:s3cret@h1:2379,h2:2379?cacert=/ca.pem&cert=/c.pem&key=/k.pem"),
            "etcds://***@h1:2379,h2:2379?cacert=/ca.pem&cert=/c.pem&key=***"
        );
        assert_eq!(
            redact("redis+sentinel://h1:26379,h2:26380/m?sentinel_password=s3cret&db=1"),
            "redis+sentinel://h1:26379,h2:26380/m?sentinel_password=***&db=1"
        );
        let err = StoreSpec::parse("mysql://u:s3cret@h")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cret"), "{err}");
        assert_eq!(
            redact("redis://u:p%40ss@h:1/2?db=1&password=s3cret"),
            "redis://u:***@h:1/2?db=1&password=***"
        );
        assert_eq!(
            redact("redis+sentinel://:s3cret@h1:26379,h2:26380/mymaster?db=1&pass=x"),
            "redis+sentinel://***@h1:26379,h2:26380/mymaster?db=1&pass=***"
        );
        assert_eq!(
            redact("redis+sentinel://h1:26379,h2/mymaster"),
            "redis+sentinel://h1:26379,h2/mymaster"
        );
        assert_eq!(
            redact("etcds://root:s3cret@h1:2379,h2:2379?cacert=/ca.pem"),
            "etcds://***@h1:2379,h2:2379?cacert=/ca.pem"
        );
        assert_eq!(redact("etcd://u:s3cret@h1:2379/"), "etcd://u:***@h1:2379/");
        // An unescaped `?`, `/` or `#` in a password: nothing of it prints.
        for (text, shown) in [
            ("etcd://u:se?cret@h1:2379", "etcd://***@h1:2379"),
            ("redis://u:12?cret@h:6379", "redis://***@h:6379"),
            ("redis://u:12/cr#et@h:6379/0", "redis://***@h:6379/0"),
            ("etcds://u:a?b@h?key=/k.pem", "etcds://***@h?key=***"),
        ] {
            assert_eq!(redact(text), shown, "{text}");
        }
        assert_eq!(
            redact("redis+unix:///tmp/r.sock"),
            "redis+unix:///tmp/r.sock"
        );
    }
}

/// `path` made absolute with symlinks, `.` and `..` resolved as far as it exists (the
/// rest appended as written, without empty or `.` parts): one directory named with or
/// without a trailing slash, through a symlink or relative to another working directory
/// is one path (the key of a file store's floors, ARCHITECTURE.md "The lease store").
pub fn canonical_path(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    // Lexically first (`..` after a missing part has nothing to resolve against).
    let mut parts: Vec<Component> = Vec::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(parts.last(), Some(Component::Normal(_))) {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    let lexical: PathBuf = parts.iter().collect();
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest
                .iter()
                .rev()
                .fold(real, |p: PathBuf, name| p.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

#[cfg(test)]
mod canonical_tests {
    use super::canonical_path;

    #[test]
    fn one_directory_spelled_many_ways_is_one_path() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        std::os::unix::fs::symlink(&store, dir.path().join("link")).unwrap();
        let want = std::fs::canonicalize(&store).unwrap();
        for spelling in ["store", "store/", "./store/.", "link/", "store/../store"] {
            assert_eq!(
                canonical_path(&dir.path().join(spelling)),
                want,
                "{spelling}"
            );
        }
        let missing = dir.path().join("not-yet/");
        assert_eq!(
            canonical_path(&missing),
            std::fs::canonicalize(dir.path()).unwrap().join("not-yet")
        );
    }
}
