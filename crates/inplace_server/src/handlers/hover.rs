//! `textDocument/hover`: on a finding, the runtime error it will produce; on any other in-place
//! write, which names share the version counter it bumps.

use crate::convert;
use crate::scheduler::ensure_analysed;
use crate::session::Session;
use std::sync::Arc;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::Client;

pub async fn hover(
    session: &Arc<Session>,
    client: &Client,
    params: HoverParams,
) -> Result<Option<Hover>> {
    let uri = params.text_document_position_params.text_document.uri;
    let pos = params.text_document_position_params.position;
    let key = session.key(&uri);
    if !session.docs.contains_key(&key) {
        return Err(Error::invalid_params(format!(
            "unknown document {}",
            uri.as_str()
        )));
    }
    let Some(analysis) = ensure_analysed(session, client, &key).await else {
        return Ok(None);
    };
    let enc = session.enc();
    let Some(entry) = session.docs.get(&key) else {
        return Ok(None);
    };
    if entry.doc.version != analysis.version {
        return Ok(None);
    }
    let Some(offset) = entry.offset(&uri, pos, enc) else {
        return Ok(None);
    };
    let findings = session.select(&key, &analysis.findings);
    let hit = |r: inplace_analysis::TextRange| r.start <= offset && offset <= r.end;
    let label = |o: usize| entry.label(o);
    let markdown = if let Some(f) = findings.iter().find(|f| hit(f.range)) {
        Some((convert::hover_finding(&label, f), f.range))
    } else {
        analysis
            .sites
            .iter()
            .find(|s| hit(s.range))
            .map(|s| (convert::hover_site(s, &entry.doc.text), s.range))
    };
    Ok(markdown.map(|(value, r)| Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(entry.location(&key, r, enc).range),
    }))
}
