//! `textDocument/diagnostic` (pull clients): the current version's diagnostics.

use crate::scheduler::ensure_analysed;
use crate::session::Session;
use std::sync::Arc;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::Client;

/// How many superseded analyses a pull waits through before asking the client to pull again.
const ATTEMPTS: usize = 3;

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
    // The analysis waited for may be superseded before it is read (a settings change clears
    // it, an edit of a project module moves its epoch on): the answer comes from that analysis
    // while it is of the current text. Never an empty report for want of one: the client
    // would show the file clean, with no quick fix to offer, until its next pull.
    for _ in 0..ATTEMPTS {
        let Some(a) = ensure_analysed(session, client, &key).await else {
            break;
        };
        let Some((_, groups)) = session.diagnostics_of(&key, &a) else {
            continue;
        };
        // A notebook cell gets the diagnostics of the notebook that lie in it.
        let items = groups
            .into_iter()
            .find(|(u, _)| *u == uri)
            .map(|(_, d)| d)
            .unwrap_or_default();
        return Ok(full(items));
    }
    // (Closed while the pull waited: nothing to show, and nothing to pull again.)
    if !session.docs.contains_key(&key) {
        return Ok(full(Vec::new()));
    }
    Err(pull_again())
}

fn full(items: Vec<Diagnostic>) -> DocumentDiagnosticReportResult {
    DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(
        RelatedFullDocumentDiagnosticReport {
            related_documents: None,
            full_document_diagnostic_report: FullDocumentDiagnosticReport {
                result_id: None,
                items,
            },
        },
    ))
}

/// LSP's `ServerCancelled` with `retriggerRequest`: the client keeps what it shows and pulls
/// again.
fn pull_again() -> Error {
    Error {
        code: ErrorCode::ServerError(-32802),
        message: "the document's analysis was superseded; pull again".into(),
        data: Some(serde_json::json!({ "retriggerRequest": true })),
    }
}
