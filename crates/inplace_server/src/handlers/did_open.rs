//! `textDocument/didOpen`: keep the text, analyse it.

use crate::document::Document;
use crate::scheduler::schedule;
use crate::session::{DocEntry, Session};
use std::sync::Arc;
use tower_lsp_server::ls_types::DidOpenTextDocumentParams;
use tower_lsp_server::Client;

pub fn did_open(session: &Arc<Session>, client: &Client, params: DidOpenTextDocumentParams) {
    let d = params.text_document;
    let doc = Document::new(d.text, d.version);
    session.docs.insert(d.uri.clone(), DocEntry::new(doc));
    schedule(session, client, d.uri);
}
