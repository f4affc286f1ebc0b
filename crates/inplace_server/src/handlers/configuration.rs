//! Settings from the editor (`workspace/didChangeConfiguration`) and from `pyproject.toml`
//! (saved, or changed on disk as the registered watcher reports): reload, then analyse every
//! open document again. Python files changed on disk: the documents importing them again.

use crate::scheduler::{refresh_pulls, schedule};
use crate::session::uri_path;
use crate::session::Session;
use crate::settings::{load_projects, ClientSettings};
use crate::workspace;
use std::sync::{Arc, PoisonError};
use tower_lsp_server::ls_types::{
    DidChangeWatchedFilesParams, DidSaveTextDocumentParams, FileChangeType, MessageType,
};
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
    refresh_pulls(session, client);
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

/// Files changed on disk, as the registered watchers report: `pyproject.toml` reloads the
/// settings; Python files changed are read again by the documents that import them, and files
/// created or deleted may change where any import resolves.
pub async fn did_change_watched_files(
    session: &Arc<Session>,
    client: &Client,
    params: DidChangeWatchedFilesParams,
) {
    let mut settings = false;
    let mut moved = false;
    let mut changed = Vec::new();
    for event in &params.changes {
        if event.uri.path().as_str().ends_with("pyproject.toml") {
            settings = true;
        } else if event.typ == FileChangeType::CHANGED {
            if let Some(path) = uri_path(&event.uri) {
                session.workspace.changed_on_disk(&path);
                changed.push(path);
            }
        } else {
            moved = true;
        }
    }
    if settings {
        settings_changed(session, client).await;
    } else if moved {
        workspace::all_imports_changed(session, client).await;
    } else {
        workspace::modules_changed(session, client, &changed).await;
    }
}

async fn settings_changed(session: &Arc<Session>, client: &Client) {
    load(session, client).await;
    session.workspace.files_moved();
    reanalyse_all(session, client).await;
}

pub async fn did_save(session: &Arc<Session>, client: &Client, params: DidSaveTextDocumentParams) {
    let uri = &params.text_document.uri;
    if uri.path().as_str().ends_with("pyproject.toml") {
        settings_changed(session, client).await;
    } else if let Some(path) = uri_path(uri) {
        // Its open text stands for it meanwhile; once closed, the saved file does.
        session.workspace.changed_on_disk(&path);
    }
}
