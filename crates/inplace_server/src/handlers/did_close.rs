//! `textDocument/didClose`: forget the document and its analysis; clear its diagnostics.

use crate::session::Session;
use std::sync::Arc;
use tower_lsp_server::ls_types::DidCloseTextDocumentParams;
use tower_lsp_server::Client;

pub async fn did_close(
    session: &Arc<Session>,
    client: &Client,
    params: DidCloseTextDocumentParams,
) {
    let uri = params.text_document.uri;
    if let Some((_, entry)) = session.docs.remove(&uri) {
        // An analysis still running stops.
        entry
            .latest
            .store(i32::MIN, std::sync::atomic::Ordering::Relaxed);
    }
    if !session.pulls() {
        client.publish_diagnostics(uri, Vec::new(), None).await;
    }
}
