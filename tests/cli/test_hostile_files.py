"""Files the CLI reads (issue 10, SPEC 12): regular files within a size limit, TOML at most
32 levels deep, include globs in linear time, `--out` a folder, and the build enforcing the
limits `verify` does. Each is refused with the command's own code, never a traceback or a
hang, and nothing is written."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.cli import main
from lineup_build.files import collect_files, compile_glob
from lineup_build.fsutil import MAX_TOML_DEPTH, TomlTooDeep, parse_toml, read_regular
from lineup_build.init import init_project
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustedKey, TrustStore
from lineup_sdk.errors import LineupError

DEEP_ARRAY = "x = " + "[" * 5000 + "]" * 5000 + "\n"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run `lineup ARGS` in a thread that must finish (a FIFO read would hang it)."""
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            main(args)
        except SystemExit as exc:
            box["code"] = int(exc.code or 0)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), f"lineup {' '.join(args)} hangs"
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text, text
    return box["code"], text


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if ".lineup" in p.parts:  # `--dev-key` creates the project's key on first use
            continue
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "todo"
    init_project(root, template="todo", scope="todo")
    return root


@pytest.fixture()
def bundle(project: Path, signing_key: SigningKey) -> Path:
    result = build_project(project, signing_key=signing_key)
    assert result.ok and result.bundle is not None
    return result.bundle


@pytest.fixture()
def trust_file(tmp_path: Path, signing_key: SigningKey) -> Path:
    path = tmp_path / "trust.toml"
    TrustStore.from_keys(
        [TrustedKey(signing_key.key_id, signing_key.public_raw, ("*",), "t")]
    ).save(path)
    return path


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _folder(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()


def _huge(limit: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_bytes(b"# padding\n" * (limit // 10 + 1))

    return make


def _deep(path: Path) -> None:
    path.write_text(DEEP_ARRAY)


KINDS = {"fifo": _fifo, "dev-zero": _dev_zero, "folder": _folder, "deep": _deep}


# -- lineup.toml --------------------------------------------------------------------------
@pytest.mark.parametrize("make", [*KINDS.values(), _huge(1024 * 1024)], ids=[*KINDS, "over-1-MiB"])
def test_a_hostile_lineup_toml_is_config_invalid(
    project: Path, make: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    make(project / "lineup.toml")
    before = tree_hash(project)
    for command in (["check", str(project)], ["build", str(project), "--dev-key"]):
        code, text = run_cli([*command, "--json"], capsys)
        assert code == 1
        assert "config_invalid" in text
    assert tree_hash(project) == before  # no dist/, nothing read from the FIFO or device


def test_dotted_keys_nested_too_deep_are_config_invalid(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "lineup.toml").write_text("[" + ".".join(["t"] * 40) + "]\nx = 1\n")
    code, text = run_cli(["check", str(project), "--json"], capsys)
    assert code == 1 and "config_invalid" in text and "nested deeper" in text


# -- trust store --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make", [*KINDS.values(), _huge(4 * 1024 * 1024)], ids=[*KINDS, "over-4-MiB"]
)
def test_a_hostile_trust_store_is_trust_store_invalid(
    bundle: Path, tmp_path: Path, make: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "hostile-trust.toml"
    store.write_text("")
    make(store)
    code, text = run_cli(["verify", str(bundle), "--trust", str(store), "--json"], capsys)
    assert code == 1 and "trust_store_invalid" in text
    code, text = run_cli(["trust", "list", "--store", str(store), "--json"], capsys)
    assert code == 1 and "trust_store_invalid" in text


# -- bundle -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_a_hostile_bundle_path_is_bundle_unreadable(
    tmp_path: Path, trust_file: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "app.lineup"
    KINDS[kind](target)
    for command in (
        ["verify", str(target), "--trust", str(trust_file)],
        ["inspect", str(target)],
    ):
        code, text = run_cli([*command, "--json"], capsys)
        assert code == 1 and "bundle_unreadable" in text


# -- scenario -----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [*KINDS.values(), _huge(1024 * 1024)], ids=[*KINDS, "over-1-MiB"])
def test_a_hostile_scenario_is_scenario_invalid(
    project: Path, tmp_path: Path, make: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text("")
    make(scenario)
    db = tmp_path / "rt.db"
    code, text = run_cli(
        ["run", str(project), "--scenario", str(scenario), "--db", str(db), "--json"], capsys
    )
    assert code == 1 and "scenario_invalid" in text
    assert not db.exists()  # refused before any runtime was opened


# -- lineup run --db ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "content", [b"garbage" * 1000, bytes(8192), b"SQLite format 3\x00" + b"\xff" * 5000]
)
def test_lineup_run_on_a_damaged_database_is_store_corrupt(
    project: Path, tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "rt.db"
    db.write_bytes(content)
    scenario = tmp_path / "s.toml"
    scenario.write_text('[[step]]\ncall = {id = "a", conversation = "c", method = "todo.list"}\n')
    code, text = run_cli(
        ["run", str(project), "--scenario", str(scenario), "--db", str(db)], capsys
    )
    assert code == 1 and "store_corrupt" in text
    assert db.read_bytes() == content


# -- --out --------------------------------------------------------------------------------
@pytest.mark.parametrize("nested", [False, True], ids=["file", "below-a-file"])
def test_out_naming_a_file_is_usage_invalid(
    project: Path, tmp_path: Path, nested: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "not-a-folder"
    file.write_text("keep me")
    out = file / "sub" if nested else file
    code, text = run_cli(["build", str(project), "--dev-key", "--out", str(out)], capsys)
    assert code == 2 and "usage_invalid" in text
    code, text = run_cli(["keygen", "--out", str(out)], capsys)
    assert code == 2 and "usage_invalid" in text
    assert file.read_text() == "keep me"


# -- include globs and bundle limits ------------------------------------------------------
def test_an_include_glob_of_24_stars_is_matched_in_linear_time(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    for i in range(50):
        (tmp_path / "pkg" / f"{'a' * 60}{i}.txt").write_text("x")
    started = time.perf_counter()
    files, diags = collect_files(tmp_path, ("pkg/" + "*" * 24 + "b", "pkg/" + "*a" * 24 + "b"))
    assert time.perf_counter() - started < 2
    assert files == [] and diags == []
    files, _ = collect_files(tmp_path, ("pkg/" + "*a" * 12 + "*.txt",))
    assert len(files) == 50


def test_a_project_over_the_file_limit_fails_at_build(
    project: Path, signing_key: SigningKey
) -> None:
    extra = project / "todo_app" / "data"
    extra.mkdir()
    for i in range(10_001):
        (extra / f"f{i}.py").write_bytes(b"")
    result = build_project(project, signing_key=signing_key)
    assert not result.ok and result.bundle is None
    assert "limits_exceeded" in {d.code for d in result.diagnostics}
    assert not (project / "dist").exists()


def test_a_project_over_the_byte_limit_stops_reading(tmp_path: Path) -> None:
    from lineup_build.reader import Limits

    for i in range(5):
        (tmp_path / f"f{i}.py").write_bytes(b"x" * 1000)
    files, diags = collect_files(tmp_path, ("*.py",), limits=Limits(max_total_bytes=2500))
    assert [d.code for d in diags] == ["limits_exceeded"]
    assert len(files) == 2


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("app/**/*.py", "app/x.py", True),
        ("app/**/*.py", "app/a/b/x.py", True),
        ("app/**/*.py", "appx.py", False),
        ("app/*.py", "app/a/x.py", False),
        ("**", "a/b/c", True),
        ("a/**", "a/b/c", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("*.txt", "a.txt.bak", False),
        ("**/x", "x", True),
        ("**/x", "a/x", True),
        ("**/x", "ax", False),
        ("a**b", "a/q/b", True),
        ("", "", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert compile_glob(pattern).match(path) is matches


# -- the shared reader --------------------------------------------------------------------
def test_read_regular_reports_why(tmp_path: Path) -> None:
    with pytest.raises(LineupError) as exc:
        read_regular(tmp_path / "missing", limit=10, code="config_invalid", what="config")
    assert exc.value.details == {"reason": "missing"}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(LineupError) as exc:
        read_regular(fifo, limit=10, code="scenario_invalid", what="scenario")
    assert exc.value.code == "scenario_invalid" and "a FIFO" in exc.value.message
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(LineupError) as exc:
        read_regular(big, limit=10, code="config_invalid", what="config")
    assert exc.value.details == {"reason": "too_large"}
    big.write_bytes(b"x" * 10)
    assert read_regular(big, limit=10, code="config_invalid", what="config") == b"x" * 10


@pytest.mark.parametrize(
    "text",
    [
        DEEP_ARRAY,
        "x = " + "[" * (MAX_TOML_DEPTH + 1) + "]" * (MAX_TOML_DEPTH + 1),
        "x = " + "{a = " * 40 + "1" + "}" * 40,
        "[" + ".".join(["t"] * (MAX_TOML_DEPTH + 1)) + "]",
        "a" + ".b" * 40 + " = 1",
    ],
    ids=["arrays", "arrays-33", "inline-tables", "table-header-33", "dotted-key"],
)
def test_toml_deeper_than_32_levels_is_refused(text: str) -> None:
    with pytest.raises(TomlTooDeep):
        parse_toml(text)


def test_toml_of_32_levels_and_brackets_in_strings_pass() -> None:
    # the document is level 0 and each array or table one level more
    assert parse_toml("x = " + "[" * MAX_TOML_DEPTH + "]" * MAX_TOML_DEPTH)
    assert parse_toml("[" + ".".join(["t"] * MAX_TOML_DEPTH) + "]")
    doc = parse_toml(
        's = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"[["\n'
        "t = '''[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''\n"
        "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"
        "[a]\nb = [[1], [2]]\n"
    )
    assert doc["a"] == {"b": [[1], [2]]}
