//! What fits in a `status` answer. A request may be 64 KiB and the location map holds as
//! many tenants as the operator has, but a `status` answer is one protocol message, at
//! most `MAX_MESSAGE_BYTES` (64 KiB): the lists in it are kept within byte budgets (the
//! newest refusals, the first map rows), each text field cut, and what was left out is
//! counted in the answer.

use serde::Serialize;

/// Each text field of a refusal kept for `status` (and logged) is cut to this many bytes.
pub const FIELD_BYTES: usize = 240;

/// The daemon's recent refusals take at most this many bytes of JSON in a `status` answer.
pub const REFUSALS_BYTES: usize = 24 * 1024;

/// The location fence's recent refusals, likewise.
pub const LOCATION_REFUSALS_BYTES: usize = 8 * 1024;

/// The location map's rows, likewise.
pub const MAP_ROWS_BYTES: usize = 16 * 1024;

/// An answer's detail is cut to this many bytes: it may quote what the peer sent (a board
/// that is not a slug, serde's account of a bad field, a foreign home), escaped, so it can
/// be several times the request's size.
pub const DETAIL_BYTES: usize = 2 * 1024;

/// The location fence's last fetch error is cut to this many bytes (it quotes the map).
pub const FETCH_ERROR_BYTES: usize = 1024;

/// Each text field of a refusal ledger record is cut to this many bytes, so the ledger
/// writer keeps up with a flood and its queue stays small (a request may be 64 KiB).
pub const LEDGER_FIELD_BYTES: usize = 4 * 1024;

/// Cuts `text` to at most [`FIELD_BYTES`] on a character boundary, marking the cut.
pub fn cut(text: &mut String) {
    cut_to(text, FIELD_BYTES);
}

/// Cuts `text` to at most `max` bytes (≥ 4) on a character boundary, marking the cut.
pub fn cut_to(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

/// The items taken in order from `items` while their JSON fits in `budget` bytes, and how
/// many were left out. Pass the newest first to keep the newest.
pub fn within<'a, T: Serialize + Clone + 'a>(
    items: impl ExactSizeIterator<Item = &'a T>,
    budget: usize,
) -> (Vec<T>, u64) {
    let total = items.len();
    let mut kept = Vec::new();
    let mut bytes = 0;
    for item in items {
        bytes += serde_json::to_vec(item).map_or(usize::MAX / 2, |json| json.len() + 1);
        if bytes > budget {
            break;
        }
        kept.push(item.clone());
    }
    let omitted = (total - kept.len()) as u64;
    (kept, omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_field_is_cut_on_a_character_boundary_and_marked() {
        let mut text = "é".repeat(FIELD_BYTES);
        cut(&mut text);
        assert!(text.len() <= FIELD_BYTES);
        assert!(text.ends_with('…'));
        let mut short = "git push".to_string();
        cut(&mut short);
        assert_eq!(short, "git push");
    }

    #[test]
    fn items_are_kept_in_order_while_they_fit_and_the_rest_counted() {
        // 97 characters: 99 bytes of JSON, 100 with the separator counted.
        let items: Vec<String> = (0..100).map(|i| format!("{i:0>97}")).collect();
        let (kept, omitted) = within(items.iter().rev(), 1_000);
        assert_eq!(kept.len(), 10);
        assert_eq!(kept[0], items[99]);
        assert_eq!(omitted, 90);
        let (all, none) = within(items.iter(), usize::MAX / 4);
        assert_eq!((all.len(), none), (100, 0));
    }
}
