//! Every `tests/fixtures/**/*.py` is a runnable script whose expected findings are written next
//! to the code: a trailing `# expect: IP301` (or `# expect: IP301, IP402`) on the culprit line.
//! Lines without one must have no finding. Messages and fixes are snapshotted with insta.
//! The real-world fixtures (`tests/fixtures/real/`) may also carry `# miss: IP301 -- reason`: a
//! hazard torch confirms (the oracle judges it like an expectation) that the analysis does not
//! find yet. A miss must stay unfound: once it is found, the test asks to turn it into `# expect:`.

use inplace_analysis::{
    analyze_source, apply_fixes, count_errors, Applicability, Finding, LineIndex, Rule,
};
use std::collections::BTreeSet;

mod common;

use common::{fixture_files, fixtures_root};

/// (1-based line, code) pairs from `# expect:` comments.
pub fn expectations(text: &str) -> BTreeSet<(usize, String)> {
    marked(text, "# expect:")
}

/// (1-based line, code) pairs from the comments starting with `marker` (`# expect:` or
/// `# miss:`); the codes end at ` -- ` (a miss's reason).
fn marked(text: &str, marker: &str) -> BTreeSet<(usize, String)> {
    let mut out = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(at) = line.find(marker) {
            let rest = &line[at + marker.len()..];
            let codes = rest.split(" -- ").next().unwrap_or_default();
            for code in codes.split(|c: char| c == ',' || c.is_whitespace()) {
                let code = code.trim();
                if code.is_empty() {
                    continue;
                }
                assert!(
                    Rule::from_code_or_name(code).is_some(),
                    "unknown code `{code}` after `{marker}`"
                );
                out.insert((i + 1, code.to_string()));
            }
        }
    }
    out
}

fn found(text: &str, findings: &[Finding]) -> BTreeSet<(usize, String)> {
    let idx = LineIndex::new(text);
    findings
        .iter()
        .map(|f| (idx.line_of(f.range.start) + 1, f.rule.code().to_string()))
        .collect()
}

/// The expected findings not found and the findings not expected, one line each.
fn disagreements(
    at: &str,
    want: &BTreeSet<(usize, String)>,
    got: &BTreeSet<(usize, String)>,
    table: &mut Vec<String>,
) {
    for (line, code) in want.difference(got) {
        table.push(format!("{at}{line}  missing {code}"));
    }
    for (line, code) in got.difference(want) {
        table.push(format!("{at}{line}  unexpected {code}"));
    }
}

#[test]
fn every_fixture_has_exactly_its_expected_findings() {
    let mut table = Vec::new();
    for path in fixture_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let want = expectations(&text);
        let got = found(&text, &analyze_source(&text));
        let rel = path
            .strip_prefix(fixtures_root())
            .unwrap()
            .display()
            .to_string();
        let missed = marked(&text, "# miss:");
        for (line, code) in missed.intersection(&got) {
            table.push(format!(
                "{rel}:{line}  {code} is found now: turn its `# miss:` into `# expect:`"
            ));
        }
        let got = got.difference(&missed).cloned().collect();
        disagreements(&format!("{rel}:"), &want, &got, &mut table);
    }
    assert!(
        table.is_empty(),
        "fixture disagreements:\n{}",
        table.join("\n")
    );
}

/// Notebook fixtures: the code cells joined as the analysis sees them, each expectation on its
/// line of the joined text.
#[test]
fn every_notebook_fixture_has_exactly_its_expected_findings() {
    let mut table = Vec::new();
    for path in common::files_with("ipynb") {
        let nb: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cells: Vec<String> = nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["cell_type"] == "code")
            .map(|c| match &c["source"] {
                serde_json::Value::String(s) => s.clone(),
                v => v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap())
                    .collect(),
            })
            .collect();
        let source = inplace_analysis::notebook::NotebookSource::new(&cells);
        let want = expectations(&source.text);
        let got = found(&source.text, &source.analyze());
        let rel = path.display().to_string();
        disagreements(&format!("{rel}: joined line "), &want, &got, &mut table);
    }
    assert!(
        table.is_empty(),
        "notebook fixture disagreements:\n{}",
        table.join("\n")
    );
}

#[test]
fn messages_and_fixes_snapshots() {
    for path in fixture_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let findings = analyze_source(&text);
        if findings.is_empty() {
            continue;
        }
        let idx = LineIndex::new(&text);
        let mut out = String::new();
        for f in &findings {
            let (l, c) = idx.position(&text, f.range.start, inplace_analysis::Encoding::Utf32);
            out.push_str(&format!(
                "{}:{} {} {} [{}]\n  {}\n",
                l + 1,
                c + 1,
                f.rule.code(),
                f.rule.name(),
                f.severity.as_str(),
                f.message
            ));
            for r in &f.related {
                out.push_str(&format!(
                    "  related {}: {}\n",
                    idx.line_of(r.range.start) + 1,
                    r.message
                ));
            }
            if let Some(fix) = &f.fix {
                out.push_str(&format!(
                    "  fix ({}): {}\n",
                    fix.applicability.as_str(),
                    fix.title
                ));
                for e in &fix.edits {
                    let old = &text[e.range.start..e.range.end];
                    out.push_str(&format!("    {:?} -> {:?}\n", old, e.content));
                }
            }
        }
        let rel = path
            .strip_prefix(fixtures_root())
            .unwrap()
            .with_extension("");
        let name = rel.display().to_string().replace(['/', '\\'], "__");
        insta::with_settings!({ snapshot_path => "snapshots/fixtures", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(name, out);
        });
    }
}

/// Every fix parses without new syntax errors, the finding it fixes is gone afterwards, and no
/// rule has more findings than before.
#[test]
fn every_fix_parses_and_removes_its_finding() {
    let mut parser = inplace_analysis::python_parser();
    let mut problems = Vec::new();
    for path in fixture_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let before_errors = count_errors(parser.parse(&text, None).unwrap().root_node());
        for f in analyze_source(&text) {
            let Some(fix) = &f.fix else { continue };
            let (new, used) = apply_fixes(&text, std::slice::from_ref(&f), Applicability::Unsafe);
            assert_eq!(used.len(), 1);
            let tree = parser.parse(&new, None).unwrap();
            let rel = path.file_name().unwrap().to_string_lossy().to_string();
            if count_errors(tree.root_node()) > before_errors {
                problems.push(format!(
                    "{rel}: fix `{}` breaks the syntax:\n{new}",
                    fix.title
                ));
                continue;
            }
            let line = text[..f.range.start].lines().count();
            let again = analyze_source(&new);
            let before = analyze_source(&text);
            // Still there: as many findings say the same as before (two lines may read alike).
            let alike = |fs: &[inplace_analysis::Finding]| {
                fs.iter()
                    .filter(|g| g.rule == f.rule && g.message == f.message)
                    .count()
            };
            if alike(&again) >= alike(&before) {
                problems.push(format!(
                    "{rel}:{line}: {} still reported after `{}`",
                    f.rule.code(),
                    fix.title
                ));
            }
            // No rule that is on by default gains a finding (a fix may remove several: a block
            // under `no_grad`; the opt-in `.data` note may take over a write a fix made
            // harmless).
            let count =
                |fs: &[inplace_analysis::Finding], r| fs.iter().filter(|g| g.rule == r).count();
            for g in again.iter().filter(|g| g.rule.default_enabled()) {
                if count(&again, g.rule) > count(&before, g.rule) {
                    problems.push(format!(
                        "{rel}:{line}: `{}` adds a {} finding: {}",
                        fix.title,
                        g.rule.code(),
                        g.message
                    ));
                    break;
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
