//! `row-fence token add`: the forge API endpoint's token, held only in the running
//! daemon's memory (ARCHITECTURE.md, "Forge API"), sent over its control socket as `keys
//! add` sends a key: to the daemon's own uid's socket only, never written anywhere. Gone
//! when the daemon stops: the forge API answers 503 until it is added again.

use crate::keys::exchange;
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{ForgeTokenAdd, Op, PROTOCOL_VERSION, Request};
use row_fence_contract::{exit, say};
use row_fence_resident::config::Settings;
use std::path::{Path, PathBuf};
use zeroize::{Zeroize, Zeroizing};

/// A token file or stdin is refused above this size.
const MAX_TOKEN_BYTES: u64 = 4096;

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TokenCommand {
    /// Load the forge's token into the running daemon's memory, for the forge API and the push proxy's HTTPS forges (gone when it stops)
    Add(TokenAddArgs),
}

#[derive(clap::Args, Debug)]
struct TokenAddArgs {
    /// A file holding the token (the caller's uid's, mode 600); `-` reads it from stdin
    file: PathBuf,
    /// The push proxy's HTTPS forge this token is for (one of the daemon's `--push-forge
    /// https://…`), when it has more than one: each forge gets only its own token
    #[arg(long, value_name = "URL")]
    forge: Option<String>,
}

/// Runs a `token` command.
pub fn token(args: TokenArgs, settings: &Settings) -> Outcome {
    let TokenCommand::Add(add) = args.command;
    row_fence_resident::broker::harden()
        .map_err(|e| Failure::could_not(format!("cannot protect this process's memory: {e}")))?;
    let token = read_token(&add.file)?;
    let mut request = Request {
        v: PROTOCOL_VERSION,
        op: Op::ForgeTokenAdd(ForgeTokenAdd {
            token: token.trim().to_string(),
            forge: add.forge.clone(),
        }),
    };
    let mut line = request.to_line();
    if let Op::ForgeTokenAdd(add) = &mut request.op {
        add.token.zeroize();
    }
    let answer = exchange(settings, &line);
    line.zeroize();
    let answer = answer?;
    say!(
        "row-fence: {} (held in the daemon's memory only: add it again after the daemon restarts)",
        answer.detail
    );
    Ok(exit::ALLOWED)
}

fn read_token(file: &Path) -> Result<Zeroizing<String>, Failure> {
    crate::keys::read_secret(file, MAX_TOKEN_BYTES, "token", "a token file")
}
