//! The agent hook's entry in a harness's JSON hook file: adds it, finds it, removes it.
//! Claude Code's settings file is the first such file; Codex's `hooks.json`, Gemini CLI's
//! `settings.json` and Cursor's `hooks.json` have the same outline (`hooks.<EVENT>` an
//! array of entries) and are edited by the same code through a [`Layout`]: the event's
//! name, and whether an entry nests its commands (`{"hooks": [{"command": …}]}`, Claude
//! Code, Codex, Gemini CLI) or is one command itself (`{"command": …}`, Cursor).
//!
//! Claude Code's entry is `hooks/claude-settings.json`'s `PreToolUse` entry (matcher `*`: every tool, an
//! explicit `timeout` longer than the guard's deadline for the whole hook) with the
//! command running `row-fence-guard`, and the installed `guard-bash.sh` shim only when
//! the guard cannot answer.
//!
//! The file is parsed by `jsonc-parser` (strict JSON: Claude Code reads it as JSON) into a
//! tree whose every node knows its byte range, and edited as text at those ranges, never
//! re-serialized: install only **inserts** one chunk (the entry, or the `PreToolUse` or
//! `hooks` member holding it when the file has none), and rollback removes exactly that
//! chunk, so install then rollback gives back the same bytes and every other setting, its
//! order and spacing stay as the operator wrote them.
//!
//! How rollback knows which chunk it inserted: an entry inserted into an existing array
//! always follows a separator or a newline, while a `PreToolUse` array or `hooks` object
//! that install created is written compactly around the entry (`[ENTRY]`,
//! `{"PreToolUse": [ENTRY]}`). A container in exactly that shape is removed whole. Whether
//! the file itself was install's to remove is not decided here (the text cannot say): the
//! installer records the files it created.

use jsonc_parser::ast;
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use row_fence_contract::harness::events;
use serde_json::Value;

/// The shipped settings snippet; its entry is the one installed.
pub const SNIPPET: &str = include_str!("../../../hooks/claude-settings.json");

/// The shipped shim (NEVER RAN, CUT OFF MID-ASK), written under the home by
/// `row-fence install claude-hook`.
pub const GUARD_BASH: &str = include_str!("../../../hooks/guard-bash.sh");

/// What a missing settings file is taken to be when install creates it.
pub const EMPTY: &str = "{}\n";

/// Where a harness's hook entries live in its JSON file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The event's member of `hooks` (`PreToolUse`, `BeforeTool`, `beforeShellExecution`).
    pub event: &'static str,
    /// True when an entry holds its commands in a `hooks` array (Claude Code's shape);
    /// false when the entry is one command (`{"command": …}`, Cursor's shape).
    pub nested: bool,
}

/// Claude Code's `PreToolUse` (and Codex's, which reads the same shape).
pub const CLAUDE: Layout = Layout {
    event: events::PRE_TOOL_USE,
    nested: true,
};

/// What install or rollback did to the text.
#[derive(Debug, PartialEq, Eq)]
pub enum Edit {
    /// The new text.
    Changed(String),
    /// Install: an entry with this command is already there. Rollback: none is.
    Unchanged,
}

/// Why a settings text was left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// Not JSON (the parser's message, with its line and column).
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("the settings are not a JSON object")]
    NotAnObject,
    /// `hooks` is there but not an object.
    #[error("the settings' \"hooks\" is not an object")]
    HooksNotAnObject,
    /// `hooks.<EVENT>` is there but not an array (the event's name).
    #[error("the settings' \"hooks\".\"{0}\" is not an array")]
    EventNotAnArray(&'static str),
    /// The shipped snippet is not the shape this module writes (a build error).
    #[error("the settings snippet has no PreToolUse entry with a timeout")]
    Snippet,
}

/// The `PreToolUse` entry to install: the snippet's entry with `command` replaced, as one
/// line of JSON.
pub fn entry(command: &str) -> Result<String, SettingsError> {
    let snippet: Value = serde_json::from_str(SNIPPET).map_err(|_| SettingsError::Snippet)?;
    let entry = &snippet["hooks"][CLAUDE.event][0];
    let hook = &entry["hooks"][0];
    let (Some(matcher), Some(kind), Some(timeout)) = (
        entry["matcher"].as_str(),
        hook["type"].as_str(),
        hook["timeout"].as_u64(),
    ) else {
        return Err(SettingsError::Snippet);
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
    snippet["hooks"][CLAUDE.event][0]["hooks"][0]["timeout"].as_u64()
}

/// Adds `entry` (from [`entry`]) to the settings `text` (`None`: no file yet, taken as
/// [`EMPTY`]) unless an entry whose hook command is `command` is there already.
pub fn install(text: Option<&str>, entry: &str, command: &str) -> Result<Edit, SettingsError> {
    install_in(CLAUDE, text.unwrap_or(EMPTY), entry, command)
}

/// [`install`] for any harness's [`Layout`]; `text` is the file as it is (a missing file
/// is the caller's empty text).
pub fn install_in(
    layout: Layout,
    text: &str,
    entry: &str,
    command: &str,
) -> Result<Edit, SettingsError> {
    let event = layout.event;
    let doc = Doc::parse(text, layout)?;
    if doc.find_ours(command)?.is_some() {
        return Ok(Edit::Unchanged);
    }
    let top = Container::object(&doc.root);
    let (at, chunk) = match top.last("hooks") {
        None => doc.insert(&top, &format!("\"hooks\": {{\"{event}\": [{entry}]}}")),
        Some(i) => {
            let hooks = as_object(&doc.root.properties[i].value)?;
            let hooks_c = Container::object(hooks);
            match hooks_c.last(event) {
                None => doc.insert(&hooks_c, &format!("\"{event}\": [{entry}]")),
                Some(j) => {
                    let pre = as_array(&hooks.properties[j].value, event)?;
                    doc.insert(&Container::array(pre), entry)
                }
            }
        }
    };
    let mut out = text.to_string();
    out.insert_str(at, &chunk);
    Ok(Edit::Changed(out))
}

/// Removes the entry whose hook command is `command` from the settings `text`, with
/// whatever install created around it. `None` text, or no such entry: unchanged.
pub fn rollback(text: Option<&str>, command: &str) -> Result<Edit, SettingsError> {
    rollback_in(CLAUDE, text, command)
}

/// [`rollback`] for any harness's [`Layout`].
pub fn rollback_in(
    layout: Layout,
    text: Option<&str>,
    command: &str,
) -> Result<Edit, SettingsError> {
    let Some(text) = text else {
        return Ok(Edit::Unchanged);
    };
    let event = layout.event;
    let doc = Doc::parse(text, layout)?;
    let Some(ours) = doc.find_ours(command)? else {
        return Ok(Edit::Unchanged);
    };
    let entry = doc.slice(ours.array.children[ours.index]);
    let (container, child) = if doc.slice(ours.pre_tool_use) != format!("[{entry}]") {
        (&ours.array, ours.index)
    } else if doc.slice(ours.hooks) != format!("{{\"{event}\": [{entry}]}}") {
        (&ours.hooks_object, ours.pre_tool_use_index)
    } else {
        (&ours.top, ours.hooks_index)
    };
    let (start, end) = doc.removal(container, child);
    let mut out = text.to_string();
    out.replace_range(start..end, "");
    Ok(Edit::Changed(out))
}

/// A byte range `[start, end)` of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

impl From<jsonc_parser::common::Range> for Span {
    fn from(r: jsonc_parser::common::Range) -> Span {
        Span {
            start: r.start,
            end: r.end,
        }
    }
}

/// An object's or array's opening bracket and its children's ranges (a member from its
/// key to the end of its value), with the members' decoded keys.
#[derive(Clone, Debug)]
struct Container {
    /// The `{` or `[`.
    open: usize,
    /// Each child's span.
    children: Vec<Span>,
    /// For objects: each member's key, decoded.
    keys: Vec<String>,
}

impl Container {
    fn object(o: &ast::Object) -> Container {
        Container {
            open: o.range.start,
            children: o.properties.iter().map(|p| p.range.into()).collect(),
            keys: o
                .properties
                .iter()
                .map(|p| p.name.as_str().to_string())
                .collect(),
        }
    }

    fn array(a: &ast::Array) -> Container {
        Container {
            open: a.range.start,
            children: a.elements.iter().map(|e| e.range().into()).collect(),
            keys: Vec::new(),
        }
    }

    /// The index of the last member named `key` (JSON readers keep the last duplicate).
    fn last(&self, key: &str) -> Option<usize> {
        self.keys.iter().rposition(|k| k == key)
    }
}

fn as_object<'v, 'a>(v: &'v ast::Value<'a>) -> Result<&'v ast::Object<'a>, SettingsError> {
    match v {
        ast::Value::Object(o) => Ok(o),
        _ => Err(SettingsError::HooksNotAnObject),
    }
}

fn as_array<'v, 'a>(
    v: &'v ast::Value<'a>,
    event: &'static str,
) -> Result<&'v ast::Array<'a>, SettingsError> {
    match v {
        ast::Value::Array(a) => Ok(a),
        _ => Err(SettingsError::EventNotAnArray(event)),
    }
}

/// True when the parsed entry runs exactly `command`, in `layout`'s shape.
pub fn entry_runs(layout: Layout, entry: &Value, command: &str) -> bool {
    if layout.nested {
        entry["hooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().any(|h| h["command"].as_str() == Some(command)))
    } else {
        entry["command"].as_str() == Some(command)
    }
}

/// Where our entry is, and the containers around it (with each one's index in its parent).
struct Ours {
    array: Container,
    index: usize,
    pre_tool_use: Span,
    hooks_object: Container,
    pre_tool_use_index: usize,
    hooks: Span,
    top: Container,
    hooks_index: usize,
}

/// Settings text and its parsed tree.
struct Doc<'a> {
    text: &'a str,
    root: ast::Object<'a>,
    layout: Layout,
}

/// Claude Code reads the settings as JSON: comments, trailing commas and the like are
/// refused here too, so the text between two children is only whitespace and a comma.
fn strict_json() -> ParseOptions {
    ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

impl<'a> Doc<'a> {
    fn parse(text: &'a str, layout: Layout) -> Result<Doc<'a>, SettingsError> {
        let parsed = parse_to_ast(text, &CollectOptions::default(), &strict_json())
            .map_err(|e| SettingsError::NotJson(e.to_string()))?;
        match parsed.value {
            Some(ast::Value::Object(root)) => Ok(Doc { text, root, layout }),
            Some(_) => Err(SettingsError::NotAnObject),
            None => Err(SettingsError::NotJson("the file holds no value".into())),
        }
    }

    fn slice(&self, span: Span) -> &'a str {
        &self.text[span.start..span.end]
    }

    /// The entry of `hooks.<EVENT>` that runs exactly `command`.
    fn find_ours(&self, command: &str) -> Result<Option<Ours>, SettingsError> {
        let top = Container::object(&self.root);
        let Some(hooks_index) = top.last("hooks") else {
            return Ok(None);
        };
        let hooks = &self.root.properties[hooks_index].value;
        let hooks_obj = as_object(hooks)?;
        let hooks_object = Container::object(hooks_obj);
        let event = self.layout.event;
        let Some(pre_tool_use_index) = hooks_object.last(event) else {
            return Ok(None);
        };
        let pre_tool_use = &hooks_obj.properties[pre_tool_use_index].value;
        let array = Container::array(as_array(pre_tool_use, event)?);
        let found = array.children.iter().position(|span| {
            serde_json::from_str::<Value>(self.slice(*span))
                .is_ok_and(|v| entry_runs(self.layout, &v, command))
        });
        Ok(found.map(|index| Ours {
            index,
            pre_tool_use: pre_tool_use.range().into(),
            pre_tool_use_index,
            hooks: hooks.range().into(),
            hooks_index,
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
                let before = c
                    .children
                    .len()
                    .checked_sub(2)
                    .map_or(c.open + 1, |i| self.after_comma(c.children[i].end));
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

    /// Just past the comma that follows a child ending at `end` (strict JSON: only
    /// whitespace stands between them).
    fn after_comma(&self, end: usize) -> usize {
        self.text[end..].find(',').map_or(end, |i| end + i + 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "ROW_FENCE_HOME='/h' '/h/hooks/guard-bash.sh'";

    fn round_trip(before: Option<&str>) -> String {
        let entry = entry(COMMAND).unwrap();
        let Edit::Changed(after) = install(before, &entry, COMMAND).unwrap() else {
            panic!("install changed nothing in {before:?}");
        };
        let v: Value = serde_json::from_str(&after).unwrap();
        let ours = v["hooks"]["PreToolUse"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["hooks"][0]["command"] == COMMAND && e["matcher"] == "*")
            .count();
        assert_eq!(ours, 1, "{after}");
        assert_eq!(
            install(Some(&after), &entry, COMMAND).unwrap(),
            Edit::Unchanged
        );
        let back = rollback(Some(&after), COMMAND).unwrap();
        // A file install created is given back as what it was created from; whether it
        // is removed is the installer's record, not the text.
        assert_eq!(
            back,
            Edit::Changed(before.unwrap_or(EMPTY).to_string()),
            "from:\n{after}"
        );
        after
    }

    #[test]
    fn every_shape_round_trips_byte_for_byte() {
        round_trip(None);
        round_trip(Some("{}\n"));
        round_trip(Some("{}"));
        round_trip(Some("{ }\n"));
        round_trip(Some("{\"a\": 1}\n"));
        round_trip(Some("  {\"a\": [1, {\"b\": \"}]\\\"\"}]}  \n"));
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
            after.contains("{\"matcher\": \"Edit\", \"hooks\": []},\n      {\"matcher\": \"*\""),
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
        assert!(install(Some("{\"a\": 1,}"), &entry, COMMAND).is_err());
        assert!(install(Some("{\"a\": 1} // x"), &entry, COMMAND).is_err());
    }

    #[test]
    fn the_snippet_timeout_is_every_harness_s() {
        assert_eq!(
            timeout_s(),
            Some(row_fence_contract::harness::HOOK_TIMEOUT_S)
        );
    }
}
