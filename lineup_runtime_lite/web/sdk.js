// LineUp Surface SDK (SPEC 14): one dependency-free ES module, served by the dev Host on the
// Surface origin at /_lineup/sdk.js. A Surface imports it as
//   import { sdk } from "/_lineup/sdk.js";
// Its bridge is a WebSocket to /_lineup/bridge on the Surface origin, authenticated by the
// per-instance Surface token alone (a sandboxed frame's Origin is `null`). Frames on the
// bridge are the runtime's Surface frames: session_data.snapshot / session_data.changed,
// each {revision, data}.

/** An error of the LineUp toolchain: the same stable `code`s as the runtime. */
export class LineupError extends Error {
  constructor(code, message, hint) {
    super(message);
    this.name = "LineupError";
    this.code = code;
    if (hint) this.hint = hint;
  }
}

const MAX_BACKOFF_MS = 5000;

function surfaceToken() {
  // The Host frames a Surface at /s/<token>/...; the token never leaves this origin.
  const match = /^\/s\/([A-Za-z0-9_-]+)\//.exec(location.pathname);
  if (!match) {
    throw new LineupError(
      "usage_invalid",
      "this page is not a Surface the LineUp dev Host framed (no Surface token in its URL)",
      "open the MiniApp through `lineup dev`",
    );
  }
  return match[1];
}

const token = surfaceToken();
const base = new URL("/", import.meta.url);

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

const appInfo = Object.freeze(await fetchApp());

/** The bridge: one WebSocket, requests by id, subscriptions by id; reconnects with backoff. */
class Bridge {
  constructor() {
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, message}
    this.subs = new Map(); // bridge subscription id -> handler(frame)
    this.onReconnect = new Set();
    this.onReload = null;
    this.socket = null;
    this.open = false;
    this.everOpened = false;
    this.delay = 100;
    this.connect();
  }

  connect() {
    const url = new URL("/_lineup/bridge", base);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("token", token);
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.onopen = () => {
      this.open = true;
      this.delay = 100;
      for (const [, req] of this.pending) socket.send(JSON.stringify(req.message));
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
    const req = this.pending.get(msg.id);
    if (!req) return;
    this.pending.delete(msg.id);
    if (msg.error) req.reject(new LineupError(msg.error.code, msg.error.message, msg.error.hint));
    else req.resolve(msg.result);
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

const bridge = new Bridge();

function snapshotOf(result) {
  return Object.freeze({ revision: result.revision, data: result.data });
}

/** One listener's subscription with the TIS2-04 client rules. */
class Subscription {
  constructor(listener) {
    this.listener = listener;
    this.last = -1; // nothing delivered yet: the first snapshot goes through, revision 0 too
    this.bridgeId = null;
    this.active = true;
    this.resyncing = null;
    this.onReconnect = () => this.resync();
    bridge.onReconnect.add(this.onReconnect);
  }

  deliver(frame, kind) {
    if (!this.active || frame.revision <= this.last) return; // a duplicate or older revision
    this.last = frame.revision;
    try {
      this.listener(snapshotOf(frame), { frame: kind });
    } catch (err) {
      console.error("a session-data listener failed", err);
    }
  }

  onFrame(frame) {
    if (!this.active || this.resyncing) return;
    const kind = frame.frame;
    if (kind === "session_data.changed" && this.last >= 0 && frame.revision > this.last + 1) {
      this.resync(); // a revision gap: drop, get again, resubscribe
      return;
    }
    this.deliver(frame, kind);
  }

  async start() {
    this.bridgeId = await bridge.subscribe("session_data", (f) => this.onFrame(f));
  }

  resync() {
    if (!this.active) return this.resyncing;
    if (this.resyncing) return this.resyncing;
    this.resyncing = (async () => {
      if (this.bridgeId !== null) bridge.unsubscribe(this.bridgeId);
      this.bridgeId = null;
      try {
        const current = await bridge.request("get", { what: "session_data" });
        this.deliver(current, "session_data.snapshot");
      } finally {
        this.resyncing = null;
      }
      if (this.active) await this.start();
    })().catch((err) => console.error("session-data resubscribe failed", err));
    return this.resyncing;
  }

  stop() {
    this.active = false;
    bridge.onReconnect.delete(this.onReconnect);
    if (this.bridgeId !== null) bridge.unsubscribe(this.bridgeId);
    this.bridgeId = null;
  }
}

function operationsSubscription(listener) {
  let id = null;
  let active = true;
  const start = async () => {
    id = await bridge.subscribe("operations", (frame) => {
      if (active) listener(frame.operations);
    });
  };
  const again = () => { if (active) start(); };
  bridge.onReconnect.add(again);
  start();
  return () => {
    active = false;
    bridge.onReconnect.delete(again);
    if (id !== null) bridge.unsubscribe(id);
  };
}

export const sdk = Object.freeze({
  /** `{scope, appSessionId, conversationId, instance}` of the instance shown. */
  app: appInfo,
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
      const sub = new Subscription(listener);
      sub.start().catch((err) => console.error("session-data subscribe failed", err));
      return () => sub.stop();
    },
    /** Surface writes wait for the mutation queue (SPEC 6): always rejects this iteration. */
    async replace(data, { expectedRevision } = {}) {
      void data;
      void expectedRevision;
      throw new LineupError(
        "session_data_write_not_allowed",
        "a Surface cannot write session data this iteration; a tool handler writes it",
        "change session data from a tool handler (ctx.session_data.replace)",
      );
    },
  }),
  /** The Runtime's operation facts for this session (a focus's `state`, `ends_at`). */
  operations: Object.freeze({
    async get() {
      return (await bridge.request("get", { what: "operations" })).operations;
    },
    subscribe(listener) {
      return operationsSubscription(listener);
    },
  }),
  host: Object.freeze({
    /** Tell the Host this Surface has loaded: the Host emits `surface_loaded` for it. */
    async ready() {
      await bridge.request("ready");
    },
  }),
});

export default sdk;
