//! Plain data the analysis hands to its callers: findings, related locations and fixes.
//! Ranges are byte offsets into the analysed text; [`crate::LineIndex`] converts them.

use crate::registry::Rule;
pub use crate::registry::Severity;
use serde::Serialize;

/// A half-open byte range `[start, end)` in the analysed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
pub struct TextRange {
    pub start: usize,
    pub end: usize,
}

impl TextRange {
    pub fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }
    pub fn contains(&self, other: TextRange) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// How far a fix can be trusted, as in ruff: `Safe` fixes keep what the program computes
/// (apart from removing the hazard) and are applied by `--fix`; `Unsafe` ones may change values
/// seen elsewhere and need `--unsafe-fixes`; `DisplayOnly` ones are shown, never applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    DisplayOnly,
    Unsafe,
    Safe,
}

impl Applicability {
    pub fn as_str(self) -> &'static str {
        match self {
            Applicability::Safe => "safe",
            Applicability::Unsafe => "unsafe",
            Applicability::DisplayOnly => "display-only",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Edit {
    pub range: TextRange,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Fix {
    pub title: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Related {
    /// The file it lies in, when not the analysed one: the origin the caller gave for an
    /// imported module (a path, a URI); the range is then in that file's text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<std::sync::Arc<str>>,
    pub range: TextRange,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    /// The culprit: the in-place write itself (not where the runtime raises).
    pub range: TextRange,
    pub message: String,
    pub related: Vec<Related>,
    pub fix: Option<Fix>,
    /// Other fixes, in the order they are preferred, for where `fix` does not remove the
    /// finding when applied (fix-all and `check` then try the next).
    #[serde(skip)]
    pub alternatives: Vec<Fix>,
}
