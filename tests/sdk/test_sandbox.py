"""The sandbox module on its own: modes, environment allow-list, what is enforced, the
test seam for a missing mechanism, bounded runs, and the strict bridge parser."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lineup_sdk.bridge import MAX_MESSAGE, ProtocolError, parse_line
from lineup_sdk.errors import LineupError
from lineup_sdk.sandbox import (
    REPORT_KEYS,
    Sandbox,
    check_mode,
    describe,
    probe,
    run_bounded,
    simulate_unavailable,
    summary,
)

LINUX = sys.platform.startswith("linux")


def test_an_unknown_mode_is_usage_invalid() -> None:
    with pytest.raises(LineupError) as exc:
        check_mode("strict")
    assert exc.value.code == "usage_invalid"
    assert check_mode("required") == "required"


def test_the_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LINEUP_SIGNING_KEY", "-----BEGIN PRIVATE KEY-----")
    monkeypatch.setenv("LINEUP_SIGNING_KEY_PASSPHRASE", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    box = Sandbox("best_effort", tmp_path)
    box.prepare()
    try:
        env = box.env({"EXTRA": "1"})
        assert box.tmp is not None
        assert env["HOME"] == env["TMPDIR"] == str(box.tmp)
        assert env["LC_ALL"] == "C.UTF-8" and env["EXTRA"] == "1"
        assert set(env) <= {"PATH", "LANG", "TZ", "HOME", "TMPDIR", "LC_ALL", "EXTRA"}
        assert not any("SIGNING" in k or "SECRET" in k for k in env)
    finally:
        box.cleanup()
    assert box.tmp is None


@pytest.mark.skipif(not LINUX, reason="the Linux mechanisms are what this machine kind has")
def test_probe_reports_every_mechanism_on_linux() -> None:
    report = probe("best_effort")
    assert report["mode"] == "best_effort" and report["refused"] is None
    for key in REPORT_KEYS:
        assert report[key], key  # Landlock ABI 7, user+pid+net namespaces on this kind
    assert "landlock" in report["files"]
    assert "NOT enforced" not in describe(report)


def test_the_seam_makes_required_refuse_and_best_effort_report() -> None:
    with simulate_unavailable("landlock"):
        required = probe("required")
        best = probe("best_effort")
    assert required["files"] is None and "files containment" in required["refused"]
    assert best["files"] is None and best["refused"] is None
    assert "files: NOT enforced" in describe(best)
    with simulate_unavailable("linux"):
        bare = probe("required")
    assert bare["process_tree"] is None and bare["network"] is None
    assert bare["refused"] is not None


def test_the_short_line_says_only_what_is_off() -> None:
    full = {**dict.fromkeys(REPORT_KEYS, "on"), "mode": "best_effort", "refused": None}
    assert summary(full) is None  # everything enforced: nothing to say without -v
    degraded = {**full, "files": None, "process_tree": None}
    assert summary(degraded) == ("sandbox: not enforced here: files, process tree (-v for details)")
    assert summary({**full, "mode": "off"}) == "sandbox: OFF (debugging only; -v for details)"
    refused = summary({**full, "refused": "no files containment"})
    assert refused == "sandbox: refused: no files containment (-v for details)"
    for line in (summary(degraded), refused):
        assert line is not None and len(line) <= 100  # one short line, not the full report


def test_off_is_reported_as_off() -> None:
    report = probe("off")
    assert all(report[k] is None for k in REPORT_KEYS)
    assert describe(report).startswith("sandbox: OFF")


def _target(tmp_path: Path, name: str, body: str) -> Path:
    app = tmp_path / "app"
    app.mkdir(exist_ok=True)
    (app / f"{name}.py").write_text(
        "import os, sys, time\n\ndef main(argv, sandbox):\n" + body + "\n"
    )
    return app


def test_run_bounded_caps_output_and_passes_the_result(tmp_path: Path) -> None:
    app = _target(
        tmp_path,
        "loud",
        "    sys.stdout.write('x' * (5 << 20)); sys.stdout.flush()\n"
        "    os.write(int(argv[0]), b'{\"ok\": 1}'); os.close(int(argv[0]))\n",
    )
    run = run_bounded(Sandbox("best_effort", app), "loud", [], cwd=app, timeout_s=60)
    assert json.loads(run.result) == {"ok": 1}
    assert len(run.stdout) == 1 << 20 and run.truncated == ("stdout",)
    assert not run.timed_out


@pytest.mark.skipif(not LINUX, reason="the PID namespace is Linux's")
def test_run_bounded_does_not_wait_for_a_daemonized_child(tmp_path: Path) -> None:
    app = _target(
        tmp_path,
        "forker",
        "    r, w = os.pipe()\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        os.write(w, os.readlink('/proc/self').encode()); os.close(w)\n"
        "        time.sleep(3600)\n"
        "    os.close(w)\n"
        "    pid = os.read(r, 64)\n"
        "    os.write(int(argv[0]), pid); os.close(int(argv[0]))\n",
    )
    run = run_bounded(Sandbox("best_effort", app), "forker", [], cwd=app, timeout_s=60)
    assert not run.timed_out
    child = int(run.result)
    # the namespace's init exited, so the kernel ended the whole tree before we returned
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return "Z"


def test_run_bounded_stops_a_target_at_its_deadline(tmp_path: Path) -> None:
    app = _target(tmp_path, "sleeper", "    time.sleep(3600)\n")
    run = run_bounded(Sandbox("best_effort", app), "sleeper", [], cwd=app, timeout_s=0.5)
    assert run.timed_out and run.returncode is not None


@pytest.mark.parametrize(
    ("line", "names"),
    [
        (b"not json\n", None),
        (b'{"t":"result","id":[1],"ok":true}\n', None),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", None),
        (b'{"t":"take_over","id":7}\n', 7),
        (b'{"t":"result","id":7,"ok":"maybe"}\n', 7),
        (b'{"t":"result","id":true,"ok":true}\n', None),
        (b'["a list"]\n', None),
        (b'{"t":"sd","id":1,"d":7,"op":"get"}\n', 1),
        (b'{"t":"pong","id":3,"stuck":"all"}\n', 3),
    ],
    ids=[
        "not-json",
        "unhashable-id",
        "deeply-nested",
        "unknown-kind",
        "wrong-field-type",
        "bool-id",
        "not-an-object",
        "sd-without-cap",
        "pong-without-count",
    ],
)
def test_a_bad_bridge_line_is_a_protocol_error_naming_what_it_can(
    line: bytes, names: int | None
) -> None:
    with pytest.raises(ProtocolError) as exc:
        parse_line(line)
    assert exc.value.delivery == names


def test_an_oversized_line_is_refused_before_parsing() -> None:
    with pytest.raises(ProtocolError, match="oversized"):
        parse_line(b'{"t":"result","id":1,"ok":true,"result":"' + b"x" * MAX_MESSAGE + b'"}')


def test_well_formed_lines_parse() -> None:
    assert parse_line(b'{"t":"result","id":1,"ok":true,"result":2}\n')["result"] == 2
    assert parse_line(b'{"t":"hello","methods":["a.b"]}')["methods"] == ["a.b"]


def test_env_is_not_inherited_by_default(tmp_path: Path) -> None:
    os.environ["LINEUP_SANDBOX_TEST_SECRET"] = "leak"
    try:
        app = _target(
            tmp_path,
            "envdump",
            "    import json\n"
            "    os.write(int(argv[0]), json.dumps(sorted(os.environ)).encode())\n"
            "    os.close(int(argv[0]))\n",
        )
        run = run_bounded(Sandbox("best_effort", app), "envdump", [], cwd=app, timeout_s=60)
    finally:
        del os.environ["LINEUP_SANDBOX_TEST_SECRET"]
    names = json.loads(run.result)
    assert "LINEUP_SANDBOX_TEST_SECRET" not in names and "HOME" in names
