"""The runtime's options in one class (issue 42): `RuntimeOptions` holds every keyword of
`Runtime.open` and `AsyncRuntime.open` — same names, order, defaults and annotations — with
its check and its doc, and the options reference page is generated from it; `open` refuses
a bad option before anything is opened, with the codes it always raised."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from lineup_build.trust import TrustStore
from lineup_runtime_lite import AsyncRuntime, Runtime, VirtualClock
from lineup_runtime_lite.api.options import RuntimeOptions, option_names
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
