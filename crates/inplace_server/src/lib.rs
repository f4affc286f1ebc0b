//! # inplace_server
//!
//! The language server on `tower-lsp`, laid out as ruff's: a [`session`] (open documents with
//! their analysis state, negotiated capabilities, settings), a [`scheduler`] that analyses each
//! document on a blocking thread (cancelled between units when its text moves on), and one
//! handler per request or notification in [`handlers`]. [`convert`] maps findings to LSP;
//! [`guard`] frames the byte stream so that malformed messages get errors instead of ending the
//! session.
//!
//! Each document keeps an [`inplace_analysis::FileState`]: an edit parses again only the items
//! whose text changed and analyses again only the units that read them (the module body, a
//! class's instance, functions on their own); the rest of the last analysis is reused.

mod convert;
pub mod document;
mod guard;
pub mod handlers;
pub mod notebook;
pub mod project;
mod scheduler;
mod session;
pub mod settings;
pub mod workspace;

pub use guard::{decode_stream, serve_guarded, session_stream};
pub use settings::ClientSettings;

use handlers::initialize::ClientCaps;
use session::Session;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

pub struct Backend {
    client: Client,
    session: Arc<Session>,
    caps: RwLock<ClientCaps>,
    shut_down: Arc<AtomicBool>,
}

impl Backend {
    pub fn new(client: Client, shut_down: Arc<AtomicBool>) -> Self {
        Backend {
            client,
            session: Arc::new(Session::default()),
            caps: RwLock::new(ClientCaps::default()),
            shut_down,
        }
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let (result, caps) =
            handlers::initialize::initialize(&self.session, &self.client, params).await?;
        *self.caps.write().unwrap_or_else(PoisonError::into_inner) = caps;
        Ok(result)
    }

    async fn initialized(&self, _: InitializedParams) {
        handlers::initialize::initialized(&self.session, &self.client).await
    }

    async fn shutdown(&self) -> Result<()> {
        self.shut_down.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        handlers::did_open::did_open(&self.session, &self.client, params).await
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        handlers::did_change::did_change(&self.session, &self.client, params).await
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        handlers::did_close::did_close(&self.session, &self.client, params).await
    }

    async fn notebook_did_open(&self, params: DidOpenNotebookDocumentParams) {
        handlers::notebook::did_open(&self.session, &self.client, params)
    }

    async fn notebook_did_change(&self, params: DidChangeNotebookDocumentParams) {
        handlers::notebook::did_change(&self.session, &self.client, params).await
    }

    async fn notebook_did_save(&self, _: DidSaveNotebookDocumentParams) {}

    async fn notebook_did_close(&self, params: DidCloseNotebookDocumentParams) {
        handlers::notebook::did_close(&self.session, &self.client, params).await
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        handlers::configuration::did_save(&self.session, &self.client, params).await
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        handlers::configuration::did_change_configuration(
            &self.session,
            &self.client,
            params.settings,
        )
        .await
    }

    async fn did_change_watched_files(&self, params: DidChangeWatchedFilesParams) {
        handlers::configuration::did_change_watched_files(&self.session, &self.client, params).await
    }

    async fn diagnostic(
        &self,
        params: DocumentDiagnosticParams,
    ) -> Result<DocumentDiagnosticReportResult> {
        handlers::diagnostic::diagnostic(&self.session, &self.client, params).await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let resolve = self
            .caps
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .resolve_actions;
        handlers::code_action::code_action(&self.session, params, resolve).await
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        handlers::code_action::resolve(&self.session, action).await
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        handlers::hover::hover(&self.session, &self.client, params).await
    }
}

/// The service, for tests and for `serve`. The flag turns true on `shutdown`.
pub fn service() -> (
    LspService<Backend>,
    tower_lsp_server::ClientSocket,
    Arc<AtomicBool>,
) {
    let shut_down = Arc::new(AtomicBool::new(false));
    let flag = shut_down.clone();
    let (service, socket) = LspService::new(move |client| Backend::new(client, flag.clone()));
    (service, socket, shut_down)
}

/// Passes every message to the server and signals when `exit` arrives, so the server stops at
/// once (tower-lsp alone stops only when another message or the end of input follows).
struct ExitWatch<S> {
    inner: S,
    exited: Arc<tokio::sync::Notify>,
}

impl<S> tower_service::Service<tower_lsp_server::jsonrpc::Request> for ExitWatch<S>
where
    S: tower_service::Service<tower_lsp_server::jsonrpc::Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::result::Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: tower_lsp_server::jsonrpc::Request) -> Self::Future {
        if req.method() == "exit" {
            self.exited.notify_one();
        }
        self.inner.call(req)
    }
}

/// Serve LSP on any reader/writer until `exit` or the end of input. Returns whether
/// `shutdown` came before `exit`.
pub async fn serve<I, O>(input: I, output: O) -> bool
where
    I: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite,
{
    serve_until(input, output, std::future::pending()).await
}

/// [`serve`], also stopping when `stop` completes. tower-lsp waits at the end of input for every
/// handler still running, and a handler sending to a client that is gone waits forever; the
/// guard uses `stop` to bound that wait.
pub(crate) async fn serve_until<I, O>(
    input: I,
    output: O,
    stop: impl std::future::Future<Output = ()>,
) -> bool
where
    I: tokio::io::AsyncRead + Unpin,
    O: tokio::io::AsyncWrite,
{
    let (service, socket, shut_down) = service();
    let exited = Arc::new(tokio::sync::Notify::new());
    let watched = ExitWatch {
        inner: service,
        exited: exited.clone(),
    };
    tokio::select! {
        _ = Server::new(input, output, socket).serve(watched) => {}
        _ = exited.notified() => {}
        _ = stop => {}
    }
    shut_down.load(Ordering::SeqCst)
}

/// Serve on stdin/stdout. The exit status: 0 after `shutdown` then `exit`, 1 otherwise.
pub fn run_stdio() -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(16 << 20)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("inplace-lsp: cannot start the runtime: {e}");
            return 2;
        }
    };
    let clean = rt.block_on(serve_guarded(tokio::io::stdin(), tokio::io::stdout()));
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    if clean {
        0
    } else {
        1
    }
}
