"""`lineup diff` as a process sees it: exit codes, text, `--json`, `--format github`,
bundles and folders, and bad input that never gives a traceback."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.cli import main
from lineup_build.diff import Change, DiffReport
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from tests.build.bundle_kit import good_bundle, make_manifest

EPOCH = 1_700_000_000


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The todo template (1.0.0) and edited copies of it."""
    root = tmp_path_factory.mktemp("diffcli")
    old = root / "todo"
    init_project(old, template="todo")

    def variant(name: str, version: str, edits: dict[str, str]) -> Path:
        path = root / name
        shutil.copytree(old, path)
        toml = path / "lineup.toml"
        toml.write_text(toml.read_text().replace('version = "1.0.0"', f'version = "{version}"'))
        tools = path / "todo_app" / "tools.py"
        text = tools.read_text()
        for a, b in edits.items():
            assert a in text
            text = text.replace(a, b)
        tools.write_text(text)
        return path

    tighter = {"max_length=200": "max_length=100"}
    return {
        "old": old,
        "minor_breaking": variant("minor_breaking", "1.1.0", tighter),
        "major_breaking": variant("major_breaking", "2.0.0", tighter),
        "minor_compatible": variant(
            "minor_compatible", "1.1.0", {"max_length=200": "max_length=300"}
        ),
    }


@pytest.fixture(scope="module")
def old_bundle(
    projects: dict[str, Path], signing_key: SigningKey, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    result = build_project(
        projects["old"], signing_key=signing_key, out_dir=tmp_path_factory.mktemp("b"), epoch=EPOCH
    )
    assert result.ok and result.bundle is not None
    return result.bundle


def test_identical_releases_pass(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], old_bundle: Path
) -> None:
    code, out, _ = run(capsys, "diff", str(old_bundle), str(projects["old"]))
    assert code == 0
    assert "ok: no changes for Agents" in out


def test_breaking_change_without_major_bump_fails_naming_tool_field_and_rule(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path]
) -> None:
    code, out, _ = run(capsys, "diff", str(projects["old"]), str(projects["minor_breaking"]))
    assert code == 1
    assert (
        "BREAKING todo.add params.title (/input_schema/properties/title/maxLength): "
        "constraint_tightened: maxLength lowered from 200 to 100"
    ) in out
    assert "fail: 1 breaking change(s) without a major version bump (1.0.0 -> 1.1.0, minor)" in out
    assert "2.0.0" in out  # the hint names the release that would pass


def test_breaking_change_under_major_bump_passes_and_is_listed(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path]
) -> None:
    code, out, _ = run(capsys, "diff", str(projects["old"]), str(projects["major_breaking"]))
    assert code == 0
    assert "BREAKING todo.add" in out and "under a major version bump" in out


def test_compatible_change_passes(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], old_bundle: Path
) -> None:
    code, out, _ = run(capsys, "diff", str(old_bundle), str(projects["minor_compatible"]))
    assert code == 0
    assert "constraint_loosened" in out and "none breaking" in out


def test_json_output(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], old_bundle: Path
) -> None:
    code, out, _ = run(capsys, "diff", str(old_bundle), str(projects["minor_breaking"]), "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False and doc["bump"] == "minor" and doc["major_bump"] is False
    assert doc["old"] == {"source": str(old_bundle), "version": "1.0.0"}
    assert doc["breaking"] == 1
    assert doc["changes"] == [
        {
            "tool": "todo.add",
            "pointer": "/input_schema/properties/title/maxLength",
            "field": "params.title",
            "kind": "constraint_tightened",
            "breaking": True,
            "message": "maxLength lowered from 200 to 100",
            "old": 200,
            "new": 100,
        }
    ]
    assert doc["error"]["code"] == "breaking_change" and doc["error"]["hint"]


def test_github_annotations(capsys: pytest.CaptureFixture[str], projects: dict[str, Path]) -> None:
    code, out, _ = run(
        capsys, "diff", str(projects["old"]), str(projects["minor_breaking"]), "--format", "github"
    )
    assert code == 1
    lines = out.splitlines()
    tools = (projects["minor_breaking"] / "todo_app" / "tools.py").resolve().as_posix()
    assert lines[0].startswith(f"::error file={tools.replace(':', '%3A')},line=")
    assert lines[0].split(",line=", 1)[1].split(",", 1)[1] == (
        "title=Breaking change in todo.add::params.title "
        "(/input_schema/properties/title/maxLength): constraint_tightened: "
        "maxLength lowered from 200 to 100"
    )
    assert lines[-1].startswith("::error file=") and (
        "title=lineup diff::1 breaking change(s)" in lines[-1]
    )


def test_github_annotations_of_a_removed_tool_point_into_old(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], tmp_path: Path
) -> None:
    """A removed tool is declared only in OLD, an added one only in NEW."""
    new = tmp_path / "todo"
    shutil.copytree(projects["old"], new)
    tools = new / "todo_app" / "tools.py"
    text = tools.read_text()
    assert '@tools.tool("todo.list",' in text
    tools.write_text(text.replace('@tools.tool("todo.list",', '@tools.tool("todo.items",'))
    code, out, _ = run(capsys, "diff", str(projects["old"]), str(new), "--format", "github")
    assert code == 1
    where = {}
    for line in out.splitlines():
        for method in ("todo.items", "todo.list"):
            if f" {method}::" in line:
                where[method] = line.split("file=", 1)[1].split(",line=", 1)
    old_file = (projects["old"] / "todo_app" / "tools.py").resolve().as_posix()
    assert where["todo.list"][0] == old_file.replace(":", "%3A")
    assert where["todo.items"][0] == tools.resolve().as_posix().replace(":", "%3A")
    assert all(not rest.startswith("1,") for _, rest in where.values())


def test_github_annotations_under_a_major_bump_are_warnings(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path]
) -> None:
    code, out, _ = run(
        capsys, "diff", str(projects["old"]), str(projects["major_breaking"]), "--format", "github"
    )
    assert code == 0
    assert out.startswith("::warning file=")
    assert ",title=Breaking change in todo.add (major bump)::" in out.splitlines()[0]
    assert "::error" not in out


def _report(message: str) -> DiffReport:
    change = Change("demo.x", "/description", "description_changed", True, message)
    return DiffReport("1.0.0", "1.1.0", "minor", False, [change], scope="demo")


def test_github_output_cannot_be_forged_by_manifest_text() -> None:
    import io

    from lineup_build.cli import _diff_render

    buf = io.StringIO()
    _diff_render.github(_report("x\n::error title=forged::pwned\r%0A"), buf)
    lines = buf.getvalue().splitlines()
    assert not any(line.startswith("::error title=forged") for line in lines)
    assert "%250A" in lines[0]  # `%` escaped, so GitHub cannot decode it into a line break


def test_text_output_escapes_control_characters() -> None:
    import io

    from lineup_build.cli import _diff_render

    buf = io.StringIO()
    _diff_render.text(_report("bell\x07 and \x1b[31mred"), buf)
    assert "\x07" not in buf.getvalue() and "\x1b" not in buf.getvalue()
    assert "\\x07" in buf.getvalue()


def _error(out: str) -> dict[str, Any]:
    doc = json.loads(out)
    assert doc["ok"] is False
    error: dict[str, Any] = doc["error"]
    return error


def test_missing_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "diff", str(tmp_path / "nope"), str(tmp_path), "--json")
    assert code == 2
    error = _error(out)
    assert error["code"] == "usage_invalid" and "OLD" in error["message"] and error["hint"]


def test_a_file_that_is_not_a_bundle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "junk.lineup"
    junk.write_bytes(b"not a zip")
    code, out, err = run(capsys, "diff", str(junk), str(junk))
    assert code == 2 and out == ""
    assert "bundle_unreadable" in err and "Traceback" not in err


def test_a_tampered_bundle_is_refused(
    capsys: pytest.CaptureFixture[str], old_bundle: Path, tmp_path: Path
) -> None:
    data = bytearray(old_bundle.read_bytes())
    at = data.rindex(b"Add one item")  # in app/todo_app/tools.py, after the manifest
    data[at] ^= 0x20
    tampered = tmp_path / "tampered.lineup"
    tampered.write_bytes(bytes(data))
    code, out, _ = run(capsys, "diff", str(tampered), str(old_bundle), "--json")
    assert code == 2
    assert _error(out)["code"] in {"file_hash_mismatch", "bundle_not_canonical"}


def test_a_project_that_does_not_build(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(projects["old"], broken)
    (broken / "lineup.toml").write_text("[app]\nscope = 'todo'\n")
    code, out, _ = run(capsys, "diff", str(projects["old"]), str(broken), "--json")
    assert code == 2
    error = _error(out)
    assert error["code"] == "config_invalid" and "NEW" in error["message"]
    assert error["details"]["diagnostics"]


def test_an_unknown_format_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path]
) -> None:
    code, _, err = run(
        capsys, "diff", str(projects["old"]), str(projects["old"]), "--format", "xml"
    )
    assert code == 2 and "Traceback" not in err


def test_permissions_and_hints_from_a_real_build(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], tmp_path: Path
) -> None:
    """The containment fields as a build writes them: a permission added breaks, a hint
    is reported; `lineup docs` shows both."""
    new = tmp_path / "todo"
    shutil.copytree(projects["old"], new)
    toml = new / "lineup.toml"
    text = toml.read_text().replace('version = "1.0.0"', 'version = "1.1.0"')
    toml.write_text(text.replace("[app]\n", "[app.permissions]\nnetwork = true\n\n[app]\n", 1))
    tools = new / "todo_app" / "tools.py"
    before = tools.read_text()
    after = before.replace(
        '@tools.tool("todo.list", activation="app_ready"',
        '@tools.tool("todo.list", activation="app_ready", read_only=True',
    )
    assert after != before, "the template's todo.list declaration changed: update this edit"
    tools.write_text(after)
    code, out, err = run(capsys, "diff", str(projects["old"]), str(new), "--json")
    assert code == 1, err
    changes = {
        (c["tool"], c["pointer"], c["kind"], c["breaking"]) for c in json.loads(out)["changes"]
    }
    assert changes == {
        (None, "/app/permissions/network", "permission_added", True),
        ("todo.list", "/hints/read_only", "hint_changed", False),
    }
    code, out, _ = run(capsys, "docs", str(new))
    assert code == 0
    assert "- **Permissions:** `network` (its workers may use the network)" in out
    assert "- **Hints:** read-only (changes nothing). Declared by the author, not enforced." in out


ODD_MANIFESTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "unknown_tool_field": lambda m: m["tools"][0].update(x_future=1),
    "network_permission_false": lambda m: m["app"].update(permissions={"network": False}),
    "network_permission_maybe": lambda m: m["app"].update(permissions={"network": "maybe"}),
    "hint_not_a_boolean": lambda m: m["tools"][0].update(hints={"read_only": "yes"}),
    "timeout_not_a_number": lambda m: m["tools"][0].update(timeout_s="30"),
    "tools_not_a_list": lambda m: m.update(tools={"todo.add": {}}),
    "no_app": lambda m: m.pop("app"),
}


@pytest.mark.parametrize("odd", sorted(ODD_MANIFESTS))
def test_a_hand_written_odd_manifest_is_manifest_invalid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, odd: str
) -> None:
    """A manifest the schema refuses (an unknown field, `network = false`, a value of the
    wrong type) never reaches the comparison or the page: `manifest_invalid`, exit 2."""
    manifest = make_manifest()
    ODD_MANIFESTS[odd](manifest)
    bundle, good = tmp_path / "odd.lineup", tmp_path / "good.lineup"
    bundle.write_bytes(good_bundle(manifest=manifest))
    good.write_bytes(good_bundle())

    code, out, err = run(capsys, "diff", str(good), str(bundle), "--json")
    assert code == 2, err
    error = _error(out)
    assert error["code"] == "manifest_invalid"
    assert error["message"].startswith(f"NEW {bundle}: manifest.json /")
    code, out, err = run(capsys, "diff", str(bundle), str(good))
    assert code == 2 and out == ""
    assert "manifest_invalid" in err and f"OLD {bundle}" in err and "Traceback" not in err
    code, out, err = run(capsys, "docs", str(bundle))
    assert code == 2 and out == ""
    assert "manifest_invalid" in err and "Traceback" not in err


def test_network_false_in_the_config_is_no_permission(
    capsys: pytest.CaptureFixture[str], projects: dict[str, Path], tmp_path: Path
) -> None:
    """`network = false` asks for nothing: the manifest carries no permission, so against
    a release that asked for the network it is `permission_removed` (not breaking), and
    against one that never asked there is no change."""

    def with_network(name: str, value: str, version: str) -> Path:
        path = tmp_path / name
        shutil.copytree(projects["old"], path)
        toml = path / "lineup.toml"
        text = toml.read_text().replace('version = "1.0.0"', f'version = "{version}"')
        toml.write_text(
            text.replace("[app]\n", f"[app.permissions]\nnetwork = {value}\n\n[app]\n", 1)
        )
        return path

    granted = with_network("granted", "true", "1.0.0")
    refused = with_network("refused", "false", "1.0.1")
    code, out, err = run(capsys, "diff", str(granted), str(refused), "--json")
    assert code == 0, err
    changes = [
        (c["pointer"], c["kind"], c["breaking"], c["old"], c["new"])
        for c in json.loads(out)["changes"]
    ]
    assert changes == [("/app/permissions/network", "permission_removed", False, True, None)]
    code, out, err = run(capsys, "diff", str(refused), str(granted), "--json")
    assert code == 1, err
    changes = [
        (c["pointer"], c["kind"], c["breaking"], c["old"], c["new"])
        for c in json.loads(out)["changes"]
    ]
    assert changes == [("/app/permissions/network", "permission_added", True, None, True)]
    code, out, err = run(capsys, "diff", str(projects["old"]), str(refused), "--json")
    assert code == 0 and json.loads(out)["changes"] == [], err
    code, out, _ = run(capsys, "docs", str(refused))
    assert code == 0 and "- **Permissions:** none (its code gets no network)" in out
