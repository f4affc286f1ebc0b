//! The project modules open documents import, and who imports whom.
//!
//! A document that trains (see [`project::reads_imports`]) is analysed with the project modules
//! it imports, found under its [`ProjectLayout`]'s roots: an open document's text wins over the
//! file on disk (unsaved edits count), other files are read once and read again when the
//! client's file watcher reports them changed (or when they are saved). Each analysis records
//! the module files it read; an edit of one of them (typed in the editor, or changed on disk)
//! analyses again the open documents that read it, directly or through a package's re-exports,
//! and only those.

use crate::project::{DiskReader, FileLookup, ProjectLayout};
use crate::scheduler::{refresh_pulls, schedule};
use crate::session::{uri_path, Session};
use dashmap::DashMap;
use inplace_analysis::project::{self, Imports};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use tower_lsp_server::ls_types::Uri;
use tower_lsp_server::Client;

#[derive(Default)]
pub struct Workspace {
    /// Open text documents by their file's path.
    open: DashMap<PathBuf, Uri>,
    /// Files of modules no open document holds.
    disk: DiskReader,
    /// Per open document: its layout, and the paths it imports with the key of the text they
    /// were read from (a keystroke elsewhere reads neither the disk nor the imports again).
    entries: DashMap<Uri, Entry>,
    /// Moves on whenever a module anyone may read changes (opened, closed, edited while read,
    /// changed on disk): the imports collected before it are stale.
    generation: AtomicU64,
}

#[derive(Clone)]
struct Entry {
    layout: Arc<ProjectLayout>,
    key: u64,
    paths: Arc<Vec<String>>,
    /// The modules collected at a generation, and their files.
    collected: Option<(u64, Arc<Imports>, Arc<Vec<PathBuf>>)>,
}

impl Workspace {
    /// A text document opened: its text now stands for its file. Returns the file.
    pub fn opened(&self, uri: &Uri) -> Option<PathBuf> {
        self.moved_on();
        let path = uri_path(uri)?;
        self.open.insert(path.clone(), uri.clone());
        Some(path)
    }

    /// A text document closed: its file on disk stands for it again. Returns the file.
    pub fn closed(&self, uri: &Uri) -> Option<PathBuf> {
        self.forget(uri);
        self.moved_on();
        let path = uri_path(uri)?;
        self.open.remove_if(&path, |_, u| u == uri);
        self.disk.forget(&path);
        Some(path)
    }

    /// A document closed (a notebook: never a module of others).
    pub fn forget(&self, uri: &Uri) {
        self.entries.remove(uri);
    }

    /// A file changed on disk (saved, or reported by the watcher).
    pub fn changed_on_disk(&self, path: &Path) {
        self.disk.forget(path);
        self.moved_on();
    }

    fn moved_on(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Files appeared or went away: every file is read again.
    pub fn files_moved(&self) {
        self.disk.forget_all();
        self.entries.clear();
        self.moved_on();
    }
}

/// The text of an open document at `path`.
fn open_text(session: &Session, path: &Path) -> Option<Arc<str>> {
    let uri = session.workspace.open.get(path)?.value().clone();
    let entry = session.docs.get(&uri)?;
    entry.notebook.is_none().then(|| entry.doc.text.clone())
}

/// How findings name a module's file: the URI the client opened it by, else its `file:` URI.
fn origin(session: &Session, path: &Path) -> String {
    if let Some(uri) = session.workspace.open.get(path) {
        return uri.value().as_str().to_string();
    }
    Uri::from_file_path(path)
        .map(|u| u.as_str().to_string())
        .unwrap_or_else(|| path.display().to_string())
}

/// The project modules the document `uri` with `text` imports, and their files. None for a
/// document that is not a file, or does not train (its analysis would not use them). Kept while
/// its import lines and the workspace's modules are the same: a keystroke elsewhere in the
/// document collects nothing again.
pub fn imports_of(session: &Session, uri: &Uri, text: &str) -> (Arc<Imports>, Arc<Vec<PathBuf>>) {
    let Some(file) = uri_path(uri).filter(|p| p.is_absolute()) else {
        return Default::default();
    };
    if !project::reads_imports(text) {
        return Default::default();
    }
    let generation = session.workspace.generation.load(Ordering::Relaxed);
    let mut entry = entry_of(session, uri, &file, text);
    if let Some((g, imports, paths)) = &entry.collected {
        if *g == generation {
            return (imports.clone(), paths.clone());
        }
    }
    let layout = &*entry.layout;
    let lookup = FileLookup {
        layout,
        reader: &session.workspace.disk,
        origin: &|p| origin(session, p),
        file: &file,
        overlay: Some(&|p| open_text(session, p)),
    };
    let imports = project::collect_from(entry.paths.clone(), layout.entry.clone(), &lookup);
    let paths: Arc<Vec<PathBuf>> = Arc::new(
        imports
            .modules
            .iter()
            .filter_map(|m| m.origin.parse::<Uri>().ok().as_ref().and_then(uri_path))
            .collect(),
    );
    let imports = Arc::new(imports);
    entry.collected = Some((generation, imports.clone(), paths.clone()));
    session.workspace.entries.insert(uri.clone(), entry);
    (imports, paths)
}

/// The document's layout and imported paths, kept while the text's [`project::imports_key`]
/// holds.
fn entry_of(session: &Session, uri: &Uri, file: &Path, text: &str) -> Entry {
    let key = project::imports_key(text);
    let kept = session.workspace.entries.get(uri).map(|e| e.clone());
    if let Some(e) = kept.as_ref().filter(|e| e.key == key) {
        return e.clone();
    }
    // (Made again when the import lines changed: they include the `sys.path` additions.)
    let workspace = session
        .folders
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|f| file.starts_with(f))
        .max_by_key(|f| f.as_os_str().len())
        .cloned();
    let layout = Arc::new(ProjectLayout::of(file, workspace.as_deref()).with_sys_path(file, text));
    let entry = Entry {
        layout,
        key,
        paths: Arc::new(project::entry_imported_paths(text)),
        collected: None,
    };
    session.workspace.entries.insert(uri.clone(), entry.clone());
    entry
}

/// The project modules at `paths` changed: analyse again the open documents whose last
/// analysis read any of them (and those whose first analysis is under way, which may have read
/// the old text).
pub async fn modules_changed(session: &Arc<Session>, client: &Client, paths: &[PathBuf]) {
    if paths.is_empty() {
        return;
    }
    let importers: Vec<Uri> = session
        .docs
        .iter()
        .filter(|e| {
            let a = e.analysis.borrow();
            match a.as_ref() {
                Some(a) => paths.iter().any(|p| a.reads(p)),
                None => e.busy && uri_path(e.key()).is_none_or(|own| !paths.contains(&own)),
            }
        })
        .map(|e| e.key().clone())
        .collect();
    if !importers.is_empty() {
        session.workspace.moved_on();
    }
    again(session, client, importers).await;
}

/// Analyse again every open document that may import project modules (files appeared or went
/// away: any import may resolve differently).
pub async fn all_imports_changed(session: &Arc<Session>, client: &Client) {
    session.workspace.files_moved();
    let importers: Vec<Uri> = session
        .docs
        .iter()
        .filter(|e| project::reads_imports(&e.doc.text))
        .map(|e| e.key().clone())
        .collect();
    again(session, client, importers).await;
}

async fn again(session: &Arc<Session>, client: &Client, uris: Vec<Uri>) {
    if uris.is_empty() {
        return;
    }
    for uri in uris {
        if let Some(entry) = session.docs.get(&uri) {
            entry.epoch.fetch_add(1, Ordering::Relaxed);
        }
        schedule(session, client, uri);
    }
    // A pulling client asks again (its requests wait for the new analyses).
    refresh_pulls(session, client);
}
