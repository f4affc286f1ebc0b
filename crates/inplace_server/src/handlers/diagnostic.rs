//! `textDocument/diagnostic` (pull clients): the current version's diagnostics.

use crate::scheduler::ensure_analysed;
use crate::session::Session;
use std::sync::Arc;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::Client;

pub async fn diagnostic(
    session: &Arc<Session>,
    client: &Client,
    params: DocumentDiagnosticParams,
) -> Result<DocumentDiagnosticReportResult> {
    let uri = params.text_document.uri;
    let key = session.key(&uri);
    if !session.docs.contains_key(&key) {
        return Err(Error::invalid_params(format!(
            "unknown document {}",
            uri.as_str()
        )));
    }
    ensure_analysed(session, client, &key).await;
    // A notebook cell gets the diagnostics of the notebook that lie in it.
    let items = session
        .diagnostics(&key)
        .and_then(|(_, groups)| groups.into_iter().find(|(u, _)| *u == uri))
        .map(|(_, d)| d)
        .unwrap_or_default();
    Ok(DocumentDiagnosticReportResult::Report(
        DocumentDiagnosticReport::Full(RelatedFullDocumentDiagnosticReport {
            related_documents: None,
            full_document_diagnostic_report: FullDocumentDiagnosticReport {
                result_id: None,
                items,
            },
        }),
    ))
}
