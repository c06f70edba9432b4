//! `row-fence controller acquire | renew | release | show`.

use crate::flags::parse_ttl;
use crate::open::{store_for_read, store_for_write};
use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use row_fence_store::ControllerLease;
use row_fence_store::controller::{self, ControllerError};
use row_fence_store::judge::rfc3339;
use std::time::Duration;

/// Default controller lease time.
pub const DEFAULT_TTL: &str = "60s";

#[derive(clap::Args, Debug)]
pub struct ControllerArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Take the board's controller lease (epoch +1 unless it is already yours and live)
    Acquire(AcquireArgs),
    /// Extend your live controller lease
    Renew(RenewArgs),
    /// Give up your controller lease (the epoch counter stays)
    Release(Target),
    /// Show the controller lease
    Show(ShowArgs),
}

/// Whose lease on which board (every change names both).
#[derive(clap::Args, Debug)]
struct Target {
    /// Board slug
    board: String,
    /// The controller's owner id
    #[arg(long)]
    owner: String,
    /// Print the lease as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct AcquireArgs {
    #[command(flatten)]
    target: Target,
    /// Lease time, e.g. 30s, 5m
    #[arg(long, default_value = DEFAULT_TTL, value_parser = parse_ttl)]
    ttl: Duration,
    /// Take a live lease held by another owner
    #[arg(long)]
    takeover: bool,
}

#[derive(clap::Args, Debug)]
struct RenewArgs {
    #[command(flatten)]
    target: Target,
    /// Lease time from now, e.g. 30s, 5m
    #[arg(long, default_value = DEFAULT_TTL, value_parser = parse_ttl)]
    ttl: Duration,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// Board slug
    board: String,
    /// Print {"board","owner","epoch","expires_at_ms","live"} (owner, epoch and expiry null and live false when there is none)
    #[arg(long)]
    json: bool,
}

fn failure(e: ControllerError) -> Failure {
    if let ControllerError::Invalid(why) = e {
        return Failure::usage(why);
    }
    if e.is_refusal() {
        Failure::refused(e.to_string())
    } else {
        Failure::could_not(e.to_string())
    }
}

pub async fn run(args: ControllerArgs, settings: &Settings) -> Outcome {
    let store = match &args.action {
        Action::Show(_) => store_for_read(settings)?,
        _ => store_for_write(settings)?,
    };
    let store = store.as_ref();
    let ttl = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
    let (verb, c, lease) = match args.action {
        Action::Show(s) => {
            validate_board(&s.board).map_err(Failure::usage)?;
            let shown = controller::show(store, &s.board).await.map_err(failure)?;
            if s.json {
                // Always one object, so a reader asks `.live` whether or not there is a
                // lease (a bare `null` is no object to ask).
                out(&match &shown {
                    Some(l) => serde_json::json!({
                        "board": s.board,
                        "owner": l.owner,
                        "epoch": l.epoch,
                        "expires_at_ms": l.expires_at_ms,
                        "live": l.live,
                    }),
                    None => serde_json::json!({
                        "board": s.board,
                        "owner": null,
                        "epoch": null,
                        "expires_at_ms": null,
                        "live": false,
                    }),
                }
                .to_string());
            } else {
                match shown {
                    Some(l) => out(&format!(
                        "{} holds the controller lease of {} at epoch {} until {} ({})",
                        l.owner,
                        s.board,
                        l.epoch,
                        rfc3339(l.expires_at_ms),
                        if l.live { "live" } else { "expired" }
                    )),
                    None => out(&format!("{} has no controller lease", s.board)),
                }
            }
            return Ok(exit::ALLOWED);
        }
        Action::Acquire(a) => {
            let c = a.target;
            let lease = controller::acquire(store, &c.board, &c.owner, ttl(a.ttl), a.takeover)
                .await
                .map_err(failure)?;
            ("acquired", c, lease)
        }
        Action::Renew(r) => {
            let c = r.target;
            let lease = controller::renew(store, &c.board, &c.owner, ttl(r.ttl))
                .await
                .map_err(failure)?;
            ("renewed", c, lease)
        }
        Action::Release(c) => {
            let lease = controller::release(store, &c.board, &c.owner)
                .await
                .map_err(failure)?;
            ("released", c, lease)
        }
    };
    print(verb, &c, &lease);
    Ok(exit::ALLOWED)
}

fn print(verb: &str, c: &Target, lease: &ControllerLease) {
    if c.json {
        out(&serde_json::to_string(lease).expect("serializes"));
    }
    say!(
        "row-fence: {verb} the controller lease of {} for {} at epoch {} (until {})",
        c.board,
        lease.owner,
        lease.epoch,
        rfc3339(lease.expires_at_ms)
    );
}
