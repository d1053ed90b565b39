"""`lineup docs`: golden Markdown for the todo and pomodoro templates, the same bytes from a
bundle as from its folder, and manifest text that cannot break the page.

The golden files under `golden/` are the templates rendered as projects `todo` and
`pomodoro`. Regenerate them after an intended change with

    LINEUP_REGEN_GOLDEN=1 python -m pytest tests/build/test_docs.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lineup_build.build import build_project, source_manifest
from lineup_build.cli import main
from lineup_build.docs import docs_markdown
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.sources import load_manifest
from tests.build.diff_app import base_manifest, tool, typed

GOLDEN = Path(__file__).parent / "golden"
TEMPLATES = ["todo", "pomodoro"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("docs")
    out = {}
    for name in TEMPLATES:
        init_project(root / name, template=name)
        out[name] = root / name
    return out


@pytest.mark.parametrize("template", TEMPLATES)
def test_golden_docs(project: dict[str, Path], template: str) -> None:
    """The template's reference, byte for byte (see the module docstring)."""
    manifest, check = source_manifest(project[template])
    assert manifest is not None, [d.to_dict() for d in check.diagnostics]
    actual = docs_markdown(typed(manifest))
    golden = GOLDEN / f"{template}.docs.md"
    if os.environ.get("LINEUP_REGEN_GOLDEN") == "1":
        golden.write_text(actual, encoding="utf-8", newline="\n")
    assert golden.exists(), f"missing {golden}; run with LINEUP_REGEN_GOLDEN=1"
    assert actual == golden.read_text(encoding="utf-8"), (
        f"{golden.name} differs; if the change is intended, regenerate with LINEUP_REGEN_GOLDEN=1"
    )


def test_a_bundle_documents_exactly_like_its_folder(
    project: dict[str, Path], signing_key: SigningKey, tmp_path: Path
) -> None:
    result = build_project(project["todo"], signing_key=signing_key, out_dir=tmp_path)
    assert result.ok and result.bundle is not None
    from_bundle = docs_markdown(load_manifest(result.bundle).manifest)
    assert from_bundle == (GOLDEN / "todo.docs.md").read_text(encoding="utf-8")


def test_cli_writes_the_file_and_prints_without_out(
    project: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "TOOLS.md"
    with pytest.raises(SystemExit) as exc:
        main(["docs", str(project["pomodoro"]), "--out", str(target)])
    assert exc.value.code in (0, None)
    assert target.read_bytes() == (GOLDEN / "pomodoro.docs.md").read_bytes()
    assert capsys.readouterr().out == ""
    with pytest.raises(SystemExit):
        main(["docs", str(project["pomodoro"])])
    assert capsys.readouterr().out == target.read_text(encoding="utf-8")


@pytest.mark.parametrize("where", ["folder", "missing_parent"])
def test_an_unwritable_out_is_refused(
    project: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    out = tmp_path if where == "folder" else tmp_path / "no" / "TOOLS.md"
    with pytest.raises(SystemExit) as exc:
        main(["docs", str(project["todo"]), "--out", str(out), "--json"])
    assert exc.value.code == 2
    assert '"usage_invalid"' in capsys.readouterr().out


def test_docs_of_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["docs", str(tmp_path / "nope")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage_invalid" in err and "Traceback" not in err


def test_shapes_of_the_shop_app() -> None:
    """Nested and recursive models, optional fields, enums, hints and permissions."""
    manifest = base_manifest()
    manifest["app"]["permissions"] = {"network": True}
    tool(manifest, "shop.search")["hints"] = {"read_only": True, "open_world": False}
    text = docs_markdown(typed(manifest))

    assert "- **Permissions:** `network` (its workers may use the network)" in text
    assert "read-only (changes nothing); not open world (stays within the app's own data)" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert "| `title` | string | yes | 1–200 characters; matches `^[^\\n]+$` | — | — |" in rows
    assert "| `quantity` | integer | no | 1–100 | `1` | How many. |" in rows
    assert (
        '| `priority` | string | no | one of `"low"`, `"normal"`, `"high"` | `"normal"` | — |'
        in rows
    )
    assert "| `owner` | object (Owner) or null | no | 1–80 characters | `null` | — |" not in rows
    assert "| `owner.name` | string | yes | 1–80 characters | — | Display name. |" in rows
    assert "| `note` | string or null | no | — | `null` | — |" in rows
    assert any(r.startswith("| `children` | array of Node") and "recursive" in r for r in rows)
    assert not any(r.startswith("| `children[].") for r in rows)  # recursion is not unrolled
    assert "| `[]`" not in text
    assert "An array of object (Saved); each item:" in text
    assert "| `owner` | object (Owner) or null | no | — | `null` | Who owns the record. |" in rows
    assert "never starts or opens the app" in text.lower()
    assert text == docs_markdown(typed(manifest))  # deterministic


def test_manifest_text_cannot_break_the_page() -> None:
    manifest = base_manifest()
    add = tool(manifest, "shop.add")
    add["description"] = "Pipes | and <script>alert(1)</script>\x1b[31m"
    add["input_schema"]["properties"]["quantity"]["description"] = "a | b\nnext line"
    text = docs_markdown(typed(manifest))
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "\x1b" not in text
    assert "| a \\| b next line |" in text


def test_dependencies_and_an_sdk_tool_that_never_starts_the_app() -> None:
    manifest = base_manifest()
    manifest["app"]["dependencies"] = ["requests>=2", "attrs"]
    tool(manifest, "shop.add")["activation"] = "activation_not_required"
    text = docs_markdown(typed(manifest))

    assert "- **Dependencies:** `requests>=2`, `attrs`" in text
    activation = [line for line in text.splitlines() if line.startswith("- **Activation:**")]
    not_running = (
        "If the MiniApp is not already running here, the call fails with `app_not_running`."
    )
    # tools in method order: add, cancel (runtime), categories, focus, search
    assert [not_running in line for line in activation] == [True, False, False, False, False]
    assert activation[1].startswith("- **Activation:** `activation_not_required` — Never starts")


def test_the_page_lists_tools_by_method_whatever_their_order() -> None:
    manifest = base_manifest()
    text = docs_markdown(typed(manifest))
    manifest["tools"].reverse()
    assert docs_markdown(typed(manifest)) == text
