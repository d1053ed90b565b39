"""Every public entry, with a database error injected at each statement it sends (SPEC
16.1, "Races between nodes are decisions"): `UniqueViolation`, `SerializationFailure`,
`DeadlockDetected` and `OperationalError` on PostgreSQL, `sqlite3.IntegrityError` and
`sqlite3.OperationalError` on SQLite. None escapes as a raw exception: each is retried as
a race, or answered with a stable code (`store_unavailable`, or `runtime_locked` for a
registration), and the runtime goes on — its facts pass the invariant check at the end.

The sweep first runs an entry cleanly, counting its statements (N), then runs it again N
times per error kind, the error in place of statement 1, 2, ..., N (`tests/faults/
statements.py`). The counts are printed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_sdk.errors import LineupError
from tests.faults import invariants
from tests.faults.statements import KINDS, Injector, injecting

pytestmark = pytest.mark.slow  # handed out first under pytest-xdist


#: The codes an injected database error may surface as.
STABLE = {"store_unavailable", "runtime_locked"}
LEASE_S = 1.0


@dataclass
class Ctx:
    """What the entries act on: the runtime under test and how to open another."""

    rt: Runtime
    target: str
    other: str
    trust: TrustStore
    bundles: dict[str, Path]
    tmp: Path
    engine: str
    injector: Injector
    closing: Runtime | None = None
    ids: Iterator[int] = field(default_factory=itertools.count)

    def open_other(self, node: str = "other") -> Runtime:
        nodes: dict[str, Any] = {}
        if self.engine == "postgresql":
            nodes = {"node_id": node, "node_lease_s": LEASE_S}
        return Runtime.open(
            self.other,
            trust=self.trust,
            clock=VirtualClock(),
            host=HostSimulator("auto"),
            apps_dir=self.tmp / "apps-other",
            **nodes,
        )


Entry = tuple[Callable[[Ctx], Any], Callable[[Ctx], Any]]


def _nothing(c: Ctx) -> None:
    return None


def _uninstall_todo(c: Ctx) -> None:
    if any(a["scope"] == "todo" for a in c.rt.apps()):
        c.rt.uninstall("todo")


def _install_todo(c: Ctx) -> None:
    c.rt.install(c.bundles["todo"])


def _open_close(c: Ctx) -> None:
    c.open_other().close()


def _open_closing(c: Ctx) -> None:
    c.closing = c.open_other("closing")  # outside the count: only its close is counted


def _close(c: Ctx) -> None:
    assert c.closing is not None
    try:
        c.closing.close()
    finally:
        c.closing = None


def _new_call(c: Ctx) -> AgentMessage:
    return c.rt.call(f"n{next(c.ids)}", "conv", "probe.echo", {"text": "x"})


def _fetch_ack(c: Ctx) -> None:
    got = c.rt.outbox.fetch(5)
    c.rt.outbox.ack([m["id"] for m in got])


def _host_event(c: Ctx) -> None:
    c.rt.host.event("surface_loaded", conversation="conv", scope="probe")


def _surface(c: Ctx) -> None:
    surface = c.rt.surface("conv", "probe")
    surface.get()
    surface.subscribe(lambda kind, snap: None)()


#: name -> (setup, outside the count; the entry, counted)
ENTRIES: dict[str, Entry] = {
    "open": (_nothing, _open_close),
    "install": (_uninstall_todo, _install_todo),
    "install_unchanged": (_nothing, lambda c: c.rt.install(c.bundles["probe"])),
    "uninstall": (_install_todo, lambda c: c.rt.uninstall("todo")),
    "apps": (_nothing, lambda c: c.rt.apps()),
    "inventory": (_nothing, lambda c: c.rt.inventory()),
    "sessions": (_nothing, lambda c: c.rt.sessions()),
    "call": (_nothing, _new_call),
    "call_replay": (_nothing, lambda c: c.rt.call("up", "conv", "probe.echo", {"text": "up"})),
    # append: an item applied twice is a call delivered twice (the invariant check at the
    # end; tests/faults/test_double_delivery.py)
    "call_many": (
        _nothing,
        lambda c: c.rt.call_many(
            [
                (f"m{n}", "conv", "probe.append", {"item": f"i{n}"})
                for n in (next(c.ids), next(c.ids))
            ]
        ),
    ),
    "call_record": (_nothing, lambda c: c.rt.call_record("up")),
    "outbox.fetch+ack": (_nothing, _fetch_ack),
    "outbox.all": (_nothing, lambda c: c.rt.outbox.all()),
    "host.event": (_nothing, _host_event),
    "surface": (_nothing, _surface),
    "im_records": (_nothing, lambda c: c.rt.im_records("conv")),
    "settle": (_nothing, lambda c: c.rt.settle()),
    "tick": (_nothing, lambda c: c.rt.tick()),
    "store_dump": (_nothing, lambda c: c.rt.store_dump()),
    "close": (_open_closing, _close),
}


def _sweep(
    c: Ctx, injector: Injector, entries: dict[str, Entry]
) -> tuple[list[str], dict[str, int]]:
    """Each entry once cleanly (its statements counted), then once per statement and
    kind with the error there. Returns what escaped raw, and each entry's count."""
    escaped: list[str] = []
    counts: dict[str, int] = {}
    for name, (setup, entry) in entries.items():
        setup(c)
        with injector.run():
            entry(c)
        counts[name] = injector.count
        for at in range(1, injector.count + 1):
            for kind, make in KINDS[c.engine].items():
                setup(c)
                try:
                    with injector.run(at, make):
                        entry(c)
                except LineupError as exc:
                    if exc.code not in STABLE:
                        escaped.append(f"{name} @{at} {kind}: {exc.code}: {exc.message}")
                except Exception as exc:  # the finding: a raw exception
                    escaped.append(f"{name} @{at} {kind}: {type(exc).__name__}: {exc}")
                c.rt.settle()
    return escaped, counts


@pytest.fixture
def ctx(
    store_engine: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    trust: TrustStore,
    probe_bundle: Path,
    todo_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Ctx]:
    engine = store_engine
    injector = request.getfixturevalue("injector_" + engine)
    if engine == "postgresql":
        target = other = str(request.getfixturevalue("pg_url"))
        nodes: dict[str, Any] = {"node_id": "main", "node_lease_s": LEASE_S}
    else:
        target, other, nodes = str(tmp_path / "rt.db"), str(tmp_path / "other.db"), {}
    rt = Runtime.open(
        target,
        trust=trust,
        clock=VirtualClock(),
        host=HostSimulator("auto"),
        apps_dir=tmp_path / "apps",
        **nodes,
    )
    bundles = {"probe": probe_bundle, "todo": todo_bundle}
    c = Ctx(rt, target, other, trust, bundles, tmp_path, engine, injector)
    try:
        rt.install(probe_bundle)
        assert rt.call("up", "conv", "probe.echo", {"text": "up"})["stage"] == "accepted"
        rt.settle()  # the App session is ready: each call below is delivered at once
        if engine == "sqlite":
            c.open_other().close()  # the other file exists: `open` reopens it
        yield c
    finally:
        c.rt.close()


@pytest.fixture
def injector_sqlite(monkeypatch: pytest.MonkeyPatch) -> Iterator[Injector]:
    with injecting(monkeypatch, "sqlite") as injector:
        yield injector


@pytest.fixture
def injector_postgresql(monkeypatch: pytest.MonkeyPatch) -> Iterator[Injector]:
    with injecting(monkeypatch, "postgresql") as injector:
        yield injector


@pytest.mark.store
def test_no_database_error_escapes_any_entry_raw(
    ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    escaped, counts = _sweep(ctx, ctx.injector, ENTRIES)
    with capsys.disabled():
        total = sum(counts.values()) * len(KINDS[ctx.engine])
        print(f"\n{ctx.engine}: {total} injected runs over {len(counts)} entries: {counts}")
    assert escaped == [], "\n".join(escaped)
    # the runtime goes on, and its facts hold together
    msg = ctx.rt.call("after", "conv", "probe.echo", {"text": "after"})
    assert msg["stage"] == "result", msg
    ctx.rt.settle()
    invariants.check(ctx.rt)


def test_async_runtime_entries_answer_stable_codes(
    tmp_path: Path,
    trust: TrustStore,
    probe_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`AsyncRuntime` (the same engine under the sync `Runtime`): open, install, a call and
    the outbox, each with every kind at each statement, on SQLite."""
    target = str(tmp_path / "async.db")

    async def main(injector: Injector) -> list[str]:
        escaped: list[str] = []

        async def opened() -> AsyncRuntime:
            return await AsyncRuntime.open(
                target, trust=trust, clock=VirtualClock(), host=HostSimulator("auto")
            )

        async def entry_open() -> None:
            await (await opened()).close()

        await entry_open()  # created outside the count
        art = await opened()
        try:
            ids = itertools.count()

            async def entry_install() -> None:
                await art.install(probe_bundle)

            async def entry_call() -> None:
                await art.call(f"a{next(ids)}", "conv", "probe.echo", {"text": "x"})

            async def entry_outbox() -> None:
                got = await art.outbox.fetch(5)
                await art.outbox.ack([m["id"] for m in got])

            await art.install(probe_bundle)
            for name, entry in (
                ("call", entry_call),
                ("install", entry_install),
                ("outbox", entry_outbox),
            ):
                with injector.run():
                    await entry()
                for at in range(1, injector.count + 1):
                    for kind, make in KINDS["sqlite"].items():
                        try:
                            with injector.run(at, make):
                                await entry()
                        except LineupError as exc:
                            if exc.code not in STABLE:
                                escaped.append(f"{name} @{at} {kind}: {exc.code}")
                        except Exception as exc:
                            escaped.append(f"{name} @{at} {kind}: {type(exc).__name__}: {exc}")
                        await art.settle()
        finally:
            await art.close()
        # open: its own statements (migrations checked, recovery)
        with injector.run():
            await entry_open()
        for at in range(1, injector.count + 1):
            for kind, make in KINDS["sqlite"].items():
                try:
                    with injector.run(at, make):
                        await entry_open()
                except LineupError as exc:
                    if exc.code not in STABLE | {"store_corrupt"}:
                        escaped.append(f"open @{at} {kind}: {exc.code}")
                except Exception as exc:
                    escaped.append(f"open @{at} {kind}: {type(exc).__name__}: {exc}")
        return escaped

    with injecting(monkeypatch, "sqlite") as injector:
        escaped = asyncio.run(main(injector))
    assert escaped == [], "\n".join(escaped)


@pytest.mark.store
def test_a_writing_call_with_an_error_at_any_statement_applies_all_or_nothing(
    ctx: Ctx, capsys: pytest.CaptureFixture[str]
) -> None:
    """SPEC 17, every delivery atomic: a handler's write commits with its delivery's answer
    in one transaction. With a database error in place of any statement of a writing call
    (its acceptance, its delivery, its answer with the data), the call either answers its
    result with the data one revision on, or applies nothing — never data without its
    answer, or an answer without its data."""
    c, injector = ctx, ctx.injector
    surface = c.rt.surface("conv", "probe")

    def append() -> tuple[str, Any]:
        cid = f"w{next(c.ids)}"
        try:
            c.rt.call(cid, "conv", "probe.append", {"item": cid})
        except LineupError as exc:
            assert exc.code in STABLE, exc
        return cid, None

    with injector.run():
        append()
    count = injector.count
    runs, applied, answer_hit = 0, 0, False
    for at in range(1, count + 1):
        for make in KINDS[c.engine].values():
            before = surface.get()
            with injector.run(at, make):
                cid, _ = append()
            where = injector.where
            c.rt.settle()
            record = c.rt.call_record(cid)
            ends = [m for m in (record or {}).get("messages", []) if m["kind"] != "receipt"]
            after = surface.get()
            items = list((before.data or {}).get("items", []))
            if ends and ends[0]["kind"] == "result":
                assert ends[0]["result"] == before.revision + 1, (at, where)
                assert after.revision == before.revision + 1, (at, where)
                assert after.data == {"items": [*items, cid]}, (at, where)
                applied += 1
            else:
                assert after == before, (at, where, ends)
            answer_hit = answer_hit or "session_data" in where
            runs += 1
    with capsys.disabled():
        print(f"\n{c.engine}: {runs} injected writing calls, {applied} applied, {count} statements")
    assert answer_hit  # some error took the place of the answer's own write
    invariants.check(c.rt)
