//! Findings -> LSP diagnostics, code actions and hover text.

use crate::document::Document;
use crate::session::DocEntry;
use inplace_analysis::project::Imports;
use inplace_analysis::{
    Applicability, Encoding, Finding, Fix, Form, InplaceSite, LineIndex, Rule, Severity, TextRange,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tower_lsp_server::ls_types::*;

pub const SOURCE: &str = "inplace-lsp";
pub const FIX_ALL_KIND: &str = "source.fixAll.inplace-lsp";

/// What a diagnostic carries in `data`, so a code action needs no new analysis.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiagnosticData {
    pub version: i32,
    pub fix: Option<FixData>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixData {
    pub title: String,
    pub applicability: String,
    /// The edits per document (a notebook's fix may touch several cells).
    pub changes: HashMap<Uri, Vec<TextEdit>>,
}

fn severity(s: Severity) -> DiagnosticSeverity {
    match s {
        Severity::Error => DiagnosticSeverity::ERROR,
        Severity::Warning => DiagnosticSeverity::WARNING,
        Severity::Information => DiagnosticSeverity::INFORMATION,
        Severity::Hint => DiagnosticSeverity::HINT,
    }
}

pub fn fix_data(entry: &DocEntry, key: &Uri, fix: &Fix, enc: Encoding) -> FixData {
    let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    for e in &fix.edits {
        let at = entry.location(key, e.range, enc);
        changes.entry(at.uri).or_default().push(TextEdit {
            range: at.range,
            new_text: e.content.clone(),
        });
    }
    FixData {
        title: fix.title.clone(),
        applicability: fix.applicability.as_str().to_string(),
        changes,
    }
}

/// The imported modules related locations lie in, by origin (the module's URI), with their
/// line indexes (built for the modules findings name).
pub struct ModuleLines<'a> {
    by_origin: HashMap<&'a str, (&'a str, LineIndex)>,
}

impl<'a> ModuleLines<'a> {
    pub fn new(imports: &'a Imports, findings: &[Finding]) -> ModuleLines<'a> {
        let mut by_origin = HashMap::new();
        for origin in findings
            .iter()
            .flat_map(|f| &f.related)
            .filter_map(|r| r.source.as_deref())
        {
            if by_origin.contains_key(origin) {
                continue;
            }
            if let Some(m) = imports.modules.iter().find(|m| &*m.origin == origin) {
                by_origin.insert(&*m.origin, (&*m.text, LineIndex::new(&m.text)));
            }
        }
        ModuleLines { by_origin }
    }

    /// Where a range of a module's text is.
    fn location(&self, origin: &str, r: TextRange, enc: Encoding) -> Option<Location> {
        let (text, lines) = self.by_origin.get(origin)?;
        let at = |o: usize| {
            let (line, col) = lines.position(text, o, enc);
            Position::new(line as u32, col as u32)
        };
        Some(Location {
            uri: origin.parse().ok()?,
            range: Range::new(at(r.start), at(r.end)),
        })
    }
}

/// A finding as a diagnostic of the document (or notebook cell) it lies in, with that
/// document's URI (`key`: the open document's URI); related locations in imported modules
/// carry the module's URI.
pub fn diagnostic(
    entry: &DocEntry,
    key: &Uri,
    f: &Finding,
    modules: &ModuleLines,
    enc: Encoding,
) -> (Uri, Diagnostic) {
    let related = f
        .related
        .iter()
        .filter_map(|r| {
            let location = match r.source.as_deref() {
                Some(origin) => modules.location(origin, r.range, enc)?,
                None => entry.location(key, r.range, enc),
            };
            Some(DiagnosticRelatedInformation {
                location,
                message: r.message.clone(),
            })
        })
        .collect::<Vec<_>>();
    let data = DiagnosticData {
        version: entry.doc.version,
        fix: f.fix.as_ref().map(|x| fix_data(entry, key, x, enc)),
    };
    let at = entry.location(key, f.range, enc);
    (
        at.uri,
        Diagnostic {
            range: at.range,
            severity: Some(severity(f.severity)),
            code: Some(NumberOrString::String(f.rule.code().to_string())),
            code_description: f
                .rule
                .url()
                .parse::<Uri>()
                .ok()
                .map(|href| CodeDescription { href }),
            source: Some(SOURCE.to_string()),
            message: f.message.clone(),
            related_information: (!related.is_empty()).then_some(related),
            tags: None,
            data: serde_json::to_value(data).ok(),
        },
    )
}

/// Which fix of a diagnostic is offered: the one its data carries, or another of its finding's
/// (an alternative, where that one does not verify), or none.
pub enum Offered {
    None,
    Carried,
    Other(FixData),
}

/// The quick fixes and the suppression action for one of our diagnostics.
/// `offered`: the fix that, applied alone, adds no syntax error and removes its finding (a fix
/// is offered only then).
pub fn actions_for(
    doc: &Document,
    uri: &Uri,
    d: &Diagnostic,
    enc: Encoding,
    first: bool,
    offered: Offered,
) -> Vec<CodeActionOrCommand> {
    let mut out = Vec::new();
    let Some(NumberOrString::String(code)) = &d.code else {
        return out;
    };
    let Some(rule) = Rule::from_code_or_name(code) else {
        return out;
    };
    let data: Option<DiagnosticData> = d.data.clone().and_then(|v| serde_json::from_value(v).ok());
    let fix = match offered {
        Offered::None => None,
        Offered::Carried => data.and_then(|d| d.fix),
        Offered::Other(fix) => Some(fix),
    };
    if let Some(fix) = fix {
        if fix.applicability != Applicability::DisplayOnly.as_str() {
            out.push(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("{} ({})", fix.title, rule.code()),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![d.clone()]),
                edit: Some(WorkspaceEdit {
                    changes: Some(fix.changes),
                    ..Default::default()
                }),
                is_preferred: Some(first && fix.applicability == Applicability::Safe.as_str()),
                ..Default::default()
            }));
        }
    }
    if let Some(edit) = noqa_edit(doc, d.range.start.line as usize, rule, enc) {
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: format!("Suppress {} on this line", rule.code()),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![d.clone()]),
            edit: Some(WorkspaceEdit {
                changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                ..Default::default()
            }),
            is_preferred: Some(false),
            ..Default::default()
        }));
    }
    out
}

/// `# noqa: IPxxx` at the end of a line, or the code added to a `# noqa:` already there.
fn noqa_edit(doc: &Document, line: usize, rule: Rule, enc: Encoding) -> Option<TextEdit> {
    if line >= doc.lines.line_count() {
        return None;
    }
    let (start, end) = doc.lines.line_range(&doc.text, line);
    let text = &doc.text[start..end];
    if let Some(at) = text.find("# noqa:") {
        let insert = start + at + "# noqa:".len();
        let pos = doc.position(insert, enc);
        return Some(TextEdit {
            range: Range {
                start: pos,
                end: pos,
            },
            new_text: format!(" {},", rule.code()),
        });
    }
    let pos = doc.position(end, enc);
    Some(TextEdit {
        range: Range {
            start: pos,
            end: pos,
        },
        new_text: format!("  # noqa: {}", rule.code()),
    })
}

/// How a form ③ message reads for an op: `torch.sigmoid` -> `Sigmoid`.
fn node_name(op: &str) -> String {
    let base = op
        .trim_start_matches("torch.")
        .trim_start_matches("F.")
        .trim_start_matches('.')
        .trim_end_matches("()");
    let base = base
        .split('(')
        .next()
        .unwrap_or(base)
        .trim_start_matches("nn.");
    let mut out = String::new();
    for part in base.split('_').filter(|p| !p.is_empty()) {
        let mut c = part.chars();
        if let Some(f) = c.next() {
            out.extend(f.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    if out.is_empty() {
        "Op".into()
    } else {
        out
    }
}

fn form(rule: Rule) -> &'static str {
    match rule.form() {
        Form::Leaf => "form ① — raises at the write",
        Form::LeafView => "form ② — raises at the write",
        Form::OutArg => "raises at the call — `out=` under autograd",
        Form::RefusedView => "raises at the write — a view autograd refuses to rebase",
        Form::Saved => "form ③ — raises at `backward()`",
        Form::Silent => "form ④ — never raises; silently wrong",
        Form::Cost => "cost",
        Form::Habit => "opt-in — nothing wrong here; a habit that hides mistakes elsewhere",
    }
}

/// Markdown for a finding: form, the runtime message it will produce, why, the fix.
/// `label` names the line of an offset (`line 9`, or `cell 3, line 2` in a notebook).
pub fn hover_finding(label: &dyn Fn(usize) -> String, f: &Finding) -> String {
    let line = |r: inplace_analysis::TextRange| label(r.start);
    let mut md = format!(
        "**{} {}** ({})\n\n{}\n\n",
        f.rule.code(),
        f.rule.name(),
        form(f.rule),
        f.message
    );
    let runtime = match f.rule.form() {
        Form::Leaf => Some(format!("RuntimeError: {}", inplace_analysis::FORM1_MESSAGE)),
        Form::LeafView => Some(format!("RuntimeError: {}", inplace_analysis::FORM2_MESSAGE)),
        // (Its text depends on how the view was made: the finding's message ends with it.)
        Form::RefusedView => f
            .message
            .split_once("it raises here: ")
            .map(|(_, text)| format!("RuntimeError: {text}")),
        Form::Saved => {
            let op = f
                .related
                .first()
                .and_then(|r| r.message.split('`').nth(1))
                .unwrap_or("the op");
            Some(format!(
                "RuntimeError: {}: [torch.FloatTensor [...]], which is output 0 of {}, is at version N; expected version N-1 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).",
                inplace_analysis::FORM3_MESSAGE,
                node_name(op)
            ))
        }
        _ => None,
    };
    if let Some(r) = runtime {
        let at = f
            .related
            .iter()
            .find(|r| r.source.is_none() && r.message.contains("raises here"))
            .map(|r| line(r.range));
        let place = match at {
            Some(l) => format!(" (raised at {l})"),
            None => String::new(),
        };
        md.push_str(&format!(
            "The runtime will raise{place}:\n\n```text\n{r}\n```\n\n"
        ));
        if f.rule.form() == Form::Saved {
            md.push_str(
                "Torch before 2.x names the backward node instead (e.g. `SigmoidBackward0`).\n\n",
            );
        }
    }
    md.push_str(&format!("Why: {}.\n\n", f.rule.summary()));
    if let Some(fix) = &f.fix {
        md.push_str(&format!(
            "Fix: {} ({} fix).\n\n",
            fix.title,
            fix.applicability.as_str()
        ));
    }
    md.push_str(&format!("[Rule documentation]({})", f.rule.url()));
    md
}

/// Markdown for an in-place write without a finding.
pub fn hover_site(site: &InplaceSite, text: &str) -> String {
    let what = &text[site.range.start..site.range.end];
    let first = what.lines().next().unwrap_or(what);
    let names = if site.names.is_empty() {
        "no other name".to_string()
    } else {
        site.names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "**In-place write** `{first}`\n\nIt writes the tensor's storage and bumps its version counter, shared by: {names}. \
         No op that a later `backward()` needs saved this storage, so autograd will not raise here."
    )
}
