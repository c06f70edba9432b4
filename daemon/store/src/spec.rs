//! `ROW_FENCE_STORE`: which store to open. `file` (the embedded default, under
//! `$ROW_FENCE_HOME/store/`), `file:DIR`, or a Redis URL: `redis://…`, `rediss://…`
//! (TLS), `redis+unix://…` / `unix://…`, a Redis Cluster node: `redis+cluster://…`,
//! `rediss+cluster://…`, or the sentinels that elect the primary:
//! `redis+sentinel://host:port[,host:port…]/<master-name>`. Redis URLs also carry
//! row-fence's own options (`redis::url`).

use std::fmt;
use std::path::PathBuf;

/// A parsed store specification.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded file store; `None` means `$ROW_FENCE_HOME/store/`.
    File(Option<PathBuf>),
    /// A Redis URL, kept verbatim (it may hold a password: print it with
    /// [`StoreSpec::redacted`]).
    Redis(String),
}

impl StoreSpec {
    /// Parses a specification; the error names what is accepted.
    pub fn parse(text: &str) -> Result<StoreSpec, String> {
        let text = text.trim();
        if text.is_empty() || text == "file" {
            return Ok(StoreSpec::File(None));
        }
        if let Some(dir) = text.strip_prefix("file:") {
            let dir = dir.strip_prefix("//").unwrap_or(dir);
            if dir.is_empty() {
                return Ok(StoreSpec::File(None));
            }
            return Ok(StoreSpec::File(Some(PathBuf::from(dir))));
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
            return Ok(StoreSpec::Redis(text.to_string()));
        }
        Err(format!(
            "store {:?} is not one of: file, file:DIR, redis://…, rediss://…, redis+unix://…, redis+cluster://…, rediss+cluster://…, redis+sentinel://…",
            redact(text)
        ))
    }

    /// The specification with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        match self {
            StoreSpec::File(None) => "file".to_string(),
            StoreSpec::File(Some(dir)) => format!("file:{}", dir.display()),
            StoreSpec::Redis(url) => redact(url),
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

/// Replaces the password of a URL's userinfo (`user:pass@`) and any `pass=` or
/// `password=` query value with `***`.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let start = scheme_end + 3;
        let authority_end = out[start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..authority_end].rfind('@') {
            let userinfo = &out[start..start + at];
            let redacted = match userinfo.find(':') {
                Some(colon) => format!("{}:***", &userinfo[..colon]),
                None => "***".to_string(),
            };
            out.replace_range(start..start + at, &redacted);
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k == "pass" || k == "password" => format!("{k}=***"),
                _ => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{head}{query}");
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
        let err = StoreSpec::parse("mysql://u:s3cret@h").unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
