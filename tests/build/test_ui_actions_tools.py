"""UI Actions in the build tools (SPEC 17): a signed bundle with actions verifies and
its actions are checked (names, one namespace with tools, schemas); `inspect` (and
`--json`), `lineup docs` and `lineup diff` show them in their own section; `json_type`
has one home and follows JSON Schema (a number with a zero fraction is an integer).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from lineup_build.build import build_project
from lineup_build.cli import main
from lineup_build.diff import diff_manifests
from lineup_build.docs import docs_markdown
from lineup_build.docs._schema import SchemaReader
from lineup_build.manifest_checks import tool_problems
from lineup_build.model import Manifest
from lineup_build.schema_refs import json_type
from lineup_build.verify import check_bundle, verify_bundle
from tests.build.bundle_kit import EPOCH, KEY, make_manifest, sdk_tool, trust, ui_action

BOARD = Path(__file__).parents[1] / "sdk" / "apps" / "board"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The board test app (one tool, two UI Actions), built and signed with KEY."""
    out = tmp_path_factory.mktemp("board")
    result = build_project(BOARD, signing_key=KEY, out_dir=out, epoch=EPOCH)
    assert result.ok and result.bundle is not None, [d.to_dict() for d in result.diagnostics]
    return result.bundle


# -- the golden manifest with actions -------------------------------------------------------

GOLDEN = Path(__file__).parent / "golden" / "board.manifest.json"


def test_golden_manifest_with_actions(board: Path) -> None:
    """The board app's manifest byte for byte (regenerate after an intended change with
    `LINEUP_REGEN_GOLDEN=1`, as the todo template's golden files)."""
    with zipfile.ZipFile(board) as zf:
        actual = zf.read("manifest.json")
    if os.environ.get("LINEUP_REGEN_GOLDEN") == "1":
        GOLDEN.write_bytes(actual)
    assert actual == GOLDEN.read_bytes()
    doc = json.loads(actual)
    assert list(doc) == sorted(doc) and list(doc).index("ui_actions") > list(doc).index("tools")


# -- verify --------------------------------------------------------------------------------


def test_a_signed_bundle_with_actions_verifies_and_matches_its_source(board: Path) -> None:
    verified = verify_bundle(board, trust(scopes=("board",)), source=BOARD)
    names = [a.name for a in verified.model.ui_actions]
    assert names == ["board.clear_done", "board.toggle"]
    assert [a["name"] for a in verified.manifest["ui_actions"]] == names


def _problems(**kw: Any) -> list[tuple[str, str]]:
    model = Manifest.from_json(make_manifest(**kw))
    return [(p.code, p.message) for p in tool_problems(model)]


def test_verify_checks_actions_by_the_tools_rules() -> None:
    assert _problems(ui_actions=[ui_action()]) == []
    assert [c for c, _ in _problems(ui_actions=[ui_action("other.toggle")])] == [
        "method_outside_scope"
    ]
    shared = _problems(tools=[sdk_tool("todo.toggle")], ui_actions=[ui_action("todo.toggle")])
    assert shared == [
        (
            "duplicate_method",
            "todo.toggle: listed as a tool and as a UI Action in manifest.json",
        )
    ]
    twice = _problems(ui_actions=[ui_action(), ui_action()])
    assert [c for c, _ in twice] == ["duplicate_method"]
    remote = ui_action(input_schema={"type": "object", "properties": {"x": {"$ref": "x.json"}}})
    assert [c for c, _ in _problems(ui_actions=[remote])] == ["remote_ref"]
    bad_result = ui_action(result_schema={"type": "nope"})
    assert [c for c, _ in _problems(ui_actions=[bad_result])] == ["invalid_result_schema"]


def test_verify_reports_name_where_and_what_of_each_action_problem() -> None:
    """Each problem carries the action's name in its message and `details` (what `verify
    --json` shows), the schema and the JSON pointer of a schema problem, and its fix."""

    def full(**kw: Any) -> list[tuple[str, str, Any]]:
        model = Manifest.from_json(make_manifest(**kw))
        return [(p.code, p.message, p.details) for p in tool_problems(model)]

    assert full(ui_actions=[ui_action("other.toggle")]) == [
        (
            "method_outside_scope",
            "method 'other.toggle' is outside app scope 'todo'",
            {"method": "other.toggle"},
        )
    ]
    assert full(ui_actions=[ui_action(), ui_action()]) == [
        (
            "duplicate_method",
            "todo.toggle: listed twice in manifest.json",
            {"method": "todo.toggle"},
        )
    ]
    remote = ui_action(input_schema={"type": "object", "properties": {"x": {"$ref": "x.json"}}})
    assert full(ui_actions=[remote]) == [
        (
            "remote_ref",
            "todo.toggle: input_schema at /properties/x/$ref: $ref 'x.json' is not a local "
            "reference",
            {"method": "todo.toggle", "field": "input_schema", "pointer": "/properties/x/$ref"},
        )
    ]
    bad_result = ui_action(result_schema={"type": "nope"})
    assert full(ui_actions=[bad_result]) == [
        (
            "invalid_result_schema",
            "todo.toggle: result_schema at /type: type 'nope' is not a JSON Schema type",
            {"method": "todo.toggle", "field": "result_schema", "pointer": "/type"},
        )
    ]
    (problem,) = tool_problems(Manifest.from_json(make_manifest(ui_actions=[remote])))
    assert problem.hint == "Inline the referenced schema under `$defs` and use `#/$defs/...`."


# -- inspect -------------------------------------------------------------------------------


def test_inspect_lists_actions_in_their_own_table(
    board: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", str(board))
    assert code == 0
    tools_at, actions_at, files_at = out.index("tools"), out.index("UI Actions"), out.index("files")
    assert tools_at < actions_at < files_at
    section = out[actions_at:files_at]
    assert "board.toggle" in section and "5 s" in section and "Tick or untick one card." in section
    assert "board.toggle" not in out[tools_at:actions_at]


def test_inspect_json_lists_actions(board: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", "--json", str(board))
    assert code == 0
    doc = json.loads(out)
    assert [t["method"] for t in doc["tools"]] == ["board.add"]
    assert doc["ui_actions"] == [
        {
            "name": "board.clear_done",
            "description": "Remove every card that is done.",
            "timeout_s": 30,
        },
        {"name": "board.toggle", "description": "Tick or untick one card.", "timeout_s": 5},
    ]


def test_an_app_without_actions_reports_an_empty_list(tmp_path: Path) -> None:
    from tests.build.bundle_kit import good_bundle

    path = tmp_path / "todo.lineup"
    path.write_bytes(good_bundle())
    assert check_bundle(path, None).to_dict()["ui_actions"] == []


def test_check_verify_and_build_show_actions(
    board: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "check", str(BOARD))
    assert code == 0 and "1 tools, 2 UI Actions, 3 files" in out
    code, out, _ = run(capsys, "check", "--json", str(BOARD))
    doc = json.loads(out)
    assert doc["tools"] == ["board.add"]
    assert doc["ui_actions"] == ["board.clear_done", "board.toggle"]
    assert doc["projects"][0]["ui_actions"] == 2
    store = tmp_path / "trust.toml"
    trust(scopes=("board",)).save(store)
    code, out, _ = run(capsys, "verify", "--trust", str(store), str(board))
    assert code == 0 and "board 1.0.0, 1 tools, 2 UI Actions, 3 files" in out
    project = tmp_path / "board"
    shutil.copytree(BOARD, project, ignore=shutil.ignore_patterns("__pycache__", ".lineup"))
    code, out, _ = run(capsys, "build", "--dev-key", "--out", str(tmp_path / "dist"), str(project))
    assert code == 0
    assert out.index("board.add") < out.index("UI Actions") < out.index("board.toggle")


def test_a_bundle_without_actions_says_nothing_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.build.bundle_kit import good_bundle

    path = tmp_path / "todo.lineup"
    path.write_bytes(good_bundle())
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 0 and "UI Action" not in out


# -- docs ----------------------------------------------------------------------------------


def test_docs_list_actions_in_their_own_section(board: Path) -> None:
    text = docs_markdown(check_bundle(board, None).model)  # type: ignore[arg-type]
    assert "- **UI Actions:** 2 (for its Surface)" in text
    head, section = text.split("\n## UI Actions\n", 1)
    assert "board.toggle" not in head  # not among the tools
    assert "an Agent never sees or calls them" in section
    assert "| [`board.toggle`](#action-boardtoggle) | 5 s | Tick or untick one card. |" in section
    toggle = section.split("## Action `board.toggle`", 1)[1]
    assert "| `id` | string | yes | — | — | The card to toggle. |" in toggle
    assert "| `done` | boolean | yes | — | Whether the card is done now. |" in toggle
    assert "Any other parameter is refused (`invalid_params`)." in toggle
    clear = section.split("## Action `board.clear_done`", 1)[1].split("## Action", 1)[0]
    assert "No parameters." in clear and "Nothing: the result is `null`." in clear


def test_docs_of_an_app_without_actions_say_nothing_of_them() -> None:
    text = docs_markdown(Manifest.from_json(make_manifest()))
    assert "UI Action" not in text


# -- diff ----------------------------------------------------------------------------------


def _pair(**edits: Any) -> tuple[Manifest, Manifest]:
    old = make_manifest(ui_actions=[ui_action(), ui_action("todo.rename")])
    new = copy.deepcopy(old)
    new["app"]["version"] = "1.1.0"
    for name, edit in edits.items():
        entry = next(a for a in new["ui_actions"] if a["name"] == name)
        edit(entry)
    return Manifest.from_json(old), Manifest.from_json(new)


def test_removing_an_action_is_breaking_in_its_own_section() -> None:
    old, new = _pair()
    new = Manifest.from_json(
        {**new.to_json(), "ui_actions": [a for a in new.to_json()["ui_actions"][:1]]}
    )
    report = diff_manifests(old, new)
    assert not report.ok
    assert [(c.action, c.kind, c.breaking, c.tool) for c in report.changes] == [
        ("todo.toggle", "action_removed", True, None)
    ]
    doc = report.to_dict()
    assert doc["changes"] == []
    assert doc["ui_actions"][0]["action"] == "todo.toggle"
    assert "tool" not in doc["ui_actions"][0]
    verdict = report.verdict()
    assert verdict is not None and verdict.code == "breaking_change"
    assert "UI Action todo.toggle" in verdict.message


def test_adding_an_action_is_compatible() -> None:
    old = Manifest.from_json(make_manifest())
    new_doc = make_manifest(ui_actions=[ui_action()])
    new_doc["app"]["version"] = "1.1.0"
    report = diff_manifests(old, Manifest.from_json(new_doc))
    assert report.ok
    assert [(c.action, c.kind, c.breaking) for c in report.changes] == [
        ("todo.toggle", "action_added", False)
    ]


def _narrow(entry: dict[str, Any]) -> None:
    entry["input_schema"]["properties"]["id"]["maxLength"] = 8


def test_narrowing_an_actions_params_is_breaking_and_loosening_is_not() -> None:
    report = diff_manifests(*_pair(**{"todo.toggle": _narrow}))
    assert [(c.action, c.field, c.kind, c.breaking) for c in report.changes] == [
        ("todo.toggle", "params.id", "constraint_tightened", True)
    ]

    def required_param(entry: dict[str, Any]) -> None:
        entry["input_schema"]["properties"]["to"] = {"type": "string"}
        entry["input_schema"]["required"] = ["id", "to"]

    report = diff_manifests(*_pair(**{"todo.rename": required_param}))
    assert [(c.action, c.breaking) for c in report.changes] == [("todo.rename", True)]

    def optional_param(entry: dict[str, Any]) -> None:
        entry["input_schema"]["properties"]["note"] = {"type": "string"}

    report = diff_manifests(*_pair(**{"todo.rename": optional_param}))
    assert report.ok and [c.breaking for c in report.changes] == [False]


def test_an_actions_timeout_and_description_are_reported_not_breaking() -> None:
    def edit(entry: dict[str, Any]) -> None:
        entry["timeout_s"] = 5
        entry["description"] = "Tick it."

    report = diff_manifests(*_pair(**{"todo.toggle": edit}))
    assert report.ok
    assert [(c.kind, c.breaking) for c in report.changes] == [
        ("timeout_lowered", False),
        ("description_changed", False),
    ]


def test_a_tool_becoming_an_action_is_a_tool_removed_and_an_action_added() -> None:
    old = Manifest.from_json(make_manifest(tools=[sdk_tool(), sdk_tool("todo.toggle")]))
    new_doc = make_manifest(ui_actions=[ui_action()])
    new_doc["app"]["version"] = "2.0.0"
    report = diff_manifests(old, Manifest.from_json(new_doc))
    assert [(c.subject, c.kind) for c in report.changes] == [
        ("todo.toggle", "tool_removed"),
        ("todo.toggle", "action_added"),
    ]
    assert report.ok  # a major bump


@pytest.fixture(scope="module")
def board_v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The board app at 1.1.0 with `board.clear_done` gone and `board.toggle`'s id capped."""
    root = tmp_path_factory.mktemp("board2") / "board"
    shutil.copytree(BOARD, root, ignore=shutil.ignore_patterns("__pycache__", ".lineup"))
    toml = root / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.1.0"'))
    actions = root / "board_app" / "actions.py"
    text = actions.read_text()
    text = text.replace(
        "async def toggle(ctx: ActionContext, id: str) -> Toggled:",
        "async def toggle(ctx: ActionContext, id: str = Field(max_length=8)) -> Toggled:",
    )
    text = text.split('@actions.action("board.clear_done"')[0]
    actions.write_text(text)
    return root


def test_diff_cli_text_json_and_github(
    board: Path, board_v2: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "diff", str(board), str(board_v2))
    assert code == 1
    lines = out.splitlines()
    at = lines.index("  UI Actions:")
    assert lines[at + 1 : at + 3] == [
        "    BREAKING board.clear_done: action_removed: UI Action removed: an open Surface "
        "of the old build still asks for it",
        "    BREAKING board.toggle params.id (/input_schema/properties/id/maxLength): "
        "constraint_tightened: maxLength 8 added",
    ]

    code, out, _ = run(capsys, "diff", "--json", str(board), str(board_v2))
    doc = json.loads(out)
    assert code == 1 and doc["changes"] == [] and doc["breaking"] == 2
    assert [(c["action"], c["kind"]) for c in doc["ui_actions"]] == [
        ("board.clear_done", "action_removed"),
        ("board.toggle", "constraint_tightened"),
    ]

    code, out, _ = run(capsys, "diff", "--format", "github", str(board), str(board_v2))
    assert code == 1
    toggle = next(line for line in out.splitlines() if "board.toggle" in line)
    declared = (board_v2 / "board_app" / "actions.py").read_text().splitlines()
    line = next(i for i, t in enumerate(declared, 1) if '@actions.action("board.toggle"' in t)
    assert toggle.startswith("::error file=")
    assert f"board_app/actions.py,line={line}," in toggle
    assert "title=Breaking change in UI Action board.toggle::" in toggle


# -- json_type: one home, JSON Schema's meaning --------------------------------------------

VALUES: list[Any] = [None, True, False, 0, 2, -3, 2.0, -0.0, 1e300, 2.5, "2", [], {}]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v) for v in VALUES])
def test_json_type_agrees_with_the_jsonschema_validator(value: Any) -> None:
    kind = json_type(value)
    for t in TYPES:
        accepted = Draft202012Validator({"type": t}).is_valid(value)
        assert accepted == (kind == t or (t == "number" and kind == "integer")), (value, t)


def test_two_point_zero_is_an_integer_in_docs_and_diff() -> None:
    assert json_type(2.0) == "integer"
    assert SchemaReader({}).type_text({"enum": [2.0, 3]}) == "integer"
    # diff: an enum [2.0] is the integer 2, so `const: 2` over it changes no type
    old = make_manifest(tools=[sdk_tool(result_schema={"enum": [2.0]})])
    new = make_manifest(tools=[sdk_tool(result_schema={"const": 2})])
    new["app"]["version"] = "1.0.1"
    report = diff_manifests(Manifest.from_json(old), Manifest.from_json(new))
    assert [c.kind for c in report.changes if "type" in c.kind] == []
