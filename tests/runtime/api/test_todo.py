"""The todo template end to end against the runtime: worker, session data, ToolError."""

from __future__ import annotations

from pathlib import Path

from lineup_runtime_lite import Runtime
from tests.runtime.conftest import message


def test_todo_add_list_complete(rt: Runtime, todo_bundle: Path) -> None:
    rt.install(todo_bundle)
    assert rt.call("a1", "conv", "todo.add", {"title": "milk"})["stage"] == "accepted"
    rt.settle()
    assert message(rt, "a1:result")["result"]["count"] == 1
    added = rt.call("a2", "conv", "todo.add", {"title": "eggs"})
    assert added["result"]["item"] == {"id": "a2", "title": "eggs", "done": False}
    done = rt.call("c1", "conv", "todo.complete", {"item_id": "a1"})
    assert done["result"] == {"id": "a1", "title": "milk", "done": True}
    listed = rt.call("l1", "conv", "todo.list", {})
    assert [i["done"] for i in listed["result"]["items"]] == [True, False]
    missing = rt.call("c2", "conv", "todo.complete", {"item_id": "nope"})
    assert missing["error"]["code"] == "app.not_found"
    empty = rt.call("a3", "conv", "todo.add", {"title": ""})
    assert empty["error"]["code"] == "invalid_params"
    assert empty["error"]["details"][0]["path"] == "/title"
    snap = rt.surface("conv", "todo").get()
    assert snap.revision == 3 and len(snap.data["items"]) == 2  # type: ignore[index]
    assert rt.surface("other", "todo").get().revision == 0
