"""`lineup dev` on the command line: usage errors as stable codes (no traceback), the web
extra's install hint, and when a browser opens (SPEC 14)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lineup_build.build import build_project
from lineup_build.cli.dev import should_open
from lineup_build.init import init_project
from tests.cli_kit import lineup_process, run_cli, start_lines


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host", "sometimes"], "--host"),
        (["--isolation", "conversation"], "isolation"),
        (["--sandbox", "maybe"], "sandbox"),
    ],
    ids=["host", "isolation", "sandbox"],
)
def test_usage_errors(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    init_project(tmp_path / "todo", template="todo")
    code, _, err = run_cli(["dev", str(tmp_path / "todo"), *args, "--no-open"], capsys)
    assert code == 2
    assert "usage_invalid" in err and needle in err and "Traceback" not in err


def test_not_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["dev", str(tmp_path / "missing.lineup"), "--no-open"], capsys)
    assert code == 2
    assert "usage_invalid" in err and "not a MiniApp folder" in err


def test_without_the_web_extra_the_hint_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lineup_runtime_lite

    for name in [m for m in sys.modules if m.startswith("lineup_runtime_lite.web")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(lineup_runtime_lite, "web", raising=False)
    monkeypatch.setitem(sys.modules, "websockets", None)  # as if not installed
    init_project(tmp_path / "todo", template="todo")
    code, _, err = run_cli(["dev", str(tmp_path / "todo"), "--no-open"], capsys)
    assert code == 2
    from lineup_sdk import __version__

    # install lines that work before the distribution is on an index: a checkout, a wheel
    assert "usage_invalid" in err and 'pip install ".[web]"' in err
    assert f'pip install "lineup_sdk-{__version__}-py3-none-any.whl[web]"' in err
    assert "lineup-sdk[" not in err


@pytest.mark.parametrize(
    ("flag", "env", "tty", "opens"),
    [
        (None, {"DISPLAY": ":0"}, True, True),
        (None, {}, True, False),
        (None, {"DISPLAY": ":0"}, False, False),
        (True, {}, False, True),
        (False, {"DISPLAY": ":0"}, True, False),
    ],
    ids=["terminal-with-display", "no-display", "no-terminal", "--open", "--no-open"],
)
def test_a_browser_opens_only_on_a_terminal_with_a_display(
    flag: bool | None, env: dict[str, str], tty: bool, opens: bool
) -> None:
    assert should_open(flag, env, tty) is opens


def test_the_printed_urls_name_127_0_0_1_for_the_host_and_localhost_for_surfaces(
    tmp_path: Path,
) -> None:
    """`lineup dev`'s start lines after the host-name split (SPEC 16.3): the Host page URL
    on 127.0.0.1 works as printed; the same URL on `localhost` is redirected to it before
    any cookie; Surfaces are on `localhost`."""
    import http.client
    import os
    import re

    init_project(tmp_path / "todo", template="todo")
    args = ["dev", str(tmp_path / "todo"), "--port", "0", "--no-open"]
    args += ["--db", str(tmp_path / "d.db")]
    with lineup_process(args, None, {**os.environ, "PYTHONUNBUFFERED": "1"}) as proc:
        said = start_lines(proc, lambda line: "Surfaces on" in line)
        text = "".join(said)
        page = re.search(r"Host page: (http://127\.0\.0\.1:(\d+)/\?token=(\S+))", text)
        surfaces = re.search(r"Surfaces on http://localhost:(\d+);", text)
        mcp = re.search(r"MCP: http://127\.0\.0\.1:(\d+)/mcp ", text)
        assert page and surfaces and mcp, text
        port, token = int(page.group(2)), page.group(3)
        assert int(mcp.group(1)) == port and int(surfaces.group(1)) != port

        def get(name: str) -> tuple[int, Any]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", f"/?token={token}", headers={"Host": f"{name}:{port}"})
                answer = conn.getresponse()
                answer.read()
                return answer.status, answer.headers
            finally:
                conn.close()

        status, headers = get("127.0.0.1")
        assert status == 303 and "lineup_dev_token=" in headers["set-cookie"]
        status, headers = get("localhost")
        assert status == 307 and headers["set-cookie"] is None
        assert headers["location"] == page.group(1)


def test_lineup_dev_on_postgres_serves_the_verified_surface_and_runs_a_call(
    tmp_path: Path, pg_url: str
) -> None:
    """SPEC 16.1: `lineup dev --db postgresql://…` serves the todo template's Surface from
    the build's verified install folder (`<apps_dir>/<manifest sha256>`), a call runs, and
    a Surface file changed on disk after install is refused (`install_tampered`), never
    served."""
    import http.client
    import json
    import os
    import re
    import time

    project = tmp_path / "todo"
    init_project(project, template="todo")
    args = ["dev", str(project), "--port", "0", "--no-open", "--db", pg_url]
    with lineup_process(args, None, {**os.environ, "PYTHONUNBUFFERED": "1"}) as proc:
        said = start_lines(proc, lambda line: "Surfaces on" in line)
        text = "".join(said)
        page = re.search(r"Host page: http://127\.0\.0\.1:(\d+)/\?token=(\S+)", text)
        surfaces = re.search(r"Surfaces on http://localhost:(\d+);", text)
        assert page and surfaces, text
        port, token = int(page.group(1)), page.group(2)
        origin = f"http://127.0.0.1:{port}"

        def host(method: str, path: str, body: Any = None) -> Any:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                headers = {"Authorization": f"Bearer {token}", "Origin": origin}
                data = None if body is None else json.dumps(body)
                if data is not None:
                    headers["Content-Type"] = "application/json"
                conn.request(method, path, body=data, headers=headers)
                answer = conn.getresponse()
                raw = answer.read()
                assert answer.status == 200, (path, answer.status, raw)
                return json.loads(raw)
            finally:
                conn.close()

        def surface(url: str) -> tuple[int, bytes]:
            path = url.split(f"localhost:{surfaces.group(1)}", 1)[1]
            conn = http.client.HTTPConnection("localhost", int(surfaces.group(1)), timeout=30)
            try:
                conn.request("GET", path, headers={"Host": f"localhost:{surfaces.group(1)}"})
                answer = conn.getresponse()
                return answer.status, answer.read()
            finally:
                conn.close()

        def state_until(done: Any) -> Any:
            for _ in range(300):  # the dev Host's own loop moves on: asked again
                state = host("GET", "/_lineup/api/state")
                found = done(state)
                if found:
                    return found
                time.sleep(0.1)
            raise AssertionError(state)

        accepted = host(
            "POST",
            "/_lineup/api/call",
            {"conversation": "c1", "method": "todo.add", "params": {"title": "tea"}},
        )
        assert accepted["stage"] == "accepted", accepted
        instance = state_until(
            lambda s: next(
                (
                    i["instance"]
                    for c in s["conversations"]
                    for i in c["instances"]
                    if i["instance"]
                ),
                None,
            )
        )
        url = host("GET", f"/_lineup/api/surface?instance={instance}")["url"]
        status, body = surface(url)
        # the Surface as one signed document (SPEC 18.2): what `lineup build` writes
        built = build_project(project, dev_key=True, out_dir=tmp_path / "expected")
        assert built.ok and built.bundle is not None
        with zipfile.ZipFile(built.bundle) as z:
            document = z.read(f"app/{json.loads(z.read('manifest.json'))['surface']['document']}")
        assert status == 200 and body == document
        host("POST", "/_lineup/api/host", {"button": "confirm", "instance": instance})
        result = state_until(
            lambda s: next(
                (
                    e
                    for e in s["timeline"]
                    if e.get("call_id") == accepted["call_id"] and e.get("kind") == "result"
                ),
                None,
            )
        )
        assert result["result"]["item"]["title"] == "tea", result
        # the installed copy (named by its manifest's hash, not scope/version) rewritten
        (installed,) = (project / ".lineup" / "dev-apps").glob("*/*/_lineup/surface.html")
        assert re.fullmatch(r"[0-9a-f]{64}", installed.parent.parent.name)
        installed.write_text("<script>planted()</script>")
        status, body = surface(url)
        assert status == 409 and b"planted" not in body, body
        assert json.loads(body)["code"] == "install_tampered"


def test_ctrl_c_stops_lineup_dev_quietly_with_status_0(tmp_path: Path) -> None:
    """Ctrl-C at a terminal signals the whole foreground group (workers too): `lineup dev`
    stops both servers gracefully, says nothing more and exits 0 (it printed a uvicorn
    traceback and exited 130)."""
    import json
    import os
    import re
    import signal
    import subprocess
    import urllib.request

    from tests.cli_kit import LINEUP

    init_project(tmp_path / "todo", template="todo")
    args = ["dev", str(tmp_path / "todo"), "--port", "0", "--no-open"]
    proc = subprocess.Popen(
        [*LINEUP, *args, "--db", str(tmp_path / "d.db")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # its own group, as a terminal's foreground job is
    )
    try:
        said = "".join(start_lines(proc, lambda line: "Surfaces on" in line))
        page = re.search(r"Host page: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", said)
        assert page, said
        call = urllib.request.Request(
            page.group(1) + "/_lineup/api/call",
            data=json.dumps({"conversation": "dev", "method": "todo.add", "params": {}}).encode(),
            headers={"content-type": "application/json", "Cookie": f"lineup_dev_token={page[2]}"},
        )
        with urllib.request.urlopen(call, timeout=60) as answer:  # a worker is running
            assert json.loads(answer.read())["call_id"]
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err
    assert err == "" and out == ""  # nothing after the start lines: no traceback, no noise
