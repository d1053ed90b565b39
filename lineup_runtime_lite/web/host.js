// The dev Host page: conversations and instances, the selected Surface in a sandboxed frame
// on the Surface origin, the Host panel, the Agent console and the live timeline. Every
// request carries the Host token as its HttpOnly cookie (set from /?token= once).

const $ = (id) => document.getElementById(id);
const state = { conversation: null, instance: null, next: 0, tools: [], toolsKey: "", build: 0 };

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, { credentials: "same-origin", ...init });
  return response.json();
}

function button(text, testid, selected, onclick, attrs = {}) {
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.textContent = text;
  b.dataset.testid = testid;
  for (const [k, v] of Object.entries(attrs)) b.dataset[k] = v;
  if (selected) b.classList.add("selected");
  b.onclick = onclick;
  li.append(b);
  return li;
}

function renderConversations(conversations) {
  if (!state.conversation && conversations.length) state.conversation = conversations[0].conversation_id;
  $("conversations").replaceChildren(...conversations.map((c) =>
    button(c.conversation_id, "lineup-conversation", c.conversation_id === state.conversation,
      () => {
        if (state.conversation === c.conversation_id) return;
        state.conversation = c.conversation_id;
        state.instance = null;
        refresh();
      },
      { conversation: c.conversation_id })));
  const current = conversations.find((c) => c.conversation_id === state.conversation);
  const instances = current ? current.instances.filter((i) => i.instance) : [];
  if (instances.length && !instances.some((i) => i.instance === state.instance)) {
    select(instances[instances.length - 1].instance);
  }
  $("instances").replaceChildren(...instances.map((i) =>
    button(`${i.scope} · ${i.state} · ${i.version}`, "lineup-instance", i.instance === state.instance,
      () => { if (i.instance !== state.instance) select(i.instance); },
      { instance: i.instance, state: i.state })));
  for (const b of document.querySelectorAll(".panel button")) b.disabled = !state.instance;
}

async function select(instance) {
  state.instance = instance;
  const { url } = await api(`/_lineup/api/surface?instance=${encodeURIComponent(instance)}`);
  showFrame(url);
}

function showFrame(url) {
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.dataset.testid = "lineup-surface-frame";
  frame.dataset.instance = state.instance;
  frame.name = "lineup-surface";
  frame.src = url;
  $("frame-box").replaceChildren(frame);
  $("surface-title").textContent = state.instance;
}

function renderTools(inventory) {
  const key = inventory.map((t) => t.method).join(",");
  if (key === state.toolsKey) return;
  state.toolsKey = key;
  state.tools = inventory;
  const select = $("tool");
  const before = select.value;
  select.replaceChildren(...inventory.map((t) => {
    const o = document.createElement("option");
    o.value = o.textContent = t.method;
    return o;
  }));
  if (inventory.some((t) => t.method === before)) select.value = before;
  renderForm();
}

const SCALARS = ["string", "integer", "number", "boolean"];

function renderForm() {
  const tool = state.tools.find((t) => t.method === $("tool").value);
  const props = (tool && tool.input_schema && tool.input_schema.properties) || {};
  const fields = Object.entries(props).filter(([, s]) => SCALARS.includes(s.type));
  $("form").replaceChildren(...fields.map(([name, schema]) => {
    const label = document.createElement("label");
    label.textContent = `${name} (${schema.type})`;
    const input = document.createElement("input");
    input.dataset.testid = `lineup-console-param-${name}`;
    input.dataset.name = name;
    input.dataset.type = schema.type;
    if (schema.type === "boolean") input.type = "checkbox";
    input.oninput = input.onchange = syncParams;
    label.append(input);
    return label;
  }));
  $("params").value = "{}";
}

function syncParams() {
  let params = {};
  try { params = JSON.parse($("params").value || "{}"); } catch { params = {}; }
  for (const input of $("form").querySelectorAll("input")) {
    const { name, type } = input.dataset;
    if (type === "boolean") params[name] = input.checked;
    else if (input.value === "") delete params[name];
    else if (type === "integer" || type === "number") params[name] = Number(input.value);
    else params[name] = input.value;
  }
  $("params").value = JSON.stringify(params);
}

function describe(entry) {
  if (entry.source === "agent") {
    const what = entry.error ? `${entry.error.code}: ${entry.error.message}`
      : entry.result !== undefined ? JSON.stringify(entry.result)
      : entry.activation || entry.reason || "";
    return `${entry.at} ${entry.call_id} ${entry.stage} ${what}`;
  }
  if (entry.source === "ui") {
    const what = entry.error ? `${entry.error.code}: ${entry.error.message}`
      : `${JSON.stringify(entry.result)} (revision ${entry.revision})`;
    return `ui ${entry.name} ${entry.action_id || "(rejected)"} ${what}`;
  }
  if (entry.source === "runtime") return `runtime ${entry.event} ${entry.moved_sessions || ""}`;
  if (entry.source === "host") return `host ${entry.event} ${entry.instance}${entry.applied ? "" : " (ignored)"}`;
  if (entry.source === "build") return `build ${entry.action} ${entry.version || entry.code || ""}`;
  return JSON.stringify(entry);
}

function renderTimeline(entries) {
  const list = $("timeline");
  for (const entry of entries) {
    const li = document.createElement("li");
    li.dataset.source = entry.source;
    li.dataset.origin = entry.origin || entry.source; // agent, ui, host, runtime, build
    if (entry.stage) li.dataset.stage = entry.stage;
    li.textContent = describe(entry);
    list.append(li);
  }
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const s = await api(`/_lineup/api/state?since=${state.next}`);
    state.next = s.timeline_next;
    $("build").textContent = `build ${s.build} · host ${s.policy}`;
    renderTools(s.inventory);
    renderConversations(s.conversations);
    renderTimeline(s.timeline);
  } finally {
    busy = false;
  }
}

for (const b of document.querySelectorAll(".panel button")) {
  b.onclick = async () => {
    if (!state.instance) return;
    if (b.dataset.button === "close") {
      $("frame-box").replaceChildren();
      return;
    }
    await api("/_lineup/api/host", { button: b.dataset.button, instance: state.instance });
    refresh();
  };
}

$("tool").onchange = renderForm;
$("call").onclick = async () => {
  let params;
  try { params = JSON.parse($("params").value || "{}"); } catch (err) {
    $("answer").textContent = `params are not JSON: ${err.message}`;
    return;
  }
  const conversation = $("conversation").value || "dev";
  state.conversation = conversation;
  $("answer").textContent = "…";
  const answer = await api("/_lineup/api/call", { conversation, method: $("tool").value, params });
  $("answer").textContent = JSON.stringify(answer, null, 2);
  refresh();
};

refresh();
setInterval(refresh, 300);
