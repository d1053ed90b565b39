// The MCP Apps test host's page (bundled with esbuild by host.mjs): the official ext-apps
// AppBridge per View, each View in a sandbox proxy on a second loopback origin (as the
// extension requires of web hosts), its MCP requests relayed to the host's MCP client in
// the Node process (/rpc). window.lineupHost is what the Python tests drive.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const SANDBOX = document.documentElement.dataset.sandbox;

async function rpc(method, params) {
  const response = await fetch("/rpc", { method: "POST", body: JSON.stringify({ method, params }) });
  const body = await response.json();
  if (body.error) throw new Error(`${method}: ${body.error}`);
  return body.result;
}

const views = [];

async function open(name, args, meta) {
  const listed = (await rpc("tools/list", {})).tools.find((t) => t.name === name);
  const uri = listed?._meta?.ui?.resourceUri;
  if (!uri) throw new Error(`${name} is not linked to a UI resource`);
  const params = { name, arguments: args ?? {} };
  if (meta) params._meta = meta;
  const result = await rpc("tools/call", params);
  const html = (await rpc("resources/read", { uri })).contents[0].text;
  const view = { index: views.length, syncs: 0, actions: 0, sizes: [], torn: false, result };
  views.push(view);
  const iframe = document.createElement("iframe");
  iframe.style.cssText = "width:480px;height:320px;border:1px solid #ccc";
  document.body.appendChild(iframe);
  const bridge = new AppBridge(
    null,
    { name: "lineup-test-host", version: "0.0.0" },
    { serverTools: {}, logging: {} },
  );
  bridge.oncalltool = async (call) => {
    if (call.name === "lineup-surface-sync") view.syncs += 1;
    if (call.name === "lineup-ui-action") view.actions += 1;
    return rpc("tools/call", call);
  };
  bridge.onsizechange = (size) => view.sizes.push(size);
  const initialized = new Promise((resolve) => (bridge.oninitialized = resolve));
  const sandboxReady = new Promise((resolve) => (bridge.onsandboxready = resolve));
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.src = `${SANDBOX}/sandbox.html`;
  await sandboxReady;
  await bridge.sendSandboxResourceReady({ html, sandbox: "allow-scripts" });
  await initialized;
  await bridge.sendToolResult(result);
  view.bridge = bridge;
  view.iframe = iframe;
  return view.index;
}

async function teardown(index) {
  await views[index].bridge.teardownResource({});
  views[index].torn = true;
}

function counts(index) {
  const v = views[index];
  return { syncs: v.syncs, actions: v.actions, sizes: v.sizes.length, torn: v.torn };
}

window.lineupHost = { open, teardown, counts, rpc, views };
document.documentElement.dataset.ready = "1";
