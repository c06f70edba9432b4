//! `row-fence renew|release --via-daemon`: a lane's own renew and release asked of the
//! daemon on the key broker's socket (an agent-protocol extension), for lanes that hold
//! no store credentials (ARCHITECTURE.md, "Key broker"). The daemon decides which lane
//! and which token from this process's uid; nothing here names either.

use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::{exit, say};
use row_fence_resident::broker::lease::{LeaseAnswer, LeaseRequest, RELEASE, RENEW};
use row_fence_store::judge::rfc3339;
use ssh_agent_lib::agent::Session;
use ssh_agent_lib::proto::Extension;
use std::path::PathBuf;
use std::time::Duration;

/// How long the daemon gets to answer (it bounds its store call by 5 s).
const ANSWER_WITHIN: Duration = Duration::from_secs(8);

/// Renews this uid's lane's lease for `ttl_ms`.
pub async fn renew(agent: Option<PathBuf>, ttl_ms: u64, json: bool) -> Outcome {
    let answer = ask(agent, RENEW, &LeaseRequest { ttl_ms }).await?;
    report(&answer, json, "renewed")
}

/// Releases this uid's lane's lease.
pub async fn release(agent: Option<PathBuf>, json: bool) -> Outcome {
    let answer = ask(agent, RELEASE, &LeaseRequest::default()).await?;
    report(&answer, json, "released")
}

async fn ask(
    agent: Option<PathBuf>,
    name: &str,
    request: &LeaseRequest,
) -> Result<LeaseAnswer, Failure> {
    let socket = agent
        .or_else(|| {
            std::env::var_os("SSH_AUTH_SOCK")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .ok_or_else(|| {
            Failure::usage("--via-daemon needs --agent or SSH_AUTH_SOCK (the key broker's socket)")
        })?;
    let stream = tokio::net::UnixStream::connect(&socket)
        .await
        .map_err(|e| {
            Failure::could_not(format!(
                "cannot connect to the key broker {}: {e}",
                socket.display()
            ))
        })?;
    let mut client = ssh_agent_lib::client::Client::new(stream);
    let body = serde_json::to_vec(request).expect("a lease request serializes");
    let sent = Extension {
        name: name.to_string(),
        details: body.into(),
    };
    let answered = tokio::time::timeout(ANSWER_WITHIN, client.extension(sent))
        .await
        .map_err(|_| {
            Failure::could_not(format!(
                "the key broker did not answer within {ANSWER_WITHIN:?}; the lease may or may not have changed (row-fence show tells)"
            ))
        })?
        .map_err(|e| {
            Failure::could_not(format!(
                "the agent on {} refused the request ({e}): is it row-fence's key broker?",
                socket.display()
            ))
        })?;
    let Some(reply) = answered.filter(|r| r.name == name) else {
        return Err(Failure::could_not(format!(
            "the agent on {} did not answer the request: is it row-fence's key broker?",
            socket.display()
        )));
    };
    serde_json::from_slice(reply.details.as_ref())
        .map_err(|e| Failure::could_not(format!("the key broker's answer is not valid: {e}")))
}

fn report(answer: &LeaseAnswer, json: bool, verb: &str) -> Outcome {
    if !answer.ok {
        return Err(if answer.refused {
            Failure::refused(&answer.error)
        } else {
            Failure::could_not(&answer.error)
        });
    }
    if json {
        out(&serde_json::to_string(answer).expect("an answer serializes"));
    } else {
        let until = answer
            .expires_at_ms
            .map_or(String::new(), |ms| format!(" until {}", rfc3339(ms)));
        say!(
            "row-fence: {verb} {}/{} for {} at generation {}{until} (through the daemon)",
            answer.board.as_deref().unwrap_or("?"),
            answer.row.as_deref().unwrap_or("?"),
            answer.lane.as_deref().unwrap_or("?"),
            answer.generation.unwrap_or(0),
        );
    }
    Ok(exit::ALLOWED)
}
