"""What the UI Actions tests share (SPEC 17): the queue app's bundle and a runtime with it
installed (fixtures `queue_bundle`, `q`), its App session started, its items, and the
session's serial order over calls and actions."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from tests.runtime.conftest import APPS, build_app


@pytest.fixture(scope="session")
def queue_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "queue", tmp_path_factory.mktemp("queue") / "queue", rt_key)


@pytest.fixture()
def q(rt: Runtime, queue_bundle: Path) -> Runtime:
    rt.install(queue_bundle)
    return rt


def start(rt: Runtime, conversation: str = "conv") -> None:
    """Bring the queue app up in `conversation` (an Agent call that writes nothing)."""
    assert rt.call(f"up-{conversation}", conversation, "queue.read", {})["stage"] == "accepted"
    rt.settle()


def items(rt: Runtime, conversation: str = "conv") -> list[str]:
    data = rt.surface(conversation, "queue").get().data
    return list((data or {}).get("items", []))


# -- many writers ------------------------------------------------------------------------------
def _serial_order(rt: Runtime, session_id: str) -> list[str]:
    """Every accepted operation's item, in the session's one order (`seq` over calls and
    actions): what the serial application of the queue makes."""
    import json

    dump = engine_of(rt).store.dump()
    ops: list[tuple[int, str]] = []
    # calls: (call_id, fingerprint, conversation, scope, method, params, session, act, seq, …)
    for row in dump["calls"]:
        if row[6] == session_id and row[4] == "queue.add":
            ops.append((int(row[8]), json.loads(row[5])["item"]))
    # ui_actions: (session, seq, client_id, client_seq, name, params, …)
    for row in dump["ui_actions"]:
        if row[0] == session_id and row[4] == "queue.push":
            ops.append((int(row[1]), json.loads(row[5])["item"]))
    return [item for _, item in sorted(ops)]
