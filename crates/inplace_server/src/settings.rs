//! Settings: what the editor sends (`initializationOptions`, `didChangeConfiguration`) and each
//! workspace folder's `pyproject.toml`; which findings of a document they let through.

use inplace_analysis::config::{parse_pyproject, Options, Settings};
use inplace_analysis::{Finding, Rule, Severity};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Settings an editor sends (`initializationOptions`, `workspace/didChangeConfiguration`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSettings {
    #[serde(default)]
    pub select: Vec<String>,
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Code -> `error` | `warning` | `information` | `hint`.
    #[serde(default)]
    pub severities: BTreeMap<String, String>,
}

impl ClientSettings {
    /// Accepts the settings flat, or under `inplace-lsp` / `inplaceLsp` / `inplace_lsp`.
    pub fn from_value(v: &serde_json::Value) -> Option<ClientSettings> {
        let inner = ["inplace-lsp", "inplaceLsp", "inplace_lsp"]
            .iter()
            .find_map(|k| v.get(k))
            .unwrap_or(v);
        serde_json::from_value(inner.clone()).ok()
    }

    /// Compiled once per change, not on every publish.
    pub fn compile(&self) -> Result<ClientConfig, String> {
        let selection = Settings::new(
            Options::default(),
            &self.select,
            &self.ignore,
            "client settings",
        )?;
        let mut severities = BTreeMap::new();
        for (code, s) in &self.severities {
            let s =
                parse_severity(s).ok_or_else(|| format!("unknown severity `{s}` for {code}"))?;
            let rule = Rule::from_code_or_name(code)
                .ok_or_else(|| format!("unknown rule `{code}` in severities"))?;
            severities.insert(rule, s);
        }
        Ok(ClientConfig {
            selection,
            severities,
        })
    }
}

fn parse_severity(s: &str) -> Option<Severity> {
    match s.to_ascii_lowercase().as_str() {
        "error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        "information" | "info" => Some(Severity::Information),
        "hint" => Some(Severity::Hint),
        _ => None,
    }
}

/// Client settings ready to apply.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    pub selection: Settings,
    pub severities: BTreeMap<Rule, Severity>,
}

/// A workspace folder with a `[tool.inplace-lsp]` table.
pub struct Project {
    pub root: PathBuf,
    pub settings: Settings,
}

/// The projects of the workspace folders (deepest first), and the problems reading them.
pub fn load_projects(folders: &[PathBuf]) -> (Vec<Project>, Vec<String>) {
    let mut projects = Vec::new();
    let mut problems = Vec::new();
    for root in folders {
        let file = root.join("pyproject.toml");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        match parse_pyproject(&text).and_then(|o| {
            Settings::new(o.unwrap_or_default(), &[], &[], &file.display().to_string())
        }) {
            Ok(settings) => projects.push(Project {
                root: root.clone(),
                settings,
            }),
            Err(e) => problems.push(format!("{}: {e}", file.display())),
        }
    }
    projects.sort_by_key(|p| std::cmp::Reverse(p.root.as_os_str().len()));
    (projects, problems)
}

/// Findings of a document at `path` after project and client selection and severities.
pub fn select(
    client: &ClientConfig,
    projects: &[Project],
    path: Option<&Path>,
    findings: &[Finding],
) -> Vec<Finding> {
    let project = path.and_then(|p| projects.iter().find(|pr| p.starts_with(&pr.root)));
    findings
        .iter()
        .filter(|f| {
            let by_project = match (project, path) {
                (Some(pr), Some(p)) => pr
                    .settings
                    .enabled(f.rule, p.strip_prefix(&pr.root).unwrap_or(p)),
                _ => true,
            };
            by_project && client.selection.selection.enabled(f.rule)
        })
        .map(|f| {
            let mut f = f.clone();
            if let Some(s) = client.severities.get(&f.rule) {
                f.severity = *s;
            }
            f
        })
        .collect()
}
