//! `textDocument/hover`: on a finding, the runtime error it will produce; on any other in-place
//! write, which names share the version counter it bumps.

use crate::convert;
use crate::scheduler::ensure_analysed;
use crate::session::Session;
use std::sync::Arc;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::Client;

pub async fn hover(
    session: &Arc<Session>,
    client: &Client,
    params: HoverParams,
) -> Result<Option<Hover>> {
    let uri = params.text_document_position_params.text_document.uri;
    let pos = params.text_document_position_params.position;
    if !session.docs.contains_key(&uri) {
        return Err(Error::invalid_params(format!("unknown document {uri}")));
    }
    let Some(analysis) = ensure_analysed(session, client, &uri).await else {
        return Ok(None);
    };
    let enc = session.enc();
    let Some(entry) = session.docs.get(&uri) else {
        return Ok(None);
    };
    if entry.doc.version != analysis.version {
        return Ok(None);
    }
    let doc = &entry.doc;
    let offset = doc.offset(pos, enc);
    let findings = session.select(&uri, &analysis.findings);
    let hit = |r: inplace_analysis::TextRange| r.start <= offset && offset <= r.end;
    let markdown = if let Some(f) = findings.iter().find(|f| hit(f.range)) {
        Some((convert::hover_finding(doc, f), f.range))
    } else {
        analysis
            .sites
            .iter()
            .find(|s| hit(s.range))
            .map(|s| (convert::hover_site(s, &doc.text), s.range))
    };
    Ok(markdown.map(|(value, r)| Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(doc.range(r, enc)),
    }))
}
