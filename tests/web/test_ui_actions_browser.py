"""UI Actions from a Surface in headless Chromium against `lineup dev` (SPEC 17): the Surface
SDK's `sdk.actions.run` and `pending`, the bridge's two answers, the Surface token's `act`
scope, and both writers — the Surface's actions and an MCP client's calls through `/mcp` —
ending as the serial application of every operation."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from tests.web.dev_host_kit import _mcp_call, _run

#: A bound on each wait in the page, so a broken SDK fails a test instead of hanging it.
WITHIN = """
const within = (p) => Promise.race([p, new Promise((_, reject) =>
  setTimeout(() => reject(new Error("no answer within 20 s")), 20000))]);
"""
#: In the Surface frame: `run(name, params)` as data — the outcome or the error's code.
RUN = """
async ({ name, params }) => {
  const { sdk, LineupError } = await import("/_lineup/sdk.js");
  WITHIN
  try {
    const o = await within(sdk.actions.run(name, params));
    return { actionId: o.actionId, result: o.result, revision: o.revision };
  } catch (err) {
    if (!(err instanceof LineupError)) throw err;
    return { error: { code: err.code, message: err.message, details: err.details } };
  }
}
""".replace("WITHIN", WITHIN)
#: Many runs at once (none awaited before the next is asked for); their answers in order.
RUN_ALL = """
async (ops) => {
  const { sdk } = await import("/_lineup/sdk.js");
  WITHIN
  const runs = ops.map(([name, params]) => sdk.actions.run(name, params).then(
    (o) => ({ actionId: o.actionId, result: o.result, revision: o.revision }),
    (err) => ({ error: { code: err.code, message: err.message } })));
  return await within(Promise.all(runs));
}
""".replace("WITHIN", WITHIN)
#: Count what the page sends on its bridge (every socket's `send` goes through here).
SPY = """
() => {
  window.__sent = [];
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    window.__sent.push(JSON.parse(data));
    return send.call(this, data);
  };
}
"""


def _data(dev: Any, conversation: str = "dev") -> Any:
    return dev.server.rt.surface(conversation, "todo").get()


def _titles(dev: Any, conversation: str = "dev") -> list[tuple[str, bool]]:
    return [(i["title"], i["done"]) for i in (_data(dev, conversation).data or {})["items"]]


def _fault(dev: Any, fault: str, instance: str) -> None:
    token = dev.server.host.host_token
    req = urllib.request.Request(
        dev.server.urls.host_origin + "/_lineup/api/fault",
        data=json.dumps({"fault": fault, "instance": instance}).encode(),
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.loads(resp.read())["bridges"] >= 1


def _instance(dev: Any, conversation: str = "dev") -> str:
    [s] = [s for s in dev.server.rt.sessions("todo") if s["conversation_id"] == conversation]
    return str(s["instance"])


def _ids(dev: Any, conversation: str = "dev") -> list[str]:
    return [i["id"] for i in (_data(dev, conversation).data or {})["items"]]


def _slow_project(template_project: Callable[[str], Path]) -> Path:
    """The todo template with one more action that takes a while (so actions are still
    pending when the bridge drops)."""
    project = template_project("todo")
    actions = project / "todo_app" / "actions.py"
    actions.write_text(
        actions.read_text()
        + '''

@actions.action("todo.slow_toggle", timeout_s=10)
async def slow_toggle(ctx: ActionContext, id: ItemId) -> Changed:
    """Tick an item, or untick it, after a while.

    Args:
        id: The item's id.
    """
    import asyncio

    await asyncio.sleep(0.15)
    return await toggle(ctx, id)
'''
    )
    return project


def test_ticks_and_renames_while_an_mcp_client_adds_end_as_the_serial_application(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    urls, token = dev.server.urls, dev.server.host.host_token
    for n in range(3):
        assert not _run(_mcp_call, urls.mcp_url, token, "todo-add", {"title": f"seed {n}"}).is_error
    frame = dev.surface()
    frame.get_by_test_id("todo-item").nth(2).wait_for()
    seeds = _ids(dev, "mcp")

    async def agent_adds() -> None:
        for n in range(8):
            await _mcp_call(urls.mcp_url, token, "todo-add", {"title": f"agent {n}"})
            await anyio.sleep(0.01)

    errors: list[BaseException] = []

    def agent() -> None:
        try:
            anyio.run(agent_adds)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=agent)
    thread.start()
    ops: list[list[Any]] = []
    for round_ in range(4):
        for k, item in enumerate(seeds):
            ops.append(["todo.toggle", {"id": item}])
            ops.append(["todo.rename", {"id": item, "title": f"seed {k} r{round_}"}])
    answers = frame.evaluate(RUN_ALL, ops)
    thread.join(60)
    assert not errors, errors
    assert all("error" not in a for a in answers), answers
    # one client: applied in its order, seq 1, 2, 3…, revisions strictly increasing
    seqs = [int(a["actionId"].rsplit(":", 1)[1]) for a in answers]
    assert seqs == list(range(1, len(ops) + 1))
    revisions = [a["revision"] for a in answers]
    assert revisions == sorted(set(revisions))
    snap = _data(dev, "mcp")
    # every write one revision: 3 seeds + 8 Agent adds + every action, none lost
    assert snap.revision == 3 + 8 + len(ops)
    # the serial application: adds in their order, 4 toggles (even: not done), last renames
    expected = [(f"seed {k} r3", False) for k in range(3)] + [
        (f"agent {n}", False) for n in range(8)
    ]
    assert _titles(dev, "mcp") == expected
    frame.wait_for_function(
        f"() => document.getElementById('items').dataset.revision === '{snap.revision}'"
    )
    assert frame.get_by_test_id("todo-title").all_text_contents() == [t for t, _ in expected]
    # the timeline shows the actions beside the calls, each entry with its origin
    origins = dev.page.locator('[data-testid="lineup-timeline"] li[data-origin="ui"]')
    origins.nth(len(ops) - 1).wait_for()
    assert dev.page.locator('[data-testid="lineup-timeline"] li[data-origin="agent"]').count()
    assert dev.page.locator('[data-testid="lineup-timeline"] li:not([data-origin])').count() == 0


def test_actions_pending_when_the_bridge_drops_are_resent_once_and_applied_once(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(_slow_project(template_project), faults=True)
    for n in range(5):
        dev.call("todo.add", {"title": f"item {n}"})
    frame = dev.surface()
    frame.get_by_test_id("todo-item").nth(4).wait_for()
    ids, instance = _ids(dev), _instance(dev)
    frame.evaluate(SPY)
    frame.evaluate(
        """async (ids) => {
          const { sdk } = await import("/_lineup/sdk.js");
          const within = (p) => Promise.race([p, new Promise((_, reject) =>
            setTimeout(() => reject(new Error("no answer within 20 s")), 20000))]);
          window.__runs = within(Promise.all(ids.map((id) => sdk.actions.run("todo.slow_toggle", { id })
            .then((o) => o.actionId, (err) => "error " + err.code))));
        }""",
        ids,
    )
    frame.wait_for_function("() => window.__sent.some((m) => m.op === 'act' && m.seq === 2)")
    pending = frame.evaluate(
        """async () => {
          const { sdk } = await import('/_lineup/sdk.js');
          return sdk.actions.pending.map((p) => [p.actionId, p.name, p.params.id]);
        }"""
    )
    assert pending and {name for _, name, _ in pending} == {"todo.slow_toggle"}
    at_drop = {int(action_id.rsplit(":", 1)[1]) for action_id, _, _ in pending}
    _fault(dev, "reconnect", instance)  # the bridge drops with actions pending
    action_ids = frame.evaluate("() => window.__runs")
    assert [a.rsplit(":", 1)[1] for a in action_ids] == ["1", "2", "3", "4", "5"]
    sent = frame.evaluate("() => window.__sent.filter((m) => m.op === 'act').map((m) => m.seq)")
    counts = {seq: sent.count(seq) for seq in set(sent)}
    assert set(counts) == {1, 2, 3, 4, 5}
    # each one pending at the drop resent once (same id), none more
    assert all(counts[seq] == 2 for seq in at_drop) and max(counts.values()) == 2, counts
    # applied once each: a toggle applied twice would be undone
    assert _titles(dev) == [(f"item {n}", True) for n in range(5)]
    assert _data(dev).revision == 5 + 5
    assert (
        frame.evaluate("async () => (await import('/_lineup/sdk.js')).sdk.actions.pending.length")
        == 0
    )


def test_a_rejection_does_not_strand_the_next_action(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "buy milk"})
    frame = dev.surface()
    frame.get_by_test_id("todo-item").first.wait_for()
    [item] = _ids(dev)
    refused = frame.evaluate(RUN, {"name": "todo.rename", "params": {"id": item, "title": ""}})
    assert refused["error"]["code"] == "invalid_params"
    assert refused["error"]["details"]  # the offending path, as the runtime reports it
    # seq 1 was not used: the next action takes it and is applied
    ok = frame.evaluate(RUN, {"name": "todo.toggle", "params": {"id": item}})
    assert ok["actionId"].endswith(":1") and ok["revision"] == 2
    assert _titles(dev) == [("buy milk", True)]


def test_a_business_refusal_is_shown_and_the_list_stays(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "buy milk"})
    dev.call("todo.add", {"title": "call Ada"})
    frame = dev.surface()
    frame.get_by_test_id("todo-item").nth(1).wait_for()
    first, second = _ids(dev)
    assert frame.evaluate(RUN, {"name": "todo.delete", "params": {"id": first}})["revision"] == 3
    # the Surface asks again for the deleted item (a stale view): refused, nothing changes
    frame.evaluate(
        """async (id) => {
          const { sdk } = await import("/_lineup/sdk.js");
          try { await sdk.actions.run("todo.toggle", { id }); }
          catch (err) { document.getElementById("error").textContent = `${err.code}: ${err.message}`; }
        }""",
        first,
    )
    frame.get_by_test_id("todo-error").filter(has_text="app.not_found").wait_for()
    assert _titles(dev) == [("call Ada", False)] and _data(dev).revision == 3
    # the queue goes on: the same Surface's next action is applied
    frame.get_by_test_id("todo-item").first.get_by_test_id("todo-toggle").click()
    frame.locator('[data-testid="todo-item"].done').wait_for()
    assert _titles(dev) == [("call Ada", True)]
    assert second in _ids(dev)


#: A raw bridge from the Surface frame (its own token), one message, its answers.
RAW = """
async (msg) => {
  const token = /^\\/s\\/([A-Za-z0-9_-]+)\\//.exec(location.pathname)[1];
  const url = new URL("/_lineup/bridge", location.href);
  url.protocol = "ws:";
  url.searchParams.set("token", token);
  const ws = new WebSocket(url);
  const answers = [];
  await new Promise((resolve) => (ws.onopen = resolve));
  const done = new Promise((resolve) => {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.id !== 1) return;
      answers.push(m);
      if (m.error || m.outcome) resolve();
    };
  });
  ws.send(JSON.stringify({ id: 1, ...msg }));
  await done;
  ws.close();
  return answers;
}
"""


def test_the_surface_token_acts_only_for_its_own_instances_declared_actions(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "mine"}, conversation="dev")
    dev.call("todo.add", {"title": "theirs"}, conversation="other")
    other = _instance(dev, "other")
    frame = dev.select("dev", _instance(dev, "dev"))
    frame.get_by_test_id("todo-item").first.wait_for()
    [mine], [theirs] = _ids(dev, "dev"), _ids(dev, "other")

    def code(name: str, params: dict[str, Any]) -> str:
        return str(frame.evaluate(RUN, {"name": name, "params": params})["error"]["code"])

    # undeclared: an Agent tool's name, another app's action, a made-up one
    assert code("todo.add", {"title": "x"}) == "unknown_action"
    assert code("pomodoro.start", {}) == "unknown_action"
    assert code("todo.nope", {}) == "unknown_action"
    # another instance's: the token names its instance; a message naming another is refused
    answers = frame.evaluate(
        RAW,
        {
            "op": "act",
            "instance": other,
            "conversation": "other",
            "name": "todo.toggle",
            "params": {"id": theirs},
            "client": "c",
            "seq": 1,
        },
    )
    assert [a.get("error", {}).get("code") for a in answers] == ["usage_invalid"]
    # and its own item id is simply not in the other list: a business refusal, nothing there
    assert code("todo.toggle", {"id": theirs}) == "app.not_found"
    assert _titles(dev, "other") == [("theirs", False)]
    assert _titles(dev, "dev") == [("mine", False)]
    # the raw bridge answers an act twice: accepted, then the outcome
    answers = frame.evaluate(
        RAW,
        {"op": "act", "name": "todo.toggle", "params": {"id": mine}, "client": "raw", "seq": 1},
    )
    assert [sorted(a) for a in answers] == [["accepted", "action_id", "id"], ["id", "outcome"]]
    assert answers[0]["accepted"] == 1 and answers[1]["outcome"]["revision"] == 2


def test_replace_is_still_refused(
    lineup_dev: Callable[..., Any], template_project: Callable[[str], Path]
) -> None:
    dev = lineup_dev(template_project("todo"))
    dev.call("todo.add", {"title": "mine"})
    frame = dev.surface()
    frame.get_by_test_id("todo-item").first.wait_for()
    refused = frame.evaluate(
        """async () => {
          const { sdk } = await import("/_lineup/sdk.js");
          try { await sdk.sessionData.replace({ items: [] }, { expectedRevision: 1 }); }
          catch (err) { return err.code; }
        }"""
    )
    assert refused == "session_data_write_not_allowed"
    raw = frame.evaluate(RAW, {"op": "replace", "data": {"items": []}, "expected_revision": 1})
    assert [a["error"]["code"] for a in raw] == ["usage_invalid"]
    assert _titles(dev) == [("mine", False)]
