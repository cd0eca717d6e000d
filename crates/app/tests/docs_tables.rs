//! docs/configuration.md's tables of settings follow the declarations — the turn's settings
//! (`ragctx_core::TurnOverrides`) and the others (`ragctx_app::RawConfig`): every setting, in
//! the declared order, with its flag and its default. Their "what it is" column is the docs'
//! own prose (a new setting starts with its doc comment), and so is a config setting's flag
//! (the CLI declares its global flags). A default stated in the docs' prose ("`--limit`
//! (default 24)") is checked too.
//!
//! `RAGCTX_BLESS=1 cargo test --release -p ragctx-app --test docs_tables` rewrites the tables.

use ragctx_app::RawConfig;
use ragctx_core::TurnOverrides;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const HEADER: &str = "| setting | flag | default | what it is |\n|---|---|---|---|";

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// A row of a table: its setting's name and its cells after the name.
struct Row {
    name: String,
    flag: String,
    default: String,
    what: String,
}

impl Row {
    fn parse(line: &str) -> Option<Row> {
        let inner = line.strip_prefix('|')?.strip_suffix('|')?;
        let cells: Vec<&str> = inner.splitn(4, '|').map(str::trim).collect();
        let [name, flag, default, what] = cells[..] else { return None };
        let name = name.strip_prefix('`')?.strip_suffix('`')?.to_owned();
        Some(Row { name, flag: flag.into(), default: default.into(), what: what.into() })
    }

    fn line(&self) -> String {
        let name = format!("`{}`", self.name);
        let cells = [&name, &self.flag, &self.default, &self.what];
        cells.iter().fold("|".to_owned(), |line, c| if c.is_empty() { line + " |" } else { format!("{line} {c} |") })
    }
}

/// A value as the docs write it: a number as it is, a word in backticks.
fn code(value: &str) -> String {
    if value.parse::<f64>().is_ok() {
        value.to_owned()
    } else {
        format!("`{value}`")
    }
}

/// The two tables as the declarations make them, with the prose of the rows in `text`.
fn tables(text: &str) -> [(&'static str, String); 2] {
    let written: HashMap<String, Row> = text.lines().filter_map(Row::parse).map(|r| (r.name.clone(), r)).collect();
    let prose = |name: &str, doc: &str| written.get(name).map_or_else(|| doc.to_owned(), |r| r.what.clone());
    let turn = TurnOverrides::fields().into_iter().map(|f| Row {
        name: f.name.into(),
        flag: format!("`--{}`", f.name.replace('_', "-")),
        default: code(&f.default),
        what: prose(f.name, f.doc),
    });
    let other = RawConfig::fields().into_iter().map(|f| Row {
        name: f.name.into(),
        flag: written.get(f.name).map(|r| r.flag.clone()).unwrap_or_default(),
        default: f.default.unwrap_or_default(),
        what: prose(f.name, f.doc),
    });
    let table = |rows: &mut dyn Iterator<Item = Row>| {
        let mut t = HEADER.to_owned();
        for row in rows {
            t.push('\n');
            t.push_str(&row.line());
        }
        t
    };
    [("turn settings", table(&mut turn.into_iter())), ("other settings", table(&mut other.into_iter()))]
}

/// `text` with each table between its markers (`<!-- turn settings: ... -->` and
/// `<!-- end of turn settings -->`) replaced by `table`.
fn with_table(text: &str, title: &str, table: &str) -> String {
    let open = format!("<!-- {title}:");
    let close = format!("<!-- end of {title} -->");
    let start = text.find(&open).unwrap_or_else(|| panic!("docs/configuration.md has no `{open} ... -->` marker"));
    let start = start + text[start..].find("-->\n").expect("the marker closes") + "-->\n".len();
    let end = text[start..].find(&close).unwrap_or_else(|| panic!("docs/configuration.md has no `{close}`")) + start;
    format!("{}{table}\n{}", &text[..start], &text[end..])
}

#[test]
fn docs_tables_follow_the_declarations() {
    let path = docs().join("configuration.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut expected = text.clone();
    for (title, table) in tables(&text) {
        expected = with_table(&expected, title, &table);
    }
    if expected == text {
        return;
    }
    if std::env::var_os("RAGCTX_BLESS").is_some() {
        std::fs::write(&path, expected).unwrap();
        return;
    }
    let differ: Vec<String> = expected
        .lines()
        .zip(text.lines())
        .filter(|(e, t)| e != t)
        .map(|(e, t)| format!("  docs:     {t}\n  declared: {e}"))
        .take(10)
        .collect();
    panic!(
        "docs/configuration.md's settings tables differ from the declarations (ragctx_core::TurnOverrides, ragctx_app::RawConfig):\n{}\n\nThe tables as declared:\n\n{}\n\nRefresh them with `RAGCTX_BLESS=1 cargo test --release -p ragctx-app --test docs_tables` (the \"what it is\" column and a config setting's flag are kept).",
        if differ.is_empty() { "  (rows added or removed)".to_owned() } else { differ.join("\n") },
        tables(&text).map(|(_, t)| t).join("\n\n")
    );
}

/// Each setting's default as the docs' prose writes it (`24`, `0.6`, `auto`).
fn declared_defaults() -> HashMap<String, String> {
    let turn = TurnOverrides::fields().into_iter().map(|f| (f.name.to_owned(), f.default));
    let other = RawConfig::fields().into_iter().filter_map(|f| Some((f.name.to_owned(), f.default?.replace('`', ""))));
    turn.chain(other).collect()
}

/// Every "`--name` (default VALUE" (or `` `name` `` or `` `RAGCTX_NAME` ``, a few words before
/// the parenthesis, other words after it) in `text`: the setting and the value, each where
/// the docs wrote it.
fn stated_defaults(text: &str) -> Vec<(String, String)> {
    let mut stated = Vec::new();
    for (at, _) in text.match_indices("default ") {
        // Up to a space or a mark, a comma between digits kept (`6,000`).
        let rest = &text[at + "default ".len()..];
        let end = rest
            .char_indices()
            .find(|&(i, c)| {
                let digit_follows = rest[i + 1..].starts_with(|d: char| d.is_ascii_digit());
                matches!(c, ' ' | ';' | ')' | '\n') || (c == ',' && !digit_follows)
            })
            .map_or(rest.len(), |(i, _)| i);
        let value = rest[..end].replace('`', "");
        let before = &text[..at];
        // The setting: the last code span before it, with no other code span or a closed
        // parenthesis between them.
        let Some(close) = before.rfind('`') else { continue };
        let Some(open) = before[..close].rfind('`') else { continue };
        let between = &before[close + 1..];
        if value.is_empty() || between.len() > 40 || between.contains(')') || !between.contains('(') {
            continue;
        }
        let span = before[open + 1..close].split(' ').next().unwrap_or_default();
        let name = span.strip_prefix("RAGCTX_").map(str::to_ascii_lowercase).unwrap_or_else(|| span.to_owned());
        let name = name.strip_prefix("--").map(|n| n.replace('-', "_")).unwrap_or(name);
        stated.push((name, value));
    }
    stated
}

#[test]
fn defaults_stated_in_the_docs_prose_are_the_declared_ones() {
    let declared = declared_defaults();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for page in ["configuration.md", "turns.md"] {
        let text = std::fs::read_to_string(docs().join(page)).unwrap();
        for (name, value) in stated_defaults(&text) {
            let Some(default) = declared.get(&name) else { continue };
            checked += 1;
            let number = |v: &str| v.replace(',', "").parse::<f64>().ok();
            let same = match (number(&value), number(default)) {
                (Some(a), Some(b)) => a == b,
                _ => value == *default,
            };
            if !same {
                wrong.push(format!("docs/{page}: `{name}` (default {value}), declared {default}"));
            }
        }
    }
    assert!(checked >= 5, "only {checked} stated defaults found: has the docs' wording changed?");
    assert!(wrong.is_empty(), "defaults in the docs' prose differ from the declarations:\n{}", wrong.join("\n"));
}
