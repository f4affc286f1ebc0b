//! What the handlers and the analysis workers share: the open documents (each with its
//! analysis state), the negotiated capabilities and the settings.

use crate::document::Document;
use crate::notebook::NotebookDoc;
use crate::settings::{self, ClientConfig, Project};
use crate::workspace::Workspace;
use dashmap::DashMap;
use inplace_analysis::project::Imports;
use inplace_analysis::{Encoding, FileState, Finding, InplaceSite, TextRange};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use tower_lsp_server::ls_types::{Diagnostic, Location, Position, Range, Uri};

/// The result of analysing one version of a document.
#[derive(Default)]
pub struct Analysed {
    pub version: i32,
    /// The [`DocEntry::epoch`] of the project modules it read.
    pub epoch: u64,
    pub findings: Vec<Finding>,
    pub sites: Vec<InplaceSite>,
    /// The project modules it read (their text maps related locations inside them).
    pub imports: Arc<Imports>,
    /// Their files: an edit of one of them analyses this document again.
    pub module_paths: Arc<Vec<PathBuf>>,
}

impl Analysed {
    /// Whether it read the module at `path`.
    pub fn reads(&self, path: &std::path::Path) -> bool {
        self.module_paths.iter().any(|p| p == path)
    }
}

/// Diagnostics for one target document (a file, or a notebook cell).
pub type Published = (Uri, Vec<Diagnostic>);

/// An open document (or notebook) and its analysis.
pub struct DocEntry {
    /// The analysed text: the document's, or a notebook's code cells joined.
    pub doc: Document,
    /// For a notebook: its cells.
    pub notebook: Option<NotebookDoc>,
    /// What the last versions' analyses left; `None` while a worker has it.
    pub state: Option<Box<FileState>>,
    /// The latest analysis; handlers waiting for one subscribe.
    pub analysis: tokio::sync::watch::Sender<Option<Arc<Analysed>>>,
    /// A worker is analysing this document.
    pub busy: bool,
    /// The latest version, for a running analysis to see that it is out of date.
    pub latest: Arc<AtomicI32>,
    /// Counts changes of the project modules the document reads (edits of other open
    /// documents, files changed on disk): an analysis is current only at the latest.
    pub epoch: Arc<AtomicU64>,
}

impl DocEntry {
    /// The analysis of the current version, if it is done.
    pub fn current(&self) -> Option<Arc<Analysed>> {
        self.of_text().filter(|a| a.epoch == self.epoch())
    }

    /// The analysis of the current text, if it is done, even when project modules it read
    /// changed since: its findings are the diagnostics the client shows until the next analysis
    /// lands, and their quick fixes are verified on the current text when offered.
    pub fn of_text(&self) -> Option<Arc<Analysed>> {
        self.analysis
            .borrow()
            .clone()
            .filter(|a| a.version == self.doc.version)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Whether an analysis of `version` at `epoch` is out of date.
    pub fn moved_on(&self, version: i32, epoch: u64) -> bool {
        version != self.doc.version || epoch != self.epoch()
    }

    /// An open notebook: its code cells joined are the analysed text.
    pub fn notebook(nb: NotebookDoc, version: i32) -> DocEntry {
        let mut entry = DocEntry::new(Document::new(nb.source.text.clone(), version));
        entry.notebook = Some(nb);
        entry
    }

    /// Where a range of the analysed text shows in the client (`key`: the document's URI).
    pub fn location(&self, key: &Uri, r: TextRange, enc: Encoding) -> Location {
        match &self.notebook {
            Some(nb) => nb.location(r, enc).unwrap_or_else(|| Location {
                uri: key.clone(),
                range: Range::default(),
            }),
            None => Location {
                uri: key.clone(),
                range: self.doc.range(r, enc),
            },
        }
    }

    /// The offset in the analysed text of a position in `uri` (the document or a cell).
    pub fn offset(&self, uri: &Uri, pos: Position, enc: Encoding) -> Option<usize> {
        match &self.notebook {
            Some(nb) => nb.offset(uri, pos, enc),
            None => Some(self.doc.offset(pos, enc)),
        }
    }

    /// The text document `uri` names: the document itself, or one of the notebook's cells.
    pub fn view(&self, uri: &Uri) -> Option<&Document> {
        match &self.notebook {
            Some(nb) => nb.cell(uri).map(|c| &c.doc),
            None => Some(&self.doc),
        }
    }

    /// How a message names the line of an offset: `line 9`, or `cell 3, line 2`.
    pub fn label(&self, offset: usize) -> String {
        match &self.notebook {
            Some(nb) => nb.label(offset, &self.doc.lines),
            None => format!("line {}", self.doc.lines.line_of(offset) + 1),
        }
    }

    /// Where diagnostics go: the document, or every code cell.
    pub fn targets(&self, key: &Uri) -> Vec<Uri> {
        match &self.notebook {
            Some(nb) => nb.code_uris().cloned().collect(),
            None => vec![key.clone()],
        }
    }

    pub fn new(doc: Document) -> DocEntry {
        let latest = Arc::new(AtomicI32::new(doc.version));
        DocEntry {
            doc,
            notebook: None,
            state: Some(Box::default()),
            analysis: tokio::sync::watch::Sender::new(None),
            busy: false,
            latest,
            epoch: Arc::default(),
        }
    }
}

pub struct Session {
    /// Open documents and notebooks, by their URI.
    pub docs: DashMap<Uri, DocEntry>,
    /// The cells of open notebooks: cell URI -> notebook URI.
    pub cells: DashMap<Uri, Uri>,
    pub encoding: RwLock<Encoding>,
    /// The client can register file watchers (for pyproject.toml).
    pub watch: AtomicBool,
    /// The client pulls diagnostics (so they are not pushed too).
    pub pull: AtomicBool,
    /// The client can be asked to pull all diagnostics again (`workspace/diagnostic/refresh`).
    pub refresh: AtomicBool,
    pub client: RwLock<ClientConfig>,
    pub projects: RwLock<Vec<Project>>,
    pub folders: RwLock<Vec<PathBuf>>,
    /// The project modules open documents import: open documents' text, files on disk.
    pub workspace: Workspace,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            docs: DashMap::new(),
            cells: DashMap::new(),
            encoding: RwLock::new(Encoding::Utf16),
            watch: AtomicBool::new(false),
            pull: AtomicBool::new(false),
            refresh: AtomicBool::new(false),
            client: RwLock::new(ClientConfig::default()),
            projects: RwLock::new(Vec::new()),
            folders: RwLock::new(Vec::new()),
            workspace: Workspace::default(),
        }
    }
}

/// The file path of a `file:` URI.
pub fn uri_path(uri: &Uri) -> Option<PathBuf> {
    uri.scheme()
        .as_str()
        .eq_ignore_ascii_case("file")
        .then(|| uri.to_file_path().map(|p| p.into_owned()))
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
    pub fn select(&self, uri: &Uri, findings: &[Finding]) -> Vec<Finding> {
        let client = self.client.read().unwrap_or_else(PoisonError::into_inner);
        let projects = self.projects.read().unwrap_or_else(PoisonError::into_inner);
        let path = uri_path(uri);
        settings::select(&client, &projects, path.as_deref(), findings)
    }

    /// The open document a URI belongs to: itself, or the notebook of a cell.
    pub fn key(&self, uri: &Uri) -> Uri {
        self.cells
            .get(uri)
            .map(|k| k.value().clone())
            .unwrap_or_else(|| uri.clone())
    }

    /// The current version's diagnostics, per target document (the document, or each code
    /// cell of a notebook, those without findings included), when its analysis is done.
    pub fn diagnostics(&self, key: &Uri) -> Option<(i32, Vec<Published>)> {
        let a = self.docs.get(key)?.current()?;
        self.diagnostics_of(key, &a)
    }

    /// The diagnostics of analysis `a` while it is of the document's current text (a settings
    /// change or an edit of a project module it read may have superseded it since: its findings
    /// stay what the client shows until the next analysis lands).
    pub fn diagnostics_of(&self, key: &Uri, a: &Analysed) -> Option<(i32, Vec<Published>)> {
        let entry = self.docs.get(key)?;
        if a.version != entry.doc.version {
            return None;
        }
        let enc = self.enc();
        let mut groups: Vec<Published> = entry
            .targets(key)
            .into_iter()
            .map(|u| (u, Vec::new()))
            .collect();
        let at: std::collections::HashMap<Uri, usize> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.0.clone(), i))
            .collect();
        let findings = self.select(key, &a.findings);
        let modules = crate::convert::ModuleLines::new(&a.imports, &findings);
        for f in &findings {
            let (uri, d) = crate::convert::diagnostic(&entry, key, f, &modules, enc);
            if let Some(&i) = at.get(&uri) {
                groups[i].1.push(d);
            }
        }
        Some((a.version, groups))
    }
}
