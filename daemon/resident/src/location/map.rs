//! The tenant → location map's contract (the location-fencing source, "The map
//! contract"): `GET {url}/api/tenants` answers 200 with camelCase JSON
//! `{"tenants": [{"id", "location", "epoch", "state", …}], "generatedAt"}`. Unknown
//! members are ignored; a row without `id` or `epoch` is dropped; a non-integer `epoch`, a
//! non-200 status, an HTML (login) page or a body without a `tenants` array is a failed
//! fetch; `generatedAt` may be an integer or a string, anything else reads as null and
//! never fails the fetch. Freshness is our own fetch time, never `generatedAt`.

pub use row_fence_contract::status::TenantRow;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Why a fetch gave no map: a sentence for `status`, the log and `map_unreachable`'s
/// detail. It never holds the access secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// A status other than 200.
    #[error("the map answered HTTP {0}")]
    Status(u16),
    /// An HTML page, typically an access login in front of the map.
    #[error("the map answered an HTML page (an access login?)")]
    Html,
    /// A body that is not JSON.
    #[error("the map is not JSON: {0}")]
    NotJson(String),
    /// JSON without a `tenants` array of rows.
    #[error("the map has no tenants array of rows: {0}")]
    Shape(String),
    /// A row whose `epoch` is not an integer.
    #[error("tenant {id:?} has a non-integer epoch {epoch}")]
    Epoch {
        /// The tenant.
        id: String,
        /// The epoch as sent.
        epoch: String,
    },
    /// A body over the limit (bytes).
    #[error("the map is over {0} bytes")]
    TooBig(usize),
    /// No answer within the fetch timeout (s).
    #[error("the map did not answer within {0} s")]
    Timeout(u64),
    /// No connection (refused, unresolvable, TLS).
    #[error("cannot connect to the map: {0}")]
    Connect(String),
    /// Any other transport failure.
    #[error("the map fetch failed: {0}")]
    Fetch(String),
    /// A redirect not followed: to an origin the operator did not allow (its answer is
    /// not trusted, and it is never sent the access headers), too many, or unusable.
    #[error("the map redirected {0}")]
    Redirect(String),
    /// The access secret cannot be sent as a header.
    #[error("the access secret is not a valid header value")]
    Secret,
    /// No map URL is configured.
    #[error("no map URL is configured")]
    NoUrl,
}

/// A good map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TenantMap {
    /// The rows kept.
    pub tenants: Vec<TenantRow>,
    /// The worker's own timestamp, informational: an integer (ms) or a string, else null.
    pub generated_at: Option<Value>,
}

/// The response body as the contract spells it; every lenient rule is a field attribute.
#[derive(Deserialize)]
struct Document {
    tenants: Vec<Row>,
    #[serde(
        default,
        rename = "generatedAt",
        deserialize_with = "integer_or_string"
    )]
    generated_at: Option<Value>,
}

/// One row before the `id`/`epoch` rules: a member of the wrong type reads as absent,
/// except `epoch`, which is checked by [`Row::kept`].
#[derive(Deserialize)]
struct Row {
    #[serde(default, deserialize_with = "string_only")]
    id: Option<String>,
    #[serde(default, deserialize_with = "string_only")]
    location: Option<String>,
    #[serde(default)]
    epoch: Option<Value>,
    #[serde(default, deserialize_with = "string_only")]
    state: Option<String>,
}

impl Row {
    /// The row the fence keeps: `None` for a row without `id` or `epoch` (dropped); an
    /// error for an `epoch` that is not an integer (the whole fetch fails).
    fn kept(self) -> Result<Option<TenantRow>, MapError> {
        let (Some(id), Some(epoch)) = (self.id, self.epoch.filter(|e| !e.is_null())) else {
            return Ok(None);
        };
        let epoch = match &epoch {
            Value::Number(n) if n.is_i64() => n.as_i64(),
            Value::Number(n) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64),
            _ => None,
        }
        .ok_or_else(|| MapError::Epoch {
            id: id.clone(),
            epoch: epoch.to_string(),
        })?;
        Ok(Some(TenantRow {
            id,
            location: self.location,
            epoch,
            state: self.state,
        }))
    }
}

fn string_only<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

fn integer_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    let v = Value::deserialize(d)?;
    Ok((v.is_i64() || v.is_u64() || v.is_string()).then_some(v))
}

/// Reads a response into a map; the error is a sentence for `status` and the log.
pub fn parse(status: u16, content_type: Option<&str>, body: &[u8]) -> Result<TenantMap, MapError> {
    if status != 200 {
        return Err(MapError::Status(status));
    }
    if content_type.is_some_and(|c| c.to_ascii_lowercase().contains("text/html"))
        || looks_like_html(body)
    {
        return Err(MapError::Html);
    }
    let document: Document = serde_json::from_slice(body).map_err(|e| {
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
            MapError::NotJson(e.to_string())
        } else {
            MapError::Shape(e.to_string())
        }
    })?;
    let mut tenants = Vec::with_capacity(document.tenants.len());
    for row in document.tenants {
        tenants.extend(row.kept()?);
    }
    Ok(TenantMap {
        tenants,
        generated_at: document.generated_at,
    })
}

fn looks_like_html(body: &[u8]) -> bool {
    let start: Vec<u8> = body
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take(15)
        .map(u8::to_ascii_lowercase)
        .collect();
    start.starts_with(b"<!doctype html") || start.starts_with(b"<html")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_map_keeps_what_the_fence_reads_and_ignores_the_rest() {
        let body = br#"{"tenants":[
            {"id":"acme","name":"Acme","githubOrg":"a","installationId":1,"location":"here","epoch":3,"state":"active","moveId":null,"updatedAt":1790990000000,"extra":{"x":[1]}},
            {"location":"here","epoch":1},
            {"id":"no-epoch","location":"here"},
            {"id":"null-epoch","epoch":null}
        ],"repoOverrides":[{"repo":"r","tenantId":"acme"}],"generatedAt":1790990005000}"#;
        let map = parse(200, Some("application/json"), body).unwrap();
        assert_eq!(
            map.tenants,
            vec![TenantRow {
                id: "acme".into(),
                location: Some("here".into()),
                epoch: 3,
                state: Some("active".into())
            }]
        );
        assert_eq!(map.generated_at, Some(serde_json::json!(1790990005000u64)));
    }

    #[test]
    fn generated_at_never_fails_the_fetch() {
        for (g, want) in [
            (r#""2026-11-29T00:00:00Z""#, true),
            ("{}", false),
            ("[1]", false),
            ("1.5", false),
            ("true", false),
            ("null", false),
        ] {
            let body = format!(r#"{{"tenants":[],"generatedAt":{g}}}"#);
            let map = parse(200, None, body.as_bytes()).unwrap();
            assert_eq!(map.generated_at.is_some(), want, "{g}");
        }
    }

    #[test]
    fn failed_fetches_say_why() {
        assert_eq!(parse(500, None, b"{}").unwrap_err(), MapError::Status(500));
        assert!(
            parse(200, Some("text/html; charset=utf-8"), b"<html>login</html>").unwrap_err()
                == MapError::Html
        );
        assert!(parse(200, None, b"  <!DOCTYPE html><html>").unwrap_err() == MapError::Html);
        assert!(parse(200, None, b"not json").is_err());
        assert!(
            parse(200, None, br#"{"rows":[]}"#)
                .unwrap_err()
                .to_string()
                .contains("tenants")
        );
        assert!(
            parse(200, None, br#"{"tenants":{}}"#)
                .unwrap_err()
                .to_string()
                .contains("tenants")
        );
        assert!(
            parse(200, None, br#"{"tenants":[{"id":"a","epoch":"3"}]}"#)
                .unwrap_err()
                .to_string()
                .contains("non-integer")
        );
        assert!(
            parse(200, None, br#"{"tenants":[{"id":"a","epoch":2.5}]}"#)
                .unwrap_err()
                .to_string()
                .contains("non-integer")
        );
    }
}
