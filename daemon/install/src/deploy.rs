//! The supervised job: renders the launchd user agent and the systemd user unit that run
//! `row-fence-resident` (ARCHITECTURE.md, "Installers"). The templates live in
//! `deploy/` and are compiled into the binary, so an installed `row-fence` renders without
//! the source tree. Every value in a template goes through its format's one filter, which
//! escapes it and refuses what the format cannot carry: `xml` for the plist (XML 1.0
//! character data), `systemd_quote` or `systemd_plain` for the unit. Autoescape is off, so
//! a test pins that no `{{ … }}` in a template lacks its filter.

use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a job file was not rendered; nothing is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// `--label` is not a file and unit name.
    #[error("label {0:?} must be 1-128 of the characters A-Z a-z 0-9 . _ -")]
    Label(String),
    /// `--bin-dir` or `--home` is relative.
    #[error("{flag} {path} is not absolute")]
    Relative {
        /// The flag.
        flag: &'static str,
        /// The path given.
        path: PathBuf,
    },
    /// A path that no job file can name.
    #[error(transparent)]
    NotUtf8(#[from] crate::shell::NotUtf8),
    /// `--env NAME=…` with a name that is not a variable name.
    #[error("{0:?} is not an environment variable name")]
    EnvName(String),
    /// `--env` for a variable that has its own flag.
    #[error("give {name} with {flag}, not --env")]
    OwnFlag {
        /// The variable.
        name: String,
        /// Its flag.
        flag: &'static str,
    },
    /// systemd cannot run an executable whose path holds a quote or a backslash.
    #[error(
        "systemd cannot run {0}: its path holds a quote or a backslash; install the binaries elsewhere (--bin-dir)"
    )]
    UnitExecutable(String),
    /// `HOME` is unset, so the default job directory is unknown.
    #[error("HOME is not set; give --out")]
    NoHome,
    /// The template refused a value (a character the format cannot carry), with tera's
    /// nested causes.
    #[error("{0}")]
    Template(String),
}

/// A value one of the formats cannot carry.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} holds the character {c:?}, which {format} cannot carry")]
pub struct CannotCarry {
    /// The value.
    pub text: String,
    /// The first character refused.
    pub c: char,
    /// The format, e.g. "a launchd plist (XML 1.0)".
    pub format: &'static str,
}

/// Which service manager the job is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Job {
    /// A launchd user agent (macOS): `~/Library/LaunchAgents/<label>.plist`.
    Launchd,
    /// A systemd user unit (Linux): `~/.config/systemd/user/<label>.service`.
    Systemd,
}

/// The label (launchd) and unit name (systemd) when `--label` is not given.
pub const DEFAULT_LABEL: &str = "row-fence-resident";

/// launchd waits this many seconds between starts of a job (its default is 10): a
/// code-stamp restart on an upgrade should cost seconds, not ten.
pub const THROTTLE_INTERVAL_S: u32 = 2;

/// systemd's `RestartSec`: one second between an exit and the next start.
pub const RESTART_S: u32 = 1;

/// systemd's `WatchdogSec`: the serving loop pings every half of it, and a loop that stops
/// turning for this long is killed and restarted. The loop never waits on an ask (each
/// connection is its own task), so 15 s between pings leaves room on a loaded machine.
pub const WATCHDOG_S: u32 = 30;

/// systemd gives up restarting after `START_LIMIT_BURST` starts within this many seconds
/// (a daemon that cannot start at all is left failed for an operator).
pub const START_LIMIT_INTERVAL_S: u32 = 60;

/// See [`START_LIMIT_INTERVAL_S`]: ten one-second restarts in a minute is a crash loop.
pub const START_LIMIT_BURST: u32 = 10;

/// Names the job's environment must not take from `--env`: they have their own flags.
const OWN_FLAGS: &[(&str, &str)] = &[("ROW_FENCE_HOME", "--home"), ("ROW_FENCE_STORE", "--store")];

const LAUNCHD_NAME: &str = "row-fence-resident.plist.tera";
const LAUNCHD_TEMPLATE: &str =
    include_str!("../../../deploy/launchd/row-fence-resident.plist.tera");
const SYSTEMD_NAME: &str = "row-fence-resident.service.tera";
const SYSTEMD_TEMPLATE: &str =
    include_str!("../../../deploy/systemd/row-fence-resident.service.tera");

/// What a job runs: which binaries, which home and store, which environment.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The launchd label, also the systemd unit's name (without `.service`).
    pub label: String,
    /// The directory holding `row-fence-resident` (absolute). The hooks must run the
    /// asker from the same directory: an asker from other binaries gets `stale_code`.
    pub bin_dir: PathBuf,
    /// `ROW_FENCE_HOME` (absolute).
    pub home: PathBuf,
    /// `ROW_FENCE_STORE`, as the daemon will parse it (it may carry a password, so the
    /// rendered file is written 0600).
    pub store: String,
    /// More variables, in order; a later one replaces an earlier one of the same name,
    /// and `PATH` replaces the default search path.
    pub env: Vec<(String, String)>,
}

/// One environment variable of the job, in the order the file lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value, unescaped.
    pub value: String,
}

#[derive(Serialize)]
struct Context {
    label: String,
    resident: String,
    env: Vec<EnvVar>,
    stdout_path: String,
    stderr_path: String,
    throttle_interval_s: u32,
    restart_s: u32,
    watchdog_s: u32,
    start_limit_interval_s: u32,
    start_limit_burst: u32,
}

impl JobSpec {
    /// The daemon's executable: `<bin_dir>/row-fence-resident`.
    pub fn resident(&self) -> PathBuf {
        self.bin_dir.join("row-fence-resident")
    }

    /// Where launchd writes the daemon's stdout and stderr: `<home>/log/`. It must exist
    /// before the job loads (launchd creates the files, not the directory).
    pub fn log_dir(&self) -> PathBuf {
        self.home.join("log")
    }

    /// The job's environment: `PATH`, `ROW_FENCE_HOME`, `ROW_FENCE_STORE`, then the extra
    /// variables in the order given. Errors name a bad name or a variable that has its
    /// own flag (a value the file cannot carry is refused by the template's filter).
    pub fn environment(&self, job: Job) -> Result<Vec<EnvVar>, DeployError> {
        let mut extra: Vec<EnvVar> = Vec::new();
        let mut path = default_path(job, &self.bin_dir)?;
        for (name, value) in &self.env {
            check_name(name)?;
            if let Some((_, flag)) = OWN_FLAGS.iter().find(|(own, _)| own == name) {
                return Err(DeployError::OwnFlag {
                    name: name.clone(),
                    flag,
                });
            }
            if name == "PATH" {
                path = value.clone();
                continue;
            }
            extra.retain(|v| &v.name != name);
            extra.push(EnvVar {
                name: name.clone(),
                value: value.clone(),
            });
        }
        let mut env = vec![
            EnvVar {
                name: "PATH".into(),
                value: path,
            },
            EnvVar {
                name: "ROW_FENCE_HOME".into(),
                value: utf8(&self.home)?.to_string(),
            },
            EnvVar {
                name: "ROW_FENCE_STORE".into(),
                value: self.store.clone(),
            },
        ];
        env.extend(extra);
        Ok(env)
    }
}

/// The job's default `PATH`: the binaries' directory first, then the system's (and
/// Homebrew's on macOS). The daemon runs nothing from it; it is there for anything a
/// future store adapter or an operator's wrapper might.
pub fn default_path(job: Job, bin_dir: &Path) -> Result<String, DeployError> {
    let system = match job {
        Job::Launchd => "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin",
        Job::Systemd => "/usr/local/bin:/usr/bin:/bin",
    };
    Ok(format!("{}:{system}", utf8(bin_dir)?))
}

/// Renders the job file for `job`. Errors: an invalid label, a relative or non-UTF-8
/// path, a bad variable (see [`JobSpec::environment`]), or a template error.
pub fn render(job: Job, spec: &JobSpec) -> Result<String, DeployError> {
    check_label(&spec.label)?;
    for (what, path) in [("--bin-dir", &spec.bin_dir), ("--home", &spec.home)] {
        if !path.is_absolute() {
            return Err(DeployError::Relative {
                flag: what,
                path: path.clone(),
            });
        }
    }
    let resident = utf8(&spec.resident())?.to_string();
    if job == Job::Systemd && resident.contains(['"', '\'', '\\']) {
        // systemd refuses such an executable path however it is quoted.
        return Err(DeployError::UnitExecutable(resident));
    }
    let log_dir = spec.log_dir();
    let context = Context {
        label: spec.label.clone(),
        resident,
        env: spec.environment(job)?,
        stdout_path: utf8(&log_dir.join("resident.out.log"))?.to_string(),
        stderr_path: utf8(&log_dir.join("resident.err.log"))?.to_string(),
        throttle_interval_s: THROTTLE_INTERVAL_S,
        restart_s: RESTART_S,
        watchdog_s: WATCHDOG_S,
        start_limit_interval_s: START_LIMIT_INTERVAL_S,
        start_limit_burst: START_LIMIT_BURST,
    };
    let context = tera::Context::from_serialize(&context).map_err(template_error)?;
    let name = match job {
        Job::Launchd => LAUNCHD_NAME,
        Job::Systemd => SYSTEMD_NAME,
    };
    engine()?.render(name, &context).map_err(template_error)
}

/// The file name the job is installed under: `<label>.plist` or `<label>.service`.
pub fn file_name(job: Job, label: &str) -> String {
    match job {
        Job::Launchd => format!("{label}.plist"),
        Job::Systemd => format!("{label}.service"),
    }
}

/// Where the service manager looks for a user's jobs: `~/Library/LaunchAgents/` for
/// launchd, `$XDG_CONFIG_HOME/systemd/user/` (default `~/.config/systemd/user/`) for
/// systemd. Errors when `HOME` is not set.
pub fn default_job_dir(job: Job) -> Result<PathBuf, DeployError> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(DeployError::NoHome)
    };
    Ok(match job {
        Job::Launchd => home()?.join("Library/LaunchAgents"),
        Job::Systemd => match std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
            Some(config) => PathBuf::from(config).join("systemd/user"),
            None => home()?.join(".config/systemd/user"),
        },
    })
}

fn engine() -> Result<tera::Tera, DeployError> {
    let mut tera = tera::Tera::default();
    tera.autoescape_on(vec![]);
    tera.register_filter("xml", filter(xml_escape));
    tera.register_filter("systemd_quote", filter(systemd_quote));
    tera.register_filter("systemd_plain", filter(systemd_plain));
    tera.add_raw_templates(vec![
        (LAUNCHD_NAME, LAUNCHD_TEMPLATE),
        (SYSTEMD_NAME, SYSTEMD_TEMPLATE),
    ])
    .map_err(template_error)?;
    Ok(tera)
}

/// A tera filter from an escape: strings and numbers in, the escaped string out, or the
/// escape's refusal as the render's error.
fn filter(
    escape: fn(&str) -> Result<String, CannotCarry>,
) -> impl Fn(&tera::Value, &HashMap<String, tera::Value>) -> tera::Result<tera::Value> {
    move |value, _| {
        let text = match value {
            tera::Value::String(s) => s.clone(),
            tera::Value::Number(n) => n.to_string(),
            other => return Err(tera::Error::msg(format!("cannot escape {other}"))),
        };
        escape(&text)
            .map(tera::Value::String)
            .map_err(|e| tera::Error::msg(e.to_string()))
    }
}

/// Escapes text for XML character data and attribute values (`& < > " '`), refusing the
/// characters XML 1.0 cannot carry even escaped: control characters (tab, newline and
/// carriage return too: a job's values are single lines), U+FFFE and U+FFFF.
pub fn xml_escape(text: &str) -> Result<String, CannotCarry> {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                return Err(cannot_carry(text, c, "a launchd plist (XML 1.0)"));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn cannot_carry(text: &str, c: char, format: &'static str) -> CannotCarry {
    CannotCarry {
        text: text.to_string(),
        c,
        format,
    }
}

/// Quotes one word for a systemd unit file (systemd.syntax(7), systemd.exec(5)): in
/// double quotes, `\` and `"` backslash-escaped, `%` doubled (specifiers are expanded in
/// quoted values too). `$` stays: `Environment=` does not expand it, and neither does
/// `ExecStart=` in the executable's own path, the only word of ours there. A control
/// character is refused: a unit file is line based.
pub fn systemd_quote(text: &str) -> Result<String, CannotCarry> {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            c if c.is_control() => return Err(cannot_carry(text, c, "a systemd unit")),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// A bare value of a unit setting (a number, the label): written as is, so it may hold
/// no control character, quote, backslash or `%` (a specifier).
pub fn systemd_plain(text: &str) -> Result<String, CannotCarry> {
    match text
        .chars()
        .find(|c| c.is_control() || matches!(c, '"' | '\'' | '\\' | '%'))
    {
        Some(c) => Err(cannot_carry(text, c, "a bare systemd value")),
        None => Ok(text.to_string()),
    }
}

fn template_error(e: tera::Error) -> DeployError {
    // tera nests the cause; the outer message alone says only "failed to render".
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    DeployError::Template(message)
}

/// Labels become file and unit names: letters, digits, `.`, `_`, `-`; 1–128 characters.
fn check_label(label: &str) -> Result<(), DeployError> {
    let ok = !label.is_empty()
        && label.len() <= 128
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(DeployError::Label(label.to_string()))
    }
}

fn check_name(name: &str) -> Result<(), DeployError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(DeployError::EnvName(name.to_string()))
    }
}

fn utf8(path: &Path) -> Result<&str, DeployError> {
    Ok(crate::shell::text(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            label: DEFAULT_LABEL.into(),
            bin_dir: "/opt/rf/bin".into(),
            home: "/Users/a & b/<rf> 'x' \"y\"".into(),
            store: "redis://:p%w$d@host/0".into(),
            env: vec![("RUST_LOG".into(), "info".into())],
        }
    }

    #[test]
    fn the_plist_escapes_every_value() {
        let text = render(Job::Launchd, &spec()).unwrap();
        assert!(
            text.contains(
                "<string>/Users/a &amp; b/&lt;rf&gt; &apos;x&apos; &quot;y&quot;</string>"
            ),
            "{text}"
        );
        assert!(!text.contains("a & b"), "{text}");
    }

    #[test]
    fn the_unit_quotes_percent_but_not_dollar_for_systemd() {
        let text = render(Job::Systemd, &spec()).unwrap();
        assert!(
            text.contains("Environment=\"ROW_FENCE_STORE=redis://:p%%w$d@host/0\""),
            "{text}"
        );
        assert!(
            text.contains("Environment=\"ROW_FENCE_HOME=/Users/a & b/<rf> 'x' \\\"y\\\"\""),
            "{text}"
        );
        assert!(
            text.contains("ExecStart=\"/opt/rf/bin/row-fence-resident\" --supervised"),
            "{text}"
        );
    }

    #[test]
    fn home_and_store_have_their_own_flags_and_control_characters_are_refused() {
        let mut s = spec();
        s.env.push(("ROW_FENCE_HOME".into(), "/x".into()));
        assert!(
            render(Job::Launchd, &s)
                .unwrap_err()
                .to_string()
                .contains("--home")
        );
        let mut s = spec();
        s.env.push(("X".into(), "a\nb".into()));
        assert!(
            render(Job::Systemd, &s)
                .unwrap_err()
                .to_string()
                .contains("cannot carry")
        );
        assert!(
            render(Job::Launchd, &s)
                .unwrap_err()
                .to_string()
                .contains("cannot carry")
        );
        for c in ['\u{FFFE}', '\u{FFFF}', '\u{1}', '\t'] {
            let mut s = spec();
            s.env.push(("X".into(), format!("a{c}b")));
            let e = render(Job::Launchd, &s).unwrap_err().to_string();
            assert!(e.contains("XML 1.0"), "{c:?}: {e}");
        }
        let mut s = spec();
        s.label = "a/b".into();
        assert!(render(Job::Systemd, &s).is_err());
        let mut s = spec();
        s.bin_dir = "/opt/it's/bin".into();
        assert!(
            render(Job::Systemd, &s)
                .unwrap_err()
                .to_string()
                .contains("quote")
        );
        assert!(render(Job::Launchd, &s).is_ok());
    }

    #[test]
    fn every_value_in_a_template_goes_through_its_formats_filter() {
        for (name, text, allowed) in [
            (LAUNCHD_NAME, LAUNCHD_TEMPLATE, &["xml"][..]),
            (
                SYSTEMD_NAME,
                SYSTEMD_TEMPLATE,
                &["systemd_quote", "systemd_plain"][..],
            ),
        ] {
            let mut rest = text;
            let mut seen = 0;
            while let Some(start) = rest.find("{{") {
                let end = rest[start..].find("}}").expect("a closed expression") + start;
                let expression = rest[start + 2..end].trim();
                let last = expression.rsplit('|').next().unwrap().trim();
                assert!(
                    expression.contains('|') && allowed.contains(&last),
                    "{name}: {{{{ {expression} }}}} does not end in one of {allowed:?}"
                );
                seen += 1;
                rest = &rest[end + 2..];
            }
            assert!(seen > 3, "{name}");
        }
    }

    #[test]
    fn path_from_env_replaces_the_default() {
        let mut s = spec();
        s.env.push(("PATH".into(), "/only".into()));
        let env = s.environment(Job::Systemd).unwrap();
        assert_eq!(env[0].value, "/only");
        assert_eq!(env.iter().filter(|v| v.name == "PATH").count(), 1);
    }
}
