//! # inplace_server
//!
//! The language server on `tower-lsp`: open documents in a `DashMap`, incremental edits with an
//! incremental tree-sitter reparse, negotiated position encodings, push and pull diagnostics,
//! quick fixes, hover, and configuration from the client and from `pyproject.toml`.
//!
//! Ordering: `tower-lsp` may run notification handlers concurrently, so every `didChange` is
//! applied to the document synchronously, before the handler awaits anything; stale versions
//! are ignored. Analysis runs on a blocking thread, one worker per document that always takes
//! the latest text: a burst of keystrokes yields one analysis of the final text, and results for
//! versions that moved on are dropped. A panic inside analysis is caught and logged.

mod convert;
pub mod document;
mod guard;

pub use guard::{decode_stream, serve_guarded, session_stream};

use convert::{DiagnosticData, FIX_ALL_KIND, SOURCE};
use dashmap::DashMap;
use document::Document;
use inplace_analysis::config::{parse_pyproject, Options, Settings};
use inplace_analysis::{Applicability, Encoding, Finding, InplaceSite, Severity};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, LanguageServer, LspService, Server};

/// Settings an editor sends (`initializationOptions`, `workspace/didChangeConfiguration`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSettings {
    #[serde(default)]
    pub select: Vec<String>,
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Code -> `error` | `warning` | `information` | `hint`.
    #[serde(default)]
    pub severities: BTreeMap<String, String>,
}

impl ClientSettings {
    /// Accepts the settings flat, or under `inplace-lsp` / `inplaceLsp` / `inplace_lsp`.
    fn from_value(v: &serde_json::Value) -> Option<ClientSettings> {
        let inner = ["inplace-lsp", "inplaceLsp", "inplace_lsp"]
            .iter()
            .find_map(|k| v.get(k))
            .unwrap_or(v);
        serde_json::from_value(inner.clone()).ok()
    }
}

/// Client settings ready to apply: compiled once per change, not on every publish.
#[derive(Debug, Clone, Default)]
struct ClientConfig {
    selection: Settings,
    severities: BTreeMap<String, Severity>,
}

impl ClientSettings {
    fn compile(&self) -> std::result::Result<ClientConfig, String> {
        let selection = Settings::new(
            Options::default(),
            &self.select,
            &self.ignore,
            "client settings",
        )?;
        let mut severities = BTreeMap::new();
        for (code, s) in &self.severities {
            let s =
                parse_severity(s).ok_or_else(|| format!("unknown severity `{s}` for {code}"))?;
            severities.insert(code.to_ascii_uppercase(), s);
        }
        Ok(ClientConfig {
            selection,
            severities,
        })
    }
}

/// The result of analysing one version of a document.
struct Analysed {
    version: i32,
    findings: Vec<Finding>,
    sites: Vec<InplaceSite>,
}

struct DocState {
    doc: Document,
    analysis: Option<Arc<Analysed>>,
    /// A worker is analysing this document.
    busy: bool,
}

struct Project {
    root: PathBuf,
    settings: Settings,
}

/// State the handlers and the analysis workers share.
struct Shared {
    docs: DashMap<Url, DocState>,
    encoding: RwLock<Encoding>,
    /// The client can register file watchers (for pyproject.toml).
    watch: AtomicBool,
    /// The client pulls diagnostics (so they are not pushed too).
    pull: AtomicBool,
    client: RwLock<ClientConfig>,
    projects: RwLock<Vec<Project>>,
}

pub struct Backend {
    client: Client,
    shared: Arc<Shared>,
    folders: RwLock<Vec<PathBuf>>,
    shut_down: Arc<AtomicBool>,
}

fn parse_severity(s: &str) -> Option<Severity> {
    match s.to_ascii_lowercase().as_str() {
        "error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        "information" | "info" => Some(Severity::Information),
        "hint" => Some(Severity::Hint),
        _ => None,
    }
}

fn uri_path(uri: &Url) -> Option<PathBuf> {
    (uri.scheme() == "file")
        .then(|| uri.to_file_path().ok())
        .flatten()
}

impl Backend {
    pub fn new(client: Client, shut_down: Arc<AtomicBool>) -> Self {
        let shared = Shared {
            docs: DashMap::new(),
            encoding: RwLock::new(Encoding::Utf16),
            watch: AtomicBool::new(false),
            pull: AtomicBool::new(false),
            client: RwLock::new(ClientConfig::default()),
            projects: RwLock::new(Vec::new()),
        };
        Backend {
            client,
            shared: Arc::new(shared),
            folders: RwLock::new(Vec::new()),
            shut_down,
        }
    }

    fn enc(&self) -> Encoding {
        self.shared.enc()
    }

    /// (Re)read `[tool.inplace-lsp]` of every workspace folder's pyproject.toml.
    async fn load_projects(&self) {
        let folders = self
            .folders
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut projects = Vec::new();
        let mut problems = Vec::new();
        for root in folders {
            let file = root.join("pyproject.toml");
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            match parse_pyproject(&text).and_then(|o| {
                Settings::new(o.unwrap_or_default(), &[], &[], &file.display().to_string())
            }) {
                Ok(settings) => projects.push(Project { root, settings }),
                Err(e) => problems.push(format!("{}: {e}", file.display())),
            }
        }
        projects.sort_by_key(|p| std::cmp::Reverse(p.root.as_os_str().len()));
        *self
            .shared
            .projects
            .write()
            .unwrap_or_else(PoisonError::into_inner) = projects;
        for p in problems {
            self.client
                .show_message(MessageType::WARNING, format!("inplace-lsp: {p}"))
                .await;
        }
    }

    /// Start the document's worker unless one is running; it analyses until it has caught up.
    fn schedule(&self, uri: Url) {
        {
            let Some(mut state) = self.shared.docs.get_mut(&uri) else {
                return;
            };
            if state.busy {
                return;
            }
            state.busy = true;
        }
        let worker = Worker {
            client: self.client.clone(),
            shared: self.shared.clone(),
        };
        tokio::spawn(async move { worker.work(uri).await });
    }

    /// Analyse now if the current version has no analysis yet (pull diagnostics, hover).
    async fn ensure_analysed(&self, uri: &Url) -> Option<Arc<Analysed>> {
        let (version, text, tree) = {
            let state = self.shared.docs.get(uri)?;
            if let Some(a) = &state.analysis {
                if a.version == state.doc.version {
                    return Some(a.clone());
                }
            }
            (
                state.doc.version,
                state.doc.text.clone(),
                state.doc.tree.clone(),
            )
        };
        let result = analyse_blocking(&self.client, version, text, tree).await?;
        let result = Arc::new(result);
        if let Some(mut state) = self.shared.docs.get_mut(uri) {
            if state.doc.version == version {
                state.analysis = Some(result.clone());
            }
        }
        Some(result)
    }

    /// Apply settings from the editor; invalid ones are reported and leave the old ones.
    async fn set_client_settings(&self, s: &ClientSettings) {
        match s.compile() {
            Ok(config) => {
                *self
                    .shared
                    .client
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = config
            }
            Err(e) => {
                self.client
                    .show_message(MessageType::WARNING, format!("inplace-lsp: {e}"))
                    .await
            }
        }
    }

    async fn reanalyse_all(&self) {
        let uris: Vec<Url> = self.shared.docs.iter().map(|e| e.key().clone()).collect();
        for uri in uris {
            if let Some(mut s) = self.shared.docs.get_mut(&uri) {
                s.analysis = None;
            }
            self.schedule(uri);
        }
        if self.shared.pull.load(Ordering::Relaxed) {
            let _ = self.client.workspace_diagnostic_refresh().await;
        }
    }
}

impl Shared {
    fn enc(&self) -> Encoding {
        *self.encoding.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Findings of a document after project and client selection and severity overrides.
    fn select(&self, uri: &Url, findings: &[Finding]) -> Vec<Finding> {
        let client = self.client.read().unwrap_or_else(PoisonError::into_inner);
        let projects = self.projects.read().unwrap_or_else(PoisonError::into_inner);
        let path = uri_path(uri);
        let project = path
            .as_ref()
            .and_then(|p| projects.iter().find(|pr| p.starts_with(&pr.root)));
        findings
            .iter()
            .filter(|f| {
                let by_project = match (project, &path) {
                    (Some(pr), Some(p)) => pr
                        .settings
                        .enabled(f.rule, p.strip_prefix(&pr.root).unwrap_or(p)),
                    _ => true,
                };
                by_project && client.selection.selection.enabled(f.rule)
            })
            .map(|f| {
                let mut f = f.clone();
                if let Some(s) = client.severities.get(f.rule.code()) {
                    f.severity = *s;
                }
                f
            })
            .collect()
    }

    fn diagnostics(&self, uri: &Url) -> Option<(i32, Vec<Diagnostic>)> {
        let state = self.docs.get(uri)?;
        let a = state.analysis.as_ref()?;
        if a.version != state.doc.version {
            return None;
        }
        let enc = self.enc();
        let findings = self.select(uri, &a.findings);
        Some((
            a.version,
            findings
                .iter()
                .map(|f| convert::diagnostic(&state.doc, uri, f, enc))
                .collect(),
        ))
    }
}

/// Analyses one document until its latest version is done, then publishes (push clients).
struct Worker {
    client: Client,
    shared: Arc<Shared>,
}

/// Run the analysis on a blocking thread, catching panics.
async fn analyse_blocking(
    client: &Client,
    version: i32,
    text: String,
    tree: Option<tree_sitter::Tree>,
) -> Option<Analysed> {
    let job = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let analysis = match &tree {
                Some(_) => inplace_analysis::analyze_text(&text),
                None => inplace_analysis::Analysis::default(),
            };
            Analysed {
                version,
                findings: analysis.findings,
                sites: analysis.sites,
            }
        }))
    });
    match job.await {
        Ok(Ok(a)) => Some(a),
        _ => {
            client
                .log_message(
                    MessageType::ERROR,
                    "inplace-lsp: internal error while analysing; please report it",
                )
                .await;
            None
        }
    }
}

impl Worker {
    async fn work(self, uri: Url) {
        loop {
            let snapshot = {
                let Some(state) = self.shared.docs.get(&uri) else {
                    return;
                };
                (
                    state.doc.version,
                    state.doc.text.clone(),
                    state.doc.tree.clone(),
                )
            };
            let version = snapshot.0;
            let result = analyse_blocking(&self.client, snapshot.0, snapshot.1, snapshot.2).await;
            let done = {
                let Some(mut state) = self.shared.docs.get_mut(&uri) else {
                    return;
                };
                if state.doc.version == version {
                    if let Some(r) = result {
                        state.analysis = Some(Arc::new(r));
                    }
                    state.busy = false;
                    true
                } else {
                    false
                }
            };
            if done {
                if !self.shared.pull.load(Ordering::Relaxed) {
                    if let Some((version, diags)) = self.shared.diagnostics(&uri) {
                        self.client
                            .publish_diagnostics(uri.clone(), diags, Some(version))
                            .await;
                    }
                }
                return;
            }
        }
    }
}

#[tower_lsp::async_trait]
impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let offered = params
            .capabilities
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
        *self
            .shared
            .encoding
            .write()
            .unwrap_or_else(PoisonError::into_inner) = enc;
        let pull = params
            .capabilities
            .text_document
            .as_ref()
            .and_then(|t| t.diagnostic.as_ref())
            .is_some();
        self.shared.pull.store(pull, Ordering::Relaxed);
        let watch = params
            .capabilities
            .workspace
            .as_ref()
            .and_then(|w| w.did_change_watched_files.as_ref())
            .and_then(|d| d.dynamic_registration)
            .unwrap_or(false);
        self.shared.watch.store(watch, Ordering::Relaxed);
        if let Some(s) = params
            .initialization_options
            .as_ref()
            .and_then(ClientSettings::from_value)
        {
            self.set_client_settings(&s).await;
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
        *self.folders.write().unwrap_or_else(PoisonError::into_inner) = folders;
        self.load_projects().await;
        Ok(InitializeResult {
            server_info: Some(ServerInfo {
                name: "inplace-lsp".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            capabilities: ServerCapabilities {
                position_encoding: Some(kind),
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
                        inter_file_dependencies: false,
                        workspace_diagnostics: false,
                        work_done_progress_options: Default::default(),
                    })
                }),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![
                            CodeActionKind::QUICKFIX,
                            CodeActionKind::new(FIX_ALL_KIND),
                        ]),
                        ..Default::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                ..Default::default()
            },
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let watcher = Registration {
            id: "inplace-lsp-pyproject".into(),
            method: "workspace/didChangeWatchedFiles".into(),
            register_options: serde_json::to_value(DidChangeWatchedFilesRegistrationOptions {
                watchers: vec![FileSystemWatcher {
                    glob_pattern: GlobPattern::String("**/pyproject.toml".into()),
                    kind: None,
                }],
            })
            .ok(),
        };
        if self.shared.watch.load(Ordering::Relaxed) {
            let _ = self.client.register_capability(vec![watcher]).await;
        }
        self.client
            .log_message(
                MessageType::INFO,
                format!("inplace-lsp {} ready", env!("CARGO_PKG_VERSION")),
            )
            .await;
    }

    async fn shutdown(&self) -> Result<()> {
        self.shut_down.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let d = params.text_document;
        let mut parser = inplace_analysis::python_parser();
        let doc = Document::new(d.text, d.version, &mut parser);
        self.shared.docs.insert(
            d.uri.clone(),
            DocState {
                doc,
                analysis: None,
                busy: false,
            },
        );
        self.schedule(d.uri);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        // Applied before any await, so concurrent handlers cannot reorder edits.
        let uri = params.text_document.uri;
        let version = params.text_document.version;
        let enc = self.enc();
        let stale = {
            let Some(mut state) = self.shared.docs.get_mut(&uri) else {
                return;
            };
            if version <= state.doc.version {
                true
            } else {
                let mut parser = inplace_analysis::python_parser();
                state
                    .doc
                    .apply(params.content_changes, version, enc, &mut parser);
                false
            }
        };
        if stale {
            self.client
                .log_message(
                    MessageType::WARNING,
                    format!("inplace-lsp: ignored change to {uri} with old version {version}"),
                )
                .await;
            return;
        }
        self.schedule(uri);
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        self.shared.docs.remove(&uri);
        if !self.shared.pull.load(Ordering::Relaxed) {
            self.client.publish_diagnostics(uri, Vec::new(), None).await;
        }
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        if params.text_document.uri.path().ends_with("pyproject.toml") {
            self.load_projects().await;
            self.reanalyse_all().await;
        }
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        if let Some(s) = ClientSettings::from_value(&params.settings) {
            self.set_client_settings(&s).await;
            self.reanalyse_all().await;
        }
    }

    async fn did_change_watched_files(&self, _: DidChangeWatchedFilesParams) {
        self.load_projects().await;
        self.reanalyse_all().await;
    }

    async fn diagnostic(
        &self,
        params: DocumentDiagnosticParams,
    ) -> Result<DocumentDiagnosticReportResult> {
        let uri = params.text_document.uri;
        if !self.shared.docs.contains_key(&uri) {
            return Err(Error::invalid_params(format!("unknown document {uri}")));
        }
        self.ensure_analysed(&uri).await;
        let items = self
            .shared
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

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let enc = self.enc();
        let only = params.context.only.clone();
        let wants = |k: &CodeActionKind| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|x| k.as_str().starts_with(x.as_str())))
        };
        let mut actions = Vec::new();
        if wants(&CodeActionKind::QUICKFIX) {
            let Some(state) = self.shared.docs.get(&uri) else {
                return Err(Error::invalid_params(format!("unknown document {uri}")));
            };
            let ours: Vec<&Diagnostic> = params
                .context
                .diagnostics
                .iter()
                .filter(|d| d.source.as_deref() == Some(SOURCE))
                .collect();
            for (i, d) in ours.iter().enumerate() {
                let current = d
                    .data
                    .clone()
                    .and_then(|v| serde_json::from_value::<DiagnosticData>(v).ok())
                    .is_none_or(|data| data.version == state.doc.version);
                if current {
                    actions.extend(convert::actions_for(&state.doc, &uri, d, enc, i == 0));
                }
            }
        }
        if wants(&CodeActionKind::new(FIX_ALL_KIND)) {
            if let Some(edit) = self.fix_all(&uri).await {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: "Fix all safe in-place hazards".into(),
                    kind: Some(CodeActionKind::new(FIX_ALL_KIND)),
                    edit: Some(edit),
                    ..Default::default()
                }));
            }
        }
        Ok(Some(actions))
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let uri = params.text_document_position_params.text_document.uri;
        let pos = params.text_document_position_params.position;
        if !self.shared.docs.contains_key(&uri) {
            return Err(Error::invalid_params(format!("unknown document {uri}")));
        }
        let Some(analysis) = self.ensure_analysed(&uri).await else {
            return Ok(None);
        };
        let enc = self.enc();
        let Some(state) = self.shared.docs.get(&uri) else {
            return Ok(None);
        };
        if state.doc.version != analysis.version {
            return Ok(None);
        }
        let offset = state.doc.offset(pos, enc);
        let findings = self.shared.select(&uri, &analysis.findings);
        let hit = |r: inplace_analysis::TextRange| r.start <= offset && offset <= r.end;
        let markdown = if let Some(f) = findings.iter().find(|f| hit(f.range)) {
            Some((convert::hover_finding(&state.doc, f), f.range))
        } else {
            analysis
                .sites
                .iter()
                .find(|s| hit(s.range))
                .map(|s| (convert::hover_site(s, &state.doc.text), s.range))
        };
        Ok(markdown.map(|(value, r)| Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value,
            }),
            range: Some(state.doc.range(r, enc)),
        }))
    }
}

impl Backend {
    /// One edit replacing the document with all safe fixes applied (computed off the reactor).
    async fn fix_all(&self, uri: &Url) -> Option<WorkspaceEdit> {
        let (text, version) = {
            let state = self.shared.docs.get(uri)?;
            (state.doc.text.clone(), state.doc.version)
        };
        let shared = self.shared.clone();
        let target = uri.clone();
        let original = text.clone();
        let job = tokio::task::spawn_blocking(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let keep =
                    |f: &Finding| !shared.select(&target, std::slice::from_ref(f)).is_empty();
                inplace_analysis::fix_all_filtered(&original, Applicability::Safe, &keep).text
            }))
        });
        let fixed = job.await.ok()?.ok()?;
        let state = self.shared.docs.get(uri)?;
        if fixed == text || state.doc.version != version {
            return None;
        }
        let end = state.doc.position(text.len(), self.enc());
        let edit = TextEdit {
            range: Range {
                start: Position::new(0, 0),
                end,
            },
            new_text: fixed,
        };
        Some(WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
            ..Default::default()
        })
    }
}

/// The service, for tests and for `serve`. The flag turns true on `shutdown`.
pub fn service() -> (
    LspService<Backend>,
    tower_lsp::ClientSocket,
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

impl<S> tower_service::Service<tower_lsp::jsonrpc::Request> for ExitWatch<S>
where
    S: tower_service::Service<tower_lsp::jsonrpc::Request>,
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

    fn call(&mut self, req: tower_lsp::jsonrpc::Request) -> Self::Future {
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
