"""What `lineup serve` installs: project folders with their dev keys, and an edited folder
re-installed over its previous dev build of the same version (sessions keep their build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_build.cli.compose import prepare_targets
from lineup_build.init import init_project
from lineup_build.trust import TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.serve import install_targets
from lineup_sdk.errors import LineupError


def _edit(root: Path) -> None:
    tools = root / "todo_app" / "tools.py"
    text = tools.read_text()
    tools.write_text(text.replace('"""List every item', '"""List every item (edited)'))


def _session_versions(rt: Runtime) -> dict[str, str]:
    rows = rt.store_dump()["app_sessions"]
    return {r[1]: r[3] for r in rows}  # conversation_id -> version


def test_an_edited_folder_reinstalls_over_its_dev_build(tmp_path: Path) -> None:
    root = tmp_path / "todo"
    init_project(root, template="todo", scope="todo")
    trust, prepared = prepare_targets([root], None)
    rt = Runtime.open(
        tmp_path / "rt.db", trust=trust, clock=VirtualClock(), host=HostSimulator(policy="auto")
    )
    try:
        assert [d["action"] for d in install_targets(rt, prepared)] == ["installed"]
        rt.call("a1", "old", "todo.add", {"title": "milk"})
        rt.settle()
        _edit(root)
        trust2, again = prepare_targets([root], None)
        rt.trust = trust2  # the same dev key, loaded again
        (done,) = install_targets(rt, again)
        assert done["action"] == "upgraded" and done["version"].startswith("1.0.0+dev.")
        listing = {e["method"]: e for e in rt.inventory()}
        assert "(edited)" in listing["todo.list"]["description"]
        assert install_targets(rt, again)[0]["action"] == "unchanged"

        old = rt.call("l1", "old", "todo.list", {})  # pinned to the build it started on
        assert old["kind"] == "result" and [i["id"] for i in old["result"]["items"]] == ["a1"]
        new = rt.call("l2", "new", "todo.list", {})
        rt.settle()
        if new["kind"] != "result":
            new = rt.call("l2", "new", "todo.list", {})
        assert new["kind"] == "result" and new["result"] == {"items": []}
        versions = _session_versions(rt)
        assert versions == {"old": "1.0.0", "new": done["version"]}
    finally:
        rt.close()


def test_without_the_dev_option_an_edit_is_a_version_conflict(tmp_path: Path) -> None:
    root = tmp_path / "todo"
    init_project(root, template="todo", scope="todo")
    trust, prepared = prepare_targets([root], None)
    with Runtime.open(":memory:", trust=trust, clock=VirtualClock()) as rt:
        rt.install(prepared[0].bundle)
        _edit(root)
        _, again = prepare_targets([root], None)
        with pytest.raises(LineupError) as exc:
            rt.install(again[0].bundle)
        assert exc.value.code == "version_conflict"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: [], "at least one"),
        (lambda p: [p / "missing"], "neither a MiniApp folder nor a bundle"),
        (lambda p: [p / "bundle.lineup"], "pass --trust FILE"),
    ],
    ids=["nothing", "missing", "bundle-without-trust"],
)
def test_usage_errors(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "bundle.lineup").write_bytes(b"PK")
    with pytest.raises(LineupError) as exc:
        prepare_targets(make(tmp_path), None)
    assert exc.value.code == "usage_invalid" and exc.value.exit_code == 2
    assert message in exc.value.message


def test_a_bundle_is_verified_against_the_trust_file_beside_a_folder(
    tmp_path: Path, todo_bundle: Path, trust: TrustStore
) -> None:
    trust_file = tmp_path / "trust.toml"
    trust.save(trust_file)
    focus = tmp_path / "focus"
    init_project(focus, template="pomodoro", scope="pomodoro")
    store, prepared = prepare_targets([todo_bundle, focus], trust_file)
    assert [(p.scope, p.dev_build) for p in prepared] == [("todo", False), ("pomodoro", True)]
    with Runtime.open(":memory:", trust=store, clock=VirtualClock()) as rt:
        done = install_targets(rt, prepared)
        assert [d["action"] for d in done] == ["installed", "installed"]
        assert {e["method"] for e in rt.inventory()} >= {"todo.add", "pomodoro.start"}
    assert TrustStore.load(trust_file).dumps() == trust.dumps()  # dev keys never written back
