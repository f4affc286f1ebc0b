//! `textDocument/didClose`: forget the document and its analysis; clear its diagnostics. Its
//! file on disk stands for it again in the analysis of the open documents that import it.

use crate::session::Session;
use crate::workspace;
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
    let path = session.workspace.closed(&uri);
    if !session.pulls() {
        client.publish_diagnostics(uri, Vec::new(), None).await;
    }
    if let Some(path) = path {
        workspace::modules_changed(session, client, &[path]).await;
    }
}
