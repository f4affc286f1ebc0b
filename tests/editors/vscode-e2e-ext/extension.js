// Test-only driver, run inside a real VS Code (code-server) by tests/editors/vscode_e2e.py.
// Reads `.inplace-e2e.json` from the workspace folder ({fixture, result, fixCode, fixedText,
// timeoutMs, notebook?}), opens the fixture, waits for inplace-lsp's diagnostics, runs the
// preferred quickfix and a hover through VS Code's own command API; then, with `notebook`, opens
// that .ipynb as a notebook and checks the same on its cells (which reach the server through
// notebookDocument/*); and writes what it saw to `result`.
"use strict";
const fs = require("fs");
const path = require("path");
const vscode = require("vscode");

const RUNTIME =
  "one of the variables needed for gradient computation has been modified by an inplace operation";

function expectedFrom(text) {
  const out = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const m = /#\s*(?:expect:\s*)?(IP\d{3})/.exec(line);
    if (m) out.push(`${i + 1}:${m[1]}`);
  });
  return out.sort();
}

function ours(uri) {
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === "inplace-lsp");
}

function codeOf(d) {
  return typeof d.code === "object" && d.code !== null ? String(d.code.value) : String(d.code);
}

function seen(uri) {
  return ours(uri).map((d) => `${d.range.start.line + 1}:${codeOf(d)}`).sort();
}

/** Resolves when `check()` is true after a diagnostics change (or now), rejects after `ms`. */
function waitFor(check, ms, what) {
  return new Promise((resolve, reject) => {
    if (check()) return resolve();
    const timer = setTimeout(() => {
      sub.dispose();
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    const sub = vscode.languages.onDidChangeDiagnostics(() => {
      if (check()) {
        clearTimeout(timer);
        sub.dispose();
        resolve();
      }
    });
  });
}

/**
 * The code actions VS Code's lightbulb would get for a diagnostic, asked again (as moving the
 * cursor does) while the answer lacks the one `pick` wants, for up to 3 s. Every answer without
 * it is kept in `report.codeActionRetries`, with the diagnostics VS Code held then, so a run that
 * needed a second request says so in its log.
 */
async function quickFix(uri, diagnostic, report, pick) {
  let actions = [];
  for (let attempt = 1; attempt <= 6; attempt++) {
    actions =
      (await vscode.commands.executeCommand(
        "vscode.executeCodeActionProvider",
        uri,
        diagnostic.range,
        vscode.CodeActionKind.QuickFix.value,
      )) || [];
    const action = pick(actions);
    if (action) return { action, actions };
    report.codeActionRetries = report.codeActionRetries || [];
    report.codeActionRetries.push({
      uri: uri.toString(),
      attempt,
      titles: actions.map((a) => a.title),
      diagnostics: seen(uri),
    });
    await new Promise((r) => setTimeout(r, 500));
  }
  return { action: undefined, actions };
}

async function run(cfg, report) {
  const ext = vscode.extensions.getExtension("inplace-lsp.inplace-lsp");
  if (!ext) throw new Error("the inplace-lsp extension is not installed");
  report.checks.push(`extension found: ${ext.id} ${ext.packageJSON.version}`);

  const uri = vscode.Uri.file(cfg.fixture);
  const doc = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(doc);
  const api = await ext.activate();
  if (!api || !api.isRunning()) {
    throw new Error("the inplace-lsp server is not running after activation (see its log channel)");
  }
  report.checks.push("server running");

  const want = expectedFrom(doc.getText());
  report.expected = want;
  await waitFor(() => seen(uri).join(" ") === want.join(" "), cfg.timeoutMs, `diagnostics [${want.join(" ")}]`)
    .catch((e) => {
      throw new Error(`${e.message}; got [${seen(uri).join(" ")}]`);
    });
  report.diagnostics = seen(uri);
  report.checks.push(`diagnostics match the fixture: ${want.length} findings`);

  const target = ours(uri).find((d) => codeOf(d) === cfg.fixCode);
  if (!target) throw new Error(`no ${cfg.fixCode} diagnostic`);
  const { action, actions } = await quickFix(uri, target, report, (all) => {
    const fixes = all.filter((a) => a.edit && a.kind && vscode.CodeActionKind.QuickFix.contains(a.kind));
    return fixes.find((a) => a.isPreferred) || fixes[0];
  });
  if (!action) throw new Error(`no quickfix for ${cfg.fixCode}: ${JSON.stringify(actions)}`);
  report.quickfix = action.title;
  if (!(await vscode.workspace.applyEdit(action.edit))) throw new Error("applyEdit failed");
  const line = doc.lineAt(target.range.start.line).text;
  report.fixedLine = line;
  if (!line.includes(cfg.fixedText)) {
    throw new Error(`after the quickfix line ${target.range.start.line + 1} reads ${JSON.stringify(line)}`);
  }
  report.checks.push(`quickfix applied: ${action.title}`);
  const fixedAt = `${target.range.start.line + 1}:${cfg.fixCode}`;
  await waitFor(
    () => !seen(uri).includes(fixedAt) && seen(uri).length === want.length - 1,
    cfg.timeoutMs,
    `${fixedAt} to go away`,
  );
  report.checks.push(`${fixedAt} gone after the fix`);

  const hoverOn = ours(uri).find((d) => ["IP301", "IP302"].includes(codeOf(d)));
  if (!hoverOn) throw new Error("no IP301/IP302 left to hover");
  const hovers = await vscode.commands.executeCommand("vscode.executeHoverProvider", uri, hoverOn.range.start);
  const text = (hovers || [])
    .flatMap((h) => h.contents)
    .map((c) => (typeof c === "string" ? c : c.value))
    .join("\n");
  report.hover = text;
  if (!text.includes(RUNTIME)) throw new Error(`hover does not quote the runtime message: ${text}`);
  report.checks.push(`hover on line ${hoverOn.range.start.line + 1} quotes the runtime message`);

  // Leave the editor as a user would see it, for the screenshot: the original file, unfixed.
  await vscode.commands.executeCommand("undo");
  await waitFor(() => seen(uri).length === want.length, cfg.timeoutMs, "diagnostics after undo");

  if (cfg.notebook) {
    report.notebook = {};
    await runNotebook(cfg, cfg.notebook, report);
  }

  const editor = await vscode.window.showTextDocument(doc);
  const at = hoverOn.range.start;
  editor.selection = new vscode.Selection(at, at);
  editor.revealRange(new vscode.Range(at.translate(-12), at), vscode.TextEditorRevealType.AtTop);
  await vscode.commands.executeCommand("editor.action.showHover");
  report.ok = true;
}

/** Our diagnostics on every cell of `notebook`, as "cell:line:code" (1-based, all cells counted). */
function seenInNotebook(notebook) {
  return notebook
    .getCells()
    .flatMap((cell) => ours(cell.document.uri).map((d) => `${cell.index + 1}:${d.range.start.line + 1}:${codeOf(d)}`))
    .sort();
}

// nb: {fixture, expected: ["cell:line:code"], fixCell, fixLine, fixCode, rangeText, message,
// related: {cell, line}, fixTitle, fixedText}, cells and lines 1-based.
async function runNotebook(cfg, nb, report) {
  const out = report.notebook;
  const notebook = await vscode.workspace.openNotebookDocument(vscode.Uri.file(nb.fixture));
  await vscode.window.showNotebookDocument(notebook);
  out.notebookType = notebook.notebookType;
  out.cells = notebook.getCells().map((c) => `${c.index + 1}:${c.kind === vscode.NotebookCellKind.Code ? c.document.languageId : "markdown"}`);
  report.checks.push(`notebook opened: ${notebook.notebookType}, ${notebook.cellCount} cells`);

  const want = [...nb.expected].sort();
  const what = `notebook diagnostics [${want.join(" ")}] (does the server get the notebook's cells?)`;
  await waitFor(() => seenInNotebook(notebook).join(" ") === want.join(" "), cfg.timeoutMs, what).catch((e) => {
    throw new Error(`${e.message}; got [${seenInNotebook(notebook).join(" ")}]`);
  });
  out.diagnostics = seenInNotebook(notebook);
  report.checks.push(`notebook diagnostics match: [${want.join(" ")}]`);

  const cell = notebook.cellAt(nb.fixCell - 1);
  const cellDoc = cell.document;
  const target = ours(cellDoc.uri).find((d) => codeOf(d) === nb.fixCode && d.range.start.line === nb.fixLine - 1);
  if (!target) throw new Error(`no ${nb.fixCode} on cell ${nb.fixCell} line ${nb.fixLine}`);
  out.message = target.message;
  out.rangeText = cellDoc.getText(target.range);
  if (out.rangeText !== nb.rangeText) {
    throw new Error(`the ${nb.fixCode} range covers ${JSON.stringify(out.rangeText)}, not ${JSON.stringify(nb.rangeText)}`);
  }
  if (!target.message.includes(nb.message)) {
    throw new Error(`the ${nb.fixCode} message does not name ${JSON.stringify(nb.message)}: ${target.message}`);
  }
  const origin = notebook.cellAt(nb.related.cell - 1).document.uri.toString();
  out.related = (target.relatedInformation || []).map((r) => `${r.location.uri.toString()}#${r.location.range.start.line + 1}`);
  const related = (target.relatedInformation || []).some(
    (r) => r.location.uri.toString() === origin && r.location.range.start.line === nb.related.line - 1,
  );
  if (!related) throw new Error(`no related information at cell ${nb.related.cell} line ${nb.related.line} (${origin})`);
  report.checks.push(
    `cell ${nb.fixCell} line ${nb.fixLine}: ${nb.fixCode} on ${JSON.stringify(out.rangeText)}, names ${nb.message}, related to cell ${nb.related.cell}`,
  );

  const hovers = await vscode.commands.executeCommand("vscode.executeHoverProvider", cellDoc.uri, target.range.start);
  out.hover = (hovers || [])
    .flatMap((h) => h.contents)
    .map((c) => (typeof c === "string" ? c : c.value))
    .join("\n");
  if (!out.hover.includes(RUNTIME)) throw new Error(`no hover quoting the runtime message on the cell: ${out.hover}`);
  report.checks.push(`hover on cell ${nb.fixCell} quotes the runtime message`);

  const { action, actions } = await quickFix(cellDoc.uri, target, report, (all) =>
    all.find((a) => a.edit && a.title.startsWith(nb.fixTitle)),
  );
  out.actions = actions.map((a) => a.title);
  if (!action) throw new Error(`no quickfix "${nb.fixTitle}…" on the cell: [${out.actions.join(", ")}]`);
  out.quickfix = action.title;
  out.editedUris = action.edit.entries().map(([u]) => u.toString());
  if (out.editedUris.some((u) => u !== cellDoc.uri.toString())) {
    throw new Error(`the quickfix edits other documents than the cell: ${out.editedUris.join(", ")}`);
  }
  if (!(await vscode.workspace.applyEdit(action.edit))) throw new Error("applyEdit on the cell failed");
  out.fixedLine = cellDoc.lineAt(nb.fixLine - 1).text;
  if (!cellDoc.getText().includes(nb.fixedText)) {
    throw new Error(`after the quickfix cell ${nb.fixCell} reads ${JSON.stringify(cellDoc.getText())}`);
  }
  report.checks.push(`quickfix applied on the cell: ${action.title}`);

  const fixedAt = `${nb.fixCell}:${nb.fixLine}:${nb.fixCode}`;
  const rest = want.filter((w) => w !== fixedAt);
  await waitFor(
    () => seenInNotebook(notebook).join(" ") === rest.join(" "),
    cfg.timeoutMs,
    `${fixedAt} to go away after the fix`,
  ).catch((e) => {
    throw new Error(`${e.message}; got [${seenInNotebook(notebook).join(" ")}]`);
  });
  report.checks.push(`${fixedAt} gone after the fix`);
}

async function activate() {
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  if (!folder) return;
  const cfgFile = path.join(folder.uri.fsPath, ".inplace-e2e.json");
  if (!fs.existsSync(cfgFile)) return;
  const cfg = JSON.parse(fs.readFileSync(cfgFile, "utf8"));
  const report = { ok: false, checks: [], vscodeVersion: vscode.version };
  try {
    await run(cfg, report);
  } catch (e) {
    report.error = e && e.message ? e.message : String(e);
  }
  fs.writeFileSync(cfg.result + ".tmp", JSON.stringify(report, null, 2));
  fs.renameSync(cfg.result + ".tmp", cfg.result);
}

module.exports = { activate, deactivate() {} };
