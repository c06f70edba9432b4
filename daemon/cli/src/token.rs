//! `row-fence token add`: the forge API endpoint's token, held only in the running
//! daemon's memory (ARCHITECTURE.md, "Forge API"), sent over its control socket as `keys
//! add` sends a key: to the daemon's own uid's socket only, never written anywhere. Gone
//! when the daemon stops: the forge API answers 503 until it is added again.

use crate::keys::exchange;
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{ForgeTokenAdd, Op, PROTOCOL_VERSION, Request};
use row_fence_contract::{exit, paths, say};
use row_fence_resident::config::Settings;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
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
    /// Load the forge API's token into the running daemon's memory (gone when it stops)
    Add(TokenAddArgs),
}

#[derive(clap::Args, Debug)]
struct TokenAddArgs {
    /// A file holding the token (the caller's uid's, mode 600); `-` reads it from stdin
    file: PathBuf,
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
    let mut text = Zeroizing::new(String::new());
    if file == Path::new("-") {
        std::io::stdin()
            .take(MAX_TOKEN_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("cannot read the token from stdin: {e}")))?;
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let meta = opened
            .metadata()
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
        let uid = paths::euid();
        if meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(Failure::usage(format!(
                "{}: owned by uid {} with mode {:03o}; a token file must be uid {uid}'s with no group or other bits (chmod 600)",
                file.display(),
                meta.uid(),
                meta.mode() & 0o777
            )));
        }
        opened
            .take(MAX_TOKEN_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
    }
    if text.trim().is_empty() {
        return Err(Failure::usage("no token given".to_string()));
    }
    if text.len() as u64 > MAX_TOKEN_BYTES {
        return Err(Failure::usage(format!(
            "the token is over {MAX_TOKEN_BYTES} bytes"
        )));
    }
    Ok(text)
}
