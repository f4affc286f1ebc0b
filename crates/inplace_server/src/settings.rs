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
            // A project's pyproject.toml decides which rules run (opt-in ones included); the
            // editor's settings can only narrow that. Without a project, the editor's
            // selection decides.
            let client = &client.selection.selection;
            match (project, path) {
                (Some(pr), Some(p)) => {
                    pr.settings
                        .enabled(f.rule, p.strip_prefix(&pr.root).unwrap_or(p))
                        && client.allows(f.rule)
                }
                _ => client.enabled(f.rule),
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use inplace_analysis::config::Options;
    use inplace_analysis::{Finding, TextRange};

    fn finding(rule: Rule) -> Finding {
        Finding {
            rule,
            severity: rule.default_severity(),
            range: TextRange::new(0, 1),
            message: String::new(),
            related: Vec::new(),
            fix: None,
            alternatives: Vec::new(),
        }
    }

    /// An opt-in rule runs when the project selects it, although the editor's settings select
    /// nothing; the editor can still narrow what the project enables.
    #[test]
    fn the_project_decides_opt_in_rules_and_the_editor_narrows() {
        let settings = |select: &[&str], ignore: &[&str]| {
            let s: Vec<String> = select.iter().map(|s| s.to_string()).collect();
            let i: Vec<String> = ignore.iter().map(|s| s.to_string()).collect();
            Settings::new(Options::default(), &s, &i, "test").unwrap()
        };
        let all = [finding(Rule::DataAccess), finding(Rule::SavedOutputInplace)];
        let codes = |client: &ClientConfig, projects: &[Project], path: &str| -> Vec<&str> {
            select(client, projects, Some(Path::new(path)), &all)
                .iter()
                .map(|f| f.rule.code())
                .collect()
        };
        let editor = ClientConfig::default();
        let project = [Project {
            root: PathBuf::from("/p"),
            settings: settings(&["ALL"], &[]),
        }];
        assert_eq!(codes(&editor, &[], "/p/a.py"), ["IP301"]);
        assert_eq!(codes(&editor, &project, "/p/a.py"), ["IP410", "IP301"]);
        assert_eq!(codes(&editor, &project, "/elsewhere/a.py"), ["IP301"]);
        let narrowing = ClientConfig {
            selection: settings(&[], &["IP4"]),
            ..Default::default()
        };
        assert_eq!(codes(&narrowing, &project, "/p/a.py"), ["IP301"]);
    }
}
