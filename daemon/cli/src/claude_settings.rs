//! The agent hook's entry in a Claude Code settings file: adds it, finds it, removes it.
//!
//! The entry is `hooks/claude-settings.json`'s `PreToolUse` entry (matcher `Bash`, an
//! explicit `timeout` longer than the guard's deadline for the whole hook) with the
//! command running `row-fence-guard`, and the installed `guard-bash.sh` shim only when
//! the guard cannot answer. The file is edited as text, never
//! re-serialized: install only **inserts** one chunk (the entry, or the `PreToolUse` or
//! `hooks` member holding it when the file has none), and rollback removes exactly that
//! chunk, so install then rollback gives back the same bytes and every other setting, its
//! order, spacing and comments-free formatting stay as the operator wrote them.
//!
//! How rollback knows which chunk it inserted: an entry inserted into an existing array
//! always follows a separator or a newline, while a `PreToolUse` array or `hooks` object
//! that install created is written compactly around the entry (`[ENTRY]`,
//! `{"PreToolUse": [ENTRY]}`). A container in exactly that shape is removed whole.

use serde_json::Value;

/// The shipped settings snippet; its entry is the one installed.
pub const SNIPPET: &str = include_str!("../../../hooks/claude-settings.json");

/// The shipped shim (NEVER RAN, CUT OFF MID-ASK), written under the home by
/// `row-fence install claude-hook`.
pub const GUARD_BASH: &str = include_str!("../../../hooks/guard-bash.sh");

/// What a missing settings file is taken to be (and what a file that is this exactly
/// after rollback is removed as).
pub const EMPTY: &str = "{}\n";

/// What install or rollback did to the text.
#[derive(Debug, PartialEq, Eq)]
pub enum Edit {
    /// The new text (`None`: remove the file; it held nothing but our entry).
    Changed(Option<String>),
    /// Install: an entry with this command is already there. Rollback: none is.
    Unchanged,
}

/// The `PreToolUse` entry to install: the snippet's entry with `command` replaced, as one
/// line of JSON. Errors if the snippet is not the shape this module writes.
pub fn entry(command: &str) -> Result<String, String> {
    let snippet: Value =
        serde_json::from_str(SNIPPET).map_err(|e| format!("the settings snippet: {e}"))?;
    let entry = &snippet["hooks"]["PreToolUse"][0];
    let hook = &entry["hooks"][0];
    let (Some(matcher), Some(kind), Some(timeout)) = (
        entry["matcher"].as_str(),
        hook["type"].as_str(),
        hook["timeout"].as_u64(),
    ) else {
        return Err("the settings snippet has no PreToolUse entry with a timeout".into());
    };
    let quote = |s: &str| Value::String(s.to_string()).to_string();
    Ok(format!(
        "{{\"matcher\": {}, \"hooks\": [{{\"type\": {}, \"command\": {}, \"timeout\": {timeout}}}]}}",
        quote(matcher),
        quote(kind),
        quote(command)
    ))
}

/// The snippet's hook `timeout`, in seconds (Claude Code's unit for it).
pub fn timeout_s() -> Option<u64> {
    let snippet: Value = serde_json::from_str(SNIPPET).ok()?;
    snippet["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"].as_u64()
}

/// Adds `entry` (from [`entry`]) to the settings `text` (`None`: no file yet) unless an
/// entry whose hook command is `command` is there already. Errors: the text is not a JSON
/// object, or its `hooks` / `hooks.PreToolUse` is not an object / array.
pub fn install(text: Option<&str>, entry: &str, command: &str) -> Result<Edit, String> {
    let text = text.unwrap_or(EMPTY);
    let doc = Doc::parse(text)?;
    if doc.find_ours(command)?.is_some() {
        return Ok(Edit::Unchanged);
    }
    let top = doc.object(doc.root)?;
    let (at, chunk) = match top.last("hooks") {
        None => doc.insert(&top, &format!("\"hooks\": {{\"PreToolUse\": [{entry}]}}")),
        Some(hooks) => {
            let hooks = doc.object(hooks.value)?;
            match hooks.last("PreToolUse") {
                None => doc.insert(&hooks, &format!("\"PreToolUse\": [{entry}]")),
                Some(pre) => doc.insert(&doc.array(pre.value)?, entry),
            }
        }
    };
    let mut out = text.to_string();
    out.insert_str(at, &chunk);
    Ok(Edit::Changed(Some(out)))
}

/// Removes the entry whose hook command is `command` from the settings `text`, with
/// whatever install created around it. `None` text, or no such entry: unchanged.
pub fn rollback(text: Option<&str>, command: &str) -> Result<Edit, String> {
    let Some(text) = text else {
        return Ok(Edit::Unchanged);
    };
    let doc = Doc::parse(text)?;
    let Some(ours) = doc.find_ours(command)? else {
        return Ok(Edit::Unchanged);
    };
    let entry = doc.slice(ours.entry);
    let (container, child) = if doc.slice(ours.pre_tool_use.value) != format!("[{entry}]") {
        (ours.array, ours.index)
    } else if doc.slice(ours.hooks.value) != format!("{{\"PreToolUse\": [{entry}]}}") {
        (ours.hooks_object, ours.pre_tool_use_index)
    } else {
        (ours.top, ours.hooks_index)
    };
    let (start, end) = doc.removal(&container, child);
    let mut out = text.to_string();
    out.replace_range(start..end, "");
    Ok(Edit::Changed((out != EMPTY).then_some(out)))
}

/// A byte range `[start, end)` of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// An object member: its key's start and its value.
#[derive(Clone, Copy, Debug)]
struct Member {
    key_start: usize,
    value: Span,
}

/// An object's or array's brackets and children (members from their key, elements).
#[derive(Clone, Debug)]
struct Container {
    /// The `{` or `[`.
    open: usize,
    /// Each child's span: for a member, from its key to the end of its value.
    children: Vec<Span>,
    /// For objects: each member's key, decoded.
    keys: Vec<String>,
    members: Vec<Member>,
}

impl Container {
    /// The last member named `key` (JSON readers keep the last of duplicates).
    fn last(&self, key: &str) -> Option<Member> {
        self.keys
            .iter()
            .rposition(|k| k == key)
            .map(|i| self.members[i])
    }
}

/// Where our entry is, and the containers around it.
struct Ours {
    entry: Span,
    array: Container,
    index: usize,
    pre_tool_use: Member,
    hooks_object: Container,
    pre_tool_use_index: usize,
    hooks: Member,
    top: Container,
    hooks_index: usize,
}

/// Settings text, validated as JSON, with a scanner for the spans of its values.
struct Doc<'a> {
    text: &'a str,
    root: Span,
}

impl<'a> Doc<'a> {
    fn parse(text: &'a str) -> Result<Doc<'a>, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        if !value.is_object() {
            return Err("the settings are not a JSON object".into());
        }
        let start = skip_ws(text, 0);
        let root = Span {
            start,
            end: value_end(text, start)?,
        };
        Ok(Doc { text, root })
    }

    fn slice(&self, span: Span) -> &'a str {
        &self.text[span.start..span.end]
    }

    fn object(&self, span: Span) -> Result<Container, String> {
        if !self.slice(span).starts_with('{') {
            return Err(format!("expected an object at byte {}", span.start));
        }
        let mut c = Container {
            open: span.start,
            children: Vec::new(),
            keys: Vec::new(),
            members: Vec::new(),
        };
        let mut i = skip_ws(self.text, span.start + 1);
        while self.text.as_bytes()[i] != b'}' {
            let key_end = string_end(self.text, i)?;
            let key: String = serde_json::from_str(&self.text[i..key_end])
                .map_err(|e| format!("a key at byte {i}: {e}"))?;
            let colon = skip_ws(self.text, key_end);
            let start = skip_ws(self.text, colon + 1);
            let value = Span {
                start,
                end: value_end(self.text, start)?,
            };
            c.children.push(Span {
                start: i,
                end: value.end,
            });
            c.keys.push(key);
            c.members.push(Member {
                key_start: i,
                value,
            });
            i = skip_separator(self.text, value.end);
        }
        Ok(c)
    }

    fn array(&self, span: Span) -> Result<Container, String> {
        if !self.slice(span).starts_with('[') {
            return Err(format!("expected an array at byte {}", span.start));
        }
        let mut c = Container {
            open: span.start,
            children: Vec::new(),
            keys: Vec::new(),
            members: Vec::new(),
        };
        let mut i = skip_ws(self.text, span.start + 1);
        while self.text.as_bytes()[i] != b']' {
            let end = value_end(self.text, i)?;
            c.children.push(Span { start: i, end });
            i = skip_separator(self.text, end);
        }
        Ok(c)
    }

    /// The entry of `hooks.PreToolUse` one of whose hooks runs exactly `command`.
    fn find_ours(&self, command: &str) -> Result<Option<Ours>, String> {
        let top = self.object(self.root)?;
        let Some(hooks) = top.last("hooks") else {
            return Ok(None);
        };
        if !self.slice(hooks.value).starts_with('{') {
            return Err("the settings' \"hooks\" is not an object".into());
        }
        let hooks_object = self.object(hooks.value)?;
        let Some(pre_tool_use) = hooks_object.last("PreToolUse") else {
            return Ok(None);
        };
        if !self.slice(pre_tool_use.value).starts_with('[') {
            return Err("the settings' \"hooks\".\"PreToolUse\" is not an array".into());
        }
        let array = self.array(pre_tool_use.value)?;
        let runs_command = |entry: &Value| {
            entry["hooks"]
                .as_array()
                .is_some_and(|hooks| hooks.iter().any(|h| h["command"].as_str() == Some(command)))
        };
        let found = array.children.iter().position(|span| {
            serde_json::from_str::<Value>(self.slice(*span)).is_ok_and(|v| runs_command(&v))
        });
        let Some(index) = found else {
            return Ok(None);
        };
        let position = |c: &Container, m: Member| {
            c.members
                .iter()
                .position(|x| x.key_start == m.key_start)
                .expect("a member of its own container")
        };
        Ok(Some(Ours {
            entry: array.children[index],
            index,
            pre_tool_use,
            pre_tool_use_index: position(&hooks_object, pre_tool_use),
            hooks,
            hooks_index: position(&top, hooks),
            array,
            hooks_object,
            top,
        }))
    }

    /// Where and what to insert to add `item` as the last child of `c`: after the last
    /// child, `,` then the last child's own line break and indentation (or a space when
    /// the container is on one line); into an empty container, on a line of its own one
    /// indentation step deeper than the bracket's line, the bracket closing on the next.
    fn insert(&self, c: &Container, item: &str) -> (usize, String) {
        match c.children.last() {
            Some(last) => {
                let before = c.children.len().checked_sub(2).map_or(c.open + 1, |i| {
                    skip_separator_start(self.text, c.children[i].end)
                });
                let lead = &self.text[before..last.start];
                let gap = match lead.rfind('\n') {
                    Some(nl) => lead[nl..].to_string(),
                    None => " ".to_string(),
                };
                (last.end, format!(",{gap}{item}"))
            }
            None => {
                let close = self.closing_line(c);
                (
                    c.open + 1,
                    format!("{close}{}{item}{close}", self.indent_step()),
                )
            }
        }
    }

    /// The range removing child `i` of `c` and one separator: from the end of the child
    /// before it; for the first child, up to the next one; for the only child, from just
    /// after the bracket through the line break install put before the closing bracket.
    /// These undo exactly what [`Doc::insert`] inserts.
    fn removal(&self, c: &Container, i: usize) -> (usize, usize) {
        let child = c.children[i];
        if i > 0 {
            (c.children[i - 1].end, child.end)
        } else if let Some(next) = c.children.get(1) {
            (child.start, next.start)
        } else {
            let close = self.closing_line(c);
            let after = &self.text[child.end..];
            let end = child.end
                + if after.starts_with(&close) {
                    close.len()
                } else {
                    0
                };
            (c.open + 1, end)
        }
    }

    /// A line break and the indentation of the line `c` opens on: what goes before an
    /// item put into an empty `c` (plus one step) and before its closing bracket.
    fn closing_line(&self, c: &Container) -> String {
        let line_start = self.text[..c.open].rfind('\n').map_or(0, |i| i + 1);
        let indent: String = self.text[line_start..c.open]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .collect();
        format!("\n{indent}")
    }

    /// The file's indentation step: the leading whitespace of its first indented line,
    /// or two spaces.
    fn indent_step(&self) -> String {
        self.text
            .lines()
            .map(|l| {
                l.chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect::<String>()
            })
            .find(|w| !w.is_empty())
            .unwrap_or_else(|| "  ".into())
    }
}

fn skip_ws(text: &str, mut i: usize) -> usize {
    let b = text.as_bytes();
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// From the end of a child: past whitespace and one `,` and whitespace after it.
fn skip_separator(text: &str, end: usize) -> usize {
    let i = skip_ws(text, end);
    if text.as_bytes().get(i) == Some(&b',') {
        skip_ws(text, i + 1)
    } else {
        i
    }
}

/// From the end of a child: just past its `,` (where the next child's lead begins).
fn skip_separator_start(text: &str, end: usize) -> usize {
    let i = skip_ws(text, end);
    if text.as_bytes().get(i) == Some(&b',') {
        i + 1
    } else {
        i
    }
}

fn string_end(text: &str, start: usize) -> Result<usize, String> {
    let b = text.as_bytes();
    if b.get(start) != Some(&b'"') {
        return Err(format!("expected a string at byte {start}"));
    }
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(format!("an unterminated string at byte {start}"))
}

/// The end of the JSON value starting at `start` (the text is valid JSON).
fn value_end(text: &str, start: usize) -> Result<usize, String> {
    let b = text.as_bytes();
    match b.get(start) {
        Some(b'"') => string_end(text, start),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = start;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(text, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(format!("an unclosed container at byte {start}"))
        }
        Some(_) => {
            let mut i = start;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                i += 1;
            }
            Ok(i)
        }
        None => Err("unexpected end of the settings".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "ROW_FENCE_HOME='/h' '/h/hooks/guard-bash.sh'";

    fn round_trip(before: Option<&str>) -> String {
        let entry = entry(COMMAND).unwrap();
        let Edit::Changed(Some(after)) = install(before, &entry, COMMAND).unwrap() else {
            panic!("install changed nothing in {before:?}");
        };
        let v: Value = serde_json::from_str(&after).unwrap();
        let ours = v["hooks"]["PreToolUse"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["hooks"][0]["command"] == COMMAND && e["matcher"] == "Bash")
            .count();
        assert_eq!(ours, 1, "{after}");
        assert_eq!(
            install(Some(&after), &entry, COMMAND).unwrap(),
            Edit::Unchanged
        );
        let back = rollback(Some(&after), COMMAND).unwrap();
        let expected = match before {
            Some(b) if b != EMPTY => Some(b.to_string()),
            _ => None,
        };
        assert_eq!(back, Edit::Changed(expected), "from:\n{after}");
        after
    }

    #[test]
    fn every_shape_round_trips_byte_for_byte() {
        round_trip(None);
        round_trip(Some("{}\n"));
        round_trip(Some("{\"model\":\"x\"}"));
        round_trip(Some(
            "{\n  \"model\": \"x\",\n  \"env\": {\"A\": \"[{\\\"\"}\n}\n",
        ));
        round_trip(Some("{\n\t\"hooks\": {\n\t\t\"Stop\": []\n\t}\n}"));
        round_trip(Some("{\"hooks\": {}}"));
        round_trip(Some("{\"hooks\": {\"PreToolUse\": []}}"));
        round_trip(Some("{\"hooks\": {\"PreToolUse\": [ ]}}"));
        round_trip(Some(
            "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Edit\", \"hooks\": []}\n    ]\n  },\n  \"z\": 1\n}\n",
        ));
    }

    #[test]
    fn a_new_file_holds_the_entry_on_a_line_of_its_own() {
        let entry = entry(COMMAND).unwrap();
        assert_eq!(
            round_trip(None),
            format!("{{\n  \"hooks\": {{\"PreToolUse\": [{entry}]}}\n}}\n")
        );
    }

    #[test]
    fn an_entry_goes_after_the_others_on_their_own_indentation() {
        let before = "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Edit\", \"hooks\": []}\n    ]\n  }\n}\n";
        let after = round_trip(Some(before));
        assert!(
            after.contains("{\"matcher\": \"Edit\", \"hooks\": []},\n      {\"matcher\": \"Bash\""),
            "{after}"
        );
    }

    #[test]
    fn rollback_without_our_entry_changes_nothing_and_bad_shapes_are_errors() {
        assert_eq!(rollback(None, COMMAND).unwrap(), Edit::Unchanged);
        assert_eq!(
            rollback(Some("{\"a\": 1}"), COMMAND).unwrap(),
            Edit::Unchanged
        );
        let entry = entry(COMMAND).unwrap();
        assert!(install(Some("[]"), &entry, COMMAND).is_err());
        assert!(install(Some("{\"hooks\": []}"), &entry, COMMAND).is_err());
        assert!(install(Some("{\"hooks\": {\"PreToolUse\": {}}}"), &entry, COMMAND).is_err());
        assert!(install(Some("{"), &entry, COMMAND).is_err());
    }

    #[test]
    fn the_snippet_timeout_is_set() {
        assert!(timeout_s().is_some_and(|t| t > 0));
    }
}
