//! The console's loop on a real terminal (crossterm, through ratatui): gather a snapshot,
//! draw it, wait for a key until the next refresh is due, carry out what the key asked.
//! A refresh that finds the daemon gone draws it gone; nothing here keeps a stale view.

use super::draw::{Palette, draw};
use super::gather::Gatherer;
use super::model::Snapshot;
use super::ui::{Command, ReleaseTarget, Ui};
use ratatui::Terminal;
use ratatui::backend::{Backend, TestBackend};
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::{ledger, say};
use row_fence_resident::config::Settings;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Runs the console until `q`; every release it made is said on stderr once the screen is
/// given back, as `row-fence release` says it.
pub async fn run(
    gatherer: Gatherer,
    settings: &Settings,
    refresh: Duration,
    allow_writes: bool,
) -> Outcome {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Failure::usage(
            "row-fence top draws on a terminal; for a script, row-fence top --once --json prints the same data",
        ));
    }
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut terminal = ratatui::try_init()
        .map_err(|e| Failure::could_not(format!("cannot take over the terminal: {e}")))?;
    let mut written = Vec::new();
    let outcome = console(
        &mut terminal,
        gatherer,
        settings,
        refresh,
        Ui::new(allow_writes),
        Palette::new(no_color),
        &mut written,
    )
    .await;
    let restored = ratatui::try_restore();
    for line in &written {
        say!("row-fence: {line}");
    }
    outcome.map_err(|e| Failure::could_not(format!("the terminal failed: {e}")))?;
    restored.map_err(|e| Failure::could_not(format!("cannot give the terminal back: {e}")))?;
    Ok(exit::ALLOWED)
}

async fn console<B: Backend>(
    terminal: &mut Terminal<B>,
    mut gatherer: Gatherer,
    settings: &Settings,
    refresh: Duration,
    mut ui: Ui,
    palette: Palette,
    written: &mut Vec<String>,
) -> Result<(), TerminalFailed<B::Error>>
where
    B::Error: std::error::Error + 'static,
{
    let mut snapshot = gatherer.gather().await;
    let mut due = Instant::now() + refresh;
    loop {
        let now_ms = ledger::now_ms();
        terminal
            .draw(|f| draw(f, &snapshot, &ui, now_ms, palette))
            .map_err(TerminalFailed::Draw)?;
        let wait = due.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(TerminalFailed::Event)? {
            let Event::Key(key) = event::read().map_err(TerminalFailed::Event)? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match ui.on_key(key, &snapshot, now_ms) {
                Command::Quit => return Ok(()),
                Command::None => continue,
                Command::Release(target) => {
                    let said = release(&target, settings).await;
                    if let Ok(line) = &said {
                        written.push(line.clone());
                    }
                    ui.message = Some(said.unwrap_or_else(|e| e.to_string()));
                }
            }
        }
        snapshot = gatherer.gather().await;
        due = Instant::now() + refresh;
    }
}

/// Why the console's loop stopped short of `q`: the terminal failed under it.
#[derive(Debug, thiserror::Error)]
enum TerminalFailed<E: std::error::Error + 'static> {
    /// Drawing a frame failed (the backend's error).
    #[error("{0}")]
    Draw(#[source] E),
    /// Waiting for or reading a key failed.
    #[error("{0}")]
    Event(#[source] std::io::Error),
}

/// A release the console asked for that did not happen: `row-fence release`'s failure
/// (its exit code and sentence).
#[derive(Debug, thiserror::Error)]
#[error("not released (exit {}): {}", .0.code, .0.message)]
struct NotReleased(Failure);

/// Releases `target` through `row-fence release`'s own path; the sentence says what
/// happened (the store's fence log records the write as it records the CLI's).
async fn release(target: &ReleaseTarget, settings: &Settings) -> Result<String, NotReleased> {
    crate::leases::release_held(
        &target.board,
        &target.row,
        &target.lane,
        target.generation,
        None,
        None,
        settings,
    )
    .await
    .map(|d| {
        format!(
            "released {}/{} (generation {}) by {}",
            d.board, d.row, d.generation, d.lane
        )
    })
    .map_err(NotReleased)
}

/// The console's first view of `snapshot` on a `width`×`height` screen, as lines of text
/// (`--once` without `--json`, and the tests).
pub fn render_text(snapshot: &Snapshot, width: u16, height: u16, now_ms: u64) -> Vec<String> {
    render_with(
        snapshot,
        &Ui::new(false),
        width,
        height,
        now_ms,
        Palette::new(true),
    )
}

/// [`render_text`] in a given state.
pub fn render_with(
    snapshot: &Snapshot,
    ui: &Ui,
    width: u16,
    height: u16,
    now_ms: u64,
    palette: Palette,
) -> Vec<String> {
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
    if terminal
        .draw(|f| draw(f, snapshot, ui, now_ms, palette))
        .is_err()
    {
        return Vec::new();
    }
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}
