"""One API shape for both runtimes (issue 23, SPEC 5.0): `Runtime` and `AsyncRuntime` name
the same public members (`outbox.fetch`, `host.event`, `surface(...).get()`, ...), awaitable
on one and blocking on the other, with the same parameters; the sync `Runtime` is a thin
wrapper over public `AsyncRuntime` members only; the old async spellings still work for one
release and warn."""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

import lineup_runtime_lite.api.runtime as sync_module
from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, Outbox, Runtime, Surface, VirtualClock
from lineup_runtime_lite.api.async_faces import AsyncOutbox, AsyncSurface
from lineup_runtime_lite.internals import AsyncHostPort, HostPort
from lineup_sdk.errors import LineupError

#: The old async spellings, deprecated for one release.
DEPRECATED = {
    "host_event",
    "operations",
    "outbox_ack",
    "outbox_all",
    "outbox_fetch",
    "simulator",
    "subscribe",
    "surface_get",
}
#: `Runtime.acall`: the sync runtime's `call()` awaited from another event loop.
SYNC_ONLY = {"acall"}
PAIRS = [
    (Runtime, AsyncRuntime, SYNC_ONLY, DEPRECATED),
    (Outbox, AsyncOutbox, set(), set()),
    (HostPort, AsyncHostPort, set(), set()),
    # `Surface.asubmit`: `submit()` awaited from another event loop (the dev Host's bridge)
    (Surface, AsyncSurface, {"asubmit"}, set()),
]
IDS = [pair[0].__name__ for pair in PAIRS]


def _public(cls: type) -> set[str]:
    """Public members, and the public attributes a class declares (set when opened)."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    names |= {n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_")}
    return names


def _kind(cls: type, name: str) -> str:
    """`data` (an attribute or a property) or `method`."""
    member = inspect.getattr_static(cls, name, None)
    return "data" if member is None or isinstance(member, property) else "method"


def _params(cls: type, name: str) -> list[tuple[str, Any, Any]]:
    sig = inspect.signature(getattr(cls, name))
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


@pytest.mark.parametrize(("sync", "asynchronous", "sync_only", "deprecated"), PAIRS, ids=IDS)
def test_both_runtimes_list_the_same_public_names(
    sync: type, asynchronous: type, sync_only: set[str], deprecated: set[str]
) -> None:
    assert _public(sync) - sync_only == _public(asynchronous) - deprecated


@pytest.mark.parametrize(("sync", "asynchronous", "sync_only", "deprecated"), PAIRS, ids=IDS)
def test_each_name_is_the_same_member_modulo_await(
    sync: type, asynchronous: type, sync_only: set[str], deprecated: set[str]
) -> None:
    for name in sorted(_public(sync) - sync_only):
        kind = _kind(asynchronous, name)
        assert _kind(sync, name) == kind, name
        if kind != "method":
            continue
        awaited = inspect.iscoroutinefunction(getattr(asynchronous, name))
        assert not inspect.iscoroutinefunction(getattr(sync, name)), name
        assert _params(sync, name) == _params(asynchronous, name), name
        if name not in ("surface", "worker_log"):  # views and paths: no IO to await
            assert awaited, name


def test_runtime_open_takes_the_arguments_of_async_runtime_open() -> None:
    assert inspect.signature(Runtime.open) == inspect.signature(AsyncRuntime.open)
    assert "trust" in inspect.signature(Runtime.open).parameters


def test_the_sync_runtime_uses_only_public_async_members() -> None:
    """No `self._art._x` (nor of the parts it holds) outside the two test hooks."""
    hooks = {"_core", "_timer"}
    held = {"_art", "_outbox", "_surface", "_host"}
    tree = ast.parse(Path(sync_module.__file__).read_text())
    private = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or fn.name in hooks:
            continue
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
                continue
            inner = node.value
            if (isinstance(inner, ast.Attribute) and inner.attr in held) or (
                isinstance(inner, ast.Name) and inner.id == "art"
            ):
                private.append(f"{fn.name}:{node.lineno}: .{node.attr}")
    assert private == []


def test_the_old_async_names_warn_and_still_work(trust: TrustStore, probe_bundle: Path) -> None:
    async def go() -> list[Any]:
        async with await AsyncRuntime.open(":memory:", trust=trust, clock=VirtualClock()) as art:
            await art.install(probe_bundle)
            await art.call("a", "c", "probe.append", {"item": "x"})
            await art.settle()
            out: list[Any] = []
            with pytest.warns(DeprecationWarning, match=r"outbox_fetch.*outbox\.fetch"):
                fetched = await art.outbox_fetch(100)
            out.append(fetched == await art.outbox.fetch(100))
            with pytest.warns(DeprecationWarning, match="outbox_all"):
                out.append(await art.outbox_all() == await art.outbox.all())
            with pytest.warns(DeprecationWarning, match="surface_get"):
                out.append(
                    await art.surface_get("c", "probe") == await art.surface("c", "probe").get()
                )
            with pytest.warns(DeprecationWarning, match="operations"):
                out.append(await art.operations("c", "probe") == [])
            with pytest.warns(DeprecationWarning, match="simulator"):
                out.append(art.simulator is art.host.simulator)
            seen: list[int] = []
            with pytest.warns(DeprecationWarning, match="subscribe"):
                off = await art.subscribe(
                    "c", "probe", lambda kind, snap: seen.append(snap.revision)
                )
            off()
            out.append(seen[:1] == [(await art.surface("c", "probe").get()).revision])
            refused = pytest.raises(LineupError, match="no instance to address")
            with pytest.warns(DeprecationWarning, match="host_event"), refused:
                await art.host_event("foreground_confirmed", conversation="x", scope="probe")
            with pytest.warns(DeprecationWarning, match="outbox_ack"):
                await art.outbox_ack([m["id"] for m in fetched])
            out.append(await art.outbox.fetch(100) == [])
            return out

    assert asyncio.run(go()) == [True] * 7


def test_runtime_open_forwards_every_argument(trust: TrustStore) -> None:
    clock = VirtualClock(1_767_225_600_000)
    with Runtime.open(path=":memory:", trust=trust, clock=clock, activation_timeout_s=5) as rt:
        assert rt.clock is clock
    with pytest.raises(TypeError):
        Runtime.open(":memory:", trust=trust, colck=clock)  # type: ignore[call-arg]


def test_async_runtime_is_the_public_api_in_at_most_450_lines() -> None:
    """Options, assembly, trust, reads, faces and deadlines live in modules of their own;
    the class keeps the public API (issue 42)."""
    import lineup_runtime_lite.api.async_runtime as module

    tree = ast.parse(Path(module.__file__).read_text("utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AsyncRuntime"]
    assert cls.end_lineno is not None
    # the node's life is `coordination.lifecycle.NodeLife`'s, not counted here any more
    assert cls.end_lineno - cls.lineno + 1 <= 450


def test_what_call_and_the_outbox_give_is_the_typed_agent_message(probe: Runtime) -> None:
    """`AgentMessage` (a TypedDict over plain dicts, SPEC 5.0) names every key a message
    has, and a message has every key it requires; likewise an action's outcome."""
    from lineup_runtime_lite.core.messages import ActionOutcome, AgentMessage, ErrorBody

    def keys(typed: Any) -> tuple[set[str], set[str]]:
        """(required, all) from the annotations as written (postponed: strings)."""
        notes = {k: str(getattr(v, "__forward_arg__", v)) for k, v in typed.__annotations__.items()}
        return {k for k, v in notes.items() if not v.startswith("NotRequired")}, set(notes)

    required, allowed = keys(AgentMessage)
    error_required, error_allowed = keys(ErrorBody)
    answers = [
        probe.call("t1", "c1", "probe.append", {"item": "x"}),
        probe.call("t2", "c1", "probe.nope", {}),
    ]
    probe.settle()
    messages = [*answers, *probe.outbox.all()]
    assert len(messages) > 2
    for msg in messages:
        assert type(msg) is dict
        assert required <= set(msg) <= allowed, msg
        if "error" in msg:
            assert error_required <= set(msg["error"]) <= error_allowed, msg
    assert {m["kind"] for m in messages} <= {"receipt", "result", "error"}
    assert keys(ActionOutcome) == ({"action_id", "result", "revision"},) * 2
    assert {"id", "call_id", "app_scope", "kind", "stage", "at"} == required
