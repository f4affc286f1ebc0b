//! Output formats of `check`: text with code frames, json, github annotations, SARIF 2.1.0.

use inplace_analysis::notebook::NotebookSource;
use inplace_analysis::project::Imports;
use inplace_analysis::{Encoding, Finding, LineIndex, Rule, Severity, TextRange};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// One checked file with its findings.
pub struct FileReport {
    /// The path as given on the command line (or found under a folder given there).
    pub path: String,
    /// The text the findings' ranges refer to (a notebook's code cells joined).
    pub text: String,
    pub findings: Vec<Finding>,
    /// For a notebook: its code cells in `text`.
    pub cells: Option<NotebookSource>,
    /// The project modules it imports: related locations may lie in them.
    pub modules: Arc<Imports>,
    /// Scopes whose work budget ran out before their end: findings in them may be missing.
    pub exhausted: usize,
}

/// A place in a report, for people: 1-based line and column (in Unicode characters), within
/// its cell for a notebook.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Place {
    cell: Option<usize>,
    line: usize,
    column: usize,
}

/// Turns a report's byte offsets into places: in the file, or in a module it imports.
struct Locator<'a> {
    path: &'a str,
    text: &'a str,
    cells: Option<&'a NotebookSource>,
    idx: LineIndex,
    /// The imported modules related locations lie in, by origin.
    modules: HashMap<Arc<str>, Locator<'a>>,
}

impl<'a> Locator<'a> {
    fn new(file: &'a FileReport) -> Self {
        let mut modules = HashMap::new();
        for f in &file.findings {
            for origin in f.related.iter().filter_map(|r| r.source.as_ref()) {
                if modules.contains_key(origin) {
                    continue;
                }
                if let Some(m) = file.modules.modules.iter().find(|m| m.origin == *origin) {
                    modules.insert(
                        origin.clone(),
                        Locator {
                            path: &m.origin,
                            text: &m.text,
                            cells: None,
                            idx: LineIndex::new(&m.text),
                            modules: HashMap::new(),
                        },
                    );
                }
            }
        }
        Self {
            path: &file.path,
            text: &file.text,
            cells: file.cells.as_ref(),
            idx: LineIndex::new(&file.text),
            modules,
        }
    }

    /// The locator of a related location's file.
    fn of(&self, source: Option<&Arc<str>>) -> &Locator<'a> {
        source.and_then(|s| self.modules.get(s)).unwrap_or(self)
    }

    fn place(&self, offset: usize) -> Place {
        match &self.cells {
            Some(cells) => {
                let (cell, line, col) = cells.cell_position(&self.idx, offset);
                Place {
                    cell: Some(cells.number(cell)),
                    line: line + 1,
                    column: col + 1,
                }
            }
            None => {
                let (l, c) = self.idx.position(self.text, offset, Encoding::Utf32);
                Place {
                    cell: None,
                    line: l + 1,
                    column: c + 1,
                }
            }
        }
    }

    /// The cell number of an offset (`None` outside notebooks).
    fn cell(&self, offset: usize) -> Option<usize> {
        self.place(offset).cell
    }

    /// The 1-based line number a people-facing frame shows for a 0-based line of the text.
    fn shown_line(&self, line: usize) -> usize {
        let first = self.cells.map_or(0, |c| {
            let at = c.locate(self.idx.line_start(line));
            c.cells().get(at.cell).map_or(0, |s| s.first_line)
        });
        line - first + 1
    }

    /// The file's name, with its cell for a notebook (as ruff prints it).
    fn origin(&self, cell: Option<usize>) -> String {
        match cell {
            Some(n) => format!("{}:cell {n}", self.path),
            None => self.path.to_string(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Github,
    Sarif,
}

/// A range in the JSON contract.
#[derive(Serialize)]
struct JsonRange {
    start: JsonPos,
    end: JsonPos,
}

#[derive(Serialize)]
struct JsonPos {
    line: usize,
    column: usize,
}

fn range_json(at: &Locator, r: TextRange) -> JsonRange {
    let (s, e) = (at.place(r.start), at.place(r.end));
    JsonRange {
        start: JsonPos {
            line: s.line,
            column: s.column,
        },
        end: JsonPos {
            line: e.line,
            column: e.column,
        },
    }
}

/// One finding in the JSON contract of DEVELOPERS.md.
#[derive(Serialize)]
struct JsonFinding<'a> {
    code: &'static str,
    name: &'static str,
    severity: &'static str,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
    range: JsonRange,
    message: &'a str,
    related: Vec<JsonRelated<'a>>,
    fix: Option<JsonFix<'a>>,
}

#[derive(Serialize)]
struct JsonRelated<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
    range: JsonRange,
    message: &'a str,
}

#[derive(Serialize)]
struct JsonFix<'a> {
    title: &'a str,
    applicability: &'static str,
    edits: Vec<JsonEdit<'a>>,
}

#[derive(Serialize)]
struct JsonEdit<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
    range: JsonRange,
    content: &'a str,
}

fn finding_json<'a>(at: &'a Locator<'a>, f: &'a Finding) -> JsonFinding<'a> {
    JsonFinding {
        code: f.rule.code(),
        name: f.rule.name(),
        severity: f.severity.as_str(),
        path: at.path,
        cell: at.cell(f.range.start),
        range: range_json(at, f.range),
        message: &f.message,
        related: f
            .related
            .iter()
            .map(|r| {
                let there = at.of(r.source.as_ref());
                JsonRelated {
                    path: there.path,
                    cell: there.cell(r.range.start),
                    range: range_json(there, r.range),
                    message: &r.message,
                }
            })
            .collect(),
        fix: f.fix.as_ref().map(|x| JsonFix {
            title: &x.title,
            applicability: x.applicability.as_str(),
            edits: x
                .edits
                .iter()
                .map(|e| JsonEdit {
                    cell: at.cell(e.range.start),
                    range: range_json(at, e.range),
                    content: &e.content,
                })
                .collect(),
        }),
    }
}

/// The findings of every file as one JSON array, one element built at a time.
struct JsonFindings<'a>(&'a [FileReport]);

impl Serialize for JsonFindings<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        for file in self.0.iter().filter(|f| !f.findings.is_empty()) {
            let at = Locator::new(file);
            for f in &file.findings {
                seq.serialize_element(&finding_json(&at, f))?;
            }
        }
        seq.end()
    }
}

/// Writes the report in `format` to `out`.
pub fn write(
    format: Format,
    files: &[FileReport],
    color: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &JsonFindings(files))?;
            writeln!(out)
        }
        Format::Github => out.write_all(github(files).as_bytes()),
        Format::Sarif => {
            serde_json::to_writer_pretty(&mut *out, &sarif(files))?;
            writeln!(out)
        }
        Format::Text => text(files, color, out),
    }
}

fn level(s: Severity) -> annotate_snippets::Level {
    use annotate_snippets::Level;
    match s {
        Severity::Error => Level::Error,
        Severity::Warning => Level::Warning,
        Severity::Information => Level::Info,
        Severity::Hint => Level::Help,
    }
}

/// The lines a frame shows: from the first line any of `ranges` touches to the last
/// (annotate-snippets folds what lies between), as (byte offset, 0-based first line, text).
fn window<'t>(text: &'t str, idx: &LineIndex, ranges: &[TextRange]) -> (usize, usize, &'t str) {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for r in ranges {
        let r = clamp(text, *r);
        lo = lo.min(r.start);
        hi = hi.max(r.end);
    }
    let first = idx.line_of(lo);
    let last = idx.line_of(hi);
    let start = idx.line_start(first);
    let end = idx.line_start(last + 1).max(hi).min(text.len());
    (start, first, &text[start..end])
}

fn text(files: &[FileReport], color: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use annotate_snippets::{Level, Renderer, Snippet};
    let renderer = if color {
        Renderer::styled()
    } else {
        Renderer::plain()
    };
    let mut count = 0;
    let mut fixable = 0;
    for file in files.iter().filter(|f| !f.findings.is_empty()) {
        let at = Locator::new(file);
        for f in &file.findings {
            count += 1;
            // One frame per cell the finding's spans touch (one for a plain file), the
            // culprit's first.
            // (range, level, label, file: None for this one).
            type Span<'s> = (TextRange, Level, &'s str, Option<&'s Arc<str>>);
            let spans: Vec<Span> =
                std::iter::once((f.range, level(f.severity), f.rule.name(), None))
                    .chain(
                        f.related
                            .iter()
                            .map(|r| (r.range, Level::Note, r.message.as_str(), r.source.as_ref())),
                    )
                    .collect();
            // One frame per file and cell.
            fn frame_of<'s>(
                at: &Locator,
                (r, _, _, src): &Span<'s>,
            ) -> (Option<&'s Arc<str>>, Option<usize>) {
                (*src, at.of(*src).cell(r.start))
            }
            let mut frames: Vec<(Option<&Arc<str>>, Option<usize>)> = Vec::new();
            for s in &spans {
                let k = frame_of(&at, s);
                if !frames.contains(&k) {
                    frames.push(k);
                }
            }
            let mut msg = level(f.severity).title(&f.message).id(f.rule.code());
            let origins: Vec<String> = frames
                .iter()
                .map(|(src, c)| at.of(*src).origin(*c))
                .collect();
            for (key, origin) in frames.iter().zip(&origins) {
                let there = at.of(key.0);
                let mine: Vec<_> = spans.iter().filter(|s| frame_of(&at, s) == *key).collect();
                let ranges: Vec<TextRange> = mine.iter().map(|(r, ..)| *r).collect();
                let (base, first, source) = window(there.text, &there.idx, &ranges);
                let span = |r: TextRange| {
                    let r = clamp(there.text, r);
                    (r.start - base).min(source.len())..(r.end - base).min(source.len())
                };
                let mut snippet = Snippet::source(source)
                    .line_start(there.shown_line(first))
                    .origin(origin)
                    .fold(true);
                for (r, lvl, label, _) in mine {
                    snippet = snippet.annotation(lvl.span(span(*r)).label(label));
                }
                msg = msg.snippet(snippet);
            }
            let help;
            if let Some(fix) = &f.fix {
                fixable += usize::from(fix.applicability == inplace_analysis::Applicability::Safe);
                help = format!("{} ({} fix)", fix.title, fix.applicability.as_str());
                msg = msg.footer(Level::Help.title(&help));
            }
            writeln!(out, "{}\n", renderer.render(msg))?;
        }
    }
    if count > 0 {
        writeln!(
            out,
            "Found {count} in-place hazard{}.",
            if count == 1 { "" } else { "s" }
        )?;
        if fixable > 0 {
            writeln!(out, "[*] {fixable} fixable with the `--fix` option.")?;
        }
    } else {
        writeln!(out, "All checks passed!")?;
    }
    Ok(())
}

/// annotate-snippets wants spans on char boundaries and non-empty.
fn clamp(text: &str, r: TextRange) -> std::ops::Range<usize> {
    let mut s = r.start.min(text.len());
    while !text.is_char_boundary(s) {
        s -= 1;
    }
    let mut e = r.end.min(text.len()).max(s);
    while !text.is_char_boundary(e) {
        e += 1;
    }
    s..e
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_prop(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn github(files: &[FileReport]) -> String {
    let mut out = String::new();
    for file in files {
        let at = Locator::new(file);
        for f in &file.findings {
            let kind = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                _ => "notice",
            };
            let (s, e) = (at.place(f.range.start), at.place(f.range.end));
            // A notebook's lines are not the lines of its JSON file: the message names the
            // cell (as ruff's annotations do) and the lines count within it.
            let cell = s.cell.map(|n| format!("cell {n}: ")).unwrap_or_default();
            // An annotation has one place: related places in other files go into its text.
            let elsewhere: String = f
                .related
                .iter()
                .filter_map(|r| {
                    let module = at.of(Some(r.source.as_ref()?));
                    let line = module.place(r.range.start).line;
                    Some(format!(" ({}: {}:{line})", r.message, module.path))
                })
                .collect();
            let _ = writeln!(
                out,
                "::{kind} title={},file={},line={},col={},endLine={},endColumn={}::{}",
                escape_prop(&format!(
                    "inplace-lsp ({} {})",
                    f.rule.code(),
                    f.rule.name()
                )),
                escape_prop(&file.path),
                s.line,
                s.column,
                e.line,
                e.column,
                escape_data(&format!("{cell}{} {}{elsewhere}", f.rule.code(), f.message))
            );
        }
    }
    out
}

fn sarif_region(at: &Locator, r: TextRange) -> Value {
    let (s, e) = (at.place(r.start), at.place(r.end));
    let mut region = json!({"startLine": s.line, "startColumn": s.column, "endLine": e.line, "endColumn": e.column});
    if let Some(cell) = s.cell {
        // SARIF has no notion of cells: the lines count within the cell named here.
        region["properties"] = json!({"cell": cell});
    }
    region
}

fn sarif(files: &[FileReport]) -> Value {
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.code(),
                "name": r.name(),
                "shortDescription": {"text": r.summary()},
                "fullDescription": {"text": r.doc()},
                "helpUri": r.url(),
                "defaultConfiguration": {"level": sarif_level(r.default_severity())},
            })
        })
        .collect();
    let mut results = Vec::new();
    for file in files {
        let at = Locator::new(file);
        let uri = file.path.replace('\\', "/");
        let location_in = |there: &Locator, r: TextRange| json!({"physicalLocation": {"artifactLocation": {"uri": there.path.replace('\\', "/")}, "region": sarif_region(there, r)}});
        for f in &file.findings {
            let location = |r: TextRange| location_in(&at, r);
            let mut result = json!({
                "ruleId": f.rule.code(),
                "ruleIndex": Rule::ALL.iter().position(|r| *r == f.rule),
                "level": sarif_level(f.severity),
                "message": {"text": f.message},
                "locations": [location(f.range)],
                "relatedLocations": f.related.iter().enumerate().map(|(i, r)| {
                    let mut l = location_in(at.of(r.source.as_ref()), r.range);
                    l["id"] = json!(i);
                    l["message"] = json!({"text": r.message});
                    l
                }).collect::<Vec<_>>(),
            });
            if let Some(fix) = &f.fix {
                result["fixes"] = json!([{
                    "description": {"text": fix.title},
                    "artifactChanges": [{
                        "artifactLocation": {"uri": uri},
                        "replacements": fix.edits.iter().map(|e| json!({
                            "deletedRegion": sarif_region(&at, e.range),
                            "insertedContent": {"text": e.content},
                        })).collect::<Vec<_>>(),
                    }],
                }]);
            }
            results.push(result);
        }
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "inplace-lsp",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/inplace-lsp/inplace-lsp",
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        _ => "note",
    }
}
