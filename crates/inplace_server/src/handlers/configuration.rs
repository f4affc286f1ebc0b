//! Settings from the editor (`workspace/didChangeConfiguration`) and from `pyproject.toml`
//! (saved, or changed on disk as the registered watcher reports): reload, then analyse every
//! open document again.

use crate::scheduler::schedule;
use crate::session::Session;
use crate::settings::{load_projects, ClientSettings};
use std::sync::{Arc, PoisonError};
use tower_lsp_server::ls_types::{DidSaveTextDocumentParams, MessageType};
use tower_lsp_server::Client;

/// Apply settings from the editor; invalid ones are reported and leave the old ones.
pub async fn set_client_settings(session: &Session, client: &Client, s: &ClientSettings) {
    match s.compile() {
        Ok(config) => {
            *session
                .client
                .write()
                .unwrap_or_else(PoisonError::into_inner) = config
        }
        Err(e) => {
            client
                .show_message(MessageType::WARNING, format!("inplace-lsp: {e}"))
                .await
        }
    }
}

/// (Re)read `[tool.inplace-lsp]` of every workspace folder's pyproject.toml.
pub async fn load(session: &Session, client: &Client) {
    let folders = session
        .folders
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let (projects, problems) = load_projects(&folders);
    *session
        .projects
        .write()
        .unwrap_or_else(PoisonError::into_inner) = projects;
    for p in problems {
        client
            .show_message(MessageType::WARNING, format!("inplace-lsp: {p}"))
            .await;
    }
}

/// Publish every open document again (the settings changed what they show).
pub async fn reanalyse_all(session: &Arc<Session>, client: &Client) {
    let uris: Vec<_> = session.docs.iter().map(|e| e.key().clone()).collect();
    for uri in uris {
        if let Some(entry) = session.docs.get(&uri) {
            entry.analysis.send_replace(None);
        }
        schedule(session, client, uri);
    }
    if session.pulls() {
        let _ = client.workspace_diagnostic_refresh().await;
    }
}

pub async fn did_change_configuration(
    session: &Arc<Session>,
    client: &Client,
    settings: serde_json::Value,
) {
    if let Some(s) = ClientSettings::from_value(&settings) {
        set_client_settings(session, client, &s).await;
        reanalyse_all(session, client).await;
    }
}

pub async fn did_change_watched_files(session: &Arc<Session>, client: &Client) {
    load(session, client).await;
    reanalyse_all(session, client).await;
}

pub async fn did_save(session: &Arc<Session>, client: &Client, params: DidSaveTextDocumentParams) {
    if params
        .text_document
        .uri
        .path()
        .as_str()
        .ends_with("pyproject.toml")
    {
        did_change_watched_files(session, client).await;
    }
}
