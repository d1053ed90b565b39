// The MCP Apps test host's Node process: its MCP clients (the official TypeScript client,
// declaring io.modelcontextprotocol/ui as the ext-apps host documentation shows, and a plain
// one) connected to `lineup serve --http`, and two loopback origins: the host page (with
// the AppBridge bundle, built here with esbuild) and the sandbox proxy.
//
// argv: the serve URL; env LINEUP_SERVE_TOKEN: its bearer token.
// stdout: one JSON line {host, sandbox} once both origins listen; runs until stdin closes.
import { readFileSync } from "node:fs";
import http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const [url] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${process.env.LINEUP_SERVE_TOKEN}` };

async function connect(capabilities) {
  const client = new Client({ name: "lineup-mcp-apps-host", version: "0.0.0" }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

const ui = await connect({ extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } });
const plain = await connect({});

const bundle = (
  await build({
    entryPoints: [join(here, "host-page.js")],
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "silent",
  })
).outputFiles[0].text;
const sandboxPage = readFileSync(join(here, "sandbox.html"), "utf8");

function listen(handler) {
  return new Promise((resolve) => {
    const server = http.createServer(handler);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function relay(client, method, params) {
  if (method === "tools/list") return client.listTools();
  if (method === "tools/call") return client.callTool(params);
  if (method === "resources/read") return client.readResource(params);
  throw new Error(`no ${method} here`);
}

const sandbox = await listen((req, res) => {
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
  res.end(sandboxPage);
});
// another site than the host page (localhost, not 127.0.0.1), as a real host's sandbox is
const sandboxOrigin = `http://localhost:${sandbox.address().port}`;

const host = await listen(async (req, res) => {
  try {
    if (req.method === "POST" && (req.url === "/rpc" || req.url === "/plain")) {
      const { method, params } = await body(req);
      const result = await relay(req.url === "/rpc" ? ui : plain, method, params);
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ result }));
      return;
    }
    if (req.url === "/host.js") {
      res.writeHead(200, { "Content-Type": "text/javascript" });
      res.end(bundle);
      return;
    }
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end(
      `<!doctype html><html data-sandbox="${sandboxOrigin}"><head><meta charset="utf-8">` +
        `<title>MCP Apps test host</title></head><body>` +
        `<script type="module" src="/host.js"></script></body></html>`,
    );
  } catch (err) {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: String(err?.message ?? err) }));
  }
});

process.stdout.write(
  JSON.stringify({ host: `http://127.0.0.1:${host.address().port}`, sandbox: sandboxOrigin }) + "\n",
);
process.stdin.resume();
process.stdin.on("end", async () => {
  await ui.close();
  await plain.close();
  process.exit(0);
});
