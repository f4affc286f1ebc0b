// Test-only driver, run inside a real VS Code (code-server) by tests/editors/vscode_e2e.py.
// Reads `.inplace-e2e.json` from the workspace folder ({fixture, result, fixCode, fixedText,
// timeoutMs}), opens the fixture, waits for inplace-lsp's diagnostics, runs the preferred
// quickfix and a hover through VS Code's own command API, and writes what it saw to `result`.
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
  const actions = await vscode.commands.executeCommand(
    "vscode.executeCodeActionProvider",
    uri,
    target.range,
    vscode.CodeActionKind.QuickFix.value,
  );
  const fixes = (actions || []).filter((a) => a.edit && a.kind && vscode.CodeActionKind.QuickFix.contains(a.kind));
  const action = fixes.find((a) => a.isPreferred) || fixes[0];
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
  const editor = vscode.window.activeTextEditor;
  if (editor) {
    const at = hoverOn.range.start;
    editor.selection = new vscode.Selection(at, at);
    editor.revealRange(new vscode.Range(at.translate(-12), at), vscode.TextEditorRevealType.AtTop);
    await vscode.commands.executeCommand("editor.action.showHover");
  }
  report.ok = true;
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
