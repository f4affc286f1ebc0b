//! Analysis off the reactor: one worker per document at a time, always on its latest text. A
//! burst of keystrokes yields one analysis of the final text: an analysis whose version moved
//! on stops between units (the units it finished are kept and reused by the next one). A panic
//! inside analysis is caught and logged; the document starts over with a fresh state.

use crate::session::{Analysed, Session};
use inplace_analysis::FileState;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tower_lsp_server::ls_types::{MessageType, Uri};
use tower_lsp_server::Client;

/// Start the document's worker unless one is running; it analyses until it has caught up, then
/// publishes (push clients).
pub fn schedule(session: &Arc<Session>, client: &Client, uri: Uri) {
    {
        let Some(mut entry) = session.docs.get_mut(&uri) else {
            return;
        };
        if entry.busy {
            return;
        }
        entry.busy = true;
    }
    let (session, client) = (session.clone(), client.clone());
    tokio::spawn(async move { work(session, client, uri).await });
}

async fn work(session: Arc<Session>, client: Client, uri: Uri) {
    loop {
        let Some(outcome) = analyse_latest(&session, &client, &uri).await else {
            return;
        };
        {
            let Some(mut entry) = session.docs.get_mut(&uri) else {
                return;
            };
            match outcome {
                Outcome::Done(a) if !entry.moved_on(a.version, a.epoch) => {
                    entry.analysis.send_replace(Some(Arc::new(a)));
                    entry.busy = false;
                }
                // A failure is not retried (the next change tries again); waiters get an
                // empty analysis.
                Outcome::Failed(version, epoch) if !entry.moved_on(version, epoch) => {
                    entry.analysis.send_replace(Some(Arc::new(Analysed {
                        version,
                        epoch,
                        ..Analysed::default()
                    })));
                    entry.busy = false;
                    return;
                }
                // The text moved on: analyse the latest.
                _ => continue,
            }
        }
        if !session.pulls() {
            publish(&session, &client, &uri).await;
        } else if session.docs.get(&uri).is_some_and(|e| e.notebook.is_some()) {
            // A pulling client asks again for the cell it edited, not for the cells after it
            // that the edit changed: ask it to pull every cell again.
            refresh_pulls(&session, &client);
        }
        return;
    }
}

/// Ask a pulling client (one that can be asked) to pull every document's diagnostics again,
/// off the caller: a handler awaiting the client's answer holds one of tower-lsp's four handler
/// slots; with them all taken, later messages queue, and once its queue (100 messages) is full
/// the server reads nothing more, the client's answers included (a burst of settings changes
/// and pulls hung the server).
pub fn refresh_pulls(session: &Session, client: &Client) {
    if session.pulls() && session.refresh.load(Ordering::Relaxed) {
        let client = client.clone();
        tokio::spawn(async move {
            let _ = client.workspace_diagnostic_refresh().await;
        });
    }
}

/// Push the current diagnostics of an open document: to it, or to each code cell of a
/// notebook (cell versions are the client's business: none is sent).
pub async fn publish(session: &Session, client: &Client, key: &Uri) {
    let Some((version, groups)) = session.diagnostics(key) else {
        return;
    };
    for (uri, diags) in groups {
        let version = (uri == *key).then_some(version);
        client.publish_diagnostics(uri, diags, version).await;
    }
}

enum Outcome {
    Done(Analysed),
    Cancelled,
    /// A panic while analysing this version (at this epoch).
    Failed(i32, u64),
}

/// Analyse the document's current text with its state (`None`: the document is gone).
async fn analyse_latest(session: &Arc<Session>, client: &Client, uri: &Uri) -> Option<Outcome> {
    let (version, epoch, text, state, latest, epochs, cells) = {
        let mut entry = session.docs.get_mut(uri)?;
        let state = entry.state.take().unwrap_or_default();
        (
            entry.doc.version,
            entry.epoch(),
            entry.doc.text.clone(),
            state,
            entry.latest.clone(),
            entry.epoch.clone(),
            entry.notebook.as_ref().map(|nb| nb.source.clone()),
        )
    };
    let (session2, uri2) = (session.clone(), uri.clone());
    let job = tokio::task::spawn_blocking(move || {
        let mut state = state;
        let mut module_paths = Arc::default();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let cancelled = || {
                latest.load(Ordering::Relaxed) != version || epochs.load(Ordering::Relaxed) != epoch
            };
            let (imports, paths) = crate::workspace::imports_of(&session2, &uri2, &text);
            if !Arc::ptr_eq(&state.imports, &imports) && *state.imports != *imports {
                state.imports = imports;
            }
            module_paths = paths;
            // A notebook's messages name cells; its fixes stay inside cells.
            state.cells = cells.as_ref().map(|c| c.cell_lines());
            let mut a = state.analyze_until(&text, &cancelled);
            if let (Some(a), Some(c)) = (a.as_mut(), &cells) {
                c.fence(&mut a.findings);
            }
            a.map(|a| (a, state.imports.clone()))
        }));
        match outcome {
            Ok(a) => (Some(state), Ok(a.map(|(a, i)| (a, i, module_paths)))),
            Err(_) => (None, Err(())),
        }
    });
    let (state, outcome) = job.await.unwrap_or((None, Err(())));
    if let Some(mut entry) = session.docs.get_mut(uri) {
        entry.state = Some(state.unwrap_or_else(|| Box::new(FileState::new())));
    }
    Some(match outcome {
        Ok(Some((a, imports, module_paths))) => {
            if a.exhausted > 0 {
                // Degraded, not wrong: those scopes stopped where their budget ran out.
                client
                    .log_message(
                        MessageType::WARNING,
                        format!(
                            "inplace-lsp: {}: {} scope(s) stopped at their work budget; findings in them may be missing",
                            uri.as_str(), a.exhausted
                        ),
                    )
                    .await;
            }
            Outcome::Done(Analysed {
                version,
                epoch,
                findings: a.findings,
                sites: a.sites,
                imports,
                module_paths,
            })
        }
        Ok(None) => Outcome::Cancelled,
        Err(()) => {
            client
                .log_message(
                    MessageType::ERROR,
                    "inplace-lsp: internal error while analysing; please report it",
                )
                .await;
            Outcome::Failed(version, epoch)
        }
    })
}

/// The analysis of the current version, waiting for the document's worker (pull diagnostics,
/// hover). `None` when the document is gone or no analysis came within a minute.
pub async fn ensure_analysed(
    session: &Arc<Session>,
    client: &Client,
    uri: &Uri,
) -> Option<Arc<Analysed>> {
    loop {
        let mut rx = {
            let entry = session.docs.get(uri)?;
            if let Some(a) = entry.current() {
                return Some(a);
            }
            entry.analysis.subscribe()
        };
        schedule(session, client, uri.clone());
        let wait = tokio::time::timeout(std::time::Duration::from_secs(60), rx.changed());
        if !matches!(wait.await, Ok(Ok(()))) {
            return None;
        }
    }
}
