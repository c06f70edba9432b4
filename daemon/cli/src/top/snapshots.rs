//! Every view of the console drawn on ratatui's `TestBackend` from one fixed snapshot and
//! compared with the text checked in under `snapshots/` (`ROW_FENCE_BLESS=1` rewrites
//! them after a deliberate change; `git diff` then shows what a user will see change).

use super::draw::Palette;
use super::model::{
    BoardView, BrokerView, DaemonView, Denial, QuarantineView, Refusal, Route, RowView, Session,
    Snapshot,
};
use super::terminal::render_with;
use super::ui::{ReleaseTarget, Ui, View};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::PathBuf;

/// 2026-12-06T10:00:00Z.
const NOW: u64 = 1_796_551_200_000;

fn refusal(ago_s: u64, lane: &str, row: &str, route: Route, reason: &str) -> Refusal {
    Refusal {
        ts_ms: NOW - ago_s * 1000,
        verdict: "refused".into(),
        reason: reason.into(),
        route,
        lane: Some(lane.into()),
        board: Some("board-1".into()),
        row: Some(row.into()),
        action: "git push origin".into(),
        session: None,
        detail: format!("board-1/{row} is held by lane-b at generation 9, not by {lane}"),
    }
}

fn row(row: &str, holder: &str, generation: u64, left_s: i64) -> RowView {
    RowView {
        row: row.into(),
        holder: holder.into(),
        generation,
        expires_at_ms: (NOW as i64 + left_s * 1000) as u64,
        left_ms: left_s * 1000,
        tenant: None,
        scope: None,
    }
}

/// A console's worth of everything: a takeover (row-7 now lane-b's), a refusal on each
/// route, a lease under its margin, one expired, a row with a scope, a store whose
/// identity and etcd fields are not reported yet.
pub fn fixture() -> Snapshot {
    let mut scoped = row("row-9", "lane-c", 12, 5_400);
    scoped.scope = Some(vec!["refs/heads/lane-c/*".into()]);
    Snapshot {
        taken_at_ms: NOW,
        home: "/home/ops/.row-fence".into(),
        daemon: DaemonView {
            up: true,
            error: None,
            what_to_do: None,
            socket: "/home/ops/.row-fence/sock".into(),
            pid: Some(4242),
            version: Some("0.1.0".into()),
            stamp: Some("9c1f…e07a".into()),
            uptime_ms: Some(7_380_000),
            heartbeat_age_ms: Some(12_000),
            store: Some("redis://127.0.0.1:6379/0".into()),
            store_kind: Some("redis".into()),
            store_identity: None,
            role: Some("master".into()),
            replicas: Some(1),
            min_replicas: Some(1),
            durable: Some(true),
            store_checked_age_ms: Some(20_000),
            problems: Vec::new(),
            read_barrier: None,
            etcd_members: None,
            etcd_leader: None,
            asks: Some(1_234),
            allowed: Some(1_201),
            refused: Some(31),
            could_not_read: Some(2),
            asks_per_second: Some(3.5),
            broker: Some(BrokerView {
                keys: 1,
                read_keys: 1,
                lanes: 3,
                signed: 88,
                sign_refused: 4,
            }),
            mismatch: None,
        },
        boards: vec![
            BoardView {
                board: "board-1".into(),
                margin_ms: 30_000,
                rows: vec![
                    row("row-3", "lane-a", 4, 3_725),
                    row("row-7", "lane-b", 9, 20),
                    row("row-8", "lane-d", 6, -200),
                ],
                error: None,
            },
            BoardView {
                board: "board-2".into(),
                margin_ms: 5_000,
                rows: vec![scoped],
                error: None,
            },
        ],
        boards_note: None,
        refusals: vec![
            refusal(2, "lane-a", "row-7", Route::PrePush, "different_holder"),
            Refusal {
                action: "git push over ssh: git-receive-pack 'app.git'".into(),
                ..refusal(
                    5,
                    "lane-a",
                    "row-7",
                    Route::TransportGate,
                    "different_holder",
                )
            },
            Refusal {
                session: Some("sess-41".into()),
                ..refusal(9, "lane-a", "row-7", Route::Guard, "different_holder")
            },
            refusal(40, "lane-d", "row-8", Route::Broker, "lease_expired"),
            refusal(65, "lane-a", "row-7", Route::ForgeApi, "stale_generation"),
            Refusal {
                verdict: "could_not_read".into(),
                ..refusal(90, "lane-c", "row-9", Route::Ask, "timeout")
            },
        ],
        refusals_error: None,
        quarantine: QuarantineView {
            sessions: vec![
                Session {
                    session: "sess-41".into(),
                    since_ms: Some(NOW - 9_000),
                    descriptor: Some("/srv/lanes/a/.git/row-fence.json".into()),
                    refusal: Some("row-fence: REFUSED (different_holder) board-1/row-7".into()),
                    denials: 2,
                    unreadable: false,
                },
                Session {
                    session: "sess-17".into(),
                    unreadable: true,
                    ..Session::default()
                },
            ],
            denials_total: 5,
            denials: vec![
                Denial {
                    ts_ms: NOW - 3_000,
                    session: "sess-41".into(),
                    tool: "Bash".into(),
                },
                Denial {
                    ts_ms: NOW - 6_000,
                    session: "sess-41".into(),
                    tool: "mcp__github__merge_pull_request".into(),
                },
            ],
            error: None,
        },
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Draws `ui` over the fixture (at `now`, 1.5 s after the read) and compares.
fn check(name: &str, snapshot: &Snapshot, ui: &Ui, width: u16, height: u16) {
    let text = render_with(
        snapshot,
        ui,
        width,
        height,
        NOW + 1_500,
        Palette::new(false),
    )
    .iter()
    .map(|l| l.trim_end().to_string())
    .collect::<Vec<_>>()
    .join("\n")
        + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/top/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("ROW_FENCE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (ROW_FENCE_BLESS=1 writes it)", path.display()));
    assert_eq!(
        text, want,
        "{name}: the view changed (ROW_FENCE_BLESS=1 rewrites it)"
    );
}

fn ui_in(view: View) -> Ui {
    let mut ui = Ui::new(false);
    ui.view = view;
    ui
}

#[test]
fn the_rows_view_counts_down_and_marks_the_margin_and_the_expired() {
    check("overview", &fixture(), &Ui::new(false), 100, 24);
}

#[test]
fn the_refusals_view_names_each_route() {
    check("refusals", &fixture(), &ui_in(View::Refusals), 120, 16);
}

#[test]
fn the_quarantine_view_lists_sessions_and_their_denials() {
    check("quarantine", &fixture(), &ui_in(View::Quarantine), 100, 16);
}

#[test]
fn the_daemon_view_shows_absent_fields_as_a_dash() {
    check("daemon", &fixture(), &ui_in(View::Daemon), 100, 20);
}

#[test]
fn a_daemon_that_is_gone_is_drawn_gone() {
    let mut snapshot = fixture();
    snapshot.daemon = DaemonView {
        error: Some(
            "no daemon status from /home/ops/.row-fence/sock: cannot connect: Connection refused"
                .into(),
        ),
        socket: "/home/ops/.row-fence/sock".into(),
        ..DaemonView::default()
    };
    check("daemon_gone", &snapshot, &ui_in(View::Daemon), 100, 14);
    check("overview_gone", &snapshot, &Ui::new(false), 100, 12);
    // The header keeps its clock however long the reason: a gone daemon's view still
    // shows that it is live.
    let header = render_with(
        &snapshot,
        &Ui::new(false),
        60,
        12,
        NOW + 1_500,
        Palette::new(false),
    )
    .remove(0);
    assert!(
        header.starts_with("row-fence top  daemon GONE  ") && header.contains(" UTC: "),
        "{header}"
    );
}

#[test]
fn a_heartbeat_older_than_health_takes_is_marked_stale_in_words() {
    let lines = |snapshot: &Snapshot, view: View| {
        render_with(
            snapshot,
            &ui_in(view),
            120,
            20,
            NOW + 1_500,
            Palette::new(true),
        )
    };
    let fresh = fixture();
    assert!(!lines(&fresh, View::Overview)[0].contains("STALE"));
    let mut stale = fixture();
    stale.daemon.heartbeat_age_ms = Some(91_000);
    stale.daemon.store_checked_age_ms = Some(95_000);
    assert!(lines(&stale, View::Overview)[0].contains("HEARTBEAT STALE"));
    let daemon = lines(&stale, View::Daemon).join("\n");
    assert!(
        daemon.contains("heartbeat       1m31s ago: STALE"),
        "{daemon}"
    );
    assert!(daemon.contains("(checked 1m35s ago)"), "{daemon}");
}

#[test]
fn a_file_store_is_never_drawn_as_not_checked_yet() {
    let mut snapshot = fixture();
    snapshot.daemon.store_kind = Some("file".into());
    snapshot.daemon.role = None;
    snapshot.daemon.replicas = None;
    snapshot.daemon.min_replicas = None;
    snapshot.daemon.durable = None;
    snapshot.daemon.store_checked_age_ms = None;
    let daemon = render_with(
        &snapshot,
        &ui_in(View::Daemon),
        120,
        20,
        NOW + 1_500,
        Palette::new(true),
    )
    .join("\n");
    assert!(!daemon.contains("not checked yet"), "{daemon}");
    assert!(
        daemon.contains("health          nothing to check: the file store is this machine's disk"),
        "{daemon}"
    );
}

#[test]
fn a_lanes_text_is_drawn_with_its_controls_escaped_never_cut_or_hidden() {
    let mut snapshot = fixture();
    snapshot.refusals[0].action = "evil\u{1b}[2J\nNEWLINE\u{202e}gnp".into();
    snapshot.quarantine.sessions[0].session = "s\u{7}1".into();
    let text = |view| {
        render_with(
            &snapshot,
            &ui_in(view),
            160,
            20,
            NOW + 1_500,
            Palette::new(true),
        )
        .join("\n")
    };
    let refusals = text(View::Refusals);
    assert!(
        refusals.contains("evil\\u{1b}[2J\\u{a}NEWLINE\\u{202e}gnp"),
        "{refusals}"
    );
    assert!(text(View::Quarantine).contains("s\\u{7}1"));
}

#[test]
fn a_ledger_longer_than_the_console_keeps_says_older_refusals_are_in_the_file() {
    let mut snapshot = fixture();
    let title = |snapshot: &Snapshot| {
        render_with(
            snapshot,
            &ui_in(View::Refusals),
            160,
            12,
            NOW + 1_500,
            Palette::new(true),
        )[2]
        .clone()
    };
    assert!(
        !title(&snapshot).contains("older ones"),
        "{}",
        title(&snapshot)
    );
    let one = snapshot.refusals[0].clone();
    snapshot.refusals = vec![one; super::model::REFUSALS_KEPT];
    assert!(
        title(&snapshot).starts_with("Refusals: 500 newest first (refusal ledger: the newest it keeps; older ones are in refusals.jsonl)"),
        "{}",
        title(&snapshot)
    );
}

#[test]
fn a_terminal_too_small_says_so() {
    check("too_small", &fixture(), &Ui::new(false), 40, 8);
}

#[test]
fn help_filter_and_a_release_waiting_for_its_y_are_drawn() {
    let snap = fixture();
    let mut ui = Ui::new(false);
    ui.on_key(key(KeyCode::Char('?')), &snap, NOW);
    check("help", &snap, &ui, 100, 24);

    let mut ui = Ui::new(true);
    ui.on_key(key(KeyCode::Char('/')), &snap, NOW);
    for c in "lane-b".chars() {
        ui.on_key(key(KeyCode::Char(c)), &snap, NOW);
    }
    check("filter", &snap, &ui, 100, 16);

    ui.on_key(key(KeyCode::Enter), &snap, NOW);
    ui.on_key(key(KeyCode::Char('x')), &snap, NOW);
    assert_eq!(
        ui.confirm,
        Some(ReleaseTarget {
            board: "board-1".into(),
            row: "row-7".into(),
            lane: "lane-b".into(),
            generation: 9
        })
    );
    check("confirm_release", &snap, &ui, 100, 12);
}

#[test]
fn no_color_draws_no_colour_and_keeps_every_marker() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;
    let snap = fixture();
    let ui = Ui::new(false);
    let mut terminal = Terminal::new(TestBackend::new(100, 24)).unwrap();
    terminal
        .draw(|f| super::draw::draw(f, &snap, &ui, NOW, Palette::new(true)))
        .unwrap();
    let buffer = terminal.backend().buffer();
    assert!(
        buffer
            .content
            .iter()
            .all(|c| c.fg == Color::Reset && c.bg == Color::Reset)
    );
    let coloured = render_with(&snap, &ui, 100, 24, NOW, Palette::new(false));
    let plain = render_with(&snap, &ui, 100, 24, NOW, Palette::new(true));
    assert_eq!(
        coloured, plain,
        "the text is the same with and without colour"
    );
}

#[test]
fn a_long_board_scrolls_with_the_selection_and_draws_only_a_screenful() {
    let mut snap = fixture();
    snap.boards[0].rows = (0..1_000)
        .map(|i| row(&format!("r-{i:04}"), "lane-a", 1, 3_600))
        .collect();
    let mut ui = Ui::new(false);
    let screen = |ui: &Ui| render_with(&snap, ui, 100, 16, NOW, Palette::new(true)).join("\n");
    assert!(screen(&ui).contains("r-0000"));
    ui.on_key(key(KeyCode::End), &snap, NOW);
    let last = screen(&ui);
    assert!(
        last.contains("board-2"),
        "the last row is board-2's: {last}"
    );
    assert!(!last.contains("r-0000"), "{last}");
    ui.on_key(key(KeyCode::Char('k')), &snap, NOW);
    assert!(screen(&ui).contains("r-0999"));
}
