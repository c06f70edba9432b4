//! The console's own state (which view, which pane, the selection, sort, filter, a write
//! waiting for its confirmation) and what each key does to it, as `top` does it
//! (ARCHITECTURE.md, "The operator's console"). Pure: a key and a snapshot in, a new state
//! and at most one command out; the terminal loop carries the command out.

use super::model::{BoardView, Refusal, RowView, Snapshot};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The four views, `1`–`4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Rows above, refusals below.
    Overview,
    /// Refusals with their action and detail.
    Refusals,
    /// Quarantined sessions and their denials.
    Quarantine,
    /// The daemon, its store and broker.
    Daemon,
}

impl View {
    /// Every view, in key order.
    pub const ALL: [View; 4] = [
        View::Overview,
        View::Refusals,
        View::Quarantine,
        View::Daemon,
    ];

    /// Its name in the tab line.
    pub fn name(self) -> &'static str {
        match self {
            View::Overview => "Rows",
            View::Refusals => "Refusals",
            View::Quarantine => "Quarantine",
            View::Daemon => "Daemon",
        }
    }

    /// How many panes `Tab` moves between.
    fn panes(self) -> usize {
        match self {
            View::Overview | View::Quarantine => 2,
            View::Refusals | View::Daemon => 1,
        }
    }
}

/// What the rows are sorted by (`s` cycles, `R` reverses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// Board, then row.
    Row,
    /// Holder, then board and row.
    Holder,
    /// Time left, least first.
    TimeLeft,
    /// Generation, highest first.
    Generation,
}

impl SortKey {
    /// Its name in the footer.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Row => "row",
            SortKey::Holder => "holder",
            SortKey::TimeLeft => "time left",
            SortKey::Generation => "generation",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::Row => SortKey::Holder,
            SortKey::Holder => SortKey::TimeLeft,
            SortKey::TimeLeft => SortKey::Generation,
            SortKey::Generation => SortKey::Row,
        }
    }
}

/// A row lease the operator asked to release, named as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseTarget {
    /// The board.
    pub board: String,
    /// The row.
    pub row: String,
    /// Its holder.
    pub lane: String,
    /// Its generation.
    pub generation: u64,
}

/// What the loop must do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Nothing but drawing again.
    None,
    /// Leave the console.
    Quit,
    /// Release this row lease (confirmed).
    Release(ReleaseTarget),
}

/// The console's state.
#[derive(Clone, Debug)]
pub struct Ui {
    /// The view shown.
    pub view: View,
    /// The pane `j`/`k` move in (index within the view).
    pub pane: usize,
    /// The selected line of each view's panes, `[view][pane]`.
    pub selected: [[usize; 2]; 4],
    /// The rows' order.
    pub sort: SortKey,
    /// Reversed order.
    pub reverse: bool,
    /// Only lines containing this text (board, row, holder, lane, reason, route, session).
    pub filter: String,
    /// True while `/` is being typed.
    pub editing_filter: bool,
    /// True while the help is shown.
    pub help: bool,
    /// A release waiting for `y`.
    pub confirm: Option<ReleaseTarget>,
    /// The last write's outcome, or why a key did nothing.
    pub message: Option<String>,
    /// `--allow-writes`: releases may be asked for.
    pub allow_writes: bool,
}

impl Ui {
    /// The state a console starts in.
    pub fn new(allow_writes: bool) -> Ui {
        Ui {
            view: View::Overview,
            pane: 0,
            selected: [[0; 2]; 4],
            sort: SortKey::Row,
            reverse: false,
            filter: String::new(),
            editing_filter: false,
            help: false,
            confirm: None,
            message: None,
            allow_writes,
        }
    }

    /// The selected line of a pane that lists `len` lines (a list that got shorter since
    /// the selection was made keeps its last line selected).
    pub fn selection(&self, view: View, pane: usize, len: usize) -> usize {
        self.selected[view as usize][pane.min(1)].min(len.saturating_sub(1))
    }

    /// Applies `key`; `snapshot` is what is on screen (the selection's bounds, the row a
    /// release names).
    pub fn on_key(&mut self, key: KeyEvent, snapshot: &Snapshot, now_ms: u64) -> Command {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Command::Quit;
        }
        if self.editing_filter {
            self.edit_filter(key.code);
            return Command::None;
        }
        if let Some(target) = self.confirm.take() {
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                return Command::Release(target);
            }
            self.message = Some("release cancelled; nothing was written".to_string());
            return Command::None;
        }
        if self.help {
            self.help = false;
            return if key.code == KeyCode::Char('q') {
                Command::Quit
            } else {
                Command::None
            };
        }
        match key.code {
            KeyCode::Char('q') => return Command::Quit,
            KeyCode::Esc => {
                self.filter.clear();
                self.message = None;
            }
            KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => self.help = true,
            KeyCode::Char(c @ '1'..='4') => {
                self.view = View::ALL[(c as u8 - b'1') as usize];
                self.pane = 0;
            }
            KeyCode::Tab => self.pane = (self.pane + 1) % self.view.panes(),
            KeyCode::BackTab => self.pane = (self.pane + self.view.panes() - 1) % self.view.panes(),
            KeyCode::Char('j') | KeyCode::Down => self.move_by(1, snapshot, now_ms),
            KeyCode::Char('k') | KeyCode::Up => self.move_by(-1, snapshot, now_ms),
            KeyCode::PageDown => self.move_by(10, snapshot, now_ms),
            KeyCode::PageUp => self.move_by(-10, snapshot, now_ms),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(isize::MIN / 2, snapshot, now_ms),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2, snapshot, now_ms),
            KeyCode::Char('/') => {
                self.editing_filter = true;
                self.filter.clear();
            }
            KeyCode::Char('s') | KeyCode::Char('>') => self.sort = self.sort.next(),
            KeyCode::Char('<') => {
                for _ in 0..3 {
                    self.sort = self.sort.next();
                }
            }
            KeyCode::Char('R') => self.reverse = !self.reverse,
            KeyCode::Char('x') => self.ask_release(snapshot, now_ms),
            _ => {}
        }
        Command::None
    }

    fn edit_filter(&mut self, code: KeyCode) {
        match code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !c.is_control() && self.filter.len() < 64 => self.filter.push(c),
            _ => {}
        }
        self.selected = [[0; 2]; 4];
    }

    fn move_by(&mut self, by: isize, snapshot: &Snapshot, now_ms: u64) {
        let len = self.pane_len(snapshot, now_ms);
        let slot = &mut self.selected[self.view as usize][self.pane.min(1)];
        let moved = (*slot as isize).saturating_add(by);
        *slot = moved.clamp(0, len.saturating_sub(1) as isize) as usize;
    }

    /// Lines in the pane in focus.
    fn pane_len(&self, snapshot: &Snapshot, now_ms: u64) -> usize {
        match (self.view, self.pane) {
            (View::Overview, 0) => visible_rows(snapshot, self, now_ms).len(),
            (View::Overview, _) | (View::Refusals, _) => visible_refusals(snapshot, self).len(),
            (View::Quarantine, 0) => snapshot.quarantine.sessions.len(),
            (View::Quarantine, _) => snapshot.quarantine.denials.len(),
            (View::Daemon, _) => 0,
        }
    }

    fn ask_release(&mut self, snapshot: &Snapshot, now_ms: u64) {
        if !(self.view == View::Overview && self.pane == 0) {
            self.message = Some("select a row in the Rows pane (1, then Tab) to release it".into());
            return;
        }
        if !self.allow_writes {
            self.message =
                Some("read-only: start row-fence top --allow-writes to release rows".to_string());
            return;
        }
        let rows = visible_rows(snapshot, self, now_ms);
        let Some((board, row)) = rows.get(self.selection(View::Overview, 0, rows.len())) else {
            self.message = Some("no row selected".to_string());
            return;
        };
        self.confirm = Some(ReleaseTarget {
            board: board.board.clone(),
            row: row.row.clone(),
            lane: row.holder.clone(),
            generation: row.generation,
        });
    }
}

/// True when `line` holds the filter (case-insensitive), or there is none.
fn matches(ui: &Ui, fields: &[&str]) -> bool {
    if ui.filter.is_empty() {
        return true;
    }
    let needle = ui.filter.to_lowercase();
    fields.iter().any(|f| f.to_lowercase().contains(&needle))
}

/// The rows the Rows pane lists, filtered and sorted: the one list the drawing and the
/// selection both read, so the selected line is the row a release names.
pub fn visible_rows<'a>(
    snapshot: &'a Snapshot,
    ui: &Ui,
    now_ms: u64,
) -> Vec<(&'a BoardView, &'a RowView)> {
    let elapsed = now_ms.saturating_sub(snapshot.taken_at_ms);
    let mut rows: Vec<(&BoardView, &RowView)> = snapshot
        .boards
        .iter()
        .flat_map(|b| b.rows.iter().map(move |r| (b, r)))
        .filter(|(b, r)| matches(ui, &[&b.board, &r.row, &r.holder]))
        .collect();
    rows.sort_by(|(ab, a), (bb, b)| {
        let by_row = (&ab.board, &a.row).cmp(&(&bb.board, &b.row));
        match ui.sort {
            SortKey::Row => by_row,
            SortKey::Holder => a.holder.cmp(&b.holder).then(by_row),
            SortKey::TimeLeft => a
                .left_after(elapsed)
                .cmp(&b.left_after(elapsed))
                .then(by_row),
            SortKey::Generation => b.generation.cmp(&a.generation).then(by_row),
        }
    });
    if ui.reverse {
        rows.reverse();
    }
    rows
}

/// The refusals listed, filtered, newest first.
pub fn visible_refusals<'a>(snapshot: &'a Snapshot, ui: &Ui) -> Vec<&'a Refusal> {
    snapshot
        .refusals
        .iter()
        .filter(|r| {
            matches(
                ui,
                &[
                    r.lane.as_deref().unwrap_or(""),
                    r.board.as_deref().unwrap_or(""),
                    r.row.as_deref().unwrap_or(""),
                    &r.reason,
                    r.route.label(),
                    r.session.as_deref().unwrap_or(""),
                ],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::model::{BoardView, RowView};

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn snapshot() -> Snapshot {
        let row = |row: &str, holder: &str, generation, left_ms| RowView {
            row: row.into(),
            holder: holder.into(),
            generation,
            left_ms,
            ..RowView::default()
        };
        Snapshot {
            boards: vec![BoardView {
                board: "b".into(),
                margin_ms: 5_000,
                rows: vec![
                    row("r1", "lane-b", 3, 60_000),
                    row("r2", "lane-a", 7, 1_000),
                ],
                error: None,
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_release_needs_allow_writes_a_selected_row_and_a_y() {
        let snap = snapshot();
        let mut ui = Ui::new(false);
        assert_eq!(ui.on_key(key('x'), &snap, 0), Command::None);
        assert!(ui.confirm.is_none());
        assert!(ui.message.as_deref().unwrap().contains("--allow-writes"));

        let mut ui = Ui::new(true);
        ui.on_key(key('j'), &snap, 0);
        ui.on_key(key('x'), &snap, 0);
        assert_eq!(ui.confirm.as_ref().map(|t| t.row.as_str()), Some("r2"));
        // Anything but y cancels, and writes nothing.
        assert_eq!(ui.on_key(key('n'), &snap, 0), Command::None);
        assert!(ui.confirm.is_none());
        ui.on_key(key('x'), &snap, 0);
        assert_eq!(
            ui.on_key(key('y'), &snap, 0),
            Command::Release(ReleaseTarget {
                board: "b".into(),
                row: "r2".into(),
                lane: "lane-a".into(),
                generation: 7
            })
        );
    }

    #[test]
    fn sort_filter_views_and_quit_keys_work_as_in_top() {
        let snap = snapshot();
        let mut ui = Ui::new(false);
        ui.on_key(key('s'), &snap, 0);
        assert_eq!(ui.sort, SortKey::Holder);
        assert_eq!(visible_rows(&snap, &ui, 0)[0].1.holder, "lane-a");
        ui.on_key(key('s'), &snap, 0);
        assert_eq!(visible_rows(&snap, &ui, 0)[0].1.row, "r2");
        ui.on_key(key('R'), &snap, 0);
        assert_eq!(visible_rows(&snap, &ui, 0)[0].1.row, "r1");
        ui.on_key(key('/'), &snap, 0);
        for c in "LANE-B".chars() {
            ui.on_key(key(c), &snap, 0);
        }
        ui.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), &snap, 0);
        assert_eq!(visible_rows(&snap, &ui, 0).len(), 1);
        // q typed into the filter is text, not quit.
        assert!(!ui.editing_filter);
        ui.on_key(key('3'), &snap, 0);
        assert_eq!(ui.view, View::Quarantine);
        ui.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE), &snap, 0);
        assert_eq!(ui.pane, 1);
        ui.on_key(key('?'), &snap, 0);
        assert!(ui.help);
        assert_eq!(ui.on_key(key('x'), &snap, 0), Command::None);
        assert!(!ui.help);
        assert_eq!(ui.on_key(key('q'), &snap, 0), Command::Quit);
    }
}
