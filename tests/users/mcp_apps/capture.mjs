// Records the JSON-RPC that the pinned TypeScript MCP client (@modelcontextprotocol/client)
// sends to `lineup serve` over stdio up to its first tools/list, as the MCP Apps test host
// configures it (declaring io.modelcontextprotocol/ui with the ext-apps RESOURCE_MIME_TYPE)
// and plain, on 2025-11-25 and 2026-07-28. The files are test fixtures
// (tests/runtime/test_serve_mcp_apps.py replays them); regenerate with
//   node capture.mjs <fixtures dir> <lineup serve command...>
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";

const [dir, command, ...args] = process.argv.slice(2);
const HOST_CAPABILITIES = { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } };

async function capture(name, capabilities, revision) {
  const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
  const messages = [];
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    messages.push(structuredClone(message));
    return send(message, options);
  };
  const options = { capabilities };
  if (revision !== "2025-11-25") options.versionNegotiation = { mode: { pin: revision } };
  else options.versionNegotiation = { mode: "legacy" };
  const client = new Client({ name: "lineup-mcp-apps-host", version: "0.0.0" }, options);
  await client.connect(transport);
  const { tools } = await client.listTools();
  await client.close();
  const declares = capabilities.extensions !== undefined;
  const ui = tools.some((t) => t._meta?.ui !== undefined);
  const doc = { client: name, revision, declares, ui_seen: ui, messages };
  writeFileSync(`${dir}/${name}-${revision}.json`, JSON.stringify(doc, null, 2) + "\n");
  return ui === declares;
}

let ok = true;
for (const revision of ["2025-11-25", "2026-07-28"]) {
  ok = (await capture("apps-host", HOST_CAPABILITIES, revision)) && ok;
  ok = (await capture("ts-client", {}, revision)) && ok;
}
process.exit(ok ? 0 : 1);
