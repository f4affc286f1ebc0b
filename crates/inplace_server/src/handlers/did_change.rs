//! `textDocument/didChange`: apply the edits in order, then analyse the new text (an analysis
//! of an older version still running stops and leaves its finished units for this one), and
//! the open documents that import it.

use crate::scheduler::schedule;
use crate::session::Session;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tower_lsp_server::ls_types::{DidChangeTextDocumentParams, MessageType};
use tower_lsp_server::Client;

/// tower-lsp may run notification handlers concurrently: the edits are applied before any
/// await, so handlers cannot reorder them; stale versions are ignored.
pub async fn did_change(
    session: &Arc<Session>,
    client: &Client,
    params: DidChangeTextDocumentParams,
) {
    let uri = params.text_document.uri;
    let version = params.text_document.version;
    let enc = session.enc();
    let stale = {
        let Some(mut entry) = session.docs.get_mut(&uri) else {
            return;
        };
        if version <= entry.doc.version {
            true
        } else {
            entry.doc.apply(params.content_changes, version, enc);
            entry.latest.store(version, Ordering::Relaxed);
            false
        }
    };
    if stale {
        client
            .log_message(
                MessageType::WARNING,
                format!(
                    "inplace-lsp: ignored change to {} with old version {version}",
                    uri.as_str()
                ),
            )
            .await;
        return;
    }
    let path = crate::session::uri_path(&uri);
    schedule(session, client, uri);
    if let Some(path) = path {
        crate::workspace::modules_changed(session, client, &[path]).await;
    }
}
