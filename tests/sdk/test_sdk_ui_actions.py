"""UI Actions in the SDK and the build (SPEC 17): `define_ui_actions` / `@actions.action`
declared as tools are (typed params → closed input schema, return → result schema,
docstring descriptions), found by the build from the entry's imports, unique across the
app's tools and actions (`duplicate_method`, both ways, naming both places), written to
the manifest's optional `ui_actions` list, and delivered by the real worker process as
`kind: action` with an `ActionContext`.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project, check_project
from lineup_build.manifest import manifest_schema_errors, serialize_manifest
from lineup_build.manifest_checks import schema_problems
from lineup_build.model import Manifest, UiAction
from lineup_sdk import ActionContext, DeclarationError, define_ui_actions
from lineup_sdk.sandbox import Sandbox

BOARD = Path(__file__).parent / "apps" / "board"

ACTIONS_HEADER = """\
from lineup_sdk import ActionContext, define_ui_actions

actions = define_ui_actions(app_scope="demo")  # <-acts
"""


# -- normal mode ---------------------------------------------------------------------------


def test_exports_and_context_fields() -> None:
    import lineup_sdk

    assert {"define_ui_actions", "ActionContext", "ActionRegistry"} <= set(lineup_sdk.__all__)
    fields = list(ActionContext.__dataclass_fields__)
    assert fields == [
        "action_id",
        "client_id",
        "app_scope",
        "app_session_id",
        "conversation_id",
        "session_data",
        "logger",
    ]


_modules = itertools.count()


def _run_module(tmp_path: Path, body: str) -> dict[str, Any]:
    """Execute `body` from a real file under a unique module name (so the registries it
    defines are its own and `file:line` are real)."""
    path = tmp_path / f"actions_decl_{next(_modules)}.py"
    path.write_text(textwrap.dedent(body))
    namespace: dict[str, Any] = {"__name__": f"lineup_test_{path.stem}"}
    exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), namespace)
    return namespace


def _line(path: Path, marker: str) -> int:
    return next(
        n for n, text in enumerate(path.read_text().splitlines(), start=1) if marker in text
    )


TOOL_THEN_ACTION = """
from lineup_sdk import ActionContext, define_agent_tools, define_ui_actions

tools = define_agent_tools(app_scope="dupa")
actions = define_ui_actions(app_scope="dupa")

@actions.action("dupa.toggle")  # <-first
def toggle(ctx: ActionContext, id: str) -> None:
    "Toggle."

@tools.tool("dupa.toggle", activation="app_ready")  # <-second
def toggle_tool(ctx, x: int) -> int:
    return x
"""

ACTION_THEN_TOOL = """
from lineup_sdk import ActionContext, define_agent_tools, define_ui_actions

tools = define_agent_tools(app_scope="dupb")

@tools.tool("dupb.add", activation="app_ready")  # <-first
def add(ctx, x: int) -> int:
    return x

actions = define_ui_actions(app_scope="dupb")

@actions.action("dupb.add")  # <-second
def add_action(ctx: ActionContext, x: int) -> None:
    "Add."
"""


@pytest.mark.parametrize("body", [TOOL_THEN_ACTION, ACTION_THEN_TOOL], ids=["tool", "action"])
def test_a_name_shared_by_a_tool_and_an_action_is_a_duplicate_naming_both_places(
    tmp_path: Path, body: str
) -> None:
    with pytest.raises(DeclarationError) as exc:
        _run_module(tmp_path, body)
    path = next(tmp_path.glob("actions_decl_*.py"))
    assert exc.value.code == "duplicate_method"
    assert (exc.value.file, exc.value.line) == (str(path), _line(path, "<-second"))
    assert exc.value.related == [(str(path), _line(path, "<-first"))]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (
            '@actions.action("dupc.x")\n'
            "def one(ctx: ActionContext) -> None: ...\n\n"
            '@actions.action("dupc.x")\n'
            "def two(ctx: ActionContext) -> None: ...\n",
            "duplicate_method",
        ),
        (
            '@actions.action("other.x")\ndef x(ctx: ActionContext) -> None: ...\n',
            "method_outside_scope",
        ),
        ('second = define_ui_actions(app_scope="dupc")\n', "registry_multiple"),
    ],
    ids=["twice", "outside-scope", "second-registry"],
)
def test_action_declaration_mistakes_raise(tmp_path: Path, body: str, code: str) -> None:
    head = (
        "from lineup_sdk import ActionContext, define_ui_actions\n\n"
        'actions = define_ui_actions(app_scope="dupc")\n'
    )
    with pytest.raises(DeclarationError) as exc:
        _run_module(tmp_path, head + body)
    assert exc.value.code == code


def test_an_invalid_scope_is_refused() -> None:
    with pytest.raises(DeclarationError) as exc:
        define_ui_actions(app_scope="Bad Scope")
    assert exc.value.code == "scope_invalid"


# -- the build (collecting mode, the real import subprocess) -------------------------------


def _spec(check: Any, name: str) -> dict[str, Any]:
    return next(a for a in check.actions if a["method"] == name)


def test_the_build_extracts_typed_params_docstrings_and_closed_schemas() -> None:
    check = check_project(BOARD)
    assert check.ok(strict=True), [d.to_dict() for d in check.diagnostics]
    assert [t["method"] for t in check.tools] == ["board.add"]
    assert [a["method"] for a in check.actions] == ["board.clear_done", "board.toggle"]
    toggle = _spec(check, "board.toggle")
    assert toggle["description"] == "Tick or untick one card."
    assert toggle["timeout_s"] == 5
    schema = toggle["input_schema"]
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["id"]
    assert schema["properties"]["id"]["type"] == "string"
    assert schema["properties"]["id"]["description"] == "The card to toggle."
    assert toggle["result_schema"]["properties"]["done"]["type"] == "boolean"
    clear = _spec(check, "board.clear_done")
    assert clear["description"] == "Remove every card that is done."  # the override
    assert clear["input_schema"]["properties"] == {}
    assert clear["input_schema"]["additionalProperties"] is False
    assert clear["result_schema"] == {"type": "null"}


def _codes(check: Any) -> list[tuple[str, str | None, int | None]]:
    return [
        (d.code, d.where.file if d.where else None, d.where.line if d.where else None)
        for d in check.diagnostics
        if d.severity == "error"
    ]


def test_the_build_reports_a_tool_action_clash_at_both_places(make_app: Any) -> None:
    app = make_app(
        """
        from demo_app import actions as _actions

        @tools.tool("demo.toggle", activation="app_ready")  # <-tool
        def toggle(ctx: ToolContext, id: str) -> None:
            '''Toggle.'''
        """,
        files={
            "demo_app/actions.py": ACTIONS_HEADER
            + textwrap.dedent(
                """
                @actions.action("demo.toggle")  # <-action
                def toggle(ctx: ActionContext, id: str) -> None:
                    '''Toggle.'''
                """
            )
        },
    )
    check = check_project(app.root)
    dups = [d for d in check.diagnostics if d.code == "duplicate_method"]
    assert len(dups) == 1
    # the actions module is imported first, so the tool is the second declaration
    assert dups[0].where is not None and dups[0].where.file == "demo_app/tools.py"
    assert dups[0].where.line == app.line("<-tool")
    assert [(r.file, r.line) for r in dups[0].related] == [
        ("demo_app/actions.py", app.line("<-action", "demo_app/actions.py"))
    ]


def test_the_build_reports_an_action_clashing_with_an_earlier_tool(make_app: Any) -> None:
    app = make_app(
        """
        @tools.tool("demo.toggle", activation="app_ready")  # <-tool
        def toggle(ctx: ToolContext, id: str) -> None:
            '''Toggle.'''

        from demo_app import actions as _actions
        """,
        files={
            "demo_app/actions.py": ACTIONS_HEADER
            + textwrap.dedent(
                """
                @actions.action("demo.toggle")  # <-action
                def toggle(ctx: ActionContext, id: str) -> None:
                    '''Toggle.'''
                """
            )
        },
    )
    check = check_project(app.root)
    dups = [d for d in check.diagnostics if d.code == "duplicate_method"]
    assert len(dups) == 1
    assert dups[0].where is not None and dups[0].where.file == "demo_app/actions.py"
    assert [(r.file, r.line) for r in dups[0].related] == [
        ("demo_app/tools.py", app.line("<-tool"))
    ]


def test_the_build_checks_actions_by_the_tools_rules(make_app: Any) -> None:
    app = make_app(
        """
        from demo_app import actions as _actions
        """,
        files={
            "demo_app/actions.py": ACTIONS_HEADER
            + textwrap.dedent(
                """
                from typing import Any

                @actions.action("demo.Bad")  # <-badname
                def bad(ctx: ActionContext) -> None:
                    '''Bad.'''

                @actions.action("demo.untyped")  # <-untyped
                def untyped(ctx: ActionContext, params: dict[str, Any]) -> None:
                    '''Untyped.'''

                @actions.action("demo.noreturn")  # <-noreturn
                def noreturn(ctx: ActionContext, x: int):
                    '''No return annotation.'''

                @actions.action("demo.slow", timeout_s=99999)  # <-slow
                def slow(ctx: ActionContext) -> None:
                    '''Slow.'''

                @actions.action("demo.quiet")  # <-quiet
                def quiet(ctx: ActionContext, x: int) -> None:
                    pass
                """
            )
        },
    )
    check = check_project(app.root)
    f = "demo_app/actions.py"
    errors = sorted((c, line) for c, file, line in _codes(check) if file == f)
    assert errors == sorted(
        [
            ("invalid_method_name", app.line("<-badname", f)),
            ("handler_signature_mismatch", app.line("<-untyped", f)),
            ("handler_signature_mismatch", app.line("<-noreturn", f)),
            ("config_invalid", app.line("<-slow", f)),
        ]
    ), _codes(check)
    (badname,) = [d for d in check.diagnostics if d.code == "invalid_method_name"]
    assert "'demo.Bad'" in badname.message  # the message names the action
    warnings = [
        (d.message, d.where.file if d.where else None, d.where.line if d.where else None)
        for d in check.diagnostics
        if d.code == "missing_description" and "quiet" in d.message
    ]
    # each warning points at the action's declaration, as the errors do
    assert sorted(warnings) == [
        ("demo.quiet: parameter 'x' has no description", f, app.line("<-quiet", f)),
        ("demo.quiet: the action has no description", f, app.line("<-quiet", f)),
    ]


def test_a_second_action_registry_and_a_scope_mismatch_are_reported(make_app: Any) -> None:
    app = make_app(
        """
        from lineup_sdk import define_ui_actions

        one = define_ui_actions(app_scope="demo")  # <-one
        two = define_ui_actions(app_scope="demo")  # <-two
        """
    )
    check = check_project(app.root)
    multiple = [d for d in check.diagnostics if d.code == "registry_multiple"]
    assert [(d.where.line if d.where else None) for d in multiple] == [app.line("<-two")]
    assert [r.line for r in multiple[0].related] == [app.line("<-one")]

    other = make_app(
        """
        from lineup_sdk import define_ui_actions

        acts = define_ui_actions(app_scope="other")  # <-other
        """
    )
    check = check_project(other.root)
    bad = [d for d in check.diagnostics if d.code == "config_invalid"]
    assert [(d.where.line if d.where else None) for d in bad] == [other.line("<-other")]
    assert "UI Action registry" in bad[0].message


# -- the manifest --------------------------------------------------------------------------


def _board_manifest(signing_key: Any, tmp_path: Path) -> dict[str, Any]:
    result = build_project(BOARD, signing_key=signing_key, out_dir=tmp_path, epoch=1_700_000_000)
    assert result.ok, [d.to_dict() for d in result.diagnostics]
    assert result.manifest is not None
    return result.manifest


def test_the_manifest_lists_actions_sorted_closed_and_round_trips(
    signing_key: Any, tmp_path: Path
) -> None:
    manifest = _board_manifest(signing_key, tmp_path)
    assert manifest["manifest_version"] == 1
    assert manifest["sdk"]["version"] == "0.3.0"
    names = [a["name"] for a in manifest["ui_actions"]]
    assert names == ["board.clear_done", "board.toggle"]
    assert set(manifest["ui_actions"][1]) == {
        "name",
        "description",
        "input_schema",
        "result_schema",
        "timeout_s",
    }
    assert manifest_schema_errors(manifest) == []
    model = Manifest.from_json(manifest)
    assert model.ui_actions[1] == UiAction.from_json(manifest["ui_actions"][1])
    assert model.ui_action("board.toggle") is model.ui_actions[1]
    assert model.tool("board.toggle") is None
    assert serialize_manifest(model.to_json()) == serialize_manifest(manifest)


@pytest.mark.parametrize(
    "edit",
    [
        lambda a: a.update(handler="x"),  # closed entry
        lambda a: a.pop("timeout_s"),  # required field
        lambda a: a.update(timeout_s=0),  # bounds as a tool's
        lambda a: a.update(name="Board.Toggle"),  # a method name
        lambda a: a.update(input_schema=True),  # input is an object
    ],
    ids=["extra-key", "missing-timeout", "zero-timeout", "bad-name", "boolean-input"],
)
def test_the_manifest_schema_refuses_a_malformed_action(
    signing_key: Any, tmp_path: Path, edit: Any
) -> None:
    manifest = _board_manifest(signing_key, tmp_path)
    edit(manifest["ui_actions"][1])
    assert manifest_schema_errors(manifest)
    assert [e.code for e in schema_problems(manifest)][:1] == ["manifest_invalid"]


def test_an_empty_action_list_is_not_canonical(signing_key: Any, tmp_path: Path) -> None:
    manifest = _board_manifest(signing_key, tmp_path)
    assert [e.code for e in schema_problems({**manifest, "ui_actions": []})] == ["manifest_invalid"]
    without = {k: v for k, v in manifest.items() if k != "ui_actions"}
    assert schema_problems(without) == []
    assert "ui_actions" not in Manifest.from_json(without).to_json()


# -- the real worker process ---------------------------------------------------------------


class WorkerPipe:
    """The real worker process, started as the runtime starts it (the sandbox launcher
    running `lineup_sdk._worker` on two private pipes), driven line by line with a
    bounded wait."""

    def __init__(self, app_dir: Path, entry: str) -> None:
        p2c_r, self._w = os.pipe()
        self._r, c2p_w = os.pipe()
        self.box = Sandbox("best_effort", app_dir)
        self.box.prepare()
        self.proc = subprocess.Popen(
            self.box.argv("lineup_sdk._worker", [entry, str(p2c_r), str(c2p_w)]),
            pass_fds=(p2c_r, c2p_w),
            cwd=app_dir,
            env=self.box.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(p2c_r)
        os.close(c2p_w)
        self._buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        os.write(self._w, json.dumps(msg).encode() + b"\n")

    def read(self, within_s: float = 30.0) -> dict[str, Any]:
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._r], [], [], within_s)
            assert ready, "the worker said nothing in time"
            chunk = os.read(self._r, 65536)
            assert chunk, "the worker closed its pipe"
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        out: dict[str, Any] = json.loads(line)
        return out

    def close(self) -> None:
        os.close(self._w)  # the worker exits when its inbox closes
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        self.box.cleanup()


@pytest.fixture
def worker() -> Iterator[WorkerPipe]:
    pipe = WorkerPipe(BOARD, "board_app.tools")
    try:
        assert pipe.read()["t"] == "sandbox"
        yield pipe
    finally:
        pipe.close()


def _ctx(**extra: Any) -> dict[str, Any]:
    return {
        "app_scope": "board",
        "app_session_id": "s1",
        "conversation_id": "c1",
        "cap": "cap-1",
        "timeout_s": 5,
        **extra,
    }


def _serve_sd(worker: WorkerPipe, data: Any, revision: int) -> list[dict[str, Any]]:
    """Answer the worker's session-data requests until it sends a result."""
    seen = []
    while True:
        msg = worker.read()
        if msg["t"] == "result":
            seen.append(msg)
            return seen
        assert msg["t"] == "sd" and msg["cap"] == "cap-1"
        seen.append(msg)
        if msg["op"] == "get":
            worker.send(
                {"t": "sd_reply", "id": msg["id"], "ok": True, "data": data, "revision": revision}
            )
        else:
            data, revision = msg["data"], revision + 1
            worker.send(
                {"t": "sd_reply", "id": msg["id"], "ok": True, "data": data, "revision": revision}
            )


def test_hello_lists_tools_and_actions_separately(worker: WorkerPipe) -> None:
    hello = worker.read()
    assert hello["t"] == "hello"
    assert hello["methods"] == ["board.add"]
    assert hello["actions"] == ["board.clear_done", "board.toggle"]


def test_a_kind_action_delivery_runs_the_action_with_its_context(worker: WorkerPipe) -> None:
    worker.read()  # hello
    cards = {"cards": [{"id": "a", "title": "milk", "done": False}]}
    worker.send(
        {
            "t": "deliver",
            "id": 7,
            "kind": "action",
            "method": "board.toggle",
            "params": {"id": "a"},
            "ctx": _ctx(action_id="cl-1:3", client_id="cl-1"),
        }
    )
    seen = _serve_sd(worker, cards, 4)
    assert [m.get("op") for m in seen[:-1]] == ["get", "replace"]
    assert seen[1]["expected_revision"] == 4
    assert seen[1]["data"]["cards"][0] == {"id": "a", "title": "milk", "done": True, "by": "cl-1:3"}
    assert seen[-1] == {"t": "result", "id": 7, "ok": True, "result": {"id": "a", "done": True}}


def test_an_action_refusal_is_app_code_and_a_sync_action_runs(worker: WorkerPipe) -> None:
    worker.read()
    worker.send(
        {
            "t": "deliver",
            "id": 1,
            "kind": "action",
            "method": "board.toggle",
            "params": {"id": "nope"},
            "ctx": _ctx(action_id="cl:1", client_id="cl"),
        }
    )
    refused = _serve_sd(worker, None, 0)[-1]
    assert refused["ok"] is False and refused["error"]["code"] == "app.not_found"
    worker.send(
        {
            "t": "deliver",
            "id": 2,
            "kind": "action",
            "method": "board.clear_done",
            "params": {},
            "ctx": _ctx(action_id="cl:2", client_id="cl"),
        }
    )
    seen = _serve_sd(worker, {"cards": [{"id": "a", "title": "t", "done": True}]}, 2)
    assert seen[1]["data"] == {"cards": []}
    assert seen[-1] == {"t": "result", "id": 2, "ok": True, "result": None}


def test_kinds_are_not_interchangeable(worker: WorkerPipe) -> None:
    worker.read()
    # an action's name delivered as a tool call (no kind) finds no tool
    worker.send(
        {
            "t": "deliver",
            "id": 1,
            "method": "board.toggle",
            "params": {"id": "a"},
            "ctx": _ctx(call_id="k1"),
        }
    )
    assert worker.read()["error"]["code"] == "handler_failed"
    # a tool's name delivered as an action finds no action
    worker.send(
        {
            "t": "deliver",
            "id": 2,
            "kind": "action",
            "method": "board.add",
            "params": {"title": "x"},
            "ctx": _ctx(action_id="cl:1", client_id="cl"),
        }
    )
    assert worker.read()["error"]["code"] == "handler_failed"
    # bad params of an action are invalid_params, as for a tool
    worker.send(
        {
            "t": "deliver",
            "id": 3,
            "kind": "action",
            "method": "board.toggle",
            "params": {"id": 1, "extra": True},
            "ctx": _ctx(action_id="cl:2", client_id="cl"),
        }
    )
    assert worker.read()["error"]["code"] == "invalid_params"
    # a kind the worker does not know finds no handler
    worker.send(
        {
            "t": "deliver",
            "id": 5,
            "kind": "bogus",
            "method": "board.add",
            "params": {"title": "x"},
            "ctx": _ctx(call_id="k3"),
        }
    )
    assert worker.read()["error"]["code"] == "handler_failed"
    # the tool still runs as a tool call
    worker.send(
        {
            "t": "deliver",
            "id": 4,
            "method": "board.add",
            "params": {"title": "x"},
            "ctx": _ctx(call_id="k2"),
        }
    )
    seen = _serve_sd(worker, None, 0)
    assert seen[-1] == {"t": "result", "id": 4, "ok": True, "result": {"id": "k2", "count": 1}}
