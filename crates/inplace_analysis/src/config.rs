//! `[tool.inplace-lsp]` settings: `select`, `ignore`, `per-file-ignores`. Parsed from text; the
//! callers find and read the files.

use crate::registry::{Rule, RuleSelection};
use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The options as written in pyproject.toml (or sent by an editor).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Options {
    #[serde(default)]
    pub select: Vec<String>,
    #[serde(default)]
    pub ignore: Vec<String>,
    #[serde(default)]
    pub per_file_ignores: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct Pyproject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    #[serde(rename = "inplace-lsp")]
    inplace_lsp: Option<toml::Value>,
}

/// `[tool.inplace-lsp]` of a pyproject.toml's text; `Ok(None)` when the table is absent.
pub fn parse_pyproject(text: &str) -> Result<Option<Options>, String> {
    let doc: Pyproject = toml::from_str(text).map_err(|e| format!("not valid TOML: {e}"))?;
    let Some(value) = doc.tool.and_then(|t| t.inplace_lsp) else {
        return Ok(None);
    };
    value
        .try_into()
        .map(Some)
        .map_err(|e| format!("invalid [tool.inplace-lsp]: {e}"))
}

/// Rule selection for one project.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub selection: RuleSelection,
    per_file: Vec<(GlobMatcher, Vec<String>)>,
}

fn check_selectors(list: &[String], what: &str) -> Result<(), String> {
    for s in list {
        if !RuleSelection::is_known_selector(s) {
            return Err(format!(
                "unknown rule selector `{s}` in {what} (expected a code like IP301, a prefix like IP3, a name, or ALL)"
            ));
        }
    }
    Ok(())
}

impl Settings {
    /// Settings from file options, overridden by `select` (replaces) and `ignore` (adds).
    pub fn new(
        options: Options,
        select: &[String],
        ignore: &[String],
        what: &str,
    ) -> Result<Settings, String> {
        check_selectors(&options.select, what)?;
        check_selectors(&options.ignore, what)?;
        check_selectors(select, "--select")?;
        check_selectors(ignore, "--ignore")?;
        let mut per_file = Vec::new();
        for (pattern, codes) in &options.per_file_ignores {
            check_selectors(codes, what)?;
            let glob = Glob::new(pattern)
                .map_err(|e| format!("invalid per-file-ignores pattern `{pattern}`: {e}"))?;
            per_file.push((glob.compile_matcher(), codes.clone()));
        }
        let selection = RuleSelection {
            select: if select.is_empty() {
                options.select
            } else {
                select.to_vec()
            },
            ignore: options
                .ignore
                .into_iter()
                .chain(ignore.iter().cloned())
                .collect(),
        };
        Ok(Settings {
            selection,
            per_file,
        })
    }

    /// Whether `rule` is enabled for a file at `rel` (relative to the project root).
    pub fn enabled(&self, rule: Rule, rel: &Path) -> bool {
        self.selection.enabled(rule)
            && !self.per_file.iter().any(|(glob, codes)| {
                glob.is_match(rel) && codes.iter().any(|c| RuleSelection::matches(c, rule))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pyproject_tables() {
        assert_eq!(parse_pyproject("[project]\nname='x'\n"), Ok(None));
        let o = parse_pyproject("[tool.inplace-lsp]\nignore=['IP5']\n[tool.inplace-lsp.per-file-ignores]\n'a/*.py'=['IP301']\n")
            .unwrap()
            .unwrap();
        let s = Settings::new(o, &[], &[], "pyproject.toml").unwrap();
        assert!(!s.enabled(Rule::AnomalyModeLeftOn, Path::new("m.py")));
        assert!(!s.enabled(Rule::SavedOutputInplace, Path::new("a/m.py")));
        assert!(s.enabled(Rule::SavedOutputInplace, Path::new("b/m.py")));
        assert!(parse_pyproject("[tool.inplace-lsp]\nselct=[]\n").is_err());
        assert!(Settings::new(Options::default(), &["IP9".into()], &[], "x").is_err());
    }
}
