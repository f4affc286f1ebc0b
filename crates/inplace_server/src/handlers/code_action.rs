//! `textDocument/codeAction` and `codeAction/resolve`: quick fixes for our diagnostics (each
//! verified when offered: applied alone it adds no syntax error and its finding goes), the
//! "suppress on this line" action, and fix-all (its edit computed on resolve, or when asked for
//! by kind).

use crate::convert::{self, DiagnosticData, FIX_ALL_KIND, SOURCE};
use crate::session::Session;
use inplace_analysis::{Applicability, FileState, Finding};
use std::collections::HashMap;
use std::sync::Arc;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;

pub async fn code_action(
    session: &Arc<Session>,
    params: CodeActionParams,
    resolve_support: bool,
) -> Result<Option<CodeActionResponse>> {
    let uri = params.text_document.uri;
    let only = params.context.only.clone();
    let wants = |k: &CodeActionKind| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|x| k.as_str().starts_with(x.as_str())))
    };
    if !session.docs.contains_key(&session.key(&uri)) {
        return Err(Error::invalid_params(format!(
            "unknown document {}",
            uri.as_str()
        )));
    }
    let mut actions = Vec::new();
    if wants(&CodeActionKind::QUICKFIX) {
        actions.extend(quick_fixes(session, &uri, &params.context.diagnostics).await);
    }
    let fix_all = CodeActionKind::new(FIX_ALL_KIND);
    if wants(&fix_all) {
        let explicit = only.is_some();
        if explicit {
            if let Some(edit) = fix_all_edit(session, &uri).await {
                actions.push(fix_all_action(Some(edit), None));
            }
        } else if resolve_support {
            let data = serde_json::json!({ "fixAll": uri });
            actions.push(fix_all_action(None, Some(data)));
        }
    }
    Ok(Some(actions))
}

/// `codeAction/resolve`: the edit of a fix-all action.
pub async fn resolve(session: &Arc<Session>, mut action: CodeAction) -> Result<CodeAction> {
    let uri = action
        .data
        .as_ref()
        .and_then(|d| d.get("fixAll"))
        .and_then(|u| serde_json::from_value::<Uri>(u.clone()).ok());
    if let Some(uri) = uri {
        action.edit = fix_all_edit(session, &uri).await;
    }
    Ok(action)
}

fn fix_all_action(
    edit: Option<WorkspaceEdit>,
    data: Option<serde_json::Value>,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title: "Fix all safe in-place hazards".into(),
        kind: Some(CodeActionKind::new(FIX_ALL_KIND)),
        edit,
        data,
        ..Default::default()
    })
}

/// Quick fixes of our diagnostics of the current version, verified.
async fn quick_fixes(
    session: &Arc<Session>,
    uri: &Uri,
    diagnostics: &[Diagnostic],
) -> Vec<CodeActionOrCommand> {
    let enc = session.enc();
    let key = session.key(uri);
    // (Only for a request about our diagnostics: editors ask on every cursor move, and a
    // request with none of ours has nothing to wait for.)
    if diagnostics
        .iter()
        .any(|d| d.source.as_deref() == Some(SOURCE))
    {
        analysis_of_text(session, &key).await;
    }
    let (text, version, state, analysis) = {
        let Some(entry) = session.docs.get(&key) else {
            return Vec::new();
        };
        (
            entry.doc.text.clone(),
            entry.doc.version,
            entry.state.as_ref().map(|s| (**s).clone()),
            // (Not only the current epoch's: a project file touched after the diagnostics
            // were published must not take their fixes away.)
            entry.of_text(),
        )
    };
    let ours: Vec<&Diagnostic> = diagnostics
        .iter()
        .filter(|d| d.source.as_deref() == Some(SOURCE))
        .filter(|d| {
            d.data
                .clone()
                .and_then(|v| serde_json::from_value::<DiagnosticData>(v).ok())
                .is_none_or(|data| data.version == version)
        })
        .collect();
    // The findings behind the diagnostics whose fixes are offered.
    let findings: Vec<Option<Finding>> = {
        let Some(entry) = session.docs.get(&key) else {
            return Vec::new();
        };
        ours.iter()
            .map(|d| {
                analysis.as_ref().and_then(|a| {
                    a.findings
                        .iter()
                        .find(|f| {
                            let at = entry.location(&key, f.range, enc);
                            at.uri == *uri
                                && at.range == d.range
                                && d.code == Some(NumberOrString::String(f.rule.code().into()))
                        })
                        .cloned()
                })
            })
            .collect()
    };
    let verified = verify(text.clone(), state, findings).await;
    let Some(entry) = session.docs.get(&key) else {
        return Vec::new();
    };
    let Some(view) = entry.view(uri).filter(|_| entry.doc.version == version) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, (d, chosen)) in ours.iter().zip(verified).enumerate() {
        let offered = match chosen {
            None => convert::Offered::None,
            Some(Chosen::First) => convert::Offered::Carried,
            Some(Chosen::Alternative(fix)) => {
                convert::Offered::Other(convert::fix_data(&entry, &key, &fix, enc))
            }
        };
        out.extend(convert::actions_for(view, uri, d, enc, i == 0, offered));
    }
    out
}

/// The fix of a finding that verified: its first, or one of its alternatives.
enum Chosen {
    First,
    Alternative(inplace_analysis::Fix),
}

/// Wait (up to 10 s) until the document has an analysis of its current text: a settings change
/// clears it and schedules another, and a quick-fix request made meanwhile (VS Code sends one
/// right after its configuration) would otherwise find no findings and offer nothing.
async fn analysis_of_text(session: &Arc<Session>, key: &Uri) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut rx = {
            let Some(entry) = session.docs.get(key) else {
                return;
            };
            if entry.of_text().is_some() {
                return;
            }
            entry.analysis.subscribe()
        };
        if !matches!(
            tokio::time::timeout_at(deadline, rx.changed()).await,
            Ok(Ok(()))
        ) {
            return;
        }
    }
}

/// Which fix of each finding passes verification (off the reactor), on a copy of the
/// document's state: its first, else the first of its alternatives that does.
async fn verify(
    text: Arc<str>,
    state: Option<FileState>,
    findings: Vec<Option<Finding>>,
) -> Vec<Option<Chosen>> {
    let n = findings.len();
    let job = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let works = |f: &Finding| match &state {
                Some(s) => s.verify_fix(&text, f).is_ok(),
                None => inplace_analysis::verify_fix(&text, f).is_ok(),
            };
            findings
                .iter()
                .map(|f| {
                    let f = f.as_ref().filter(|f| f.fix.is_some())?;
                    if works(f) {
                        return Some(Chosen::First);
                    }
                    f.alternatives.iter().find_map(|alt| {
                        let mut g = f.clone();
                        g.fix = Some(alt.clone());
                        works(&g).then(|| Chosen::Alternative(alt.clone()))
                    })
                })
                .collect::<Vec<_>>()
        }))
    });
    match job.await {
        Ok(Ok(v)) => v,
        _ => (0..n).map(|_| None).collect(),
    }
}

/// One edit replacing the document with all safe fixes applied (computed off the reactor);
/// for a notebook, one per code cell that changed.
async fn fix_all_edit(session: &Arc<Session>, uri: &Uri) -> Option<WorkspaceEdit> {
    let key = session.key(uri);
    if key != *uri {
        return fix_all_notebook(session, &key).await;
    }
    let (text, version, state) = {
        let entry = session.docs.get(uri)?;
        (
            entry.doc.text.clone(),
            entry.doc.version,
            entry
                .state
                .as_ref()
                .map(|s| (**s).clone())
                .unwrap_or_default(),
        )
    };
    let (shared, target, original) = (session.clone(), uri.clone(), text.clone());
    let job = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let keep = |f: &Finding| !shared.select(&target, std::slice::from_ref(f)).is_empty();
            let mut state = state;
            inplace_analysis::fix_all_with(&original, Applicability::Safe, &keep, &mut state).text
        }))
    });
    let fixed = job.await.ok()?.ok()?;
    let entry = session.docs.get(uri)?;
    if *fixed == *text || entry.doc.version != version {
        return None;
    }
    let end = entry.doc.position(text.len(), session.enc());
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

/// Fix-all of a notebook: its code cells fixed together, each changed cell replaced whole.
async fn fix_all_notebook(session: &Arc<Session>, key: &Uri) -> Option<WorkspaceEdit> {
    let (source, version) = {
        let entry = session.docs.get(key)?;
        (entry.notebook.as_ref()?.source.clone(), entry.doc.version)
    };
    let (shared, target, src) = (session.clone(), key.clone(), source.clone());
    let job = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let keep = |f: &Finding| !shared.select(&target, std::slice::from_ref(f)).is_empty();
            src.fix_all(Applicability::Safe, &keep).0
        }))
    });
    let cells = job.await.ok()?.ok()?;
    let entry = session.docs.get(key)?;
    let nb = entry.notebook.as_ref()?;
    if entry.doc.version != version {
        return None;
    }
    let enc = session.enc();
    let mut changes = HashMap::new();
    for (uri, new) in nb.code_uris().zip(cells) {
        let doc = &nb.cell(uri)?.doc;
        if *doc.text != *new {
            let end = doc.position(doc.text.len(), enc);
            let edit = TextEdit {
                range: Range {
                    start: Position::new(0, 0),
                    end,
                },
                new_text: new,
            };
            changes.insert(uri.clone(), vec![edit]);
        }
    }
    (!changes.is_empty()).then(|| WorkspaceEdit {
        changes: Some(changes),
        ..Default::default()
    })
}
