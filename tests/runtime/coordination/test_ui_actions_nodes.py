"""UI Actions on several runtime nodes (SPEC 17 with 15): any node accepts and records an
action; the owner of its App session delivers it in the session's order; the accepting node
answers when the outcome commits; a replay on either node answers the stored outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.runtime.conftest import APPS, build_app
from tests.runtime.coordination.nodes_kit import final_of, node, owners, until


@pytest.fixture(scope="module")
def queue_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: SigningKey) -> Path:
    return build_app(APPS / "queue", tmp_path_factory.mktemp("queue") / "queue", rt_key)


@pytest.fixture
def two_nodes(
    pg_url: str, tmp_path: Path, trust: TrustStore, queue_bundle: Path
) -> Iterator[tuple[Runtime, Runtime]]:
    n1 = node(pg_url, tmp_path, trust, "n1")
    try:
        n1.install(queue_bundle)
        n2 = node(pg_url, tmp_path, trust, "n2")
        try:
            until(lambda: any(a["scope"] == "queue" for a in n2.apps()), what="n2 sees it")
            yield n1, n2
        finally:
            n2.close()
    finally:
        n1.close()


def _items(rt: Runtime, conversation: str = "conv") -> list[str]:
    data = rt.surface(conversation, "queue").get().data
    return list((data or {}).get("items", []))


def _serial(rt: Runtime, session_id: str) -> list[str]:
    dump = engine_of(rt).store.dump()
    ops = [
        (int(r[8]), json.loads(r[5])["item"])
        for r in dump["calls"]
        if r[6] == session_id and r[4] == "queue.add"
    ]
    ops += [
        (int(r[1]), json.loads(r[5])["item"])
        for r in dump["ui_actions"]
        if r[0] == session_id and r[4] == "queue.push"
    ]
    return [item for _, item in sorted(ops)]


def test_an_action_accepted_by_another_node_is_delivered_by_the_owner(
    two_nodes: tuple[Runtime, Runtime], pg_url: str
) -> None:
    n1, n2 = two_nodes
    assert n1.call("up", "conv", "queue.read", {})["stage"] == "accepted"
    until(lambda: final_of(n1, "up"), what="the session is ready on n1")
    [session] = n1.sessions("queue")
    assert owners(pg_url)[session["app_session_id"]] == "n1"
    out = n2.surface("conv", "queue").act("queue.push", {"item": "a"}, client_id="c", seq=1)
    assert out["action_id"] == "c:1" and out["revision"] == 1
    assert engine_of(n2).workers == {}  # n2 never ran the app: the owner delivered it
    # a replay on either node answers the stored outcome; a conflict is one on both
    for rt in (n1, n2):
        s = rt.surface("conv", "queue")
        assert s.act("queue.push", {"item": "a"}, client_id="c", seq=1) == out
        with pytest.raises(LineupError) as exc:
            s.act("queue.push", {"item": "z"}, client_id="c", seq=1)
        assert exc.value.code == "action_id_conflict"
        with pytest.raises(LineupError) as exc:
            s.act("queue.push", {"item": "z"}, client_id="c", seq=3)
        assert exc.value.code == "action_out_of_order"
    assert _items(n1) == ["a"]


def test_actions_on_one_node_and_calls_on_the_other_keep_the_sessions_one_order(
    two_nodes: tuple[Runtime, Runtime],
) -> None:
    """UI clients on n2 and the Agent on n1 (the owner) write one session at once: each
    action is accepted on n2 without waiting (its outcome comes later) and a call on the
    owner follows at once — no call overtakes an action accepted before it, nothing is
    lost or doubled, and the data is the serial application in the session's order."""
    n1, n2 = two_nodes
    assert n1.call("up", "conv", "queue.read", {})["stage"] == "accepted"
    until(lambda: final_of(n1, "up"), what="the session is ready on n1")
    s2 = n2.surface("conv", "queue")
    rounds = 15

    def ui(client: str) -> None:
        for k in range(1, rounds + 1):
            try:
                s2.act("queue.push", {"item": f"{client}-{k}"}, client_id=client, seq=k, timeout=0)
            except LineupError as exc:
                assert exc.code == "action_pending", exc

    def agent() -> None:
        for k in range(rounds):
            n1.call(f"g{k}", "conv", "queue.add", {"item": f"g{k}"})

    with ThreadPoolExecutor(3) as pool:
        done = [pool.submit(ui, "u1"), pool.submit(ui, "u2"), pool.submit(agent)]
        for f in done:
            f.result()
    total = 3 * rounds
    until(lambda: len(_items(n1)) == total, what="every operation applied")
    for client in ("u1", "u2"):  # every outcome, answered on the accepting node
        for k in range(1, rounds + 1):
            out = s2.act("queue.push", {"item": f"{client}-{k}"}, client_id=client, seq=k)
            assert out["action_id"] == f"{client}:{k}"
    [session] = n1.sessions("queue")
    got = _items(n1)
    assert len(set(got)) == total
    assert got == _serial(n1, session["app_session_id"])
    n1.settle()
    invariants.check(n1)
