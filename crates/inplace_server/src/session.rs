//! What the handlers and the analysis workers share: the open documents (each with its
//! analysis state), the negotiated capabilities and the settings.

use crate::document::Document;
use crate::settings::{self, ClientConfig, Project};
use dashmap::DashMap;
use inplace_analysis::{Encoding, FileState, Finding, InplaceSite};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use tower_lsp::lsp_types::{Diagnostic, Url};

/// The result of analysing one version of a document.
pub struct Analysed {
    pub version: i32,
    pub findings: Vec<Finding>,
    pub sites: Vec<InplaceSite>,
}

/// An open document and its analysis.
pub struct DocEntry {
    pub doc: Document,
    /// What the last versions' analyses left; `None` while a worker has it.
    pub state: Option<Box<FileState>>,
    /// The latest analysis; handlers waiting for one subscribe.
    pub analysis: tokio::sync::watch::Sender<Option<Arc<Analysed>>>,
    /// A worker is analysing this document.
    pub busy: bool,
    /// The latest version, for a running analysis to see that it is out of date.
    pub latest: Arc<AtomicI32>,
}

impl DocEntry {
    /// The analysis of the current version, if it is done.
    pub fn current(&self) -> Option<Arc<Analysed>> {
        self.analysis
            .borrow()
            .clone()
            .filter(|a| a.version == self.doc.version)
    }

    pub fn new(doc: Document) -> DocEntry {
        let latest = Arc::new(AtomicI32::new(doc.version));
        DocEntry {
            doc,
            state: Some(Box::default()),
            analysis: tokio::sync::watch::Sender::new(None),
            busy: false,
            latest,
        }
    }
}

pub struct Session {
    pub docs: DashMap<Url, DocEntry>,
    pub encoding: RwLock<Encoding>,
    /// The client can register file watchers (for pyproject.toml).
    pub watch: AtomicBool,
    /// The client pulls diagnostics (so they are not pushed too).
    pub pull: AtomicBool,
    pub client: RwLock<ClientConfig>,
    pub projects: RwLock<Vec<Project>>,
    pub folders: RwLock<Vec<PathBuf>>,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            docs: DashMap::new(),
            encoding: RwLock::new(Encoding::Utf16),
            watch: AtomicBool::new(false),
            pull: AtomicBool::new(false),
            client: RwLock::new(ClientConfig::default()),
            projects: RwLock::new(Vec::new()),
            folders: RwLock::new(Vec::new()),
        }
    }
}

/// The file path of a `file:` URI.
pub fn uri_path(uri: &Url) -> Option<PathBuf> {
    (uri.scheme() == "file")
        .then(|| uri.to_file_path().ok())
        .flatten()
}

impl Session {
    pub fn enc(&self) -> Encoding {
        *self.encoding.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn pulls(&self) -> bool {
        self.pull.load(Ordering::Relaxed)
    }

    /// Findings of a document after project and client selection and severity overrides.
    pub fn select(&self, uri: &Url, findings: &[Finding]) -> Vec<Finding> {
        let client = self.client.read().unwrap_or_else(PoisonError::into_inner);
        let projects = self.projects.read().unwrap_or_else(PoisonError::into_inner);
        let path = uri_path(uri);
        settings::select(&client, &projects, path.as_deref(), findings)
    }

    /// The current version's diagnostics, when its analysis is done.
    pub fn diagnostics(&self, uri: &Url) -> Option<(i32, Vec<Diagnostic>)> {
        let entry = self.docs.get(uri)?;
        let a = entry.current()?;
        let enc = self.enc();
        let findings = self.select(uri, &a.findings);
        Some((
            a.version,
            findings
                .iter()
                .map(|f| crate::convert::diagnostic(&entry.doc, uri, f, enc))
                .collect(),
        ))
    }
}
