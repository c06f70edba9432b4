//! etcd's errors as [`StoreError`]s (ARCHITECTURE.md, "Fail closed"): no member reached is
//! `store_unreachable`; an error a member answered (no leader, a permission, a request too
//! large, too many operations) is `store_error`; a write whose answer was lost may have
//! committed (`Indeterminate`). `store_not_primary` has no meaning here: any member serves,
//! and a member cut off from the quorum answers no linearizable read.

use crate::StoreError;
use etcd_client::Error;
use tonic::Code;

/// Whether the call wrote: a write whose answer was lost may have committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Reads only: a lost answer changed nothing.
    Read,
    /// A transaction that writes.
    Write,
}

/// What a failed try on one member says about the request ([`super::members`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Not applied there: the connection was refused or never made, or the member has no
    /// leader (every request asks for one, so it is turned away before it is proposed).
    NotSent(String),
    /// It may have been applied: no answer came, or the connection broke with it in
    /// flight, or the member proposed it and timed out waiting.
    Lost(String),
    /// The member answered an error about the request itself (a permission, a size, an
    /// expired token): not applied, and the next member would answer the same.
    Answered,
}

/// Whether a member turned the request away for its authentication token: expired
/// (`--auth-token-ttl`) or issued before the auth store changed (a user or role added,
/// with jwt tokens). Neither applied the request; a new token serves it.
pub fn is_auth_rejection(e: &Error) -> bool {
    let Error::GRpcStatus(status) = e else {
        return false;
    };
    let message = status.message();
    status.code() == Code::Unauthenticated
        || message.contains("invalid auth token")
        || message.contains("revision of auth store is old")
        || message.contains("user name is empty")
}

/// Classifies a client error of one try on one member.
pub fn failure(e: &Error, call: Call) -> Failure {
    let _ = call;
    match e {
        Error::GRpcStatus(status) => {
            let detail = with_causes(status.message(), std::error::Error::source(status));
            if is_auth_rejection(e) {
                return Failure::Answered;
            }
            match status.code() {
                Code::Unavailable if detail.contains("no leader") || never_connected(&detail) => {
                    Failure::NotSent(detail)
                }
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
                    if !detail.starts_with("etcdserver:") || detail.contains("timed out") =>
                {
                    Failure::Lost(detail)
                }
                Code::Unavailable | Code::Unknown => Failure::Lost(detail),
                _ => Failure::Answered,
            }
        }
        Error::TransportError(t) => {
            let detail = with_causes(&t.to_string(), std::error::Error::source(t));
            if never_connected(&detail) {
                Failure::NotSent(detail)
            } else {
                Failure::Lost(detail)
            }
        }
        Error::IoError(io) => Failure::NotSent(io.to_string()),
        _ => Failure::Answered,
    }
}

/// True when a member's failure says the cluster is between leaders (an election, a member
/// catching up), which passes: worth trying the members again shortly.
pub fn is_election(detail: &str) -> bool {
    [
        "no leader",
        "leader changed",
        "request timed out",
        "not capable",
        "no answer within",
    ]
    .iter()
    .any(|marker| detail.contains(marker))
}

/// True when the text says the connection was never made (nothing was sent on it).
fn never_connected(detail: &str) -> bool {
    [
        "tcp connect error",
        "Connection refused",
        "connection refused",
        "error trying to connect",
        "dns error",
        "No route to host",
        "Network is unreachable",
    ]
    .iter()
    .any(|marker| detail.contains(marker))
}

/// Maps a client error of a `call`.
pub fn map(e: Error, call: Call) -> StoreError {
    match e {
        Error::GRpcStatus(status) => {
            let detail = with_causes(status.message(), std::error::Error::source(&status));
            // A status etcd itself sent names its server ("etcdserver: no leader").
            let answered = detail.starts_with("etcdserver:") || detail.starts_with("etcd");
            match status.code() {
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
                    if call == Call::Write =>
                {
                    StoreError::Indeterminate(crate::Detail::caused_by(
                        format!(
                            "the etcd transaction's answer was lost ({detail}); it may have committed"
                        ),
                        status,
                    ))
                }
                Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
                    if !answered =>
                {
                    StoreError::Unreachable(crate::Detail::caused_by(
                        format!("no etcd member answered: {detail}"),
                        status,
                    ))
                }
                code => StoreError::Failed(crate::Detail::caused_by(
                    format!("etcd answered {code:?}: {detail}{}", limit_hint(&detail)),
                    status,
                )),
            }
        }
        Error::TransportError(e) if call == Call::Write => {
            StoreError::Indeterminate(crate::Detail::caused_by(
                format!(
                    "the connection to etcd broke with a transaction in flight: {}",
                    with_causes(&e.to_string(), std::error::Error::source(&e))
                ),
                e,
            ))
        }
        Error::TransportError(e) => StoreError::Unreachable(crate::Detail::caused_by(
            format!(
                "etcd: {}",
                with_causes(&e.to_string(), std::error::Error::source(&e))
            ),
            e,
        )),
        Error::IoError(e) => {
            StoreError::Unreachable(crate::Detail::caused_by(format!("etcd: {e}"), e))
        }
        Error::InvalidArgs(ref why) | Error::EndpointError(ref why) => {
            StoreError::Invalid(crate::Detail::caused_by(format!("etcd: {why}"), e))
        }
        Error::InvalidUri(uri) => StoreError::Invalid(crate::Detail::caused_by(
            format!("etcd endpoint: {uri}"),
            uri,
        )),
        other => StoreError::Failed(crate::Detail::caused_by(format!("etcd: {other}"), other)),
    }
}

/// Which cluster setting an answered size limit is, so the operator knows what to raise:
/// etcd's own text names neither.
fn limit_hint(detail: &str) -> &'static str {
    if detail.contains("too many operations in txn request") {
        " (the cluster's --max-txn-ops is below this call's operations: row-fence's calls need up to 128, etcd's default; nothing was written)"
    } else if detail.contains("request is too large") {
        " (the cluster's --max-request-bytes, 1.5 MiB by default, is below this call's size; nothing was written)"
    } else if detail.contains("message larger than max") {
        " (an answer or request past the gRPC message limit: a record or batch that large is not stored)"
    } else {
        ""
    }
}

/// `message` followed by each cause the error carries: a transport error's own text is
/// only "transport error", the reason (a TLS alert, a refused connection) is in its causes.
fn with_causes(message: &str, mut cause: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut text = message.to_string();
    while let Some(e) = cause {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Status;

    #[test]
    fn answered_errors_are_store_errors_and_lost_writes_are_indeterminate() {
        let no_leader = || Error::GRpcStatus(Status::unavailable("etcdserver: no leader"));
        assert!(matches!(
            map(no_leader(), Call::Read),
            StoreError::Failed(_)
        ));
        assert!(map(no_leader(), Call::Write).may_have_committed());
        let refused = || Error::GRpcStatus(Status::unavailable("tcp connect error"));
        assert!(matches!(
            map(refused(), Call::Read),
            StoreError::Unreachable(_)
        ));
        let too_many = Error::GRpcStatus(Status::invalid_argument(
            "etcdserver: too many operations in txn request",
        ));
        let too_many = map(too_many, Call::Write);
        assert!(matches!(too_many, StoreError::Failed(_)));
        assert!(too_many.to_string().contains("--max-txn-ops"), "{too_many}");
        let too_large =
            Error::GRpcStatus(Status::invalid_argument("etcdserver: request is too large"));
        assert!(
            map(too_large, Call::Write)
                .to_string()
                .contains("--max-request-bytes")
        );
        let denied = Error::GRpcStatus(Status::permission_denied("etcdserver: permission denied"));
        assert!(matches!(map(denied, Call::Read), StoreError::Failed(_)));
    }
}
