//! Fetching the tenant map: `GET {url}/api/tenants` with the optional access headers
//! (`CF-Access-Client-Id`, `CF-Access-Client-Secret`), one timeout of 5 s for the whole
//! request, at most 4 MiB read. The secret is sent and never printed.
//!
//! Redirects are followed here, not by the HTTP client (which would carry every header it
//! was given to any host): to the map's own origin with the access headers; to an origin
//! the operator allowed (`ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS`) without them; to any other
//! origin not at all — the fetch fails (`map_unreachable`), so neither the secret goes
//! there nor is its answer trusted.

use super::map::{self, MapError, TenantMap};
use std::time::Duration;

/// The whole fetch (connect, request, body) gives up after this long.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Redirects followed at most for one fetch.
pub const MAX_REDIRECTS: usize = 5;

/// A map body larger than this (4 MiB) is a failed fetch.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Where and how to fetch.
#[derive(Clone)]
pub struct Source {
    /// The base URL; the map is at `{url}/api/tenants`.
    pub url: String,
    /// Sent as `CF-Access-Client-Id`.
    pub client_id: Option<String>,
    /// Sent as `CF-Access-Client-Secret`; never printed.
    pub client_secret: Option<String>,
    /// Origins other than the map's own whose answer to a redirect is trusted (as
    /// `scheme://host[:port]`); they are never sent the access headers.
    pub allowed_origins: Vec<String>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("url", &row_fence_store::spec::redact(&self.url))
            .field("client_id", &self.client_id.as_ref().map(|_| "(set)"))
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "(set)"),
            )
            .field("allowed_origins", &self.allowed_origins)
            .finish()
    }
}

impl Source {
    /// The map's URL.
    pub fn endpoint(&self) -> String {
        format!("{}/api/tenants", self.url.trim().trim_end_matches('/'))
    }
}

/// An HTTP client for one source.
pub struct Fetcher {
    source: Source,
    client: reqwest::Client,
}

impl Fetcher {
    /// A client with the fetch timeout; errors only when TLS cannot be set up.
    pub fn new(source: Source) -> Result<Fetcher, MapError> {
        row_fence_store::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .user_agent(concat!("row-fence/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| MapError::Connect(format!("cannot build the tenant map client: {e}")))?;
        Ok(Fetcher { source, client })
    }

    /// The map's URL as shown (`status`, logs): a password in its userinfo is `***`, as
    /// a store URL's is; the requests use the URL as given.
    pub fn endpoint(&self) -> String {
        row_fence_store::spec::redact(&self.source.endpoint())
    }

    /// One fetch, following redirects by the origin rule of the module docs. The error is
    /// a sentence without the secret.
    pub async fn fetch(&self) -> Result<TenantMap, MapError> {
        let work = async {
            let home = reqwest::Url::parse(&self.source.endpoint())
                .map_err(|e| MapError::Fetch(format!("the map URL does not parse: {e}")))?;
            let mut url = home.clone();
            let mut redirects = 0;
            let mut response = loop {
                let own = url.origin() == home.origin();
                let response = self
                    .request(url.clone(), own)?
                    .send()
                    .await
                    .map_err(describe)?;
                if !response.status().is_redirection() {
                    break response;
                }
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(MapError::Redirect(format!(
                        "more than {MAX_REDIRECTS} redirects"
                    )));
                }
                let next = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|to| url.join(to).ok())
                    .ok_or_else(|| {
                        MapError::Redirect(format!(
                            "HTTP {} without a usable Location",
                            response.status().as_u16()
                        ))
                    })?;
                if next.origin() != home.origin() && !self.allowed(&next) {
                    return Err(MapError::Redirect(format!(
                        "to {}, an origin ROW_FENCE_TENANT_MAP_ALLOWED_ORIGINS does not allow: not followed",
                        next.origin().ascii_serialization()
                    )));
                }
                url = next;
            };
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(describe)? {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(MapError::TooBig(MAX_BODY_BYTES));
                }
                body.extend_from_slice(&chunk);
            }
            map::parse(status, content_type.as_deref(), &body)
        };
        match tokio::time::timeout(FETCH_TIMEOUT, work).await {
            Ok(result) => result,
            Err(_) => Err(MapError::Timeout(FETCH_TIMEOUT.as_secs())),
        }
    }

    /// A GET of `url`, with the access headers only when it is the map's own origin.
    fn request(&self, url: reqwest::Url, own: bool) -> Result<reqwest::RequestBuilder, MapError> {
        let mut request = self.client.get(url).header("accept", "application/json");
        if !own {
            return Ok(request);
        }
        if let Some(id) = &self.source.client_id {
            request = request.header("CF-Access-Client-Id", id);
        }
        if let Some(secret) = &self.source.client_secret {
            let mut value =
                reqwest::header::HeaderValue::from_str(secret).map_err(|_| MapError::Secret)?;
            value.set_sensitive(true);
            request = request.header("CF-Access-Client-Secret", value);
        }
        Ok(request)
    }

    /// True when the operator allowed `url`'s origin (an entry that does not parse as a URL
    /// allows nothing).
    fn allowed(&self, url: &reqwest::Url) -> bool {
        let origin = url.origin();
        self.source
            .allowed_origins
            .iter()
            .filter_map(|o| reqwest::Url::parse(o.trim()).ok())
            .any(|o| o.origin() == origin)
    }
}

/// A reqwest error as a sentence: its kind and URL, never headers, and the URL with any
/// userinfo password as `***` (the map URL's own, or one a redirect's `Location` named:
/// reqwest writes the whole URL into its message).
fn describe(e: reqwest::Error) -> MapError {
    if e.is_timeout() {
        return MapError::Timeout(FETCH_TIMEOUT.as_secs());
    }
    let url = e.url().map(|u| row_fence_store::spec::redact(u.as_str()));
    let connect = e.is_connect();
    let text = match url {
        Some(url) => format!("{} for url ({url})", e.without_url()),
        None => e.to_string(),
    };
    if connect {
        MapError::Connect(text)
    } else {
        MapError::Fetch(text)
    }
}
