"""The CLI's first steps as users run them (issue 18, SPEC 13.1): `lineup run --db` with a
relative path, `lineup serve` without `--db` started in `/` (as Claude Desktop does), a
second server on the same state, and a worker that fails to start naming its cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from lineup_build.cli.compose import serve_state
from lineup_build.init import init_project
from lineup_sdk.errors import LineupError
from tests.cli_kit import run_cli

LINEUP = [sys.executable, "-c", "from lineup_build.cli import main; main()"]


def test_run_with_a_relative_db_plays_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    init_project(Path("my-todo"), template="todo")
    code, out, err = run_cli(
        [
            "run",
            "my-todo",
            "--scenario",
            "my-todo/scenarios/add_list_complete.toml",
            "--db",
            "rel.db",
            "--json",
        ],
        capsys,
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0, (err, lines[-1])
    assert lines[-1]["ok"] is True
    assert Path("rel.db").is_file() and Path("rel.db.apps/my_todo/1.0.0").is_dir()
    assert "worker failed" not in err


def test_serve_without_db_started_in_the_root_folder_keeps_state_in_the_project(
    tmp_path: Path,
) -> None:
    project = tmp_path / "my-todo"
    init_project(project, template="todo")
    errors = tmp_path / "stderr.txt"
    params = StdioServerParameters(
        command=LINEUP[0], args=[*LINEUP[1:], "serve", str(project)], cwd="/"
    )

    async def session() -> None:
        with errors.open("w") as err:
            async with stdio_client(params, errlog=err) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                tools = [t.name for t in (await s.list_tools()).tools]
                assert len(tools) == 4 and "lineup-result" in tools  # 3 app tools, 1 own
                add = next(t for t in tools if t.endswith("add"))
                added = await s.call_tool(add, {"title": "milk"})
                assert not added.is_error, added.content
                assert added.structured_content is not None
                assert added.structured_content["count"] == 1
                # a second server on the same state is refused, with the way out
                second = subprocess.run(
                    [*LINEUP, "serve", str(project)],
                    cwd="/",
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=120,
                )
                assert second.returncode == 1
                assert "runtime_locked" in second.stderr and "--db" in second.stderr

    anyio.run(session)
    state = project / ".lineup" / "serve.db"
    assert state.is_file()
    assert f"state in {state}" in errors.read_text()


def test_serve_state_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    bundle = tmp_path / "app.lineup"
    bundle.write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    # the first folder named, made absolute
    assert serve_state([bundle, Path("app")], {}) == folder / ".lineup" / "serve.db"
    # only bundles: the XDG state folder, created
    xdg = tmp_path / "state"
    assert serve_state([bundle], {"XDG_STATE_HOME": str(xdg)}) == xdg / "lineup" / "serve.db"
    assert (xdg / "lineup").is_dir()
    # a relative XDG_STATE_HOME is invalid (the XDG spec) and ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = tmp_path / "home" / ".local" / "state" / "lineup" / "serve.db"
    assert serve_state([bundle], {"XDG_STATE_HOME": "rel"}) == expected
    # a folder that cannot be made is store_unavailable, with the way out
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(LineupError) as exc:
        serve_state([bundle], {"XDG_STATE_HOME": str(blocker)})
    assert exc.value.code == "store_unavailable" and "--db" in (exc.value.hint or "")


def test_run_names_the_cause_of_a_worker_that_failed_and_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    init_project(Path("bad"), template="todo")
    tools = Path("bad/bad_app/tools.py")
    tools.write_text(
        tools.read_text()
        + '\nimport sys\nif "lineup_sdk._worker" in sys.modules:\n    raise RuntimeError("boom")\n'
    )
    code, _out, err = run_cli(
        ["run", "bad", "--scenario", "bad/scenarios/add_list_complete.toml", "--db", "r.db"],
        capsys,
    )
    assert code == 1
    assert err.count("the worker failed to start: RuntimeError: boom") == 1, err
    log = tmp_path / "r.db.apps" / "_logs" / "bad-1.0.0.log"
    assert f"log: {log}" in err and "RuntimeError: boom" in log.read_text()
