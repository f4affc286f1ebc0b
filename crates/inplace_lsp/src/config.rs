//! Finding the pyproject.toml that configures a `check` run.

use anyhow::{Context, Result};
use inplace_analysis::config::{parse_pyproject, Options, Settings};
use std::path::{Path, PathBuf};

/// `[tool.inplace-lsp]` of a pyproject.toml file (`None` when the table is absent).
pub fn read_pyproject(path: &Path) -> Result<Option<Options>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_pyproject(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
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

/// The settings of a run, and the folder per-file globs are relative to.
pub struct RunSettings {
    pub settings: Settings,
    pub root: PathBuf,
}

impl RunSettings {
    pub fn enabled(&self, rule: inplace_analysis::Rule, path: &Path) -> bool {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        self.settings.enabled(rule, rel)
    }
}

/// Merge file options with command-line `--select` / `--ignore` (the command line wins).
pub fn settings(
    file: Option<(PathBuf, Options)>,
    select: &[String],
    ignore: &[String],
) -> Result<RunSettings> {
    let (source, options) = match file {
        Some((p, o)) => (Some(p), o),
        None => (None, Options::default()),
    };
    let what = source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "settings".into());
    let settings = Settings::new(options, select, ignore, &what).map_err(anyhow::Error::msg)?;
    let root = source
        .as_ref()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| std::fs::canonicalize(".").unwrap_or_else(|_| PathBuf::from(".")));
    Ok(RunSettings { settings, root })
}
