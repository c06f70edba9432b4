//! Drawing the console: a pure function of the snapshot, the console's state and the
//! time (ARCHITECTURE.md, "The operator's console"), so every view is tested on ratatui's
//! `TestBackend` against text checked in beside this file (`snapshots/`).
//!
//! What matters is never said by colour alone: a lease under its margin reads `<margin`,
//! an expired one `expired`, a daemon that is gone `GONE`, so `NO_COLOR` and a screen
//! reader lose nothing.

use super::model::{DaemonView, REFUSALS_KEPT, Refusal, Snapshot};
use super::ui::{Ui, View, visible_refusals, visible_rows};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

/// The smallest screen the console draws on; a smaller one is told so.
pub const MIN_WIDTH: u16 = 60;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 12;

/// The styles: coloured, or (`NO_COLOR`) bold and reverse only.
#[derive(Clone, Copy, Debug)]
pub struct Palette {
    color: bool,
}

impl Palette {
    /// Colours unless `no_color`.
    pub fn new(no_color: bool) -> Palette {
        Palette { color: !no_color }
    }

    fn paint(self, color: Color, fallback: Modifier) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default().add_modifier(fallback)
        }
    }

    fn bad(self) -> Style {
        self.paint(Color::Red, Modifier::BOLD)
    }

    fn warn(self) -> Style {
        self.paint(Color::Yellow, Modifier::BOLD)
    }

    fn good(self) -> Style {
        self.paint(Color::Green, Modifier::empty())
    }

    fn dim(self) -> Style {
        self.paint(Color::DarkGray, Modifier::empty())
    }

    fn heading(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}

/// Draws the whole console.
pub fn draw(frame: &mut Frame, snapshot: &Snapshot, ui: &Ui, now_ms: u64, palette: Palette) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "row-fence top: the terminal is {}x{}; it needs at least {MIN_WIDTH}x{MIN_HEIGHT}. Enlarge it, or q to quit.",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(header_line(snapshot, now_ms, palette)),
        header,
    );
    frame.render_widget(Paragraph::new(tab_line(ui, palette)), tabs);
    match ui.view {
        View::Overview => overview(frame, body, snapshot, ui, now_ms, palette),
        View::Refusals => refusals(frame, body, snapshot, ui, 0, true, palette),
        View::Quarantine => quarantine(frame, body, snapshot, ui, palette),
        View::Daemon => daemon(frame, body, snapshot, palette),
    }
    frame.render_widget(Paragraph::new(footer_line(ui, palette)), footer);
    if ui.help {
        help(frame, body);
    }
}

fn header_line(s: &Snapshot, now_ms: u64, p: Palette) -> Line<'static> {
    let d = &s.daemon;
    let mut spans = vec![Span::styled("row-fence top", p.heading()), Span::raw("  ")];
    if d.up {
        spans.push(Span::styled(
            format!("daemon pid {}", d.pid.unwrap_or_default()),
            p.good(),
        ));
        spans.push(Span::raw(format!(
            ", up {}, heartbeat {}, {} asks/s, {} store",
            short_span(d.uptime_ms.unwrap_or(0)),
            d.heartbeat_age_ms
                .map_or("never".to_string(), |ms| format!("{} ago", short_span(ms))),
            d.asks_per_second
                .map_or("—".to_string(), |r| format!("{r:.1}")),
            d.store_kind.as_deref().unwrap_or("—"),
        )));
        if d.heartbeat_age_ms.is_some_and(|ms| ms > STALE_HEARTBEAT_MS) {
            spans.push(Span::styled("  HEARTBEAT STALE", p.bad()));
        }
        if d.mismatch.is_some() {
            spans.push(Span::styled("  ANOTHER STORE", p.bad()));
        }
    } else {
        // The clock goes before the reason, which is long (a path, an OS error): cut at
        // the screen's edge, the reason loses its tail, never the ticking clock that
        // tells a live view of a gone daemon from a frozen one.
        spans.push(Span::styled("daemon GONE", p.bad()));
        push_clock(&mut spans, s.taken_at_ms, now_ms, p);
        spans.push(Span::raw(format!(
            ": {}",
            d.error.as_deref().unwrap_or("no answer")
        )));
        return Line::from(spans);
    }
    push_clock(&mut spans, s.taken_at_ms, now_ms, p);
    Line::from(spans)
}

/// The header's clock: when the snapshot was read, and how late it is when that is more
/// than 5 s ago.
fn push_clock(spans: &mut Vec<Span<'static>>, taken_at_ms: u64, now_ms: u64, p: Palette) {
    let late = now_ms.saturating_sub(taken_at_ms);
    spans.push(Span::styled(
        format!("  {} UTC", clock(taken_at_ms)),
        p.dim(),
    ));
    if late > 5_000 {
        spans.push(Span::styled(
            format!(" (not refreshed for {})", short_span(late)),
            p.bad(),
        ));
    }
}

fn tab_line(ui: &Ui, p: Palette) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, view) in View::ALL.iter().enumerate() {
        let text = format!(" {} {} ", i + 1, view.name());
        spans.push(if *view == ui.view {
            Span::styled(text, p.selected())
        } else {
            Span::raw(text)
        });
    }
    if !ui.filter.is_empty() || ui.editing_filter {
        spans.push(Span::raw(format!("  filter: {}", ui.filter)));
        if ui.editing_filter {
            spans.push(Span::styled("_", p.heading()));
        }
    }
    Line::from(spans)
}

fn footer_line(ui: &Ui, p: Palette) -> Line<'static> {
    if let Some(t) = &ui.confirm {
        return Line::from(Span::styled(
            format!(
                "Release {}/{} held by {} at generation {}? y to release, any other key cancels",
                t.board, t.row, t.lane, t.generation
            ),
            p.warn(),
        ));
    }
    if let Some(message) = &ui.message {
        return Line::from(Span::styled(message.clone(), p.warn()));
    }
    let writes = if ui.allow_writes {
        "  x release"
    } else {
        "  read-only"
    };
    Line::from(Span::styled(
        format!(
            "q quit  ? help  1-4 views  Tab pane  j/k move  / filter  s sort: {}{}{}",
            ui.sort.name(),
            if ui.reverse { " (reversed)" } else { "" },
            writes
        ),
        p.dim(),
    ))
}

fn block(title: String, focused: bool, p: Palette) -> Block<'static> {
    let style = if focused {
        p.heading()
    } else {
        Style::default()
    };
    Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(title, style))
}

fn overview(f: &mut Frame, area: Rect, s: &Snapshot, ui: &Ui, now_ms: u64, p: Palette) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(area);
    rows(f, top, s, ui, now_ms, p);
    refusals(f, bottom, s, ui, 1, false, p);
}

/// Text a lane could have put in the ledger or a quarantine record (an action, a
/// detail, a session id, a tool name) as the console draws it: every control, bidi or
/// invisible character written `\u{…}`, as every other human-readable line of the
/// fence writes it, so such text can neither hide part of itself (a newline cuts a
/// cell), reorder what is drawn, nor reach the terminal as a control.
fn plain(text: &str) -> String {
    row_fence_contract::spelling::escape_unsafe(text, false)
}

/// A pane's count: `shown`, or `shown of all (filtered)` when the filter hides some, so
/// a filter that matches nothing never reads as "no refusals".
fn counted(shown: usize, all: usize) -> String {
    if shown == all {
        shown.to_string()
    } else {
        format!("{shown} of {all} (filtered)")
    }
}

fn rows(f: &mut Frame, area: Rect, s: &Snapshot, ui: &Ui, now_ms: u64, p: Palette) {
    let elapsed = now_ms.saturating_sub(s.taken_at_ms);
    let list = visible_rows(s, ui, now_ms);
    let all = s.boards.iter().map(|b| b.rows.len()).sum::<usize>();
    let mut title = format!(
        "Rows: {} on {} board{}",
        counted(list.len(), all),
        s.boards.len(),
        if s.boards.len() == 1 { "" } else { "s" }
    );
    let errors: Vec<String> = s
        .boards
        .iter()
        .filter_map(|b| b.error.as_ref().map(|e| format!("{}: {e}", b.board)))
        .chain(s.boards_note.clone())
        .collect();
    if !errors.is_empty() {
        title.push_str(" — ");
        title.push_str(&errors.join("; "));
    }
    let focused = ui.view == View::Overview && ui.pane == 0;
    let (offset, selected) = window(&list, area, ui.selection(View::Overview, 0, list.len()));
    let table_rows = list
        .iter()
        .skip(offset)
        .take(area.height as usize)
        .map(|(b, r)| {
            let left = r.left_after(elapsed);
            let (text, style) = if left <= 0 {
                (
                    format!("expired {}", short_span(left.unsigned_abs())),
                    p.bad(),
                )
            } else if (left as u64) < b.margin_ms {
                (format!("{} <margin", short_span(left as u64)), p.warn())
            } else {
                (short_span(left as u64), Style::default())
            };
            Row::new(vec![
                Cell::from(b.board.clone()),
                Cell::from(r.row.clone()),
                Cell::from(r.holder.clone()),
                Cell::from(r.generation.to_string()),
                Cell::from(Span::styled(text, style)),
                Cell::from(r.scope.as_ref().map_or("—".to_string(), |s| s.join(" "))),
            ])
        });
    let table = Table::new(
        table_rows,
        [
            Constraint::Length(12),
            Constraint::Length(14),
            Constraint::Length(14),
            Constraint::Length(6),
            Constraint::Length(16),
            Constraint::Min(6),
        ],
    )
    .header(Row::new(["BOARD", "ROW", "HOLDER", "GEN", "LEFT", "SCOPE"]).style(p.heading()))
    .block(block(title, focused, p))
    .row_highlight_style(p.selected());
    render_table(f, table, area, selected.filter(|_| focused));
}

fn refusals(
    f: &mut Frame,
    area: Rect,
    s: &Snapshot,
    ui: &Ui,
    pane: usize,
    whole: bool,
    p: Palette,
) {
    let list = visible_refusals(s, ui);
    let mut title = format!(
        "Refusals: {} newest first (refusal ledger{})",
        counted(list.len(), s.refusals.len()),
        if s.refusals.len() >= REFUSALS_KEPT {
            ": the newest it keeps; older ones are in refusals.jsonl"
        } else {
            ""
        }
    );
    if let Some(e) = &s.refusals_error {
        title.push_str(&format!(" — cannot read: {e}"));
    }
    let line = |r: &Refusal| {
        let mut cells = vec![
            Cell::from(clock(r.ts_ms)),
            Cell::from(plain(r.lane.as_deref().unwrap_or("—"))),
            Cell::from(plain(&format!(
                "{}/{}",
                r.board.as_deref().unwrap_or("—"),
                r.row.as_deref().unwrap_or("—")
            ))),
            Cell::from(r.route.label()),
            Cell::from(Span::styled(
                if r.verdict == "could_not_read" {
                    format!("{} (could not read)", r.reason)
                } else {
                    r.reason.clone()
                },
                p.bad(),
            )),
        ];
        if whole {
            cells.push(Cell::from(plain(&if r.action.is_empty() {
                r.detail.clone()
            } else {
                format!("{}: {}", r.action, r.detail)
            })));
        }
        Row::new(cells)
    };
    let mut widths = vec![
        Constraint::Length(8),
        Constraint::Length(14),
        Constraint::Length(20),
        Constraint::Length(14),
        Constraint::Length(24),
    ];
    let mut header = vec!["TIME", "LANE", "BOARD/ROW", "ROUTE", "REASON"];
    if whole {
        widths.push(Constraint::Min(10));
        header.push("ACTION: DETAIL");
    }
    let focused = ui.pane == pane || whole;
    let (offset, selected) = window(&list, area, ui.selection(ui.view, pane, list.len()));
    let shown = list.iter().skip(offset).take(area.height as usize);
    let table = Table::new(shown.map(|r| line(r)), widths)
        .header(Row::new(header).style(p.heading()))
        .block(block(title, focused, p))
        .row_highlight_style(p.selected());
    render_table(f, table, area, selected.filter(|_| focused));
}

fn quarantine(f: &mut Frame, area: Rect, s: &Snapshot, ui: &Ui, p: Palette) {
    let q = &s.quarantine;
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let mut title = format!(
        "Quarantined sessions: {} (only read-only calls run)",
        q.sessions.len()
    );
    if let Some(e) = &q.error {
        title.push_str(&format!(" — cannot read: {e}"));
    }
    let (offset, selected) = window(
        &q.sessions,
        top,
        ui.selection(View::Quarantine, 0, q.sessions.len()),
    );
    let shown = q.sessions.iter().skip(offset).take(top.height as usize);
    let sessions = shown.map(|x| {
        Row::new(vec![
            Cell::from(plain(&x.session)),
            Cell::from(x.since_ms.map_or("—".to_string(), clock)),
            Cell::from(x.denials.to_string()),
            Cell::from(if x.unreadable {
                Span::styled("record unreadable (counts as quarantined)", p.bad())
            } else {
                Span::raw(plain(x.refusal.as_deref().unwrap_or("—")))
            }),
        ])
    });
    let table = Table::new(
        sessions,
        [
            Constraint::Length(24),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["SESSION", "SINCE", "DENIED", "REFUSAL"]).style(p.heading()))
    .block(block(title, ui.pane == 0, p))
    .row_highlight_style(p.selected());
    render_table(f, table, top, selected.filter(|_| ui.pane == 0));

    let (offset, selected) = window(
        &q.denials,
        bottom,
        ui.selection(View::Quarantine, 1, q.denials.len()),
    );
    let shown = q.denials.iter().skip(offset).take(bottom.height as usize);
    let denials = shown.map(|d| {
        Row::new(vec![
            Cell::from(clock(d.ts_ms)),
            Cell::from(plain(&d.session)),
            Cell::from(plain(&d.tool)),
        ])
    });
    let table = Table::new(
        denials,
        [
            Constraint::Length(8),
            Constraint::Length(24),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["TIME", "SESSION", "TOOL"]).style(p.heading()))
    .block(block(
        format!(
            "Denied in quarantine: {} in all, newest first",
            q.denials_total
        ),
        ui.pane == 1,
        p,
    ))
    .row_highlight_style(p.selected());
    render_table(f, table, bottom, selected.filter(|_| ui.pane == 1));
}

fn daemon(f: &mut Frame, area: Rect, s: &Snapshot, p: Palette) {
    let d = &s.daemon;
    let mut lines = Vec::new();
    let pair = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<16}"), p.heading()),
            Span::raw(v),
        ])
    };
    if !d.up {
        lines.push(Line::from(vec![
            Span::styled("daemon          GONE: ", p.bad()),
            Span::raw(d.error.clone().unwrap_or_default()),
        ]));
        lines.push(pair(
            "what to do",
            d.what_to_do.clone().unwrap_or_else(|| {
                "start it with row-fence-resident (same --home/--socket), or load its launchd/systemd job".into()
            }),
        ));
    } else {
        daemon_lines(d, &mut lines, p);
    }
    lines.push(pair("socket", d.socket.clone()));
    lines.push(pair("home", s.home.clone()));
    lines.push(pair(
        "quarantine",
        format!(
            "{} sessions now, {} calls denied in all",
            s.quarantine.sessions.len(),
            s.quarantine.denials_total
        ),
    ));
    f.render_widget(
        Paragraph::new(lines)
            .block(block("Daemon".into(), true, p))
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// The heartbeat age past which `row-fence health` says unhealthy by default (its
/// `--max-age 90s`): the daemon writes the heartbeat only after a store call succeeded,
/// so an older one means the store, or the writer, is failing.
const STALE_HEARTBEAT_MS: u64 = 90_000;

/// The heartbeat's age, marked `STALE` (in words, so `NO_COLOR` keeps it) once older
/// than `row-fence health` accepts.
fn heartbeat_span(age_ms: Option<u64>, p: Palette) -> Span<'static> {
    match age_ms {
        None => Span::styled("never written", p.bad()),
        Some(ms) if ms > STALE_HEARTBEAT_MS => Span::styled(
            format!(
                "{} ago: STALE (row-fence health takes 90s at most: the store calls fail, or the daemon is stuck)",
                short_span(ms)
            ),
            p.bad(),
        ),
        Some(ms) => Span::raw(format!("{} ago", short_span(ms))),
    }
}

fn daemon_lines(d: &DaemonView, lines: &mut Vec<Line<'static>>, p: Palette) {
    let pair = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<16}"), p.heading()),
            Span::raw(v),
        ])
    };
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
    let count = |v: Option<u64>| v.map_or("—".to_string(), |n| n.to_string());
    lines.push(pair(
        "daemon",
        format!(
            "pid {}, version {}, up {}",
            count(d.pid.map(u64::from)),
            or_dash(&d.version),
            short_span(d.uptime_ms.unwrap_or(0))
        ),
    ));
    lines.push(pair("code stamp", or_dash(&d.stamp)));
    lines.push(Line::from(vec![
        Span::styled(format!("{:<16}", "heartbeat"), p.heading()),
        heartbeat_span(d.heartbeat_age_ms, p),
    ]));
    lines.push(pair(
        "store",
        format!("{} ({})", or_dash(&d.store), or_dash(&d.store_kind)),
    ));
    lines.push(pair("identity", or_dash(&d.store_identity)));
    let health = match d.durable {
        Some(true) => Span::styled("durable", p.good()),
        Some(false) => Span::styled("NOT durable: grants are refused", p.bad()),
        None => Span::raw("not checked yet"),
    };
    if d.durable.is_none() && d.store_kind.as_deref() == Some("file") {
        // The embedded file store has no role, replicas or durability setting to check
        // (it syncs every write to this machine's disk): "not checked yet" would never end.
        lines.push(pair(
            "health",
            "nothing to check: the file store is this machine's disk, no role or replicas".into(),
        ));
    } else {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<16}", "health"), p.heading()),
            Span::raw(format!(
                "{}, {} replicas, writes wait for {}; ",
                or_dash(&d.role),
                count(d.replicas),
                count(d.min_replicas)
            )),
            health,
            Span::raw(d.store_checked_age_ms.map_or(String::new(), |ms| {
                format!(" (checked {} ago)", short_span(ms))
            })),
        ]));
    }
    for problem in &d.problems {
        lines.push(Line::from(Span::styled(
            format!("{:<16}{problem}", ""),
            p.bad(),
        )));
    }
    lines.push(pair("read barrier", or_dash(&d.read_barrier)));
    lines.push(pair(
        "etcd",
        format!(
            "members {}, leader {}",
            d.etcd_members
                .as_ref()
                .map_or("—".to_string(), |m| m.join(", ")),
            or_dash(&d.etcd_leader)
        ),
    ));
    lines.push(pair(
        "asks",
        format!(
            "{} answered: {} allowed, {} refused, {} could not read; {} asks/s",
            count(d.asks),
            count(d.allowed),
            count(d.refused),
            count(d.could_not_read),
            d.asks_per_second
                .map_or("—".to_string(), |r| format!("{r:.1}"))
        ),
    ));
    lines.push(pair(
        "broker",
        d.broker.as_ref().map_or("off".to_string(), |b| {
            format!(
                "{} push keys, {} read keys, {} lanes; {} signed, {} sign requests refused",
                b.keys, b.read_keys, b.lanes, b.signed, b.sign_refused
            )
        }),
    ));
    if let Some(m) = &d.mismatch {
        lines.push(Line::from(Span::styled(
            format!(
                "{:<16}{m}: the rows shown are not the ones it judges",
                "ANOTHER STORE"
            ),
            p.bad(),
        )));
    }
}

/// The part of a list a table of `area` shows, so only the lines on screen are built (a
/// board of thousands of rows costs a screenful per draw): the first line shown, and the
/// selected line's place among those shown (`None` for an empty list). The selection stays
/// on screen as `top` keeps it: the list scrolls once it reaches the last line.
fn window<T>(list: &[T], area: Rect, selected: usize) -> (usize, Option<usize>) {
    // The block's top border and the header take two lines.
    let lines = (area.height as usize).saturating_sub(2).max(1);
    if list.is_empty() {
        return (0, None);
    }
    let offset = (selected + 1).saturating_sub(lines);
    (offset, Some(selected - offset))
}

/// Renders a table whose lines are already the window's, with `selected` highlighted.
fn render_table(f: &mut Frame, table: Table, area: Rect, selected: Option<usize>) {
    let mut state = TableState::default();
    state.select(selected);
    f.render_stateful_widget(table, area, &mut state);
}

/// The keys, over the body.
fn help(f: &mut Frame, body: Rect) {
    let text = vec![
        Line::from("q            quit (Ctrl-C too)"),
        Line::from("?  h         this help; any key closes it"),
        Line::from("1 2 3 4      views: rows, refusals, quarantine, daemon"),
        Line::from("Tab          next pane (Shift-Tab: previous)"),
        Line::from("j k ↓ ↑      move; PgDn PgUp, g G: page, top, bottom"),
        Line::from("/            filter (Enter keeps it, Esc clears it)"),
        Line::from("s > <        sort rows by row, holder, time left, generation"),
        Line::from("R            reverse the order"),
        Line::from("x            release the selected row (--allow-writes; asks y)"),
    ];
    let width = 66.min(body.width);
    let height = (text.len() as u16 + 2).min(body.height);
    let area = Rect {
        x: body.x + (body.width - width) / 2,
        y: body.y + (body.height - height) / 2,
        width,
        height,
    };
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(text).block(Block::default().borders(Borders::ALL).title("Keys")),
        area,
    );
}

/// `HH:MM:SS` (UTC) of ms since the Unix epoch.
pub fn clock(ms: u64) -> String {
    let secs = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A span in two units at most: `45s`, `4m10s`, `1h02m`, `3d04h`.
pub fn short_span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s / 60 % 60),
        _ => format!("{}d{:02}h", s / 86_400, s / 3_600 % 24),
    }
}
