"""A runtime process the fault tests crash: it plays a plan and prints every answer.

Usage: `python driver.py PLAN.json`. The plan names the database, trust file and bundles,
an optional fault to arm before opening (`arm_at_open`), and `steps`; or a `soak` section
for a seeded random workload. Each acknowledged answer is printed as one JSON line before
the next step starts, so the parent knows what was acknowledged when the process died.
"""

from __future__ import annotations

import faulthandler
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_runtime_lite.store import faults

MIN = 60_000


def emit(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


def latest_instance(rt: Runtime, conversation: str, scope: str) -> str | None:
    row = rt._call_sync(
        lambda: engine_of(rt).store.one(
            "SELECT a.activation_id FROM activations a JOIN app_sessions s "
            "ON s.app_session_id = a.app_session_id WHERE s.conversation_id=? AND s.scope=? "
            "ORDER BY a.created_ms DESC, a.rowid DESC LIMIT 1",
            (conversation, scope),
        )
    )
    return None if row is None else str(row[0])


def run_step(rt: Runtime, clock: VirtualClock, step: dict[str, Any], i: int) -> None:
    if "arm" in step:
        point, mode, after = step["arm"]
        faults.arm(point, mode, after=after)
        emit(i=i, kind="arm", point=point)
    elif "call" in step:
        call_id, conv, method, params = step["call"]
        msg = rt.call(call_id, conv, method, params)
        emit(i=i, kind="call", call_id=call_id, msg=msg)
    elif "call_many" in step:  # accepted in one runtime turn: the first starts, the rest queue
        msgs = rt.call_many([tuple(c) for c in step["call_many"]])
        for (call_id, *_), msg in zip(step["call_many"], msgs, strict=True):
            emit(i=i, kind="call", call_id=call_id, msg=msg)
    elif "host" in step:
        event, conv, scope = step["host"]
        inst = latest_instance(rt, conv, scope)
        applied = inst is not None and rt.host.event(
            event, conversation=conv, scope=scope, instance=inst
        )
        emit(i=i, kind="event", event=event, applied=applied)
    elif "advance" in step:
        now = clock.advance(int(step["advance"]))
        emit(i=i, kind="advance", now=now)
    elif "settle" in step:
        rt.settle()
        emit(i=i, kind="settle")
    elif "fetch" in step:
        got = rt.outbox.fetch(int(step["fetch"]))
        emit(i=i, kind="fetch", ids=[m["id"] for m in got])
        if step.get("ack"):
            rt.outbox.ack([m["id"] for m in got])
            emit(i=i, kind="ack", ids=[m["id"] for m in got])
    elif "exit" in step:
        os._exit(137)
    elif "block" in step:  # hold the database until the parent kills this process
        emit(i=i, kind="block")
        sys.stdin.readline()
    else:
        raise ValueError(f"unknown step {step}")


def soak(rt: Runtime, clock: VirtualClock, spec: dict[str, Any]) -> None:
    """A seeded random mix of todo, probe and Pomodoro calls, Host events and clock moves."""
    rnd = random.Random(spec["seed"])
    if spec.get("arm"):
        point, mode, after = spec["arm"]
        faults.arm(point, mode, after=after)
    prefix = spec["prefix"]
    convs = [f"conv{n}" for n in range(spec.get("conversations", 12))]
    made: list[tuple[str, str, str, dict[str, Any]]] = []
    starting: dict[str, list[str]] = {"pomodoro": [], "probe": []}
    for i in range(spec["steps"]):
        conv = rnd.choice(convs)
        roll = rnd.random()
        cid = f"{prefix}-{i}"
        call: tuple[str, str, str, dict[str, Any]] | None = None
        if roll < 0.22:
            call = (cid, conv, "todo.add", {"title": f"task {i}"})
        elif roll < 0.27:
            call = (cid, conv, "todo.list", {})
        elif roll < 0.40:
            call = (cid, conv, "probe.append", {"item": cid})
        elif roll < 0.43:
            call = (cid, conv, "probe.fg", {})
        elif roll < 0.45:
            call = (cid, conv, "probe.peek", {})
        elif roll < 0.57:
            params: dict[str, Any] = {"minutes": rnd.randint(1, 30)}
            if rnd.random() < 0.5:
                params["label"] = f"focus {i}"
            call = (cid, conv, "pomodoro.start", params)
        elif roll < 0.62:
            call = (cid, conv, "pomodoro.interrupt", {})
        elif roll < 0.64:
            call = (cid, conv, "todo.add", {"title": ""})  # invalid: nothing is stored
        elif roll < 0.69 and made:
            call = rnd.choice(made)  # a retry: the latest persisted answer, nothing new
        elif roll < 0.86:
            scope = "pomodoro" if rnd.random() < 0.75 else "probe"
            if starting[scope] and rnd.random() < 0.8:  # mostly where something waits
                conv = rnd.choice(starting[scope])
            event = rnd.choices(
                ["foreground_confirmed", "surface_loaded", "user_left", "activation_failed"],
                weights=[70, 10, 10, 10],
            )[0]
            run_step(rt, clock, {"host": [event, conv, scope]}, i)
        elif roll < 0.96:
            small = rnd.random() < 0.6
            ms = rnd.randint(1_000, 50_000) if small else rnd.randint(1, 30) * MIN
            run_step(rt, clock, {"advance": ms}, i)
        else:
            rt.settle()
            emit(i=i, kind="settle")
        if call is not None:
            run_step(rt, clock, {"call": list(call)}, i)
            if call[0] == cid:
                made.append(call)
            if call[2] in ("pomodoro.start", "probe.fg"):
                starting[call[2].split(".")[0]].append(conv)
    rt.settle()


def main() -> None:
    faulthandler.dump_traceback_later(50, exit=True)  # a hang shows where, then ends
    plan = json.loads(Path(sys.argv[1]).read_text())
    clock = VirtualClock(plan["clock_ms"]) if plan.get("clock_ms") else VirtualClock()
    if plan.get("arm_at_open"):
        faults.arm(*plan["arm_at_open"][:2], after=plan["arm_at_open"][2])
    rt = Runtime.open(
        plan["db"],
        trust=Path(plan["trust"]),
        clock=clock,
        host=HostSimulator(plan.get("host", "manual")),
        apps_dir=Path(plan["apps_dir"]) if plan.get("apps_dir") else None,
        **(
            {"node_id": plan["node_id"], "node_lease_s": plan["lease_s"]}
            if plan.get("node_id")
            else {}
        ),
    )
    installed = {a["scope"] for a in rt.apps()}
    for scope, bundle in plan.get("bundles", {}).items():
        if scope not in installed:
            rt.install(bundle)
    emit(kind="open", now=clock.now_ms())
    if "soak" in plan:
        soak(rt, clock, plan["soak"])
    for i, step in enumerate(plan.get("steps", [])):
        run_step(rt, clock, step, i)
    emit(kind="done")
    rt.close()


if __name__ == "__main__":
    main()
