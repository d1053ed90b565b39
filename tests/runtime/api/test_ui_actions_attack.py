"""An outside attack on UI Actions (SPEC 17): hostile envelopes through `Surface.act` /
`submit`, each answered with a stable code, nothing persisted, the runtime still serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from tests.runtime.api.ui_actions_kit import q, queue_bundle, start


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


__all__ = ["q", "queue_bundle"]


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE: list[tuple[str, Any, Any, Any, str]] = [
    ("client ':'", "queue.push", {"item": "a"}, ("a:b", 1), "invalid_params"),
    ("client newline", "queue.push", {"item": "a"}, ("ab\n", 1), "invalid_params"),
    ("client None", "queue.push", {"item": "a"}, (None, 1), "invalid_params"),
    ("client bytes", "queue.push", {"item": "a"}, (b"ab", 1), "invalid_params"),
    ("seq None", "queue.push", {"item": "a"}, ("c", None), "invalid_params"),
    ("seq 2^53-1 first", "queue.push", {"item": "a"}, ("c", 2**53 - 1), "action_out_of_order"),
    ("seq huge", "queue.push", {"item": "a"}, ("c", 10**400), "invalid_params"),
    ("name None", None, {"item": "a"}, ("c", 1), "invalid_params"),
    ("name int", 7, {"item": "a"}, ("c", 1), "invalid_params"),
    ("name huge", "q" * 10_000_000, {"item": "a"}, ("c", 1), "invalid_params"),
    ("name a tool", "queue.read", {}, ("c", 1), "unknown_action"),
    ("name another app", "todo.toggle", {"id": "x"}, ("c", 1), "unknown_action"),
    ("name empty", "", {}, ("c", 1), "invalid_params"),
    ("params list", "queue.push", ["a"], ("c", 1), "invalid_params"),
    ("params None", "queue.push", None, ("c", 1), "invalid_params"),
    ("params str", "queue.push", "a", ("c", 1), "invalid_params"),
    ("params deep", "queue.push", _nested(100_000), ("c", 1), "invalid_params"),
    ("params deep 1k", "queue.push", {"item": _nested(1000)}, ("c", 1), "invalid_params"),
    ("params 10MB", "queue.push", {"item": "x" * 10_000_000}, ("c", 1), "params_too_large"),
    ("params non-str key", "queue.push", {1: "a"}, ("c", 1), "invalid_params"),
    ("params set", "queue.push", {"item": {"a"}}, ("c", 1), "invalid_params"),
]


@pytest.mark.store
@pytest.mark.parametrize(
    ("name", "params", "ids", "want"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
@pytest.mark.parametrize("entry", ["act", "submit"])
def test_a_hostile_envelope_gets_its_code_persists_nothing_and_the_runtime_serves(
    q: Runtime, entry: str, name: Any, params: Any, ids: tuple[Any, Any], want: str
) -> None:
    start(q)
    s = q.surface("conv", "queue")
    before = engine_of(q).store.dump()
    client, seq = ids
    with pytest.raises(LineupError) as exc:
        getattr(s, entry)(name, params, client_id=client, seq=seq)
    assert exc.value.code == want
    assert engine_of(q).store.dump() == before
    assert s.act("queue.push", {"item": "ok"}, client_id="c", seq=1)["revision"] == 1


HOSTILE_APP = '''
from typing import Any

from lineup_sdk import ActionContext, ToolContext, define_agent_tools, define_ui_actions

tools = define_agent_tools(app_scope="hostile")
actions = define_ui_actions(app_scope="hostile")


@tools.tool("hostile.up", activation="app_ready")
async def up(ctx: ToolContext) -> int:
    """Bring the app up."""
    return 1


@actions.action("hostile.unserialisable")
async def unserialisable(ctx: ActionContext) -> Any:
    """Answers a value that refers to itself."""
    value: dict[str, Any] = {}
    value["self"] = value
    return value


@actions.action("hostile.huge")
async def huge(ctx: ActionContext) -> Any:
    """Answers 20 MB."""
    return "x" * 20_000_000


@actions.action("hostile.deep")
async def deep(ctx: ActionContext) -> Any:
    """Answers a deeply nested value."""
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    return value


@actions.action("hostile.ok")
async def ok(ctx: ActionContext) -> int:
    """Writes one value."""
    snap = await ctx.session_data.get()
    await ctx.session_data.replace({"n": 1}, expected_revision=snap.revision)
    return 1
'''


@pytest.fixture(scope="module")
def hostile_bundle(tmp_path_factory: pytest.TempPathFactory, rt_key: Any) -> Path:
    from tests.runtime.conftest import build_source_app

    return build_source_app(tmp_path_factory.mktemp("hostile"), "hostile", HOSTILE_APP, rt_key)


@pytest.mark.store
@pytest.mark.parametrize("name", ["unserialisable", "huge", "deep"])
def test_a_handler_answering_what_cannot_travel_is_handler_result_invalid(
    rt: Runtime, hostile_bundle: Path, name: str
) -> None:
    rt.install(hostile_bundle)
    assert rt.call("up", "conv", "hostile.up", {})["stage"] == "accepted"
    rt.settle()
    s = rt.surface("conv", "hostile")
    with pytest.raises(LineupError) as exc:
        s.act(f"hostile.{name}", {}, client_id="c", seq=1, timeout=60)
    assert exc.value.code == "handler_result_invalid", exc.value
    # recorded as the outcome: a replay answers it again; the queue goes on
    with pytest.raises(LineupError) as again:
        s.act(f"hostile.{name}", {}, client_id="c", seq=1, timeout=60)
    assert again.value.code == exc.value.code
    assert s.act("hostile.ok", {}, client_id="c", seq=2, timeout=60)["revision"] == 1


@pytest.mark.parametrize("command", ["act c:1 conv queue.push", "call x conv queue.add"])
def test_the_prompt_answers_params_nested_past_the_parser_as_a_mistake(command: str) -> None:
    """`lineup run`'s prompt: JSON nested deeper than the parser goes is a `usage_invalid`
    mistake (the prompt goes on), not a raw RecursionError."""
    from lineup_runtime_lite.sim.prompt import read_line

    with pytest.raises(LineupError) as exc:
        read_line(f"{command} " + '{"a":' * 5_000 + "1" + "}" * 5_000)
    assert exc.value.code == "usage_invalid" and "not JSON" in exc.value.message
