"""The golden fixtures with Surface steps, replayed by the Surface SDK in headless Chromium
against `lineup dev` (SPEC 14): the same files `tests/conformance` replays in Python. Agent
calls go to the dev Host's runtime; `subscribe`, `frames`, `session_data` and
`surface_replace` run in the Surface frame through `sdk.js`; a `ui_action` (SPEC 17) is the
`act` message the Surface SDK sends, from the Surface frame on a bridge of its own with the
step's client and seq (a fixture resends, skips and reuses seqs, which `sdk.actions.run`
never does), answered accepted and then with its outcome; `drop_frame`, `reconnect` and
`crash_worker` go through the fault seam (`LINEUP_DEV_FAULTS=1`)."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite.sim.expect import compare
from lineup_runtime_lite.sim.format import Step, load_scenario

FIXTURES_DIR = Path(__file__).parents[1] / "conformance" / "fixtures"
APPS = Path(__file__).parents[1] / "conformance" / "apps"
SURFACE_ACTIONS = {
    "subscribe",
    "frames",
    "drop_frame",
    "reconnect",
    "surface_replace",
    "ui_action",
    "crash_worker",
}
FIXTURES = sorted(
    p
    for p in FIXTURES_DIR.glob("*.json")
    if SURFACE_ACTIONS & {a for s in json.loads(p.read_text())["step"] for a in s}
    or p.stem.startswith("tis2_06_")  # SPEC 17's fixtures: every one in the browser too
)

SUBSCRIBE = """
async (name) => {
  const { sdk } = await import("/_lineup/sdk.js");
  window.__lineup = window.__lineup || {};
  const seen = (window.__lineup[name] = []);
  sdk.sessionData.subscribe((snap, meta) => {
    seen.push({ frame: meta.frame, revision: snap.revision, data: snap.data });
  });
}
"""
#: The listener's frames once its last revision is the committed one (and the bridge is up).
FRAMES = """
async ({ name, revision }) => {
  const { sdk } = await import("/_lineup/sdk.js");
  await sdk.sessionData.get(); // answered once the bridge is (back) up
  const seen = window.__lineup[name];
  for (let i = 0; i < 400 && !(seen.length && seen[seen.length - 1].revision >= revision); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  return seen;
}
"""
GET = """
async () => {
  const { sdk } = await import("/_lineup/sdk.js");
  return await sdk.sessionData.get();
}
"""
REPLACE = """
async ({ data, expectedRevision }) => {
  const { sdk, LineupError } = await import("/_lineup/sdk.js");
  try {
    await sdk.sessionData.replace(data, { expectedRevision });
    return { ok: true };
  } catch (err) {
    if (!(err instanceof LineupError)) throw err;
    return { error: { code: err.code, message: err.message } };
  }
}
"""


#: A UI Action from the Surface frame: the SDK's `act` message on a bridge of its own (the
#: frame's Surface token); its answers up to the outcome (or, with `acceptedOnly`, the
#: acceptance: an action queued behind a starting activation).
ACT = """
async ({ msg, acceptedOnly }) => {
  const token = /^\\/s\\/([A-Za-z0-9_-]+)\\//.exec(location.pathname)[1];
  const url = new URL("/_lineup/bridge", location.href);
  url.protocol = "ws:";
  url.searchParams.set("token", token);
  const ws = new WebSocket(url);
  const answers = [];
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  await new Promise((resolve) => {
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.id !== 1) return;
      answers.push(m);
      if (m.error || m.outcome || (acceptedOnly && m.accepted !== undefined)) resolve();
    };
    ws.send(JSON.stringify({ id: 1, op: "act", ...msg }));
  });
  ws.close();
  return answers;
}
"""


class BrowserReplay:
    """One fixture's steps against a running `lineup dev` and its page."""

    def __init__(self, dev: Any) -> None:
        self.dev, self.rt = dev, dev.server.rt
        self.seen_outbox = 0
        self.subs: dict[str, tuple[str, str, Any]] = {}  # as -> (conversation, scope, frame)

    def _emitted(self) -> list[dict[str, Any]]:
        self.rt.settle()
        messages: list[dict[str, Any]] = self.rt.outbox.all()
        fresh, self.seen_outbox = messages[self.seen_outbox :], len(messages)
        return fresh

    def _frame(self, conversation: str, scope: str) -> Any:
        [session] = [
            s
            for s in self.rt.sessions(scope)
            if s["conversation_id"] == conversation and s["instance"]
        ]
        return self.dev.select(conversation, session["instance"]), session["instance"]

    def _fault(self, fault: str, instance: str | None) -> None:
        token = self.dev.server.host.host_token
        req = urllib.request.Request(
            self.dev.server.urls.host_origin + "/_lineup/api/fault",
            data=json.dumps({"fault": fault, "instance": instance}).encode(),
            headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read())["bridges"] >= (0 if instance is None else 1)

    def act(self, step: Step, scope: str) -> list[dict[str, Any]]:
        a = step.args
        if step.action in ("call", "calls"):
            calls = [a] if step.action == "call" else a
            answers = self.rt.call_many(
                [(c["id"], c["conversation"], c["method"], c["params"]) for c in calls]
            )
            fresh = self._emitted()
            ids = {m["id"] for m in fresh}
            return fresh + [m for m in answers if m["id"] not in ids]
        if step.action == "host":
            self.rt.host.event(
                a["event"],
                conversation=a["conversation"],
                scope=a.get("scope") or scope,
                instance=a.get("instance"),
            )
            return self._emitted()
        if step.action == "subscribe":
            frame, instance = self._frame(a["conversation"], a.get("scope") or scope)
            self.subs[a["as"]] = (a["conversation"], a.get("scope") or scope, instance)
            frame.evaluate(SUBSCRIBE, a["as"])
            return self._frames(a["as"])
        if step.action in ("frames", "drop_frame", "reconnect"):
            if step.action == "drop_frame":
                self._fault("drop_frame", self.subs[a["as"]][2])
                return []
            if step.action == "reconnect":
                self._fault("reconnect", self.subs[a["as"]][2])
            return self._frames(a["as"])
        if step.action == "session_data":
            frame, _ = self._frame(a["conversation"], a.get("scope") or scope)
            return [frame.evaluate(GET)]
        if step.action == "ui_action":
            return self._ui_action(a, a.get("scope") or scope)
        if step.action == "crash_worker":
            self._fault("crash_worker", None)
            return self._emitted()
        if step.action == "surface_replace":
            frame, _ = self._frame(a["conversation"], a.get("scope") or scope)
            return [
                frame.evaluate(
                    REPLACE, {"data": a["data"], "expectedRevision": a["expected_revision"]}
                )
            ]
        raise AssertionError(f"step {step.index}: {step.action} has no browser replay here")

    def _ui_action(self, a: dict[str, Any], scope: str) -> list[dict[str, Any]]:
        """As the Python replay: the outcome (`{action_id, result, revision}` or `{action_id?,
        error}`), then what the outbox gained; an action queued behind a starting activation
        is `action_pending` once accepted (only a later step moves it on)."""
        frame, _ = self._frame(a["conversation"], scope)
        starting = any(
            s["conversation_id"] == a["conversation"] and s["state"] == "starting"
            for s in self.rt.sessions(scope)
        )
        msg = {"name": a["name"], "params": a["params"], "client": a["client"], "seq": a["seq"]}
        answers = frame.evaluate(ACT, {"msg": msg, "acceptedOnly": starting})
        *first, last = answers
        out: dict[str, Any]
        if "outcome" in last:
            assert [f.get("accepted") for f in first] == [a["seq"]], answers
            out = dict(last["outcome"])
        elif "error" in last:
            error = {k: v for k, v in last["error"].items() if k != "hint"}
            out = {"action_id": last["action_id"], "error": error} if first else {"error": error}
        else:  # accepted, behind a starting activation
            out = {
                "action_id": last["action_id"],
                "error": {"code": "action_pending", "message": "queued behind the activation"},
            }
        self.rt.settle()
        return [out, *self._emitted()]

    def _frames(self, name: str) -> list[dict[str, Any]]:
        conversation, scope, _ = self.subs[name]
        revision = self.rt.surface(conversation, scope).get().revision
        frame = self.dev.surface()
        seen: list[dict[str, Any]] = frame.evaluate(FRAMES, {"name": name, "revision": revision})
        revisions = [f["revision"] for f in seen]
        assert revisions == sorted(set(revisions)), f"not strictly increasing: {revisions}"
        return seen


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_in_chromium(
    path: Path,
    lineup_dev: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINEUP_DEV_FAULTS", "1")  # the fault seam (off otherwise)
    scenario = load_scenario(path)
    header = scenario.header
    assert header.app and header.host
    project = tmp_path / header.app
    shutil.copytree(APPS / header.app, project)
    dev = lineup_dev(project, host=header.host)
    replay = BrowserReplay(dev)
    failed = []
    for step in scenario.steps:
        if not step.runs_on("web"):
            continue
        emitted = replay.act(step, header.app)
        if step.expect is not None:
            problems = [d.describe() for d in compare(step.expect, emitted)]
            if problems:
                failed.append(f"step {step.index} ({step.describe()}): {'; '.join(problems)}")
    assert not failed, f"{path.name}: " + "; ".join(failed)


def test_the_fixtures_with_surface_steps_are_the_named_ones() -> None:
    assert {p.stem for p in FIXTURES} >= {
        "tis2_04_get_replace_subscribe",
        "tis2_04_subscribe_then_replace",
        "tis2_04_revision_gap",
        "tis2_04_bridge_reconnect",
        "tis2_04_surface_replace_refused",
        # UI Actions (SPEC 17), replayed from the Surface frame
        "tis2_06_agent_and_ui_interleaved",
        "tis2_06_resend_applied_once",
        "tis2_06_out_of_order",
        "tis2_06_action_id_conflict",
        "tis2_06_business_refusal",
        "tis2_06_action_interrupted_by_crash",
        "tis2_06_tool_interrupted_by_crash",
        "tis2_06_action_while_starting",
    }
