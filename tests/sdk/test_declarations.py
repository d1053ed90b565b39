"""Normal mode: declaration mistakes raise `DeclarationError` at decoration time.

Each fixture is a small module executed from a real file (so `file:line` are real) under
a unique module name; `# <-marker` comments name the lines the error must point at.
"""

from __future__ import annotations

import inspect
import itertools
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lineup_sdk import DeclarationError, LineupError, ToolRegistry, define_agent_tools

_names = itertools.count()

HEADER = """\
from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="{scope}")  # <-registry


def plain(ctx: ToolContext, x: int) -> int:
    return x


def raw(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
    return params
"""

OBJ = '{"type": "object"}'


class Module:
    """A fixture module on disk, executed under a unique name."""

    def __init__(self, tmp_path: Path, body: str, scope: str = "demo") -> None:
        self.path = tmp_path / f"decl_{next(_names)}.py"
        self.path.write_text(HEADER.format(scope=scope) + textwrap.dedent(body))
        self.namespace: dict[str, Any] = {"__name__": f"lineup_test_{self.path.stem}"}

    def run(self) -> dict[str, Any]:
        code = compile(self.path.read_text(), str(self.path), "exec", dont_inherit=True)
        exec(code, self.namespace)
        return self.namespace

    def line(self, marker: str) -> int:
        for number, text in enumerate(self.path.read_text().splitlines(), start=1):
            if marker in text:
                return number
        raise AssertionError(marker)


CASES = [
    pytest.param(
        """
        tools.tool("demo.add", activation="app_ready")(plain)  # <-first
        tools.tool("demo.add", activation="app_ready")(plain)  # <-at
        """,
        "duplicate_method",
        "<-first",
        id="duplicate_method-tool_and_tool",
    ),
    pytest.param(
        f"""
        tools.declare("demo.add", input_schema={OBJ}, result_schema={OBJ}, activation="app_ready")  # <-first
        @tools.tool("demo.add", activation="app_ready")  # <-at
        def add(ctx: ToolContext, x: int) -> int:
            return x
        """,
        "duplicate_method",
        "<-first",
        id="duplicate_method-declare_and_tool",
    ),
    pytest.param(
        f"""
        tools.runtime_tool("pomodoro.start", handler_key="pomodoro.start", activation="foreground_required")  # <-first
        tools.declare("pomodoro.start", input_schema={OBJ}, result_schema={OBJ}, activation="app_ready")  # <-at
        """,
        "duplicate_method",
        "<-first",
        id="duplicate_method-runtime_tool_and_declare",
    ),
    pytest.param(
        """
        tools.runtime_tool("pomodoro.interrupt", handler_key="pomodoro.interrupt", activation="activation_not_required")  # <-first
        tools.runtime_tool("pomodoro.interrupt", handler_key="pomodoro.interrupt", activation="activation_not_required")  # <-at
        """,
        "duplicate_method",
        "<-first",
        id="duplicate_method-runtime_tool_twice",
    ),
    pytest.param(
        f"""
        tools.declare("demo.add", input_schema={OBJ}, result_schema={OBJ}, activation="app_ready")
        tools.handler("demo.add")(raw)  # <-first
        tools.handler("demo.add")(raw)  # <-at
        """,
        "duplicate_method",
        "<-first",
        id="duplicate_method-second_handler",
    ),
    pytest.param(
        """
        @tools.handler("demo.ghost")  # <-at
        def ghost(ctx: ToolContext, params: dict[str, Any]) -> dict[str, Any]:
            return params
        """,
        "handler_without_declaration",
        None,
        id="handler_without_declaration",
    ),
    pytest.param(
        """
        tools.runtime_tool("pomodoro.start", handler_key="pomodoro.start", activation="foreground_required")  # <-first
        tools.handler("pomodoro.start")(raw)  # <-at
        """,
        "handler_without_declaration",
        "<-first",
        id="handler_without_declaration-runtime_tool",
    ),
    pytest.param(
        """
        tools.tool("demo.Add", activation="app_ready")(plain)  # <-at
        """,
        "invalid_method_name",
        None,
        id="invalid_method_name",
    ),
    pytest.param(
        """
        tools.tool("demo..add", activation="app_ready")(plain)  # <-at
        """,
        "invalid_method_name",
        None,
        id="invalid_method_name-empty_segment",
    ),
    pytest.param(
        """
        tools.tool("other.add", activation="app_ready")(plain)  # <-at
        """,
        "method_outside_scope",
        None,
        id="method_outside_scope",
    ),
    pytest.param(
        """
        tools.runtime_tool("pomodoro.snooze", handler_key="pomodoro.snooze", activation="app_ready")  # <-at
        """,
        "unknown_runtime_handler",
        None,
        id="unknown_runtime_handler",
    ),
    pytest.param(
        """
        tools.tool("demo.add", activation="sometimes")(plain)  # <-at
        """,
        "config_invalid",
        None,
        id="config_invalid-activation",
    ),
    pytest.param(
        """
        again = define_agent_tools(app_scope="demo")  # <-at
        """,
        "registry_multiple",
        "<-registry",
        id="registry_multiple",
    ),
    pytest.param(
        """
        bad = define_agent_tools(app_scope="Not A Scope")  # <-at
        """,
        "scope_invalid",
        None,
        id="scope_invalid",
    ),
]


@pytest.mark.parametrize(("body", "code", "first"), CASES)
def test_mistakes_raise_at_decoration_time(
    body: str, code: str, first: str | None, tmp_path: Path
) -> None:
    scope = "pomodoro" if "pomodoro." in body else "demo"
    module = Module(tmp_path, body, scope=scope)
    if code == "scope_invalid":
        module.path.write_text(module.path.read_text().replace('scope="pomodoro"', 'scope="demo"'))

    with pytest.raises(DeclarationError) as info:
        module.run()

    err = info.value
    file, line = str(module.path), module.line("<-at")
    assert err.code == code
    assert (err.file, err.line) == (file, line)
    assert f"{file}:{line}" in err.message
    if first is not None:  # both places are named
        assert err.related == [(file, module.line(first))]
        assert f"see also {file}:{module.line(first)}" in err.message
    assert isinstance(err, LineupError) and err.exit_code == 1
    assert err.to_dict()["code"] == code and err.to_dict()["hint"]


def test_a_clean_module_declares_every_kind_of_tool(tmp_path: Path) -> None:
    module = Module(
        tmp_path,
        f"""
        @tools.tool("pomodoro.note", activation="app_ready", timeout_s=5)
        async def note(ctx: ToolContext, text: str) -> str:
            '''Keep a note.'''
            return text

        tools.declare("pomodoro.raw", input_schema={OBJ}, result_schema={OBJ}, activation="app_ready")
        tools.handler("pomodoro.raw")(raw)
        tools.runtime_tool("pomodoro.start", handler_key="pomodoro.start", activation="foreground_required")
        """,
        scope="pomodoro",
    )
    ns = module.run()
    tools: ToolRegistry = ns["tools"]

    assert [d.method for d in tools.declarations()] == [
        "pomodoro.note",
        "pomodoro.raw",
        "pomodoro.start",
    ]
    note, raw, start = tools.declarations()
    assert (note.delivery, note.origin, note.timeout_s) == ("miniapp_sdk", "tool", 5)
    assert note.handler is ns["note"] and note.location.line == note.handler_location.line  # type: ignore[union-attr]
    assert (raw.origin, raw.handler) == ("declare", ns["raw"])
    assert (start.delivery, start.handler_key, start.handler) == ("runtime", "pomodoro.start", None)
    assert start.description  # the catalog's default description
    assert tools.get("pomodoro.nope") is None
    assert "tools=3" in repr(tools)


def test_decorators_return_the_function_unchanged(tmp_path: Path) -> None:
    ns = Module(
        tmp_path,
        """
        def original(ctx: ToolContext, x: int, *, y: str = "a") -> int:
            return x

        decorated = tools.tool("demo.add", activation="app_ready")(original)
        """,
    ).run()
    assert ns["decorated"] is ns["original"]
    assert str(inspect.signature(ns["decorated"])).endswith("x: int, *, y: str = 'a') -> int")


def test_one_registry_per_module_but_modules_are_independent(tmp_path: Path) -> None:
    a = Module(tmp_path, "").run()
    b = Module(tmp_path, "").run()
    assert a["tools"] is not b["tools"]


def test_define_agent_tools_requires_a_keyword_scope() -> None:
    with pytest.raises(TypeError):
        define_agent_tools("demo")  # type: ignore[call-arg]
