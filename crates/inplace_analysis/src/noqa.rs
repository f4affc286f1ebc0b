//! `# noqa` and `# noqa: IP301, IP302` comments, as in ruff: they suppress findings that start
//! on their line.

use crate::finding::Finding;
use crate::line_index::LineIndex;
use crate::registry::{Rule, RuleSelection};
use rustc_hash::FxHashMap;

/// Per line: `None` suppresses everything, `Some(codes)` only those (prefixes allowed).
#[derive(Debug, Default)]
pub struct NoqaMap {
    lines: FxHashMap<usize, Option<Vec<String>>>,
}

impl NoqaMap {
    /// The map of the comments that mention `noqa` (the outline collects them).
    pub fn from_comments(text: &str, comments: &[(u32, u32)], lines: &LineIndex) -> Self {
        let mut map = NoqaMap::default();
        for &(s, e) in comments {
            if let Some(codes) = text.get(s as usize..e as usize).and_then(parse) {
                map.lines.insert(lines.line_of(s as usize), codes);
            }
        }
        map
    }

    pub fn suppresses(&self, line: usize, rule: Rule) -> bool {
        match self.lines.get(&line) {
            None => false,
            Some(None) => true,
            Some(Some(codes)) => codes.iter().any(|c| RuleSelection::matches(c, rule)),
        }
    }

    pub fn filter(&self, lines: &LineIndex, findings: &mut Vec<Finding>) {
        if self.lines.is_empty() {
            return;
        }
        findings.retain(|f| !self.suppresses(lines.line_of(f.range.start), f.rule));
    }
}

/// `# noqa` -> Some(None); `# noqa: IP301,IP302` -> Some(Some([..])); anything else -> None.
fn parse(comment: &str) -> Option<Option<Vec<String>>> {
    let lower = comment.to_ascii_lowercase();
    let at = lower.find("noqa")?;
    if !lower[..at].trim_end().ends_with('#') {
        return None;
    }
    let rest = comment[at + 4..].trim_start();
    let Some(list) = rest.strip_prefix(':') else {
        return Some(None);
    };
    let codes: Vec<String> = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(str::trim)
        .filter(|c| !c.is_empty() && c.chars().next().is_some_and(|ch| ch.is_ascii_alphabetic()))
        .map(str::to_string)
        .collect();
    if codes.is_empty() {
        Some(None)
    } else {
        Some(Some(codes))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_noqa_forms() {
        assert_eq!(parse("# noqa"), Some(None));
        assert_eq!(
            parse("# NOQA: IP301, IP4"),
            Some(Some(vec!["IP301".into(), "IP4".into()]))
        );
        assert_eq!(parse("# see noqa docs"), None);
        assert_eq!(
            parse("# type: ignore  # noqa:IP101"),
            Some(Some(vec!["IP101".into()]))
        );
    }
}
