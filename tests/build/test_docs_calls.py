"""`lineup docs` answers "how do I call this, and what can go wrong": an example call per
tool (the author's `Field(examples=...)`, else generated from the schema and valid against
it), the tool as `lineup serve` serves it (its name under the default mapping, the
long-running envelope, `lineup-result`), the errors it can answer, its UI Actions; and the
same page as one HTML document.

Golden files under `golden/`; regenerate after an intended change with

    LINEUP_REGEN_GOLDEN=1 python -m pytest tests/build/test_docs_calls.py
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lineup_build.build import build_project, source_manifest
from lineup_build.docs import docs_html, docs_markdown
from lineup_build.docs._example import example_params
from lineup_build.init import init_project
from lineup_build.model import Tool, UiAction
from lineup_build.signing import SigningKey
from lineup_build.sources import load_manifest
from lineup_runtime_lite.internals import RESULT_TOOL, tool_name
from tests.build.diff_app import base_manifest, tool, typed
from tests.cli_kit import run_cli

GOLDEN = Path(__file__).parent / "golden"

_TOOLS = '''
"""A shelf of books: tools with examples, and one UI Action."""

from pydantic import BaseModel, Field

from lineup_sdk import ToolContext, define_agent_tools, define_ui_actions

tools = define_agent_tools(app_scope="shelf")
actions = define_ui_actions(app_scope="shelf")


class Book(BaseModel):
    """One book on the shelf."""

    title: str = Field(min_length=1, max_length=120, examples=["The Dispossessed"])
    pages: int = Field(ge=1, le=5000, description="How many pages.")


@tools.tool("shelf.add", activation="app_ready")
def add(
    ctx: ToolContext,
    title: str = Field(min_length=1, max_length=120, examples=["The Dispossessed"]),
    stars: int = Field(default=3, ge=1, le=5, description="1 to 5."),
) -> Book:
    """Put one book on the shelf."""
    return Book(title=title, pages=1)


@tools.tool("shelf.find", activation="activation_not_required", read_only=True)
def find(
    ctx: ToolContext,
    isbn: str = Field(pattern=r"^[0-9]{13}$", description="13 digits."),
    limit: int = Field(ge=2, le=9),
    tags: list[str] = Field(min_length=2, description="At least two tags."),
) -> list[Book]:
    """Find books by ISBN."""
    return []


@actions.action("shelf.pin")
def pin(ctx: object, title: str = Field(min_length=3)) -> bool:
    """Pin a book to the top of the shelf."""
    return True
'''


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shelf") / "shelf"
    init_project(root, template="blank", scope="shelf")
    entry = next(root.rglob("tools.py"))
    entry.write_text(textwrap.dedent(_TOOLS).lstrip(), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def pomodoro(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pomodoro") / "pomodoro"
    init_project(root, template="pomodoro")
    return root


def _golden(name: str, actual: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("LINEUP_REGEN_GOLDEN") == "1":
        golden.write_text(actual, encoding="utf-8", newline="\n")
    assert golden.exists(), f"missing {golden}; run with LINEUP_REGEN_GOLDEN=1"
    assert actual == golden.read_text(encoding="utf-8"), (
        f"{name} differs; if the change is intended, regenerate with LINEUP_REGEN_GOLDEN=1"
    )


def _manifest(project: Path) -> dict[str, Any]:
    manifest, check = source_manifest(project)
    assert manifest is not None, [d.to_dict() for d in check.diagnostics]
    return manifest


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_golden_page_with_examples_mcp_view_errors_and_actions(shelf: Path) -> None:
    text = docs_markdown(typed(_manifest(shelf)))
    _golden("shelf.docs.md", text)
    add = _section(text, "## `shelf.add`")
    assert "Params, from the author's `examples`:" in add
    assert '"title": "The Dispossessed"' in add  # Field(examples=...), not generated
    assert '"stars"' not in add.split("### Over MCP")[0].split("### Example call")[1]
    assert "- **Name:** `shelf-add`" in add
    assert '{"name": "shelf-add", "arguments": {"title": "The Dispossessed"}}' in add
    assert f'{{"name": "{RESULT_TOOL}", "arguments": {{"call_id": "<call_id>"}}}}' in add
    for code in ("invalid_params", "activation_failed", "handler_timeout", "handler_failed"):
        assert f"| `{code}` |" in add, code
    assert "`app_not_running`" not in add  # app_ready starts the app
    assert "`app.<code>`" in add
    find = _section(text, "## `shelf.find`")
    assert "generated from the schema" in find
    assert "| `app_not_running` |" in find and "`activation_failed`" not in find
    assert "Replace the placeholder at `/isbn`" in find  # a pattern is not solved
    assert 'wrapped as `{"result": ...}`' in find  # a list result, as serve wraps it
    pin = _section(text, "## Action `shelf.pin`")
    assert "### Example params" in pin and '"title": "text"' in pin
    assert "`unknown_action`" in pin and "`action_pending`" in pin


def test_golden_long_running_tool_names_its_envelope(pomodoro: Path) -> None:
    text = docs_markdown(typed(_manifest(pomodoro)))
    start = _section(text, "## `pomodoro.start`")
    assert "- **Name:** `pomodoro-start`" in start
    assert '`{"status": "pending", "call_id", "stage"}`' in start
    assert '`{"status": "final", "call_id", "stage": "result", "result": ...}`' in start
    assert "answers `pending`; call `lineup-result`" in start
    assert "| `pomodoro_already_active` |" in start
    assert "| `activation_cancelled` |" in start
    assert "`handler_timeout`" not in start  # the runtime handles it: no MiniApp handler
    interrupt = _section(text, "## `pomodoro.interrupt`")
    assert "`app_not_running`" not in interrupt  # a runtime tool that never needs the app


def test_names_are_the_ones_lineup_serve_serves(shelf: Path, pomodoro: Path) -> None:
    for project in (shelf, pomodoro):
        manifest = typed(_manifest(project))
        text = docs_markdown(manifest)
        for t in manifest.tools:
            assert f"- **Name:** `{tool_name(t.method, 'dashed')}`" in text
            assert f"serves it as `{tool_name(t.method, 'dotted')}`" in text


def _name(action: UiAction) -> str:
    return action.name


def _examples(text: str) -> list[Any]:
    blocks = re.findall(r"### Example (?:call|params)\n\n[^\n]*\n\n```json\n(.*?)\n```", text, re.S)
    return [json.loads(b) for b in blocks]


def test_every_generated_example_is_valid_params(shelf: Path, pomodoro: Path) -> None:
    """Each example the page shows is accepted by its tool's schema (a pattern aside)."""
    manifests = [typed(_manifest(shelf)), typed(_manifest(pomodoro)), typed(base_manifest())]
    checked = 0
    for manifest in manifests:
        text = docs_markdown(manifest)
        shown = _examples(text)
        tools = sorted(manifest.tools, key=lambda t: t.method)
        entries: list[Tool | UiAction] = [*tools, *sorted(manifest.ui_actions, key=_name)]
        assert len(shown) == len(entries)
        for entry, params in zip(entries, shown, strict=True):
            schema = entry.input_schema
            example = example_params(schema)
            assert example.params == params
            errors = [
                e
                for e in jsonschema.Draft202012Validator(schema).iter_errors(params)
                if not (
                    e.validator == "pattern"
                    and e.json_path.lstrip("$.") in {p.lstrip("/") for p in example.unsolved}
                )
            ]
            assert errors == [], (getattr(entry, "method", None), params, errors)
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "properties": {}}, {}),
        (
            {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "exclusiveMinimum": 4, "multipleOf": 3},
                    "x": {"type": "number", "maximum": -2},
                    "s": {"type": "string", "minLength": 9, "format": "date"},
                    "e": {"enum": ["b", "a"]},
                    "o": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/P"}]},
                    "skip": {"type": "string"},
                },
                "required": ["n", "x", "s", "e", "o"],
                "$defs": {
                    "P": {"type": "object", "properties": {"k": {"const": 7}}, "required": ["k"]}
                },
            },
            {"e": "b", "n": 6, "o": {"k": 7}, "s": "2026-01-01", "x": -2},
        ),
        (
            {"type": "object", "examples": [{"q": "whole"}], "properties": {"q": {}}},
            {"q": "whole"},
        ),
    ],
    ids=["empty", "constraints-refs-and-optional-left-out", "schema-level-examples"],
)
def test_generated_examples(schema: dict[str, Any], expected: Any) -> None:
    assert example_params(schema).params == expected
    assert example_params(schema) == example_params(json.loads(json.dumps(schema)))


def test_html_is_one_page_from_a_bundle_as_from_its_folder(
    shelf: Path, signing_key: SigningKey, tmp_path: Path
) -> None:
    result = build_project(shelf, signing_key=signing_key, out_dir=tmp_path)
    assert result.ok and result.bundle is not None
    page = docs_html(load_manifest(result.bundle).manifest)
    _golden("shelf.docs.html", page)
    assert page == docs_html(typed(_manifest(shelf)))
    assert page.startswith("<!doctype html>") and page.count("<h2 ") >= 4
    assert '<h2 id="shelfadd"><code>shelf.add</code></h2>' in page
    assert '<a href="#shelfadd"><code>shelf.add</code></a>' in page
    assert docs_markdown(load_manifest(result.bundle).manifest) == docs_markdown(
        typed(_manifest(shelf))
    )


def test_html_keeps_manifest_text_inert() -> None:
    manifest = base_manifest()
    add = tool(manifest, "shop.add")
    add["description"] = "Pipes | and <script>alert(1)</script> `<b>x</b>` [a](javascript:x)"
    add["input_schema"]["properties"]["quantity"]["examples"] = ["```</code><script>"]
    page = docs_html(typed(manifest))
    assert "<script>" not in page and "<b>" not in page
    assert "javascript:" not in page.replace("[a](javascript:x)", "")
    assert 'href="javascript' not in page
    assert "&lt;script&gt;" in page


def test_cli_format_html_and_a_wrong_format(
    shelf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "shelf.html"
    code, out, _ = run_cli(["docs", str(shelf), "--format", "html", "--out", str(target)], capsys)
    assert code == 0 and out == ""
    assert target.read_text(encoding="utf-8") == (GOLDEN / "shelf.docs.html").read_text("utf-8")
    code, out, _ = run_cli(["docs", str(shelf), "--format", "pdf", "--json"], capsys)
    assert code == 2 and json.loads(out)["error"]["code"] == "usage_invalid"
