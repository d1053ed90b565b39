// The TypeScript MCP SDK's Client over stdio, with its defaults, as a line-driven driver for
// tests/users/test_mcp_clients.py. argv: the server command and its arguments; the working
// folder is this process's. stdin: one JSON request a line, {"id", "op": "list"} or
// {"id", "op": "call", "name", "arguments", "_meta"?}; stdout: one JSON answer a line,
// {"id", "result"} or {"id", "error": {"name", "message", "code"}}. The server's stderr is
// inherited (the transport's default). Requests run concurrently; stdin's end closes.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, cwd: process.cwd() });
const client = new Client({ name: "lineup-tests-ts", version: "0.0.0" });

function answer(doc) {
  process.stdout.write(JSON.stringify(doc) + "\n");
}

async function handle(request) {
  const { id, op } = request;
  try {
    let result;
    if (op === "list") {
      result = await client.listTools();
    } else if (op === "call") {
      const params = { name: request.name, arguments: request.arguments ?? {} };
      if (request._meta !== undefined) params._meta = request._meta;
      result = await client.callTool(params); // default options: 60 s timeout, no progress
    } else if (op === "resources") {
      result = await client.listResources();
    } else if (op === "templates") {
      result = await client.listResourceTemplates();
    } else if (op === "read") {
      result = await client.readResource({ uri: request.uri });
    } else {
      throw new Error(`unknown op ${op}`);
    }
    answer({ id, result });
  } catch (err) {
    answer({ id, error: { name: err?.name, message: String(err?.message ?? err), code: err?.code } });
  }
}

try {
  await client.connect(transport);
} catch (err) {
  answer({ id: null, error: { name: err?.name, message: String(err?.message ?? err), code: err?.code } });
  process.exit(1);
}
answer({ id: null, result: { connected: true } });
const pending = new Set();
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const job = handle(JSON.parse(line));
  pending.add(job);
  job.finally(() => pending.delete(job));
}
await Promise.allSettled([...pending]);
await client.close();
