//! `initialize`, `initialized`, `shutdown`: negotiate the position encoding and how
//! diagnostics travel (pushed, or pulled when the client can), read settings and the workspace
//! folders' pyproject.toml, and watch those files.

use super::configuration;
use crate::convert::{FIX_ALL_KIND, SOURCE};
use crate::session::{uri_path, Session};
use crate::settings::ClientSettings;
use inplace_analysis::Encoding;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::Client;

/// The capabilities of the client that matter here.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientCaps {
    /// It can resolve code actions lazily (their `edit`).
    pub resolve_actions: bool,
}

pub async fn initialize(
    session: &Arc<Session>,
    client: &Client,
    params: InitializeParams,
) -> Result<(InitializeResult, ClientCaps)> {
    let caps = &params.capabilities;
    let offered = caps
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.clone())
        .unwrap_or_default();
    let (enc, kind) = if offered.contains(&PositionEncodingKind::UTF8) {
        (Encoding::Utf8, PositionEncodingKind::UTF8)
    } else if offered.contains(&PositionEncodingKind::UTF32) {
        (Encoding::Utf32, PositionEncodingKind::UTF32)
    } else {
        (Encoding::Utf16, PositionEncodingKind::UTF16)
    };
    *session
        .encoding
        .write()
        .unwrap_or_else(PoisonError::into_inner) = enc;
    let text_caps = caps.text_document.as_ref();
    let pull = text_caps.and_then(|t| t.diagnostic.as_ref()).is_some();
    session.pull.store(pull, Ordering::Relaxed);
    let refresh = caps
        .workspace
        .as_ref()
        .and_then(|w| w.diagnostics.as_ref())
        .and_then(|d| d.refresh_support)
        .unwrap_or(false);
    session.refresh.store(refresh, Ordering::Relaxed);
    let resolve_actions = text_caps
        .and_then(|t| t.code_action.as_ref())
        .and_then(|c| c.resolve_support.as_ref())
        .is_some_and(|r| r.properties.iter().any(|p| p == "edit"));
    let watch = caps
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|d| d.dynamic_registration)
        .unwrap_or(false);
    session.watch.store(watch, Ordering::Relaxed);
    if let Some(s) = params
        .initialization_options
        .as_ref()
        .and_then(ClientSettings::from_value)
    {
        configuration::set_client_settings(session, client, &s).await;
    }
    let mut folders: Vec<PathBuf> = params
        .workspace_folders
        .unwrap_or_default()
        .iter()
        .filter_map(|f| uri_path(&f.uri))
        .collect();
    #[allow(deprecated)]
    if let Some(root) = params.root_uri.as_ref().and_then(uri_path) {
        if folders.is_empty() {
            folders.push(root);
        }
    }
    *session
        .folders
        .write()
        .unwrap_or_else(PoisonError::into_inner) = folders;
    configuration::load(session, client).await;
    let result = InitializeResult {
        server_info: Some(ServerInfo {
            name: "inplace-lsp".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
        capabilities: capabilities(kind, pull),
        offset_encoding: None,
    };
    Ok((result, ClientCaps { resolve_actions }))
}

fn capabilities(encoding: PositionEncodingKind, pull: bool) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(encoding),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                ..Default::default()
            },
        )),
        diagnostic_provider: pull.then(|| {
            DiagnosticServerCapabilities::Options(DiagnosticOptions {
                identifier: Some(SOURCE.into()),
                inter_file_dependencies: true,
                workspace_diagnostics: false,
                work_done_progress_options: Default::default(),
            })
        }),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![
                CodeActionKind::QUICKFIX,
                CodeActionKind::new(FIX_ALL_KIND),
            ]),
            resolve_provider: Some(true),
            ..Default::default()
        })),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        // The Python cells of Jupyter notebooks, analysed together.
        notebook_document_sync: Some(OneOf::Left(NotebookDocumentSyncOptions {
            // Every cell (no `cells` filter): markdown and raw cells are not analysed, but they
            // count in the cell numbers messages use, as the editor shows them.
            notebook_selector: vec![NotebookSelector::ByNotebook {
                notebook: Notebook::String("jupyter-notebook".into()),
                cells: None,
            }],
            save: Some(true),
        })),
        ..Default::default()
    }
}

pub async fn initialized(session: &Session, client: &Client) {
    let watcher = Registration {
        id: "inplace-lsp-files".into(),
        method: "workspace/didChangeWatchedFiles".into(),
        register_options: serde_json::to_value(DidChangeWatchedFilesRegistrationOptions {
            // Settings, and the project modules open documents import.
            watchers: ["**/pyproject.toml", "**/*.py"]
                .into_iter()
                .map(|glob| FileSystemWatcher {
                    glob_pattern: GlobPattern::String(glob.into()),
                    kind: None,
                })
                .collect(),
        })
        .ok(),
    };
    if session.watch.load(Ordering::Relaxed) {
        // Off the handler, as every request to the client (see `refresh_pulls`).
        let client = client.clone();
        tokio::spawn(async move {
            let _ = client.register_capability(vec![watcher]).await;
        });
    }
    client
        .log_message(
            MessageType::INFO,
            format!("inplace-lsp {} ready", env!("CARGO_PKG_VERSION")),
        )
        .await;
}
