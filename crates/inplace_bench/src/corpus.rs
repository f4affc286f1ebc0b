//! The pinned corpus, read once.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub struct Corpus {
    pub files: Vec<(PathBuf, String)>,
    pub lines: usize,
    pub bytes: usize,
}

pub fn load(dir: &Path) -> Result<Corpus> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "py") {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    files.push((p, t));
                }
            }
        }
    }
    files.sort();
    let lines = files.iter().map(|(_, t)| t.lines().count()).sum();
    let bytes = files.iter().map(|(_, t)| t.len()).sum();
    Ok(Corpus {
        files,
        lines,
        bytes,
    })
}

impl Corpus {
    /// A real file of at least 10,000 lines: the biggest torch files of the corpus,
    /// concatenated whole (no single file in the corpus reaches 10,000 lines).
    pub fn ten_thousand_lines(&self) -> String {
        let mut big: Vec<&(PathBuf, String)> = self
            .files
            .iter()
            .filter(|(_, t)| inplace_analysis::mentions_torch(t))
            .collect();
        big.sort_by_key(|(_, t)| std::cmp::Reverse(t.lines().count()));
        let mut text = String::new();
        for (_, t) in big {
            if text.lines().count() >= 10_000 {
                break;
            }
            text.push_str(t);
            text.push('\n');
        }
        text
    }
}
