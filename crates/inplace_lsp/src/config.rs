//! `[tool.inplace-lsp]` in pyproject.toml: `select`, `ignore`, `per-file-ignores`.

use anyhow::{bail, Context, Result};
use globset::{Glob, GlobMatcher};
use inplace_analysis::{Rule, RuleSelection};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Deserialize)]
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

/// The settings `check` runs with.
#[derive(Debug, Default)]
pub struct Settings {
    pub selection: RuleSelection,
    pub per_file: Vec<(GlobMatcher, Vec<String>)>,
    /// Folder the per-file globs are relative to.
    pub root: PathBuf,
}

impl Settings {
    /// Whether `rule` is enabled for `path`.
    pub fn enabled(&self, rule: Rule, path: &Path) -> bool {
        if !self.selection.enabled(rule) {
            return false;
        }
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let rel = rel.strip_prefix("./").unwrap_or(rel);
        !self.per_file.iter().any(|(glob, codes)| {
            (glob.is_match(rel) || glob.is_match(path))
                && codes.iter().any(|c| RuleSelection::matches(c, rule))
        })
    }
}

/// Read `[tool.inplace-lsp]` from a pyproject.toml (`None` when the table is absent).
pub fn read_pyproject(path: &Path) -> Result<Option<Options>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: Pyproject =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    let Some(value) = doc.tool.and_then(|t| t.inplace_lsp) else {
        return Ok(None);
    };
    let options: Options = value
        .try_into()
        .with_context(|| format!("invalid [tool.inplace-lsp] in {}", path.display()))?;
    Ok(Some(options))
}

/// The nearest pyproject.toml with a `[tool.inplace-lsp]` table, from `start` upwards.
pub fn discover(start: &Path) -> Result<Option<(PathBuf, Options)>> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    let mut dir = if start.is_dir() {
        Some(start.as_path())
    } else {
        start.parent()
    };
    while let Some(d) = dir {
        let candidate = d.join("pyproject.toml");
        if candidate.is_file() {
            if let Some(o) = read_pyproject(&candidate)? {
                return Ok(Some((candidate, o)));
            }
        }
        dir = d.parent();
    }
    Ok(None)
}

fn check_selectors(list: &[String], what: &str) -> Result<()> {
    for s in list {
        if !RuleSelection::is_known_selector(s) {
            bail!("unknown rule selector `{s}` in {what} (expected a code like IP301, a prefix like IP3, a name, or ALL)");
        }
    }
    Ok(())
}

/// Merge file options with command-line `--select` / `--ignore` (the command line wins).
pub fn settings(
    file: Option<(PathBuf, Options)>,
    select: &[String],
    extend_ignore: &[String],
) -> Result<Settings> {
    let (source, options) = match file {
        Some((p, o)) => (Some(p), o),
        None => (None, Options::default()),
    };
    let what = source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    check_selectors(&options.select, &what)?;
    check_selectors(&options.ignore, &what)?;
    check_selectors(select, "--select")?;
    check_selectors(extend_ignore, "--ignore")?;
    let mut per_file = Vec::new();
    for (pattern, codes) in &options.per_file_ignores {
        check_selectors(codes, &what)?;
        let glob = Glob::new(pattern)
            .with_context(|| format!("invalid per-file-ignores pattern `{pattern}`"))?;
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
            .chain(extend_ignore.iter().cloned())
            .collect(),
    };
    let root = source
        .as_ref()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(Settings {
        selection,
        per_file,
        root,
    })
}
