//! `textDocument/didOpen`: keep the text, analyse it. Its text now stands for its file in
//! the analysis of the open documents that import it.

use crate::document::Document;
use crate::scheduler::schedule;
use crate::session::{DocEntry, Session};
use crate::workspace;
use std::sync::Arc;
use tower_lsp_server::ls_types::DidOpenTextDocumentParams;
use tower_lsp_server::Client;

pub async fn did_open(session: &Arc<Session>, client: &Client, params: DidOpenTextDocumentParams) {
    let d = params.text_document;
    let doc = Document::new(d.text, d.version);
    session.docs.insert(d.uri.clone(), DocEntry::new(doc));
    let path = session.workspace.opened(&d.uri);
    schedule(session, client, d.uri);
    if let Some(path) = path {
        workspace::modules_changed(session, client, &[path]).await;
    }
}
