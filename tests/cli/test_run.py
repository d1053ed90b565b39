"""`lineup run` through the real CLI: template scenarios pass, mismatches exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineup_build.init import init_project
from tests.cli_kit import run_cli

SCENARIOS = ["happy", "interrupted", "cancelled_while_starting", "restart_while_focusing"]


@pytest.fixture(scope="module")
def focus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("run") / "focus"
    init_project(root, template="pomodoro")
    return root


@pytest.mark.parametrize("name", SCENARIOS)
def test_template_scenarios_pass(
    focus: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        ["run", str(focus), "--scenario", str(focus / "scenarios" / f"{name}.toml"), "--json"],
        capsys,
    )
    assert code == 0, (out, err)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["ok"] is True
    assert all(step["ok"] for step in lines[:-1])


def test_main_job_command_through_the_console_script(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("lineup")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    env = dict(os.environ)
    subprocess.run(
        [str(exe), "init", "focus", "--template", "pomodoro"],
        cwd=tmp_path,
        check=True,
        env=env,
        capture_output=True,
    )
    done = subprocess.run(
        [str(exe), "run", "focus", "--scenario", "focus/scenarios/happy.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "every expectation held" in done.stdout
    assert (tmp_path / "focus" / ".lineup" / "dev-key.pem").exists()


def test_failed_expectation_exits_1(
    focus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[step]]\ncall = { id = "s1", conversation = "c1", method = "pomodoro.start", params = {} }\n'
        'expect = [{ stage = "started" }]\n'
    )
    code, out, _ = run_cli(["run", str(focus), "--scenario", str(bad), "--json"], capsys)
    assert code == 1
    assert json.loads(out.splitlines()[-1])["error"]["code"] == "expectation_failed"


def test_a_host_event_with_no_instance_to_address_is_the_steps_failed_expectation(
    focus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing started the app (here: no call before; under a store fault: the refused
    call): the step's outcome is the refusal, judged by its expectations (exit 1), not a
    usage error that ends the run (exit 2)."""
    first = tmp_path / "first.toml"
    first.write_text(
        '[scenario]\nversion = 2\nhost = "manual"\n'
        '[[step]]\nhost = { event = "foreground_confirmed", conversation = "c1", '
        'scope = "pomodoro" }\nexpect = []\n'
    )
    code, out, err = run_cli(["run", str(focus), "--scenario", str(first), "--json"], capsys)
    assert code == 1, (out, err)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["error"]["code"] == "expectation_failed"
    [step] = lines[:-1]
    [refused] = step["messages"]
    assert refused["error"]["code"] == "usage_invalid"
    assert "no instance to address" in refused["error"]["message"]


@pytest.mark.parametrize(
    "text",
    [
        '[[step]]\nclock = { advance = "soon" }\n',
        '[[step]]\nhost = { event = "teleport", conversation = "c1" }\n',
        '[[step]]\ncall = { id = "x" }\n',
        '[[step]]\nrestart = true\nclock = { advance = "1m" }\n',
        "not toml ===",
    ],
    ids=["bad-duration", "bad-event", "call-missing-fields", "two-actions", "not-toml"],
)
def test_scenario_invalid_names_the_step(
    focus: Path, tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    code, out, _ = run_cli(["run", str(focus), "--scenario", str(path), "--json"], capsys)
    assert code == 1
    err = json.loads(out)["error"]
    assert err["code"] == "scenario_invalid"
    if text.startswith("[[step]]"):
        assert "step 1" in err["message"]


def test_without_scenario_or_terminal_is_a_usage_error(
    focus: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    code, _, err = run_cli(["run", str(focus)], capsys)
    assert code == 2
    assert "usage_invalid" in err


def test_bundle_needs_trust(
    focus: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv("LINEUP_TRUST_STORE", raising=False)
    monkeypatch.chdir(tmp_path)  # no trust.toml here
    code, _, _ = run_cli(["build", str(focus), "--dev-key"], capsys)
    assert code == 0
    bundle = focus / "dist" / "pomodoro-1.0.0.lineup"
    code, out, _ = run_cli(
        ["run", str(bundle), "--scenario", str(focus / "scenarios" / "happy.toml"), "--json"],
        capsys,
    )
    assert code == 2
    doc = json.loads(out)
    assert doc["error"]["code"] == "usage_invalid" and doc["schema_version"] == 1


def test_db_keeps_state_between_runs(
    focus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    first = tmp_path / "first.toml"
    first.write_text(
        '[scenario]\nhost = "auto"\n[[step]]\ncall = { id = "s1", conversation = "c1", method = "pomodoro.start", params = { minutes = 5 } }\n'
        'expect = [{ stage = "accepted" }, { stage = "started" }]\n'
    )
    second = tmp_path / "second.toml"
    second.write_text(
        '[[step]]\nclock = { advance = "5m" }\nexpect = [{ call_id = "s1", stage = "result", result = { status = "completed" } }]\n'
    )
    assert (
        run_cli(["run", str(focus), "--scenario", str(first), "--db", str(db), "--json"], capsys)[0]
        == 0
    )
    code, out, _ = run_cli(
        ["run", str(focus), "--scenario", str(second), "--db", str(db), "--json"], capsys
    )
    assert code == 0, out


def test_interactive_prompt(
    focus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = iter(
        [
            "help",
            'call s1 c1 pomodoro.start {"minutes": 1}',
            "host foreground_confirmed c1",
            "advance 1m",
            "im c1",
            "bogus",
            "quit",
        ]
    )
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(commands))
    code, out, _ = run_cli(["run", str(focus), "--host", "manual", "--json"], capsys)
    assert code == 0
    steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stages = [m.get("stage") for s in steps for m in s["messages"]]
    assert stages[:3] == ["accepted", "started", "result"], out
    assert "usage_invalid: unknown command 'bogus'" in out  # reported; the prompt went on


def test_bundle_with_trust_runs(
    focus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["build", str(focus), "--dev-key"], capsys)[0] == 0
    store = tmp_path / "trust.toml"
    pub = focus / ".lineup" / "dev-key.pub.pem"
    assert (
        run_cli(["trust", "add", str(pub), "--scope", "pomodoro", "--store", str(store)], capsys)[0]
        == 0
    )
    bundle = focus / "dist" / "pomodoro-1.0.0.lineup"
    scenario = focus / "scenarios" / "interrupted.toml"
    code, out, err = run_cli(
        ["run", str(bundle), "--trust", str(store), "--scenario", str(scenario), "--json"], capsys
    )
    assert code == 0, out + err
    assert json.loads(out.splitlines()[-1])["ok"] is True


def test_the_sandbox_line_only_with_v_or_when_something_is_off(
    focus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lineup_sdk.sandbox import simulate_unavailable

    happy = ["run", str(focus), "--scenario", str(focus / "scenarios" / "happy.toml")]
    code, _, err = run_cli(happy, capsys)
    assert code == 0 and "sandbox" not in err  # all enforced here: the terminal stays quiet
    code, _, err = run_cli(["-v", *happy], capsys)
    assert code == 0 and "sandbox (best_effort): files: landlock" in err
    with simulate_unavailable("landlock"):
        code, _, err = run_cli(happy, capsys)
    assert code == 0
    said = [line for line in err.splitlines() if "sandbox" in line]
    assert said == ["sandbox: not enforced here: files (-v for details)"]
    code, _, err = run_cli([*happy, "--sandbox", "off"], capsys)
    assert code == 0
    assert [x for x in err.splitlines() if "sandbox" in x] == [
        "sandbox: OFF (debugging only; -v for details)"
    ]


def test_the_interactive_prompt_asks_for_ui_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`act CLIENT:SEQ CONVERSATION NAME [JSON]` asks for a UI Action (SPEC 17); `crash`
    kills the app's worker."""
    import shutil

    from tests.runtime.conftest import APPS

    app = tmp_path / "queue"
    shutil.copytree(APPS / "queue", app)
    commands = iter(
        [
            "call r1 c1 queue.read",
            'act ui1:1 c1 queue.push {"item": "a"}',
            'act ui1:1 c1 queue.push {"item": "a"}',
            'act ui1:3 c1 queue.push {"item": "b"}',
            "act ui1 c1 queue.push",
            "crash queue",
            'act ui1:2 c1 queue.push {"item": "b"}',
            "data c1",
            "quit",
        ]
    )
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(commands))
    code, out, _ = run_cli(["run", str(app), "--host", "manual", "--json"], capsys)
    assert code == 0, out
    steps = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    acts = [s["messages"][0] for s in steps if s["action"] == "ui_action"]
    assert acts[0]["action_id"] == "ui1:1" and acts[0]["revision"] == 1
    assert acts[1] == acts[0]  # the same id again: its stored outcome
    assert acts[2]["error"]["code"] == "action_out_of_order" and "action_id" not in acts[2]
    assert acts[3]["action_id"] == "ui1:2" and acts[3]["revision"] == 2  # on a new worker
    assert steps[-1]["messages"] == [{"revision": 2, "data": {"items": ["a", "b"]}}]
    assert "is not CLIENT:SEQ" in out  # a mistyped id is reported; the prompt went on
