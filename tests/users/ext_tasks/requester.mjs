// The MCP tasks extension's requester (@modelcontextprotocol/ext-tasks on the
// @modelcontextprotocol/client SDK) driving `lineup serve` over stdio, for
// tests/users/test_ext_tasks_client.py.
//
// argv: the server command and its arguments (a project folder with the pomodoro template's
// tools and a --db of its own); the working folder is this process's. The server is started
// twice on the same arguments, so the second one reads the first one's tasks (a restart).
// Environment: LINEUP_REQUESTER_TIMEOUT_MS bounds the whole run (default 120000).
// stdout: one JSON line with what the requester saw (see `report` below); the servers'
// stderr is inherited (the transport's default). Exit 0 when the run got to its end (the
// test judges the report), 1 when it stopped early (`report.errors` says where).
//
// What it does, on the packages' defaults where they have one:
//  1. connects with the SDK Client pinned to protocol 2026-07-28 (the era where tasks are
//     the io.modelcontextprotocol/tasks extension; the SDK's own default is the 2025 era)
//     and creates the ext-tasks session from it; ext-tasks needs a host request coordinator
//     (`rawDispatch`) and the client's framing for that revision, so this script has one: it
//     owns its request ids on the SDK's transport and matches their responses itself;
//  2. calls `pomodoro start` through the session (a long-running tool: a task) and follows
//     its updates until the Host has started the focus;
//  3. calls it again in the same conversation (its final is an error) and settles that one;
//  4. tries the extension's cancel and update on the running task;
//  5. hands the running task off (a serialized reference), closes, starts the server again,
//     resumes the task from the reference, interrupts the focus with `pomodoro interrupt`
//     and settles the task;
//  6. replays the focus call by its call_id with a plain tools/call (no task opt-in): the
//     result the tool answers, to compare with the task's result.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL = "2026-07-28";
const CALL_ID = "io.lineup/call_id";
const FOCUS_ID = "ext-tasks-focus";
const SECOND_ID = "ext-tasks-second";
const CLIENT_INFO = { name: "lineup-tests-ext-tasks", version: "0.0.0" };
const CLIENT_CAPABILITIES = {};
const TIMEOUT_MS = Number(process.env.LINEUP_REQUESTER_TIMEOUT_MS ?? 120000);

const [command, ...args] = process.argv.slice(2);
const report = {
  connections: [], // per server start: the negotiated revision and era
  generation: null, // the ext-tasks generation of the task reference ("v2" = the extension)
  capabilities: null, // the session's TaskCapabilities
  names: {},
  focus: { kind: null, task_id: null, statuses: [] },
  second: { kind: null, task_id: null, outcome: null, result: null },
  cancel: null, // what the extension's cancel of the running task answered
  update: null, // ... and its update
  after_cancel: null, // the task's snapshot after both
  resumed: { kind: null, statuses: [], outcome: null, result: null, error: null },
  interrupt: null, // the plain result of pomodoro interrupt
  replay: null, // the plain tools/call replay of the focus by its call_id
  wire: [], // every exchange of the coordinator (task-opted tools/call, tasks/*): method, id,
  // params, answer (the SDK Client's own requests, the plain calls above, are not here)
  errors: [],
};

function errorDoc(err) {
  return {
    name: err?.name,
    message: String(err?.message ?? err),
    code: err?.code,
    data: err?.data,
  };
}

function status(view) {
  return { status: view.status, message: view.statusMessage ?? null };
}

function remember(list, view) {
  const last = list[list.length - 1];
  const now = status(view);
  if (!last || last.status !== now.status || last.message !== now.message) list.push(now);
}

/** A host request coordinator on the SDK transport: its own ids, its own response matching. */
class Coordinator {
  constructor(transport) {
    this.transport = transport;
    this.pending = new Map();
    this.next = 0;
  }

  /** After `client.connect`: responses to this coordinator's ids never reach the Client. */
  attach() {
    const theirs = this.transport.onmessage;
    this.transport.onmessage = (message, extra) => {
      const id = message?.id;
      if (typeof id === "string" && this.pending.has(id) && !("method" in message)) {
        const { resolve, entry } = this.pending.get(id);
        this.pending.delete(id);
        entry.answer = "error" in message ? { error: message.error } : { result: message.result };
        resolve(
          "error" in message
            ? { kind: "error", error: message.error }
            : { kind: "result", result: message.result },
        );
        return;
      }
      theirs?.(message, extra);
    };
    const closed = this.transport.onclose;
    this.transport.onclose = () => {
      for (const { reject } of this.pending.values()) reject(new Error("transport closed"));
      this.pending.clear();
      closed?.();
    };
  }

  dispatch = (request, options = {}) => {
    const id = `ext-tasks-${++this.next}`;
    const entry = { method: request.method, id, params: request.params };
    report.wire.push(entry);
    return new Promise((resolve, reject) => {
      const timeoutMs = options.context?.requestTimeoutMs ?? 60000;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${request.method} ${id}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (fn) => (value) => {
        clearTimeout(timer);
        fn(value);
      };
      this.pending.set(id, { resolve: done(resolve), reject: done(reject), entry });
      options.signal?.addEventListener("abort", () => {
        if (this.pending.delete(id)) done(reject)(options.signal.reason);
      });
      this.transport.send({ jsonrpc: "2.0", id, ...request }).catch(done(reject));
    });
  };
}

async function open() {
  const transport = new StdioClientTransport({ command, args, cwd: process.cwd() });
  const client = new Client(CLIENT_INFO, {
    capabilities: CLIENT_CAPABILITIES,
    versionNegotiation: { mode: { pin: PROTOCOL } },
  });
  await client.connect(transport);
  const coordinator = new Coordinator(transport);
  coordinator.attach();
  const protocol = client.getNegotiatedProtocolVersion() ?? null;
  report.connections.push({ protocol, era: client.getProtocolEra() ?? null });
  const session = createTaskSessionFromClient(client, {
    endpointId: "lineup-serve-ext-tasks-test",
    rawDispatch: coordinator.dispatch,
    v2RequestFraming: {
      protocolVersion: protocol,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CLIENT_CAPABILITIES,
    },
  });
  report.capabilities = session.capabilities;
  return { client, session };
}

async function listNames(client) {
  const { tools } = await client.listTools();
  for (const method of ["pomodoro.start", "pomodoro.interrupt"]) {
    const found = tools.find((t) => t.name.replaceAll("-", ".") === method);
    if (!found) throw new Error(`${method} is not listed: ${tools.map((t) => t.name)}`);
    report.names[method] = found.name;
  }
}

async function settled(execution, into) {
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task") remember(into.statuses, event.task);
    },
  });
  into.outcome = outcome.status;
  if (outcome.task) remember(into.statuses, outcome.task);
  if (outcome.status === "completed") into.result = outcome.result;
  if (outcome.status === "failed") into.error = errorDoc(outcome.error);
  return outcome;
}

async function firstServer() {
  const { client, session } = await open();
  try {
    await listNames(client);
    const start = report.names["pomodoro.start"];
    const focus = await session.callTool(
      start,
      { minutes: 25 },
      { metadata: { [CALL_ID]: FOCUS_ID } },
    );
    report.focus.kind = focus.kind;
    if (focus.kind !== "task") throw new Error("the focus call was not a task");
    report.focus.task_id = focus.handle.taskId;
    report.generation = focus.serializeReference().generation;
    for await (const event of focus.updates()) {
      if (event.type !== "task") break;
      remember(report.focus.statuses, event.task);
      if ((event.task.statusMessage ?? "").startsWith("started")) break;
    }
    const second = await session.callTool(
      start,
      { minutes: 5 },
      { metadata: { [CALL_ID]: SECOND_ID } },
    );
    report.second.kind = second.kind;
    if (second.kind === "task") report.second.task_id = second.handle.taskId;
    const secondRun = { statuses: [], outcome: null, result: null, error: null };
    await settled(second, secondRun);
    Object.assign(report.second, secondRun);

    const controller = session.task(report.focus.task_id);
    try {
      await controller.cancel();
      report.cancel = { ok: true };
    } catch (err) {
      report.cancel = { ok: false, error: errorDoc(err) };
    }
    try {
      await controller.updateJson({});
      report.update = { ok: true };
    } catch (err) {
      report.update = { ok: false, error: errorDoc(err) };
    }
    report.after_cancel = status(await controller.snapshot());
    let reference = null;
    await focus.handoff((ref) => {
      reference = ref;
    });
    return reference;
  } finally {
    await session.close();
    await client.close();
  }
}

async function secondServer(reference) {
  const { client, session } = await open();
  try {
    await listNames(client);
    const resumed = await session.resumeTask(reference);
    report.resumed.kind = resumed.kind;
    const settling = settled(resumed, report.resumed);
    const interrupted = await client.callTool({
      name: report.names["pomodoro.interrupt"],
      arguments: {},
    });
    report.interrupt = interrupted;
    await settling;
    report.replay = await client.callTool({
      name: report.names["pomodoro.start"],
      arguments: { minutes: 25 },
      _meta: { [CALL_ID]: FOCUS_ID },
    });
  } finally {
    await session.close();
    await client.close();
  }
}

const timer = setTimeout(() => {
  report.errors.push({ name: "Timeout", message: `the run took over ${TIMEOUT_MS} ms` });
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exit(1);
}, TIMEOUT_MS);

let code = 0;
try {
  const reference = await firstServer();
  if (reference === null) throw new Error("no task reference after the hand-off");
  await secondServer(reference);
} catch (err) {
  report.errors.push(errorDoc(err));
  code = 1;
}
clearTimeout(timer);
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(code);
