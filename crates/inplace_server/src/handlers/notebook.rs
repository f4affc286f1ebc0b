//! `notebookDocument/didOpen|didChange|didSave|didClose` (LSP 3.17 notebook synchronisation):
//! a notebook is one open document whose analysed text is its code cells joined in order, so a
//! change in one cell re-analyses the cells after it too; diagnostics go to each code cell.

use crate::notebook::NotebookDoc;
use crate::scheduler::schedule;
use crate::session::{DocEntry, Session};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tower_lsp_server::ls_types::{
    DidChangeNotebookDocumentParams, DidCloseNotebookDocumentParams, DidOpenNotebookDocumentParams,
};
use tower_lsp_server::Client;

pub fn did_open(session: &Arc<Session>, client: &Client, params: DidOpenNotebookDocumentParams) {
    let nb = params.notebook_document;
    let doc = NotebookDoc::new(nb.cells, params.cell_text_documents);
    for c in &doc.cells {
        session.cells.insert(c.uri.clone(), nb.uri.clone());
    }
    session
        .docs
        .insert(nb.uri.clone(), DocEntry::notebook(doc, nb.version));
    schedule(session, client, nb.uri);
}

/// Applied before any await, as `didChange` of a text document is (see there). Every change
/// is applied: clients keep the notebook's version when only a cell's text changes (VS Code
/// does), so the analysed text gets versions of its own, one per change.
pub async fn did_change(
    session: &Arc<Session>,
    client: &Client,
    params: DidChangeNotebookDocumentParams,
) {
    let key = params.notebook_document.uri.clone();
    let enc = session.enc();
    let gone = {
        let Some(mut entry) = session.docs.get_mut(&key) else {
            return;
        };
        let entry = &mut *entry;
        let Some(nb) = entry.notebook.as_mut() else {
            return;
        };
        let list = nb.apply(params, enc);
        // Only a change of the cell list touches the cell index (not a keystroke in a cell).
        for uri in list.added {
            session.cells.insert(uri, key.clone());
        }
        let gone = list.gone;
        let version = entry.doc.version.wrapping_add(1);
        entry.doc = crate::document::Document::new(nb.source.text.clone(), version);
        entry.latest.store(version, Ordering::Relaxed);
        gone
    };
    for uri in gone {
        session.cells.remove(&uri);
        if !session.pulls() {
            client.publish_diagnostics(uri, Vec::new(), None).await;
        }
    }
    schedule(session, client, key);
}

pub async fn did_close(
    session: &Arc<Session>,
    client: &Client,
    params: DidCloseNotebookDocumentParams,
) {
    let key = params.notebook_document.uri;
    let Some((_, entry)) = session.docs.remove(&key) else {
        return;
    };
    // An analysis still running stops.
    entry.latest.store(i32::MIN, Ordering::Relaxed);
    session.workspace.forget(&key);
    let cells = entry.notebook.map(|nb| nb.cells).unwrap_or_default();
    for c in cells {
        session.cells.remove(&c.uri);
        if !session.pulls() {
            client.publish_diagnostics(c.uri, Vec::new(), None).await;
        }
    }
}
