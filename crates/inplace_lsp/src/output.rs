//! Output formats of `check`: text with code frames, json, github annotations, SARIF 2.1.0.

use inplace_analysis::{Encoding, Finding, LineIndex, Rule, Severity, TextRange};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// One checked file with its findings.
pub struct FileReport {
    /// The path as given on the command line (or found under a folder given there).
    pub path: String,
    pub text: String,
    pub findings: Vec<Finding>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Github,
    Sarif,
}

/// 1-based line and column (in Unicode characters).
fn pos(text: &str, idx: &LineIndex, offset: usize) -> (usize, usize) {
    let (l, c) = idx.position(text, offset, Encoding::Utf32);
    (l + 1, c + 1)
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

fn range_json(text: &str, idx: &LineIndex, r: TextRange) -> JsonRange {
    let (sl, sc) = pos(text, idx, r.start);
    let (el, ec) = pos(text, idx, r.end);
    JsonRange {
        start: JsonPos {
            line: sl,
            column: sc,
        },
        end: JsonPos {
            line: el,
            column: ec,
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
    range: JsonRange,
    message: &'a str,
    related: Vec<JsonRelated<'a>>,
    fix: Option<JsonFix<'a>>,
}

#[derive(Serialize)]
struct JsonRelated<'a> {
    path: &'a str,
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
    range: JsonRange,
    content: &'a str,
}

fn finding_json<'a>(file: &'a FileReport, idx: &LineIndex, f: &'a Finding) -> JsonFinding<'a> {
    let t = &file.text;
    JsonFinding {
        code: f.rule.code(),
        name: f.rule.name(),
        severity: f.severity.as_str(),
        path: &file.path,
        range: range_json(t, idx, f.range),
        message: &f.message,
        related: f
            .related
            .iter()
            .map(|r| JsonRelated {
                path: &file.path,
                range: range_json(t, idx, r.range),
                message: &r.message,
            })
            .collect(),
        fix: f.fix.as_ref().map(|x| JsonFix {
            title: &x.title,
            applicability: x.applicability.as_str(),
            edits: x
                .edits
                .iter()
                .map(|e| JsonEdit {
                    range: range_json(t, idx, e.range),
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
            let idx = LineIndex::new(&file.text);
            for f in &file.findings {
                seq.serialize_element(&finding_json(file, &idx, f))?;
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

/// The lines a finding's frame shows: from the first line any of its spans touches to the
/// last (annotate-snippets folds what lies between), as (byte offset, 1-based first line, text).
fn window<'t>(text: &'t str, idx: &LineIndex, f: &Finding) -> (usize, usize, &'t str) {
    let ranges = std::iter::once(f.range).chain(f.related.iter().map(|r| r.range));
    let (mut lo, mut hi) = (usize::MAX, 0);
    for r in ranges {
        let r = clamp(text, r);
        lo = lo.min(r.start);
        hi = hi.max(r.end);
    }
    let first = idx.line_of(lo);
    let last = idx.line_of(hi);
    let start = idx.line_start(first);
    let end = idx.line_start(last + 1).max(hi).min(text.len());
    (start, first + 1, &text[start..end])
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
        let idx = LineIndex::new(&file.text);
        for f in &file.findings {
            count += 1;
            let (base, line, source) = window(&file.text, &idx, f);
            let span = |r: TextRange| {
                let r = clamp(&file.text, r);
                (r.start - base).min(source.len())..(r.end - base).min(source.len())
            };
            let mut snippet = Snippet::source(source)
                .line_start(line)
                .origin(&file.path)
                .fold(true);
            let label = f.rule.name();
            snippet = snippet.annotation(level(f.severity).span(span(f.range)).label(label));
            for r in &f.related {
                snippet = snippet.annotation(Level::Note.span(span(r.range)).label(&r.message));
            }
            let title = f.message.as_str();
            let mut msg = level(f.severity)
                .title(title)
                .id(f.rule.code())
                .snippet(snippet);
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
        let idx = LineIndex::new(&file.text);
        for f in &file.findings {
            let kind = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                _ => "notice",
            };
            let (sl, sc) = pos(&file.text, &idx, f.range.start);
            let (el, ec) = pos(&file.text, &idx, f.range.end);
            let _ = writeln!(
                out,
                "::{kind} title={},file={},line={sl},col={sc},endLine={el},endColumn={ec}::{}",
                escape_prop(&format!(
                    "inplace-lsp ({} {})",
                    f.rule.code(),
                    f.rule.name()
                )),
                escape_prop(&file.path),
                escape_data(&format!("{} {}", f.rule.code(), f.message))
            );
        }
    }
    out
}

fn sarif_region(text: &str, idx: &LineIndex, r: TextRange) -> Value {
    let (sl, sc) = pos(text, idx, r.start);
    let (el, ec) = pos(text, idx, r.end);
    json!({"startLine": sl, "startColumn": sc, "endLine": el, "endColumn": ec})
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
        let idx = LineIndex::new(&file.text);
        let uri = file.path.replace('\\', "/");
        for f in &file.findings {
            let location = |r: TextRange| json!({"physicalLocation": {"artifactLocation": {"uri": uri}, "region": sarif_region(&file.text, &idx, r)}});
            let mut result = json!({
                "ruleId": f.rule.code(),
                "ruleIndex": Rule::ALL.iter().position(|r| *r == f.rule),
                "level": sarif_level(f.severity),
                "message": {"text": f.message},
                "locations": [location(f.range)],
                "relatedLocations": f.related.iter().enumerate().map(|(i, r)| {
                    let mut l = location(r.range);
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
                            "deletedRegion": sarif_region(&file.text, &idx, e.range),
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
