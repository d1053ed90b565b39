// LineUp Surface SDK (SPEC 14): one dependency-free ES module, served by the dev Host on the
// Surface origin at /_lineup/sdk.js. A Surface imports it as
//   import { sdk } from "/_lineup/sdk.js";
// Its bridge is a WebSocket to /_lineup/bridge on the Surface origin, authenticated by the
// per-instance Surface token alone (a sandboxed frame's Origin is `null`). Frames on the
// bridge are the runtime's Surface frames: session_data.snapshot / session_data.changed,
// each {revision, data}. A UI Action (`act`) is answered twice: `{accepted: seq}` once the
// runtime persisted it (or an error: rejected before acceptance), then its outcome.

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

let bridgeInstance = null;
// The one bridge, opened on first use (at once under `lineup dev`).
const bridge = new Proxy(
  {},
  {
    get(_, name) {
      bridgeInstance ??= new Bridge();
      const value = bridgeInstance[name];
      return typeof value === "function" ? value.bind(bridgeInstance) : value;
    },
    set(_, name, value) {
      bridgeInstance ??= new Bridge();
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
