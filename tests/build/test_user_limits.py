"""Limits a user can set (issue 36, SPEC 4 "Limits (defaults, configurable)"): the manifest,
file-count and total-size limits in `[limits]` of `lineup.toml` (or `[tool.lineup.limits]`),
as `--max-*` options of `lineup build` and `lineup verify`, and as `Runtime.open(
bundle_limits=...)` where bundles are installed; a refusal's hint names the real option.

The limits are set below a small project's size here (they may be lowered as well as
raised), so no test builds a huge bundle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.reader import Limits
from lineup_build.signing import public_pem
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import Runtime
from lineup_sdk.errors import LineupError
from tests.build.bundle_kit import KEY
from tests.cli_kit import run_cli


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits") / "todo"
    init_project(root, template="todo", scope="todo")
    return root


@pytest.fixture(scope="module")
def bundle(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = build_project(project, signing_key=KEY, out_dir=tmp_path_factory.mktemp("dist"))
    assert result.ok and result.bundle is not None
    return result.bundle


def _with_limits(project: Path, tmp_path: Path, table: str) -> Path:
    copy = tmp_path / "todo"
    import shutil

    shutil.copytree(project, copy)
    config = copy / "lineup.toml"
    config.write_text(config.read_text() + "\n[limits]\n" + table)
    return copy


def _codes(result: object) -> list[tuple[str, str | None]]:
    return [(d.code, d.hint) for d in result.diagnostics if d.severity == "error"]  # type: ignore[attr-defined]


def test_limits_in_lineup_toml_bound_the_build_and_the_hint_names_the_option(
    project: Path, tmp_path: Path
) -> None:
    small = _with_limits(project, tmp_path, "max_manifest_bytes = 200\n")
    refused = build_project(small, signing_key=KEY, out_dir=tmp_path / "dist")
    assert not refused.ok and refused.bundle is None
    [(code, hint)] = _codes(refused)
    assert code == "limits_exceeded"
    assert hint is not None and "--max-manifest-bytes" in hint and "[limits]" in hint
    # the command line's option raises what the project set
    raised = build_project(
        small, signing_key=KEY, out_dir=tmp_path / "dist", limits={"max_manifest_bytes": 1 << 20}
    )
    assert raised.ok and raised.bundle is not None


def test_the_file_count_limit_bounds_what_include_collects(project: Path, tmp_path: Path) -> None:
    few = _with_limits(project, tmp_path, "max_files = 1\n")
    refused = build_project(few, signing_key=KEY, out_dir=tmp_path / "dist")
    assert not refused.ok
    [hint] = [hint for code, hint in _codes(refused) if code == "limits_exceeded"]
    assert hint is not None and "--max-files" in hint
    assert build_project(few, signing_key=KEY, out_dir=tmp_path / "d2", limits={"max_files": 50}).ok


@pytest.mark.parametrize(
    "table",
    ["max_files = 0\n", 'max_manifest_bytes = "big"\n', "max_depth = 9\n", "max_files = 2000000\n"],
    ids=["zero", "not-a-number", "unknown-limit", "over-the-ceiling"],
)
def test_a_bad_limits_table_is_config_invalid(project: Path, tmp_path: Path, table: str) -> None:
    bad = _with_limits(project, tmp_path, table)
    result = build_project(bad, signing_key=KEY, out_dir=tmp_path / "dist")
    assert [d.code for d in result.diagnostics] == ["config_invalid"]
    assert "limits." in result.diagnostics[0].message


def test_build_takes_max_options_on_the_command_line(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "key.pem"
    from lineup_build.signing import private_pem

    key.write_bytes(private_pem(KEY))
    small = _with_limits(project, tmp_path, "max_manifest_bytes = 200\n")
    base = ["build", str(small), "--key", str(key), "--out", str(tmp_path / "dist"), "--json"]
    status, out, _ = run_cli(base, capsys)
    assert status == 1
    assert json.loads(out)["diagnostics"][0]["code"] == "limits_exceeded"
    status, out, _ = run_cli([*base, "--max-manifest-bytes", "1048576"], capsys)
    assert status == 0, out


def test_verify_takes_max_options_and_its_hint_names_them(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pub = tmp_path / "key.pub.pem"
    pub.write_bytes(public_pem(KEY))
    store = tmp_path / "trust.toml"
    assert (
        run_cli(["trust", "add", str(pub), "--scope", "todo", "--store", str(store)], capsys)[0]
        == 0
    )
    base = ["verify", str(bundle), "--trust", str(store), "--json"]
    assert run_cli(base, capsys)[0] == 0
    status, out, _ = run_cli([*base, "--max-manifest-bytes", "200"], capsys)
    first = json.loads(out)["diagnostics"][0]
    assert status == 1 and first["code"] == "limits_exceeded"
    assert "--max-manifest-bytes" in first["hint"]
    status, out, _ = run_cli([*base, "--max-files=1"], capsys)
    first = json.loads(out)["diagnostics"][0]
    assert status == 1 and first["code"] == "limits_exceeded"
    assert "--max-files" in first["hint"]
    status, out, err = run_cli([*base, "--max-files", "many"], capsys)
    assert status == 2 and "usage_invalid" in out + err


def test_runtime_open_sets_the_limits_install_verifies_within(bundle: Path, tmp_path: Path) -> None:
    trust = TrustStore.from_keys([TrustedKey(KEY.key_id, KEY.public_raw, ("*",), "t")])
    with Runtime.open(":memory:", trust=trust, bundle_limits=Limits(max_manifest_bytes=200)) as rt:
        with pytest.raises(LineupError) as exc:
            rt.install(bundle)
        assert exc.value.code == "limits_exceeded"
        assert exc.value.hint is not None and "bundle_limits" in exc.value.hint
    with Runtime.open(":memory:", trust=trust, bundle_limits=Limits()) as rt:
        assert rt.install(bundle).scope == "todo"
    with pytest.raises(LineupError) as bad:
        Runtime.open(":memory:", trust=trust, bundle_limits={"max_files": 3})  # type: ignore[arg-type]
    assert bad.value.code == "usage_invalid"


def test_a_node_re_verifies_the_recorded_bundle_within_its_own_limits(
    bundle: Path, pg_url: str, tmp_path: Path
) -> None:
    """On PostgreSQL a node verifies the recorded bundle before it lists or runs a version
    (SPEC 16.1): with the limits given to `Runtime.open`, not the defaults. A node whose
    manifest limit the bundle exceeds lists no tools and says why; one within them runs it."""
    trust = TrustStore.from_keys([TrustedKey(KEY.key_id, KEY.public_raw, ("*",), "t")])
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "apps-a") as rt:
        rt.install(bundle)
    small = Limits(max_manifest_bytes=200)
    with Runtime.open(pg_url, trust=trust, apps_dir=tmp_path / "apps-b", bundle_limits=small) as rt:
        (app,) = rt.apps()
        assert app["trusted"] is False, app
        assert app["problem"]["code"] == "limits_exceeded", app
        assert not [t for t in rt.inventory() if t["method"].startswith("todo.")]
        answer = rt.call("c1", "conv", "todo.add", {"title": "milk"})
        assert answer["kind"] == "error" and answer["error"]["code"] == "unknown_method"
        assert not any((tmp_path / "apps-b").rglob("*.py")), "nothing unpacked"
    with Runtime.open(
        pg_url, trust=trust, apps_dir=tmp_path / "apps-c", bundle_limits=Limits()
    ) as rt:
        (app,) = rt.apps()
        assert app["trusted"] is True, app
        assert [t for t in rt.inventory() if t["method"] == "todo.add"]
