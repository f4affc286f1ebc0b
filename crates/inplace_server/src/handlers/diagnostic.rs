//! `textDocument/diagnostic` (pull clients): the current version's diagnostics.

use crate::scheduler::ensure_analysed;
use crate::session::Session;
use std::sync::Arc;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::Client;

pub async fn diagnostic(
    session: &Arc<Session>,
    client: &Client,
    params: DocumentDiagnosticParams,
) -> Result<DocumentDiagnosticReportResult> {
    let uri = params.text_document.uri;
    if !session.docs.contains_key(&uri) {
        return Err(Error::invalid_params(format!("unknown document {uri}")));
    }
    ensure_analysed(session, client, &uri).await;
    let items = session
        .diagnostics(&uri)
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
