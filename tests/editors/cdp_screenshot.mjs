// Saves a PNG of the first page of a Chromium started with --remote-debugging-port, through the
// DevTools protocol (Node 22+ has WebSocket built in).  node cdp_screenshot.mjs PORT OUT.png
import { writeFileSync } from "node:fs";

const [port, out] = process.argv.slice(2);
const pages = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = pages.find((p) => p.type === "page");
if (!page) throw new Error(`no page: ${JSON.stringify(pages)}`);
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((resolve, reject) => {
  ws.onopen = resolve;
  ws.onerror = reject;
});
const reply = await new Promise((resolve, reject) => {
  ws.onmessage = (e) => {
    const msg = JSON.parse(e.data);
    if (msg.id === 1) (msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result));
  };
  ws.send(JSON.stringify({ id: 1, method: "Page.captureScreenshot", params: { format: "png" } }));
});
writeFileSync(out, Buffer.from(reply.data, "base64"));
ws.close();
