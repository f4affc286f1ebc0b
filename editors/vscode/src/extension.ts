// A thin client: it finds the `inplace-lsp` binary, starts `inplace-lsp server` over stdio and
// lets vscode-languageclient do the rest. Every finding, fix and hover comes from the server.
// Python files are synchronised as text documents; the Python cells of Jupyter notebooks through
// LSP 3.17's notebookDocument/* notifications (the server analyses a notebook's cells together).

import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";

const NAME = "inplace-lsp";
const SECTION = "inplaceLsp";

let client: LanguageClient | undefined;
let log: vscode.LogOutputChannel;

/** Where the server binary comes from, for the logs and error messages. */
interface Found {
  command: string;
  source: "setting" | "Python environment" | "bundled" | "PATH";
}

/**
 * The parts of the ms-python extension's API used here (its `exports.environments`). Typed
 * locally: ms-python is optional, and without it the Python-environment step is skipped.
 */
interface PythonEnvironmentPath {
  readonly id: string;
  readonly path: string;
}
interface PythonEnvironments {
  getActiveEnvironmentPath(resource?: vscode.Uri): PythonEnvironmentPath;
  resolveEnvironment(
    env: PythonEnvironmentPath | string,
  ): Promise<
    | {
        readonly executable: { readonly uri: vscode.Uri | undefined; readonly sysPrefix: string };
        readonly environment?: { readonly folderUri: vscode.Uri } | undefined;
      }
    | undefined
  >;
  readonly onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
}

/** How long to wait for the ms-python extension to activate before going on without it. */
const PYTHON_ACTIVATION_MS = 10_000;

function executableName(): string {
  return process.platform === "win32" ? "inplace-lsp.exe" : "inplace-lsp";
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function expandHome(p: string): string {
  if (p === "~" || p.startsWith("~/")) {
    return path.join(process.env.HOME ?? process.env.USERPROFILE ?? "", p.slice(1));
  }
  return p;
}

/** The ms-python extension's environments API, if that extension is installed and activates. */
async function pythonEnvironments(): Promise<PythonEnvironments | undefined> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (ext === undefined) {
    return undefined;
  }
  try {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), PYTHON_ACTIVATION_MS);
    });
    const exports = await Promise.race([ext.isActive ? Promise.resolve(ext.exports) : ext.activate(), timeout]);
    clearTimeout(timer);
    if (exports === undefined) {
      log.warn(`the Python extension did not activate within ${PYTHON_ACTIVATION_MS} ms; not looking in its environment`);
      return undefined;
    }
    const environments = (exports as { environments?: PythonEnvironments }).environments;
    if (typeof environments?.getActiveEnvironmentPath !== "function") {
      log.warn("the Python extension has no environments API; not looking in its environment");
      return undefined;
    }
    return environments;
  } catch (e) {
    log.warn(`the Python extension's API failed: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

/**
 * The scripts folders (`bin/` or `Scripts/`) of the Python environment selected in the Python
 * extension for `resource`, most likely first; empty without that extension or environment.
 */
async function pythonScriptDirs(resource: vscode.Uri | undefined): Promise<string[]> {
  const environments = await pythonEnvironments();
  if (environments === undefined) {
    return [];
  }
  const dirs: string[] = [];
  try {
    const active = environments.getActiveEnvironmentPath(resource);
    const resolved = await environments.resolveEnvironment(active);
    const executable = resolved?.executable.uri?.fsPath;
    if (executable !== undefined) {
      // A venv's python lives in bin/ (Scripts\ on Windows), next to its console scripts.
      dirs.push(path.dirname(executable));
    }
    for (const prefix of [resolved?.executable.sysPrefix, resolved?.environment?.folderUri.fsPath]) {
      if (prefix) {
        dirs.push(path.join(prefix, "bin"), path.join(prefix, "Scripts"));
      }
    }
    if (resolved === undefined && active.path !== "") {
      // Not resolvable (yet): `path` is the interpreter or the environment's folder.
      const isFile = fs.existsSync(active.path) && fs.statSync(active.path).isFile();
      dirs.push(
        ...(isFile ? [path.dirname(active.path)] : [path.join(active.path, "bin"), path.join(active.path, "Scripts")]),
      );
    }
  } catch (e) {
    log.warn(`reading the active Python environment failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  return [...new Set(dirs)];
}

/**
 * The server binary: the `inplaceLsp.path` setting, then `inplace-lsp` in the scripts folder of
 * the Python environment selected in the Python extension (`pythonDirs`), then the binary bundled
 * in the extension (`bin/`), then `inplace-lsp` on `PATH`. A set but wrong `path` is an error,
 * not a fallback: the user asked for that binary.
 */
export function findServer(
  context: vscode.ExtensionContext,
  config: vscode.WorkspaceConfiguration,
  pythonDirs: readonly string[] = [],
): Found | string {
  const configured = (config.get<string>("path") ?? "").trim();
  if (configured !== "") {
    let file = expandHome(configured);
    const folder = vscode.workspace.workspaceFolders?.[0];
    if (!path.isAbsolute(file) && folder !== undefined && file.includes(path.sep)) {
      file = path.join(folder.uri.fsPath, file);
    }
    if (path.isAbsolute(file)) {
      return isExecutable(file)
        ? { command: file, source: "setting" }
        : `The setting inplaceLsp.path points to "${configured}", which is not an executable file.`;
    }
    const onPath = searchPath(file);
    return onPath !== undefined
      ? { command: onPath, source: "setting" }
      : `The setting inplaceLsp.path names "${configured}", which is not on PATH.`;
  }
  for (const dir of pythonDirs) {
    const candidate = path.join(dir, executableName());
    if (isExecutable(candidate)) {
      return { command: candidate, source: "Python environment" };
    }
  }
  const bundled = context.asAbsolutePath(path.join("bin", executableName()));
  if (isExecutable(bundled)) {
    return { command: bundled, source: "bundled" };
  }
  const onPath = searchPath(executableName());
  if (onPath !== undefined) {
    return { command: onPath, source: "PATH" };
  }
  const env = pythonDirs.length > 0 ? `, none is in the Python environment (${pythonDirs.join(", ")})` : "";
  return `No inplace-lsp binary found: none is set in inplaceLsp.path${env}, none is bundled with this extension and none is on PATH.`;
}

function searchPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") {
      continue;
    }
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) {
      return candidate;
    }
  }
  return undefined;
}

/** The settings the server understands (it also reads `[tool.inplace-lsp]` of pyproject.toml). */
function serverSettings(config: vscode.WorkspaceConfiguration): object {
  return {
    select: config.get<string[]>("select") ?? [],
    ignore: config.get<string[]>("ignore") ?? [],
  };
}

/** Finds the server as `findServer` does, asking the Python extension only when the setting is empty. */
async function locateServer(
  context: vscode.ExtensionContext,
  config: vscode.WorkspaceConfiguration,
): Promise<Found | string> {
  const configured = (config.get<string>("path") ?? "").trim();
  const pythonDirs = configured === "" ? await pythonScriptDirs(vscode.workspace.workspaceFolders?.[0]?.uri) : [];
  return findServer(context, config, pythonDirs);
}

/** The binary the running client was started from. */
let running: Found | undefined;

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const found = await locateServer(context, config);
  if (typeof found === "string") {
    log.error(found);
    const choice = await vscode.window.showErrorMessage(
      `${NAME}: ${found} Install it with \`cargo install --path crates/inplace_lsp\` ` +
        "(from the inplace-lsp repository) or set inplaceLsp.path to the binary.",
      "Open Settings",
      "Show Logs",
    );
    if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "inplaceLsp.path");
    } else if (choice === "Show Logs") {
      log.show();
    }
    return;
  }
  const args = config.get<string[]>("args") ?? ["server"];
  log.info(`starting ${found.command} ${args.join(" ")} (from ${found.source})`);

  const serverOptions: ServerOptions = {
    command: found.command,
    args,
    options: { env: { ...process.env, RUST_BACKTRACE: "1" } },
  };
  const clientOptions: LanguageClientOptions = {
    // The cell filter puts hover and code actions on notebook cells. Their text reaches the
    // server through notebookDocument/* (the server's notebookDocumentSync): vscode-languageclient
    // does not also send textDocument/didOpen for cells a notebook sync covers.
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      { notebook: "jupyter-notebook", language: "python" },
    ],
    outputChannel: log,
    traceOutputChannel: log,
    initializationOptions: serverSettings(config),
    synchronize: { configurationSection: SECTION },
  };
  const next = new LanguageClient(SECTION, NAME, serverOptions, clientOptions);
  client = next;
  try {
    await next.start();
    running = found;
    if (next.initializeResult?.capabilities.notebookDocumentSync === undefined) {
      log.warn("this server does not support notebook documents; notebook cells are checked one by one");
    }
  } catch (e) {
    client = undefined;
    const message = e instanceof Error ? e.message : String(e);
    log.error(`the server did not start: ${message}`);
    void vscode.window
      .showErrorMessage(`${NAME}: the server (${found.command}) did not start: ${message}`, "Show Logs")
      .then((choice) => (choice === "Show Logs" ? log.show() : undefined));
  }
}

async function stopClient(): Promise<void> {
  const current = client;
  client = undefined;
  running = undefined;
  if (current !== undefined && current.state !== State.Stopped) {
    try {
      await current.stop(2000);
    } catch (e) {
      log.warn(`stopping the server: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}

/** What the extension exports to other extensions (and to the end-to-end test). */
export interface Api {
  /** Whether a server process is running and initialized. */
  isRunning(): boolean;
}

/** Restarts run one after another (a command, a setting and the Python environment may race). */
let queue: Promise<void> = Promise.resolve();

function enqueue(step: () => Promise<void>): Promise<void> {
  queue = queue.then(step).catch((e) => log.error(`${e instanceof Error ? e.message : String(e)}`));
  return queue;
}

function restart(context: vscode.ExtensionContext, why: string): Promise<void> {
  return enqueue(async () => {
    log.info(`restarting the server: ${why}`);
    await stopClient();
    await startClient(context);
  });
}

/** Restarts the server when another Python environment is selected and it changes the binary. */
async function watchPythonEnvironment(context: vscode.ExtensionContext): Promise<void> {
  const environments = await pythonEnvironments();
  const event = environments?.onDidChangeActiveEnvironmentPath;
  if (typeof event !== "function") {
    return;
  }
  context.subscriptions.push(
    event(() => {
      void enqueue(async () => {
        const config = vscode.workspace.getConfiguration(SECTION);
        if ((config.get<string>("path") ?? "").trim() !== "") {
          return; // the setting wins over any environment
        }
        const found = await locateServer(context, config);
        const now = typeof found === "string" ? undefined : found.command;
        if (now !== running?.command) {
          void restart(context, `the Python environment changed (server: ${now ?? "none"})`);
        }
      });
    }),
  );
}

export async function activate(context: vscode.ExtensionContext): Promise<Api> {
  log = vscode.window.createOutputChannel(NAME, { log: true });
  context.subscriptions.push(
    log,
    vscode.commands.registerCommand("inplaceLsp.restartServer", () => restart(context, "command")),
    vscode.commands.registerCommand("inplaceLsp.showLogs", () => log.show()),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      // The binary and its arguments need a new process; select/ignore reach the running
      // server through workspace/didChangeConfiguration.
      if (e.affectsConfiguration(`${SECTION}.path`) || e.affectsConfiguration(`${SECTION}.args`)) {
        await restart(context, "settings changed");
      }
    }),
  );
  await enqueue(() => startClient(context));
  void watchPythonEnvironment(context);
  return { isRunning: () => client?.state === State.Running };
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
