"""`lineup_runtime_lite.testing`: a project built with its dev key and installed into an
in-memory runtime on a virtual clock, through the `lineup_app` fixture; the in-process
`lineup_sdk.testing` client answers the todo template's calls the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lineup_build.init import init_project
from lineup_runtime_lite.pytest_plugin import lineup_app  # noqa: F401  # the fixture
from lineup_runtime_lite.testing import AppUnderTest, open_app
from lineup_sdk.errors import LineupError
from lineup_sdk.testing import ToolClient
from tests.app_kit import forget_app_modules, load_app_module

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("a1", "todo.add", {"title": "milk"}),
    ("a2", "todo.add", {"title": "eggs", "colour": "red"}),
    ("a3", "todo.add", {"title": 2}),
    ("c1", "todo.complete", {"item_id": "a1"}),
    ("c2", "todo.complete", {"item_id": "nope"}),
    ("l1", "todo.list", {}),
]


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rt-testing")
    out = {}
    for template in ("todo", "pomodoro"):
        init_project(root / template, template=template)
        out[template] = root / template
    return out


def _final(app: AppUnderTest, call_id: str, method: str, params: dict[str, Any]) -> Any:
    msg = app.call(call_id, method, params)
    if msg["kind"] == "receipt":  # accepted while the app started: the final comes later
        msg = next(m for m in app.messages() if m["id"] == f"{call_id}:result")
    return msg


def test_runtime_and_in_process_client_agree(
    projects: dict[str, Path],
    lineup_app: Any,  # noqa: F811
) -> None:
    app = lineup_app(projects["todo"])
    module = load_app_module(projects["todo"] / "todo_app", "todo_parity")
    client = ToolClient(module.tools)
    for call_id, method, params in CALLS:
        via_runtime = _final(app, call_id, method, params)
        in_process = client.call(method, params, call_id=call_id)
        if in_process.ok:
            assert via_runtime["result"] == in_process.result, call_id
        else:
            assert via_runtime["error"]["code"] == in_process.code, call_id
    assert app.session_data().data == client.session_data.get_sync().data
    assert app.session_data().revision == client.session_data.get_sync().revision == 2
    forget_app_modules("todo_parity")


def test_pomodoro_on_the_virtual_clock(projects: dict[str, Path], lineup_app: Any) -> None:  # noqa: F811
    app = lineup_app(projects["pomodoro"], host="manual")
    assert app.call("s1", "pomodoro.start", {"minutes": 25})["activation"] == "starting"
    app.host("foreground_confirmed")
    assert [m["stage"] for m in app.messages()] == ["accepted", "started"]
    app.advance("24m")
    assert app.messages() == []
    app.advance(60_000)
    (done,) = app.messages()
    assert done["result"]["status"] == "completed"
    assert app.runtime.im_records("c1")[0]["status"] == "completed"


def test_open_app_refuses_a_broken_project(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    init_project(root, template="blank")
    (root / "lineup.toml").write_text("[app]\nscope = 'broken'\n")
    with pytest.raises(LineupError) as exc:
        open_app(root)
    assert exc.value.code == "config_invalid"


def test_open_app_closes_as_a_context_manager(projects: dict[str, Path]) -> None:
    with open_app(projects["todo"]) as app:
        assert [t["method"] for t in app.runtime.inventory()] == [
            "todo.add",
            "todo.complete",
            "todo.list",
        ]
    with pytest.raises(LineupError) as exc:
        app.runtime.inventory()  # closed
    assert exc.value.code == "usage_invalid"
