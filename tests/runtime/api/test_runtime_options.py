"""The runtime's options in one class (issue 42): `RuntimeOptions` holds every keyword of
`Runtime.open` and `AsyncRuntime.open` — same names, order, defaults and annotations — with
its check and its doc, and the options reference page is generated from it; `open` refuses
a bad option before anything is opened, with the codes it always raised."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, Runtime, VirtualClock
from lineup_runtime_lite.api.options import RuntimeOptions, check_isolation, option_names
from lineup_sdk.errors import LineupError
from tests.users.docs_reference import option_docs, render_runtime_options

ROOT = Path(__file__).parents[3]


def _fields() -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(RuntimeOptions) if f.init]


def test_open_takes_exactly_the_options_fields_in_order() -> None:
    params = list(inspect.signature(AsyncRuntime.open).parameters.values())
    assert [p.name for p in params] == list(option_names())
    assert [p.name for p in params] == [f.name for f in _fields()]


@pytest.mark.parametrize("opener", [AsyncRuntime.open, Runtime.open], ids=["async", "sync"])
def test_open_and_the_options_agree_on_defaults_and_annotations(opener: Any) -> None:
    params = inspect.signature(opener).parameters
    for f in _fields():
        p = params[f.name]
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == default, f.name
        assert p.annotation == f.type, f.name
        kind = p.POSITIONAL_OR_KEYWORD if f.name == "path" else p.KEYWORD_ONLY
        assert p.kind == kind, f.name


def test_every_option_is_documented_once_in_the_class_and_on_its_page() -> None:
    docs = option_docs()
    assert sorted(docs) == sorted(option_names())
    assert all(len(text) > 20 for text in docs.values()), docs
    page = (ROOT / "docs/reference/runtime-options.md").read_text("utf-8")
    assert page == render_runtime_options()
    mkdocs = (ROOT / "mkdocs.yml").read_text("utf-8")
    assert "reference/runtime-options.md" in mkdocs


def test_options_are_frozen_and_checked_when_made(trust: TrustStore) -> None:
    options = RuntimeOptions(":memory:", trust, activation_timeout_s=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.sandbox = "off"  # type: ignore[misc]
    with pytest.raises(LineupError) as exc:
        RuntimeOptions(":memory:", trust, worker_processes=8)
    assert exc.value.code == "usage_invalid"
    assert "worker_processes" in exc.value.message


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_params_bytes": 0}, "max_params_bytes"),
        ({"sandbox": "maybe"}, "sandbox"),
        ({"worker_cpu_s": -1}, "worker_cpu_s"),
        ({"worker_memory_mb": 8}, "worker_memory_mb"),
        ({"validation_budget_s": 4000}, "validation_budget_s"),
        ({"isolation": "thread"}, "isolation"),
        ({"session_idle_s": 0}, "session_idle_s"),
        ({"workers_memory_mb": 100}, "workers_memory_mb"),
        ({"worker_env": {"LINEUP_X": "1"}}, "worker_env"),
        ({"db_schema": "s"}, "db_schema"),
        ({"node_id": ""}, "node_id"),
        ({"node_lease_s": 0.1}, "node_lease_s"),
        ({"bundle_limits": {}}, "bundle_limits"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_a_bad_option_is_refused_before_anything_is_opened(
    tmp_path: Path, trust: TrustStore, kwargs: dict[str, Any], named: str
) -> None:
    db = tmp_path / "rt.db"
    with pytest.raises(LineupError) as exc:
        Runtime.open(db, trust=trust, clock=VirtualClock(), **kwargs)
    assert exc.value.code == "usage_invalid"
    assert named in exc.value.message
    assert list(tmp_path.iterdir()) == []  # no database, no apps folder


def test_the_async_open_refuses_the_same_way(trust: TrustStore) -> None:
    async def go() -> str:
        with pytest.raises(LineupError) as exc:
            await AsyncRuntime.open(":memory:", trust=trust, isolation="thread")
        return exc.value.code

    assert asyncio.run(go()) == "usage_invalid"


def test_trust_is_keyword_only_on_both_opens(trust: TrustStore) -> None:
    with pytest.raises(TypeError):
        Runtime.open(":memory:", trust)  # type: ignore[call-arg]


def test_the_runtime_keeps_the_options_it_was_opened_with(trust: TrustStore) -> None:
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock(), session_idle_s=7) as rt:
        options = rt._art._options
        assert options.session_idle_s == 7 and options.clock is rt.clock


# -- each check's edges, on the options alone (no runtime is opened) ----------------------
def _refused(trust: TrustStore, named: str, **kwargs: Any) -> LineupError:
    """The options refused, naming the option as a word (the message says which to fix)."""
    with pytest.raises(LineupError) as exc:
        RuntimeOptions(":memory:", trust, **kwargs)
    assert exc.value.code == "usage_invalid"
    assert re.search(rf"(?<![\w]){re.escape(named)}(?![\w])", exc.value.message), (
        named,
        exc.value.message,
    )
    return exc.value


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_params_bytes": 0}, "max_params_bytes"),
        ({"max_params_bytes": 1.5}, "max_params_bytes"),
        ({"activation_timeout_s": 0}, "activation_timeout_s"),
        ({"activation_timeout_s": True}, "activation_timeout_s"),
        ({"worker_cpu_s": 0}, "worker_cpu_s"),
        ({"worker_memory_mb": 63}, "worker_memory_mb"),
        ({"worker_heartbeat_s": 0}, "worker_heartbeat_s"),
        ({"worker_log_max_bytes": -1}, "worker_log_max_bytes"),
        ({"worker_processes": 15}, "worker_processes"),
        ({"worker_processes": 32769}, "worker_processes"),
        ({"validation_budget_s": 3600.5}, "validation_budget_s"),
        ({"session_idle_s": -1}, "session_idle_s"),
        ({"workers_memory_mb": 1023}, "workers_memory_mb"),  # under worker_memory_mb
        ({"workers_memory_mb": (1 << 30) + 1}, "workers_memory_mb"),
        ({"db_schema": "s"}, "db_schema"),
        ({"node_id": "a\x01"}, "node_id"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_each_option_is_refused_just_past_its_bound(
    trust: TrustStore, kwargs: dict[str, Any], named: str
) -> None:
    _refused(trust, named, **kwargs)


def test_each_option_is_accepted_at_its_bound(trust: TrustStore) -> None:
    options = RuntimeOptions(
        Path("rt.db"),
        trust,
        max_params_bytes=1,
        worker_memory_mb=64,
        worker_heartbeat_s=0.5,
        worker_log_max_bytes=0,
        worker_processes=16,
        validation_budget_s=3600,
        workers_memory_mb=64,
        node_id="node-1",
    )
    assert (options.max_params_bytes, options.worker_log_max_bytes) == (1, 0)
    assert options.node_id == "node-1" and not options.postgres and not options.in_memory
    top = RuntimeOptions(":memory:", trust, worker_processes=32768, workers_memory_mb=1 << 30)
    assert top.in_memory and top.worker_processes == 32768


@pytest.mark.parametrize("path", ["", 3, None], ids=["empty", "int", "none"])
def test_a_path_that_is_no_file_path_is_refused(trust: TrustStore, path: Any) -> None:
    with pytest.raises(LineupError) as exc:
        RuntimeOptions(path, trust)
    assert exc.value.code == "usage_invalid" and exc.value.message.startswith("path ")


def test_a_trust_that_is_no_store_or_path_is_refused(trust: TrustStore) -> None:
    with pytest.raises(LineupError) as exc:
        RuntimeOptions(":memory:", 3)
    assert exc.value.code == "usage_invalid" and exc.value.message.startswith("trust ")
    assert RuntimeOptions(":memory:", "trust.toml").trust == "trust.toml"


def test_isolation_is_one_of_two_and_a_wrong_one_gets_a_hint(trust: TrustStore) -> None:
    assert [check_isolation(i) for i in ("app", "session")] == ["app", "session"]
    refused = _refused(trust, "isolation", isolation="threads")
    assert refused.hint and "session" in refused.hint
    for choice in ("app", "session"):  # the message lists the choices, each as a word
        assert re.search(rf"(?<![\w]){choice}(?![\w])", refused.message), refused.message


def test_node_id_defaults_to_lineup_node_id_read_once(
    trust: TrustStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEUP_NODE_ID", "from-env")
    assert RuntimeOptions(":memory:", trust).node_id == "from-env"
    assert RuntimeOptions(":memory:", trust, node_id="given").node_id == "given"
    monkeypatch.setenv("LINEUP_NODE_ID", "")
    assert RuntimeOptions(":memory:", trust).node_id is None  # empty: the default
    monkeypatch.setenv("LINEUP_NODE_ID", "bad\x01id")
    _refused(trust, "node_id")  # checked as a given one is


def test_worker_env_is_checked_and_kept_sorted(trust: TrustStore) -> None:
    options = RuntimeOptions(":memory:", trust, worker_env={"B_2": "two", "A": "1"})
    assert options.worker_env_pairs == (("A", "1"), ("B_2", "two"))
    assert RuntimeOptions(":memory:", trust).worker_env_pairs == ()
    for env in (
        {"lower": "1"},
        {"1A": "1"},
        {"A-B": "1"},
        {"LINEUP_X": "1"},
        {"PYTHONPATH": "/x"},
        {3: "1"},
        {"A": 3},
        {"A": "a\0b"},
    ):
        message = _refused(trust, "worker_env", worker_env=env).message
        assert "LINEUP_*" in message and "PYTHON*" in message  # the names never passed
    long = "a" * 10_000  # a hostile name is clipped in the message, not echoed whole
    message = _refused(trust, "worker_env", worker_env={long: "1"}).message
    assert repr("a" * 60) in message and len(message) < 300
