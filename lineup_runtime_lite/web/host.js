// The dev Host page: conversations and instances, the selected Surface in a sandboxed frame
// on the Surface origin, the Host panel, the Agent console and the live timeline. Every
// request carries the Host token as its HttpOnly cookie (set from /?token= once).

const $ = (id) => document.getElementById(id);
const state = {
  conversation: null, instance: null, next: 0, tools: [], toolsKey: "", build: 0,
  sessions: [], watch: null, // the console's latest call: its call_id, then its messages
  latest: new Map(), // call_id -> its latest timeline entry (the last 500 calls)
};

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
    button(`${i.scope} · ${stateWords(i)} · ${i.version}`, "lineup-instance", i.instance === state.instance,
      () => { if (i.instance !== state.instance) select(i.instance); },
      { instance: i.instance, state: i.state })));
  state.sessions = conversations.flatMap((c) => c.instances);
  for (const b of document.querySelectorAll(".panel button")) b.disabled = !state.instance;
  renderInstanceState();
  if (!state.instance) renderEmpty();
}

function stateWords(session) {
  if (session.state === "starting" && session.waiting_for === "foreground") return "waiting for foreground";
  return session.state || "not started";
}

// What the selected instance is doing, and what to do about it.
const STATE_HELP = {
  foreground: ["waiting", "Waiting for foreground: the call runs once the user sees the app. "
    + "Press Confirm foreground (as the Host would), or Decline."],
  worker: ["starting", "Starting: its worker is loading the app's code."],
  ready: ["ready", "Ready: calls run now; the Surface shows the session's data."],
  failed: ["failed", "Failed: this instance did not start (the timeline says why). "
    + "Call a tool to start a new instance."],
  cancelled: ["failed", "Cancelled: the start was declined or the user left. "
    + "Call a tool to start a new instance."],
};

function renderInstanceState() {
  const box = $("instance-state");
  const session = state.sessions.find((s) => s.instance && s.instance === state.instance);
  if (!session) {
    box.textContent = "";
    delete box.dataset.state;
    return;
  }
  const key = session.state === "starting" ? (session.waiting_for || "worker") : session.state;
  const [kind, words] = STATE_HELP[key] || [session.state, session.state];
  box.dataset.state = kind;
  box.textContent = words;
  $("frame-box").classList.toggle("waiting", kind === "waiting");
}

function renderEmpty() {
  if ($("frame-box").querySelector("[data-testid=lineup-empty]")) return;
  const first = state.tools.length ? state.tools[0].method : "a tool";
  const empty = document.createElement("div");
  empty.className = "empty";
  empty.dataset.testid = "lineup-empty";
  const title = document.createElement("strong");
  title.textContent = "Nothing running yet.";
  const steps = document.createElement("ol");
  for (const text of [
    `In the Agent console, pick ${first} and fill its params (the form or the JSON).`,
    "Press Call: the app starts in conversation \"dev\" and its Surface shows here.",
    "Watch each step in the timeline; edit your code and save to rebuild.",
  ]) {
    const li = document.createElement("li");
    li.textContent = text;
    steps.append(li);
  }
  empty.append(title, steps);
  $("frame-box").replaceChildren(empty);
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

// The form holds the top-level scalar fields; the JSON holds everything. They stay in step
// both ways for those fields; anything else (objects, arrays, a value of another type) is
// edited in the JSON, which wins, and the page says so.
function renderForm() {
  const tool = state.tools.find((t) => t.method === $("tool").value);
  const schema = (tool && tool.input_schema) || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  $("tool-description").textContent = (tool && tool.description) || "";
  const fields = Object.entries(props).filter(([, s]) => SCALARS.includes(s.type));
  $("form").replaceChildren(...fields.map(([name, field]) => {
    const label = document.createElement("label");
    label.textContent = `${name} (${field.type}${required.has(name) ? ", required" : ""})`;
    const input = document.createElement("input");
    input.dataset.testid = `lineup-console-param-${name}`;
    input.dataset.name = name;
    input.dataset.type = field.type;
    if (field.type === "boolean") input.type = "checkbox";
    else if (field.type !== "string") input.type = "number";
    input.oninput = input.onchange = formToJson;
    label.append(input);
    return label;
  }));
  const others = Object.entries(props).filter(([, s]) => !SCALARS.includes(s.type));
  const note = $("json-only");
  note.hidden = others.length === 0;
  note.textContent = others.length
    ? `Edit in the JSON: ${others.map(([n, s]) => `${n} (${s.type || "value"})`).join(", ")}. The JSON wins for them.`
    : "";
  $("params").value = "{}";
  jsonToForm();
}

function readParams() {
  const box = $("params-error");
  try {
    const params = JSON.parse($("params").value || "{}");
    if (params === null || typeof params !== "object" || Array.isArray(params)) {
      throw new Error("params must be a JSON object");
    }
    box.hidden = true;
    return params;
  } catch (err) {
    box.hidden = false;
    box.textContent = `The JSON is not valid (${err.message}): the form waits until it is; the call sends the JSON.`;
    return null;
  }
}

function formToJson() {
  const params = readParams();
  if (params === null) return; // never overwrite what the author is typing
  for (const input of $("form").querySelectorAll("input")) {
    const { name, type } = input.dataset;
    if (input.dataset.jsonWins === "true" && !input.matches(":focus")) continue;
    if (type === "boolean") params[name] = input.checked;
    else if (input.value === "") delete params[name];
    else if (type === "integer" || type === "number") params[name] = Number(input.value);
    else params[name] = input.value;
    delete input.dataset.jsonWins;
  }
  $("params").value = JSON.stringify(params, null, 1);
}

function jsonToForm() {
  const params = readParams();
  for (const input of $("form").querySelectorAll("input")) {
    input.disabled = params === null;
    if (params === null) continue;
    const { name, type } = input.dataset;
    const value = params[name];
    const fits = value === undefined
      || (type === "boolean" ? typeof value === "boolean"
        : type === "string" ? typeof value === "string" : typeof value === "number");
    input.dataset.jsonWins = fits ? "false" : "true";
    input.title = fits ? "" : `set in the JSON: ${JSON.stringify(value)}`;
    if (!fits) {
      if (type !== "boolean") input.value = "";
      continue;
    }
    if (type === "boolean") input.checked = value === true;
    else input.value = value === undefined ? "" : String(value);
  }
}

function span(cls, text) {
  const el = document.createElement("span");
  el.className = cls;
  el.textContent = text;
  return el;
}

function short(value) {
  const text = JSON.stringify(value);
  return text.length > 400 ? `${text.slice(0, 397)}...` : text;
}

const FINAL = new Set(["result", "error"]);

// One timeline entry as labelled parts: when, who (origin), what, and the detail.
function entryParts(entry) {
  const at = (entry.at || "").slice(11, 23);
  if (entry.source === "agent") {
    const who = entry.method ? `${entry.call_id} ${entry.method}` : entry.call_id;
    let stage = entry.stage;
    let detail = "";
    if (entry.rejected) stage = "rejected";
    if (entry.error) {
      detail = `${entry.error.code}: ${entry.error.message}`;
      const problems = Array.isArray(entry.error.details) ? entry.error.details : [];
      const where = problems.filter((p) => p && p.path !== undefined)
        .map((p) => `${p.path || "/"} ${p.message}`);
      if (where.length) detail += ` (${where.join("; ")})`;
      if (entry.rejected) detail += " — refused before it was accepted; nothing ran";
    } else if (entry.result !== undefined) detail = short(entry.result);
    else if (entry.activation) detail = `activation ${entry.activation}`;
    else if (entry.reason) detail = `reason ${entry.reason}`;
    if (entry.ends_at) detail += ` ends ${entry.ends_at}`;
    const build = entry.build ? `build ${entry.build}${entry.last_good ? " (last good)" : ""}` : "";
    return [at, who, stage, detail, FINAL.has(entry.stage) ? build : ""];
  }
  if (entry.source === "ui") {
    const what = entry.error ? `${entry.error.code}: ${entry.error.message}`
      : `${short(entry.result)} (revision ${entry.revision})`;
    return [at, `${entry.name} ${entry.action_id || ""}`.trim(),
      entry.action_id ? entry.stage : "rejected", what, ""];
  }
  if (entry.source === "host") {
    const loading = entry.event === "surface_loaded" || entry.event === "preload";
    const applied = entry.applied ? "applied"
      : loading ? "noted: a loaded Surface is not the user seeing it (only Confirm foreground is)"
      : "ignored: no start of this instance was waiting for it (it is ready, failed, or not the latest)";
    return [at, entry.instance, entry.event, applied, ""];
  }
  if (entry.source === "runtime") {
    return [at, "runtime", entry.event, `${entry.moved_sessions || 0} session(s)`, ""];
  }
  if (entry.source === "build") {
    if (entry.action === "failed") {
      const first = (entry.problems || [])[0];
      const where = first && first.file ? `${first.file}${first.line ? `:${first.line}` : ""} ` : "";
      const said = first ? first.message.split("\n").pop() : entry.message;
      return [at, "build", "failed", `${where}${said} (${entry.code}); build ${entry.running} keeps running`, ""];
    }
    return [at, `build ${entry.build || ""}`.trim(), entry.action,
      `${entry.version}; ${entry.moved_sessions} session(s) moved`, ""];
  }
  return [at, entry.source, "", short(entry), ""];
}

function renderTimeline(entries) {
  const list = $("timeline");
  for (const entry of entries) {
    const li = document.createElement("li");
    li.dataset.source = entry.source;
    li.dataset.origin = entry.origin || entry.source; // agent, ui, host, runtime, build
    if (entry.stage) li.dataset.stage = entry.stage;
    if (entry.rejected) li.dataset.rejected = "true";
    if (entry.source === "host") li.dataset.applied = String(Boolean(entry.applied));
    if (entry.source === "build") li.dataset.action = entry.action;
    const [at, who, what, detail, build] = entryParts(entry);
    const parts = [span("at", at), span("origin", li.dataset.origin), span("who", who || ""),
      span("what", what || ""), span("detail", detail || "")];
    if (build) parts.push(span("build", build));
    for (const part of parts) li.append(part, " "); // copied text keeps its words apart
    list.append(li);
    if (entry.source === "agent" && entry.call_id) {
      state.latest.delete(entry.call_id);
      state.latest.set(entry.call_id, entry);
      if (state.latest.size > 500) state.latest.delete(state.latest.keys().next().value);
    }
    if (state.watch && entry.call_id === state.watch.call_id) showAnswer(entry);
  }
  if (entries.length) list.scrollTop = list.scrollHeight;
}

// The console's answer box: the call's latest message, then its final.
function showAnswer(message, fromTimeline = true) {
  const head = $("answer-head");
  const final = FINAL.has(message.stage) || Boolean(message.rejected);
  head.dataset.final = String(final);
  head.dataset.stage = message.rejected ? "rejected" : message.stage;
  const build = message.build ? ` · answered by build ${message.build}${message.last_good ? " (the last good one)" : ""}` : "";
  head.textContent = final
    ? `${message.call_id}: final ${message.stage}${build}`
    : `${message.call_id}: ${message.stage} (latest; the final follows)`;
  const shown = { ...message };
  for (const key of ["source", "origin", "build", "last_good", "method", "rejected", "conversation_id"]) delete shown[key];
  $("answer").textContent = JSON.stringify(shown, null, 2);
  if (final && fromTimeline) state.watch = null; // the timeline's copy names its build
}

function renderBuild(s) {
  const failure = s.build_failure;
  const label = $("build");
  label.dataset.build = s.build;
  label.dataset.lastGood = String(Boolean(failure));
  label.textContent = `build ${s.build}${failure ? " (last good)" : ""} · ${s.version} · host ${s.policy}`;
  const box = $("build-failure");
  box.hidden = !failure;
  if (!failure) {
    box.replaceChildren();
    return;
  }
  const title = document.createElement("strong");
  title.textContent = `The latest build failed (${failure.code}). Calls still run build ${failure.running}, the last good one. Fix it and save: it rebuilds.`;
  const items = (failure.problems.length ? failure.problems : [{ message: failure.message }]).map((p) => {
    const li = document.createElement("li");
    li.dataset.testid = "lineup-build-problem";
    const where = p.file ? `${p.file}${p.line ? `:${p.line}` : ""}` : "";
    if (where) li.append(span("where", where), " ");
    li.append(span("message", p.message));
    return li;
  });
  const list = document.createElement("ul");
  list.append(...items);
  box.replaceChildren(title, list);
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const s = await api(`/_lineup/api/state?since=${state.next}`);
    state.next = s.timeline_next;
    renderBuild(s);
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
$("params").oninput = jsonToForm;
$("call").onclick = async () => {
  const params = readParams();
  if (params === null) return;
  const conversation = $("conversation").value || "dev";
  state.conversation = conversation;
  $("answer-head").textContent = "sending…";
  $("answer").textContent = "";
  const answer = await api("/_lineup/api/call", { conversation, method: $("tool").value, params });
  if (answer.call_id) {
    state.watch = { call_id: answer.call_id };
    const known = state.latest.get(answer.call_id); // the timeline may be ahead
    if (known) showAnswer(known);
    else showAnswer(answer, false);
  } else {
    $("answer-head").textContent = "refused";
    $("answer").textContent = JSON.stringify(answer, null, 2);
  }
  refresh();
};

refresh();
setInterval(refresh, 300);
