"""The MCP project's own conformance suite (`@modelcontextprotocol/conformance`, pinned by
conformance/package-lock.json, on Node 22 from the same lock) against `lineup serve --http`
as a user starts it (the todo and pomodoro templates), through `bearer_proxy` — a loopback
proxy that adds the bearer token, since the suite sends no headers (SPEC 18.1).

Every scenario that applies to a tools-and-resources server must pass with no failure; on
`server-sse-polling` its priming-event and retry checks must pass too (they are warnings to
the suite). The scenarios that do not apply, and why, are in docs/guides/serving.md.

The suite's packages come from LINEUP_MCP_CONFORMANCE_DIR, a folder where `npm ci` ran on
conformance/package.json and package-lock.json (`.ci/run` does it); without it the module
skips, except in CI (`CI` set), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from lineup_build.init import init_project
from tests.cli_kit import served_url, start_lines, stop_process
from tests.users.mcp_clients_kit import HERE, lineup_command

pytestmark = pytest.mark.slow

#: CI runs `npm ci` for conformance/ into a folder and names it here (see .ci/run).
CONFORMANCE_ENV = "LINEUP_MCP_CONFORMANCE_DIR"
SOURCE = HERE / "conformance"
TOKEN = "conformance-token-0123456789"
#: SPEC 18.1: the scenarios that apply to a tools-and-resources server.
APPLICABLE = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "server-sse-polling",
)
SCENARIO_S = 120.0
_SUMMARY = re.compile(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings")


def locate_suite() -> Path:
    """The folder whose node_modules holds the suite and Node 22; skips (fails in CI)
    when there is none."""
    named = os.environ.get(CONFORMANCE_ENV)
    if not named:
        why = (
            f"{CONFORMANCE_ENV} is not set: run `npm ci` in a copy of tests/users/conformance "
            f"(package.json, package-lock.json) and set {CONFORMANCE_ENV} to that folder "
            "(.ci/run does)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"the conformance suite must run in CI: {why}")
        pytest.skip(why)
    folder = Path(named)
    for tool in ("node", "conformance"):
        assert (folder / "node_modules" / ".bin" / tool).exists(), (
            f"{CONFORMANCE_ENV}={named} holds no node_modules/.bin/{tool}"
        )
    return folder


def test_the_pins_are_the_lock_file() -> None:
    """package.json pins the suite and Node 22 exactly; package-lock.json resolves them."""
    manifest = json.loads((SOURCE / "package.json").read_text())
    lock = json.loads((SOURCE / "package-lock.json").read_text())
    assert manifest["dependencies"] == {
        "@modelcontextprotocol/conformance": "0.1.16",
        "node": "22.23.3",
    }
    for package, version in manifest["dependencies"].items():
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    assert "node_modules/" in (SOURCE / ".gitignore").read_text().split()


def _drain(stream: IO[str], log: Path) -> None:
    with log.open("a") as out:
        for line in stream:
            out.write(line)
            out.flush()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, Path]]:
    """`lineup serve todo focus --http 127.0.0.1:0` and the bearer proxy in front of it:
    (the suite's folder, the proxy's /mcp URL, the server's stderr log)."""
    folder = locate_suite()
    root = tmp_path_factory.mktemp("conformance")
    init_project(root / "todo", template="todo", scope="todo")
    init_project(root / "focus", template="pomodoro", scope="pomodoro")
    serve_log = root / "serve.log"
    argv = [lineup_command(), "serve", "todo", "focus", "--db", str(root / "serve.db")]
    argv += ["--http", "127.0.0.1:0"]
    with serve_log.open("w") as err:
        server = subprocess.Popen(
            argv,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "LINEUP_SERVE_TOKEN": TOKEN},
        )
        try:
            said = start_lines(server, lambda line: f"token {TOKEN}" in line)
            err.writelines(said)
            err.flush()
            url = served_url(said)
            # keep draining the server's stderr into the log (a full pipe would stall it)
            threading.Thread(target=_drain, args=(server.stderr, serve_log), daemon=True).start()
            assert url.startswith("http://127.0.0.1:"), serve_log.read_text()
            proxy = subprocess.Popen(
                [sys.executable, "-m", "tests.users.bearer_proxy", url.removesuffix("/mcp"), TOKEN],
                cwd=HERE.parents[1],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
            try:
                assert proxy.stdout is not None
                first = proxy.stdout.readline()
                assert first.startswith("listening on http://127.0.0.1:"), first
                yield folder, first.split()[-1] + "/mcp", serve_log
            finally:
                stop_process(proxy)
        finally:
            stop_process(server)


@pytest.mark.parametrize("scenario", APPLICABLE)
def test_each_applicable_scenario_passes(
    proxied: tuple[Path, str, Path], scenario: str, tmp_path: Path
) -> None:
    folder, url, serve_log = proxied
    bin_dir = folder / "node_modules" / ".bin"
    argv = [str(bin_dir / "node"), str(bin_dir / "conformance"), "server", "--url", url]
    argv += ["--scenario", scenario, "-o", str(tmp_path / "results")]
    try:
        run = subprocess.run(
            argv,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SCENARIO_S,
            env={**os.environ, "NO_COLOR": "1"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{scenario}: no verdict within {SCENARIO_S:.0f}s")
    out = run.stdout + run.stderr
    found = _SUMMARY.search(out)
    assert found is not None, f"{scenario}: no summary (exit {run.returncode})\n{out[-3000:]}"
    passed, total, failed, warnings = map(int, found.groups())
    why = f"{scenario}\n{out[-4000:]}\n-- serve --\n{serve_log.read_text()[-2000:]}"
    assert failed == 0 and run.returncode == 0, why
    (checks_file,) = (tmp_path / "results").glob("*/checks.json")
    status = {c["id"]: c["status"] for c in json.loads(checks_file.read_text())}
    assert "FAILURE" not in status.values(), why
    # every warning is a failure here, but for the resume step of server-sse-polling: it
    # calls the suite's own test tool (`test_reconnection`), which no LineUp app has
    warned = {k for k, v in status.items() if v == "WARNING"}
    allowed = {"server-sse-disconnect-resume"} if scenario == "server-sse-polling" else set()
    assert warned <= allowed, why
    assert warnings == len(warned), why
    if scenario == "server-sse-polling":
        assert status.get("server-sse-priming-event") == "SUCCESS", why
        assert status.get("server-sse-retry-field") == "SUCCESS", why
    else:
        assert passed == total and total >= 1, why
