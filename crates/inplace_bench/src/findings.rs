//! The findings `check` reports on the corpus, against the list kept from before engine v2
//! (`tests/bench/findings-before.tsv`): written to `target/bench/findings-after.tsv`, with the
//! differences counted and listed.

use crate::report::Report;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `path<TAB>line:col<TAB>code<TAB>message` rows of a `check --output-format json` run.
fn rows(json: &[u8], corpus: &Path) -> Result<BTreeSet<String>> {
    let v: serde_json::Value = serde_json::from_slice(json).context("check's JSON")?;
    let prefix = format!("{}/", corpus.display());
    let mut out = BTreeSet::new();
    for f in v.as_array().into_iter().flatten() {
        let path = f["path"].as_str().unwrap_or("");
        let path = path.strip_prefix(&prefix).unwrap_or(path);
        let start = &f["range"]["start"];
        let message = f["message"]
            .as_str()
            .unwrap_or("")
            .replace(['\t', '\n'], " ");
        out.insert(format!(
            "{path}\t{}:{}\t{}\t{message}",
            start["line"],
            start["column"],
            f["code"].as_str().unwrap_or("")
        ));
    }
    Ok(out)
}

/// The key of a row without its message (a message names lines that may move).
fn key(row: &str) -> String {
    row.splitn(4, '\t').take(3).collect::<Vec<_>>().join("\t")
}

pub fn compare(binary: &Path, corpus: &Path, root: &Path, report: &mut Report) -> Result<()> {
    let out = Command::new(binary)
        .args(["check", "--exit-zero", "--output-format", "json"])
        .arg(corpus)
        .output()?;
    let after = rows(&out.stdout, corpus)?;
    let mut file = String::from("# `inplace-lsp check` on the pinned bench corpus, now: path, line:column, code, message.\n");
    for r in &after {
        file.push_str(r);
        file.push('\n');
    }
    std::fs::write(root.join("target/bench/findings-after.tsv"), file)?;
    let before_text = std::fs::read_to_string(root.join("tests/bench/findings-before.tsv"))
        .context("tests/bench/findings-before.tsv")?;
    let before: BTreeSet<String> = before_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(key)
        .collect();
    let after_keys: BTreeSet<String> = after.iter().map(|r| key(r)).collect();
    let gone: Vec<&String> = before.difference(&after_keys).collect();
    let new: Vec<&String> = after_keys.difference(&before).collect();
    report.figure(
        "findings on the corpus, against before engine v2",
        format!(
            "{} now, {} before: {} no longer reported, {} new (target/bench/findings-after.tsv)",
            after.len(),
            before.len(),
            gone.len(),
            new.len()
        ),
    );
    for g in gone {
        println!("  no longer: {g}");
    }
    for n in new {
        println!("  new:       {n}");
    }
    Ok(())
}
