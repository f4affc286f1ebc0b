// A thin client: it finds the `inplace-lsp` binary, starts `inplace-lsp server` over stdio and
// lets vscode-languageclient do the rest. Every finding, fix and hover comes from the server.

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
  source: "setting" | "bundled" | "PATH";
}

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

/**
 * The server binary: the `inplaceLsp.path` setting, then the binary bundled in the extension
 * (`bin/`), then `inplace-lsp` on `PATH`. A set but wrong `path` is an error, not a fallback:
 * the user asked for that binary.
 */
export function findServer(
  context: vscode.ExtensionContext,
  config: vscode.WorkspaceConfiguration,
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
  const bundled = context.asAbsolutePath(path.join("bin", executableName()));
  if (isExecutable(bundled)) {
    return { command: bundled, source: "bundled" };
  }
  const onPath = searchPath(executableName());
  if (onPath !== undefined) {
    return { command: onPath, source: "PATH" };
  }
  return "No inplace-lsp binary found: none is set in inplaceLsp.path, none is bundled with this extension and none is on PATH.";
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

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration(SECTION);
  const found = findServer(context, config);
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
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
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
  const running = client;
  client = undefined;
  if (running !== undefined && running.state !== State.Stopped) {
    try {
      await running.stop(2000);
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

export async function activate(context: vscode.ExtensionContext): Promise<Api> {
  log = vscode.window.createOutputChannel(NAME, { log: true });
  context.subscriptions.push(
    log,
    vscode.commands.registerCommand("inplaceLsp.restartServer", async () => {
      log.info("restarting the server");
      await stopClient();
      await startClient(context);
    }),
    vscode.commands.registerCommand("inplaceLsp.showLogs", () => log.show()),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      // The binary and its arguments need a new process; select/ignore reach the running
      // server through workspace/didChangeConfiguration.
      if (e.affectsConfiguration(`${SECTION}.path`) || e.affectsConfiguration(`${SECTION}.args`)) {
        await stopClient();
        await startClient(context);
      }
    }),
  );
  await startClient(context);
  return { isRunning: () => client?.state === State.Running };
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
