// LineUp Surface SDK (SPEC 14): one dependency-free ES module, served by the dev Host on the
// Surface origin at /_lineup/sdk.js. A Surface imports it as
//   import { sdk } from "/_lineup/sdk.js";
// Its bridge is a WebSocket to /_lineup/bridge on the Surface origin, authenticated by the
// per-instance Surface token alone (a sandboxed frame's Origin is `null`). Frames on the
// bridge are the runtime's Surface frames: session_data.snapshot / session_data.changed,
// each {revision, data}. A UI Action (`act`) is answered twice: `{accepted: seq}` once the
// runtime persisted it (or an error: rejected before acceptance), then its outcome.
//
// Inside an MCP Apps host (a frame with no Surface token in its URL, SPEC 18.2) the same API
// runs on a second transport, `McpAppsBridge`: the View side of the extension
// io.modelcontextprotocol/ui, JSON-RPC over postMessage to the host, which forwards
// `tools/call` of the app-only tools lineup-surface-sync and lineup-ui-action to
// `lineup serve`.

/** An error of the LineUp toolchain: the same stable `code`s as the runtime. */
export class LineupError extends Error {
  constructor(code, message, hint, details) {
    super(message);
    this.name = "LineupError";
    this.code = code;
    if (hint) this.hint = hint;
    if (details !== undefined) this.details = details;
  }
}

function errorOf(error) {
  return new LineupError(error.code, error.message, error.hint, error.details);
}

const MAX_BACKOFF_MS = 5000;

function surfaceToken() {
  // The Host frames a Surface at /s/<token>/...; the token never leaves this origin.
  const match = /^\/s\/([A-Za-z0-9_-]+)\//.exec(location.pathname);
  return match ? match[1] : null;
}

function noTransport() {
  return new LineupError(
    "usage_invalid",
    "this page is not a Surface the LineUp dev Host framed (no Surface token in its URL)",
    "open the MiniApp through `lineup dev`",
  );
}

// Under `lineup dev` (a Surface token in the URL) the SDK connects at import, so `sdk.app`
// is available then (SPEC 14); anywhere else evaluating it does nothing: the transport is
// looked up on first use (SPEC 18.2).
const token = surfaceToken();
// This page load: the Host counts `ready` once per load (a repeat is ignored; a reload is
// a new load).
const PAGE_LOAD = Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) =>
  b.toString(16).padStart(2, "0"),
).join("");
// (an MCP Apps host renders the document from `srcdoc`, whose URL has no base to resolve)
const base = token === null ? null : new URL("/", import.meta.url);

async function fetchApp() {
  const url = new URL("/_lineup/app", base);
  url.searchParams.set("token", token);
  const response = await fetch(url, { credentials: "omit" });
  const body = await response.json();
  if (!response.ok) {
    throw new LineupError(body.code || "usage_invalid", body.message || "refused", body.hint);
  }
  return body;
}

const appInfo = token === null ? null : Object.freeze(await fetchApp());

/** The bridge: one WebSocket, requests by id, subscriptions by id; reconnects with backoff. */
class Bridge {
  constructor() {
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, message}
    this.subs = new Map(); // bridge subscription id -> handler(frame)
    this.onReconnect = new Set();
    this.onOpen = new Set(); // every open, the first one too
    this.acts = new Map(); // id -> handler(msg) of a request answered more than once
    this.onReload = null;
    this.socket = null;
    this.open = false;
    this.everOpened = false;
    this.delay = 100;
    this.connect();
  }

  connect() {
    if (token === null) throw noTransport();
    const url = new URL("/_lineup/bridge", base);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("token", token);
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.onopen = () => {
      this.open = true;
      this.delay = 100;
      for (const [, req] of this.pending) socket.send(JSON.stringify(req.message));
      this.acts.clear(); // answers of the last connection never come: the owners resend
      for (const fn of this.onOpen) fn();
      if (this.everOpened) for (const fn of this.onReconnect) fn();
      this.everOpened = true;
    };
    socket.onmessage = (event) => this.receive(JSON.parse(event.data));
    socket.onclose = () => {
      this.open = false; // the server dropped this connection's subscriptions with it
      const wait = this.delay;
      this.delay = Math.min(this.delay * 2, MAX_BACKOFF_MS);
      setTimeout(() => this.connect(), wait);
    };
  }

  receive(msg) {
    if (msg.type === "reload") {
      if (this.onReload) this.onReload();
      else location.reload();
      return;
    }
    if (msg.sub !== undefined) {
      const handler = this.subs.get(msg.sub);
      if (handler) handler(msg);
      return;
    }
    const act = this.acts.get(msg.id);
    if (act) {
      act(msg);
      return;
    }
    const req = this.pending.get(msg.id);
    if (!req) return;
    this.pending.delete(msg.id);
    if (msg.error) req.reject(errorOf(msg.error));
    else req.resolve(msg.result);
  }

  /** Send a message whose answers (several) go to `handler`; false when not connected. */
  sendMany(op, args, handler) {
    if (!this.open) return false;
    const id = this.nextId++;
    this.acts.set(id, handler);
    this.socket.send(JSON.stringify({ id, op, ...args }));
    return true;
  }

  forget(handler) {
    for (const [id, fn] of this.acts) if (fn === handler) this.acts.delete(id);
  }

  request(op, args = {}) {
    const id = this.nextId++;
    const message = { id, op, ...args };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, message });
      if (this.open) this.socket.send(JSON.stringify(message));
    });
  }

  async subscribe(what, handler) {
    const id = this.nextId++;
    this.subs.set(id, handler); // frames may arrive before the answer
    try {
      await this.requestWithId(id, "subscribe", { what });
    } catch (err) {
      this.subs.delete(id);
      throw err;
    }
    return id;
  }

  requestWithId(id, op, args) {
    const message = { id, op, ...args };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, message });
      if (this.open) this.socket.send(JSON.stringify(message));
    });
  }

  unsubscribe(id) {
    this.subs.delete(id);
    if (this.open) this.socket.send(JSON.stringify({ id: this.nextId++, op: "unsubscribe", sub: id }));
  }
}

/** The View's protocol revision of MCP Apps, and this SDK's version (for `appInfo`). */
const MCP_APPS_PROTOCOL = "2026-01-26";
const SDK_VERSION = "0.3.0";
const SURFACE_META = "io.lineup/surface";
/** The longest a sync is held by the server (it clamps wait_s to this). */
const SYNC_WAIT_S = 25;
/** UI Action codes answered before acceptance (SPEC 17): no seq was used. */
const BEFORE_ACCEPTANCE = new Set([
  "unknown_action",
  "invalid_params",
  "app_not_running",
  "action_out_of_order",
  "action_id_conflict",
  "view_invalid",
]);

function inMcpAppsHost() {
  return token === null && typeof window !== "undefined" && window.parent !== window;
}

/**
 * The View side of MCP Apps, with the interface of `Bridge` so every rule above it (the
 * shared channels, TIS2-04, one UI Action at a time) holds on both transports:
 * `ui/initialize` then `ui/notifications/initialized`; the view, first revision and version
 * from the tool result's `_meta`; `get` = a sync with after_revision -1; every subscription
 * (session data and operations) rides one long-poll loop, paused while `document.hidden`
 * and stopped at `ui/resource-teardown`; an action = `tools/call lineup-ui-action`;
 * `ui/notifications/size-changed` when the page's size changes.
 */
class McpAppsBridge {
  constructor() {
    this.nextId = 1;
    this.calls = new Map(); // JSON-RPC id -> {resolve, reject}
    this.subs = new Map(); // subscription id -> {what, handler}
    this.onReconnect = new Set(); // never fired: postMessage does not reconnect
    this.onOpen = new Set();
    this.open = true;
    this.view = null;
    this.info = null; // {scope, version, revision} from the first tool result
    this.torn = false;
    this.polling = false;
    this.revision = -1; // the newest revision delivered
    this.opsVersion = undefined; // the newest operations_version delivered
    this.data = null;
    this.operations = null;
    this.warned = false;
    this.waiters = []; // resolve() of everyone awaiting the first tool result
    this.wake = null; // resolves a paused loop
    this.stats = { syncs: 0 }; // read by tests
    window.addEventListener("message", (event) => this.receive(event));
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && this.wake) this.wake();
    });
    this.handshake = this.post("ui/initialize", {
      appInfo: { name: "lineup-surface", version: SDK_VERSION },
      appCapabilities: {},
      protocolVersion: MCP_APPS_PROTOCOL,
    }).then((result) => {
      this.notify("ui/notifications/initialized", {});
      this.watchSize();
      return result;
    });
  }

  send(message) {
    window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*");
  }

  post(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.send({ id, method, params });
    });
  }

  notify(method, params) {
    this.send({ method, params });
  }

  receive(event) {
    if (event.source !== window.parent) return;
    const msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.method === undefined) {
      const call = this.calls.get(msg.id);
      if (!call) return;
      this.calls.delete(msg.id);
      if (msg.error) call.reject(new LineupError("usage_invalid", msg.error.message || "refused"));
      else call.resolve(msg.result);
      return;
    }
    if (msg.method === "ui/notifications/tool-result") this.toolResult(msg.params || {});
    else if (msg.method === "ui/resource-teardown") {
      this.teardown();
      this.send({ id: msg.id, result: {} });
    } else if (msg.id !== undefined) {
      this.send({ id: msg.id, result: {} }); // ping and requests this View has nothing for
    }
  }

  toolResult(result) {
    const meta = (result._meta || {})[SURFACE_META];
    if (!meta || typeof meta.view !== "string") return; // a call that reached no App session
    this.view = meta.view;
    if (this.info === null) {
      this.info = Object.freeze({ scope: meta.scope ?? null, version: meta.version, revision: meta.revision });
      for (const resolve of this.waiters.splice(0)) resolve(this.info);
    }
    if (this.subs.size > 0) this.poll();
  }

  ready() {
    if (this.info !== null) return Promise.resolve(this.info);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  teardown() {
    this.torn = true;
    if (this.wake) this.wake();
  }

  watchSize() {
    if (typeof ResizeObserver === "undefined") return;
    let last = "";
    const observer = new ResizeObserver(() => {
      const el = document.documentElement;
      const size = { width: Math.ceil(el.scrollWidth), height: Math.ceil(el.scrollHeight) };
      const key = `${size.width}x${size.height}`;
      if (key === last || this.torn) return;
      last = key;
      this.notify("ui/notifications/size-changed", size);
    });
    observer.observe(document.documentElement);
  }

  async tool(name, args) {
    await this.handshake;
    if (this.view === null) await this.ready();
    if (this.torn) throw new LineupError("usage_invalid", "the host tore this View down");
    const result = await this.post("tools/call", {
      name,
      arguments: { view: this.view, protocol: 1, ...args },
    });
    const meta = (result && result._meta) || {};
    if (meta[SURFACE_META] && typeof meta[SURFACE_META].view === "string") {
      this.view = meta[SURFACE_META].view; // refreshed by every answer
    }
    if (result && result.isError) {
      const error = meta["io.lineup/error"] || { code: "usage_invalid", message: "refused" };
      throw errorOf(error);
    }
    return result.structuredContent;
  }

  sync(after, wait) {
    this.stats.syncs += 1;
    const args = { after_revision: after, wait_s: wait };
    if (this.opsVersion !== undefined && after >= 0) args.after_operations = this.opsVersion;
    return this.tool("lineup-surface-sync", args);
  }

  versionCheck(body) {
    if (this.warned || !body.served_version || body.version === body.served_version) return;
    this.warned = true;
    const text =
      `This conversation's ${this.info?.scope ?? "app"} session is pinned to version ` +
      `${body.version}; this View is version ${body.served_version}. What it shows may differ.`;
    console.warn(text);
    const banner = document.createElement("div");
    banner.setAttribute("data-lineup-version-warning", "");
    banner.setAttribute("role", "status");
    banner.textContent = text;
    banner.style.cssText = "padding:4px 8px;background:#fff3cd;color:#664d03;font:12px sans-serif";
    document.body.prepend(banner);
  }

  deliver(body) {
    if (body.status !== "changed") return;
    this.versionCheck(body);
    if (body.revision > this.revision) {
      this.revision = body.revision;
      this.data = body.data;
      const frame = { frame: "session_data.snapshot", revision: body.revision, data: body.data };
      for (const sub of [...this.subs.values()]) if (sub.what === "session_data") sub.handler(frame);
    }
    if (body.operations_version !== this.opsVersion) {
      this.opsVersion = body.operations_version;
      this.operations = body.operations;
      for (const sub of [...this.subs.values()]) {
        if (sub.what === "operations") sub.handler({ operations: body.operations });
      }
    }
  }

  /** The one long-poll loop: runs while anyone subscribes, the View is shown and alive. */
  async poll() {
    if (this.polling || this.view === null) return;
    this.polling = true;
    try {
      let first = this.revision < 0;
      while (this.subs.size > 0 && !this.torn) {
        if (document.hidden) {
          await new Promise((resolve) => (this.wake = resolve));
          this.wake = null;
          continue;
        }
        try {
          this.deliver(await this.sync(first ? -1 : this.revision, first ? 0 : SYNC_WAIT_S));
          first = false;
        } catch (err) {
          console.error("lineup-surface-sync failed", err);
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    } finally {
      this.polling = false;
    }
  }

  async request(op, args = {}) {
    if (op === "ready") return undefined; // no Host event travels over MCP (SPEC 10)
    if (op !== "get") throw new LineupError("usage_invalid", `${op} is not available in an MCP Apps host`);
    const body = await this.sync(-1, 0);
    this.versionCheck(body);
    if (args.what === "operations") return { operations: body.operations };
    return { revision: body.revision, data: body.data };
  }

  async subscribe(what, handler) {
    const id = this.nextId++;
    this.subs.set(id, { what, handler });
    // a later subscriber of a kind gets what the loop already has
    if (what === "session_data" && this.revision >= 0) {
      handler({ frame: "session_data.snapshot", revision: this.revision, data: this.data });
    } else if (what === "operations" && this.operations !== null) {
      handler({ operations: this.operations });
    }
    void this.handshake.then(() => this.poll());
    return id;
  }

  unsubscribe(id) {
    this.subs.delete(id);
  }

  sendMany(op, args, handler) {
    if (op !== "act") return false;
    const { name, params, client, seq } = args;
    this.tool("lineup-ui-action", { client_id: client, seq, name, params }).then(
      (outcome) => {
        handler({ accepted: seq });
        handler({ outcome });
      },
      (error) => {
        if (!BEFORE_ACCEPTANCE.has(error.code)) handler({ accepted: seq });
        handler({ error: { code: error.code, message: error.message, hint: error.hint, details: error.details } });
      },
    );
    return true;
  }

  forget() {}
}

let bridgeInstance = null;
// The one bridge, opened on first use (at once under `lineup dev`): the dev Host's
// WebSocket, or the View side of MCP Apps in a host's frame.
const bridge = new Proxy(
  {},
  {
    get(_, name) {
      bridgeInstance ??= inMcpAppsHost() ? new McpAppsBridge() : new Bridge();
      const value = bridgeInstance[name];
      return typeof value === "function" ? value.bind(bridgeInstance) : value;
    },
    set(_, name, value) {
      bridgeInstance ??= inMcpAppsHost() ? new McpAppsBridge() : new Bridge();
      bridgeInstance[name] = value;
      return true;
    },
  },
);
if (token !== null) void bridge.open;

function snapshotOf(result) {
  return Object.freeze({ revision: result.revision, data: result.data });
}

/**
 * One bridge subscription of a kind ("session_data" or "operations"), shared by every
 * listener of that kind: the server allows few subscriptions per bridge (SPEC 16.3), so
 * many listeners never meet its cap. Starts with the first listener, ends with the last,
 * resubscribes after a bridge reconnect.
 */
class Channel {
  constructor(what, onFrame) {
    this.what = what;
    this.onFrame = onFrame; // (frame) -> void, for the channel's own rules
    this.listeners = new Set();
    this.bridgeId = null;
    this.starting = null;
    this.hooked = false; // the reconnect hook, set on first use (no bridge before)
  }

  add(listener) {
    this.listeners.add(listener);
    this.ensure();
  }

  remove(listener) {
    this.listeners.delete(listener);
    if (this.listeners.size === 0) this.drop();
  }

  ensure() {
    if (this.bridgeId !== null || this.starting || this.listeners.size === 0) return this.starting;
    if (!this.hooked) {
      bridge.onReconnect.add(() => this.restart());
      this.hooked = true;
    }
    this.starting = bridge.subscribe(this.what, (frame) => this.onFrame(frame)).then(
      (id) => {
        this.starting = null;
        this.bridgeId = id;
        if (this.listeners.size === 0) this.drop();
      },
      (err) => {
        this.starting = null;
        console.error(`${this.what} subscribe failed`, err);
      },
    );
    return this.starting;
  }

  drop() {
    if (this.bridgeId !== null) bridge.unsubscribe(this.bridgeId);
    this.bridgeId = null;
  }

  restart() {
    this.bridgeId = null; // the server dropped it with the connection
    return this.ensure();
  }
}

/** One session-data listener: the current snapshot first, then increasing revisions. */
class Listener {
  constructor(fn) {
    this.fn = fn;
    this.last = -1; // nothing delivered yet: the first snapshot goes through, revision 0 too
    this.active = true;
  }

  deliver(frame, kind) {
    if (!this.active || frame.revision <= this.last) return; // a duplicate or older revision
    this.last = frame.revision;
    try {
      this.fn(snapshotOf(frame), { frame: kind });
    } catch (err) {
      console.error("a session-data listener failed", err);
    }
  }
}

/**
 * The TIS2-04 client rules, once for all session-data listeners: a duplicate or older
 * revision is ignored; on a revision gap the bridge subscription is dropped, the data got
 * again and the subscription made again. A listener that joins gets the newest snapshot.
 */
const sessionData = new (class {
  constructor() {
    this.current = null; // the newest {revision, data} seen
    this.resyncing = null;
    this.channel = new Channel("session_data", (frame) => this.onFrame(frame));
  }

  onFrame(frame) {
    if (this.resyncing) return;
    const kind = frame.frame;
    const last = this.current ? this.current.revision : -1;
    if (kind === "session_data.changed" && last >= 0 && frame.revision > last + 1) {
      this.resync(); // a revision gap: drop, get again, resubscribe
      return;
    }
    this.accept(frame, kind);
  }

  accept(frame, kind) {
    if (this.current && frame.revision <= this.current.revision) return;
    this.current = { revision: frame.revision, data: frame.data };
    for (const listener of this.channel.listeners) listener.deliver(frame, kind);
  }

  resync() {
    if (this.resyncing) return this.resyncing;
    this.resyncing = (async () => {
      this.channel.drop();
      try {
        const got = await bridge.request("get", { what: "session_data" });
        this.resyncing = null;
        this.accept(got, "session_data.snapshot");
      } finally {
        this.resyncing = null;
      }
      await this.channel.ensure();
    })().catch((err) => console.error("session-data resubscribe failed", err));
    return this.resyncing;
  }

  subscribe(fn) {
    const listener = new Listener(fn);
    if (this.current) listener.deliver(this.current, "session_data.snapshot");
    this.channel.add(listener);
    return () => {
      listener.active = false;
      this.channel.remove(listener);
      if (this.channel.listeners.size === 0) this.current = null; // a later one starts afresh
    };
  }
})();

const operations = new (class {
  constructor() {
    this.current = null;
    this.channel = new Channel("operations", (frame) => {
      this.current = frame.operations;
      for (const fn of this.channel.listeners) this.call(fn, frame.operations);
    });
  }

  call(fn, ops) {
    try {
      fn(ops);
    } catch (err) {
      console.error("an operations listener failed", err);
    }
  }

  subscribe(fn) {
    const own = (ops) => fn(ops); // one entry per subscribe, even for the same function
    if (this.current !== null) this.call(own, this.current);
    this.channel.add(own);
    return () => {
      this.channel.remove(own);
      if (this.channel.listeners.size === 0) this.current = null;
    };
  }
})();

// This Surface client (one page load): its UI Actions are numbered 1, 2, 3… (SPEC 17).
const CLIENT_ID = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) =>
  b.toString(16).padStart(2, "0"),
).join("");

/**
 * UI Actions (SPEC 17): one at a time waits for its acceptance, so seq n + 1 is assigned
 * only after n was accepted or rejected (a rejection never strands a later action);
 * accepted ones wait for their outcomes. After a bridge reconnect the accepted-but-
 * unanswered ones and the one sent but not yet accepted are sent again with the same ids
 * (the runtime applies each at most once and answers a resend both ways again). Nothing
 * of this survives a reload of the page.
 */
const actions = new (class {
  constructor() {
    this.nextSeq = 1;
    this.waiting = []; // asked for, not sent yet (no seq yet)
    this.sent = null; // sent, not yet accepted
    this.accepted = new Map(); // seq -> accepted, outcome not in yet (insertion: seq order)
    this.listeners = new Set();
    this.hooked = false;
  }

  run(name, params) {
    if (typeof name !== "string") {
      return Promise.reject(new LineupError("invalid_params", "run(name, params) takes a name"));
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ name, params: params === undefined ? {} : params, resolve, reject });
      this.next();
    });
  }

  get pending() {
    const out = [...this.accepted.values()];
    if (this.sent) out.push(this.sent);
    return out.map((e) => Object.freeze({ actionId: e.actionId, name: e.name, params: e.params }));
  }

  next() {
    if (!this.hooked) {
      bridge.onOpen.add(() => this.resend());
      this.hooked = true;
    }
    if (this.sent || this.waiting.length === 0) return;
    const entry = this.waiting.shift();
    entry.seq = this.nextSeq;
    entry.actionId = `${CLIENT_ID}:${entry.seq}`;
    entry.handler = (msg) => this.answer(entry, msg);
    this.sent = entry;
    this.send(entry);
    this.changed();
  }

  send(entry) {
    const { name, params, seq } = entry;
    bridge.sendMany("act", { name, params, client: CLIENT_ID, seq }, entry.handler);
  }

  resend() {
    // the same ids, in seq order: the accepted ones, then the one not yet accepted
    for (const entry of this.accepted.values()) this.send(entry);
    if (this.sent) this.send(this.sent);
  }

  answer(entry, msg) {
    if (msg.accepted !== undefined) {
      if (this.sent === entry) {
        this.sent = null;
        this.nextSeq = entry.seq + 1;
        this.accepted.set(entry.seq, entry);
        this.changed();
        this.next();
      }
      return;
    }
    const wasAccepted = this.accepted.delete(entry.seq);
    bridge.forget(entry.handler);
    if (msg.error) {
      if (!wasAccepted && this.sent === entry) this.sent = null; // rejected: seq unused
      entry.reject(errorOf(msg.error));
    } else {
      const o = msg.outcome;
      entry.resolve(Object.freeze({ actionId: o.action_id, result: o.result, revision: o.revision }));
    }
    this.changed();
    this.next();
  }

  changed() {
    if (this.listeners.size === 0) return;
    const now = this.pending;
    for (const fn of this.listeners) {
      try {
        fn(now);
      } catch (err) {
        console.error("a pending-actions listener failed", err);
      }
    }
  }
})();

export const sdk = Object.freeze({
  /**
   * `{scope, appSessionId, conversationId, instance}` of the instance shown under
   * `lineup dev`; in an MCP Apps host `null` until the first tool result, then
   * `{scope, version, revision}` (await `sdk.ready()`).
   */
  get app() {
    return appInfo ?? (bridgeInstance instanceof McpAppsBridge ? bridgeInstance.info : null);
  },
  /** Resolves with `sdk.app` once it is known (at once under `lineup dev`). */
  async ready() {
    if (appInfo !== null) return appInfo;
    return bridge.ready();
  },
  sessionData: Object.freeze({
    /** The current session data: `{data, revision}` (`{data: null, revision: 0}` when empty). */
    async get() {
      return snapshotOf(await bridge.request("get", { what: "session_data" }));
    },
    /**
     * The current full snapshot first, then each change, revisions strictly increasing.
     * Returns a function that unsubscribes.
     */
    subscribe(listener) {
      if (typeof listener !== "function") {
        throw new LineupError("usage_invalid", "subscribe(listener) takes a function");
      }
      return sessionData.subscribe(listener);
    },
    /** A Surface never writes session data: it asks for UI Actions. Always rejects. */
    async replace(data, { expectedRevision } = {}) {
      void data;
      void expectedRevision;
      throw new LineupError(
        "session_data_write_not_allowed",
        "a Surface cannot write session data; it asks for a UI Action the MiniApp declares",
        "declare a UI Action (define_ui_actions) and call sdk.actions.run(name, params)",
      );
    },
  }),
  /** UI Actions the MiniApp declares (SPEC 17). */
  actions: Object.freeze({
    /**
     * Ask for a UI Action: resolves with `{actionId, result, revision}` once it was applied
     * (`revision`: the session data's revision after it), rejects with a `LineupError`.
     */
    run(name, params) {
      return actions.run(name, params);
    },
    /** The actions sent and not answered yet, in order: `{actionId, name, params}`. */
    get pending() {
      return actions.pending;
    },
    /** `listener(pending)` on every change of `pending`; returns an unsubscribe function. */
    subscribe(listener) {
      if (typeof listener !== "function") {
        throw new LineupError("usage_invalid", "subscribe(listener) takes a function");
      }
      const own = (p) => listener(p);
      actions.listeners.add(own);
      return () => actions.listeners.delete(own);
    },
  }),
  /** The Runtime's operation facts for this session (a focus's `state`, `ends_at`). */
  operations: Object.freeze({
    async get() {
      return (await bridge.request("get", { what: "operations" })).operations;
    },
    subscribe(listener) {
      if (typeof listener !== "function") {
        throw new LineupError("usage_invalid", "subscribe(listener) takes a function");
      }
      return operations.subscribe(listener);
    },
  }),
  host: Object.freeze({
    /** Tell the Host this Surface has loaded: the Host emits `surface_loaded` for it. */
    async ready() {
      await bridge.request("ready", { load: PAGE_LOAD });
    },
  }),
});

export default sdk;
