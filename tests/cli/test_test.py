"""`lineup test` and `lineup schema` through the CLI, and the scenario traps `lineup run` had:
a missing scope, a repeated `--scenario`, recovery emissions that never appeared."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from lineup_build.dev import build_with_dev_key
from lineup_build.init import init_project
from lineup_runtime_lite.api.clock import VirtualClock
from lineup_runtime_lite.api.runtime import Runtime
from lineup_runtime_lite.host.simulator import HostSimulator
from tests.cli_kit import run_cli

BROKEN = """\
# a scenario whose third step expects the wrong result
[scenario]
version = 2
host = "manual"

[[step]]
call = { id = "s1", conversation = "c1", method = "pomodoro.start", params = { minutes = 5 } }
expect = [{ stage = "accepted" }]

[[step]]
host = { event = "foreground_confirmed", conversation = "c1" }

[[step]]
clock = { advance = "5m" }
expect = [{ call_id = "s1", stage = "result", result = { status = "interrupted" } }]
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("test") / "focus"
    init_project(root, template="pomodoro")
    return root


@pytest.fixture()
def broken(project: Path, tmp_path: Path) -> Path:
    """A copy of the project with one failing and one malformed scenario beside the rest."""
    root = tmp_path / "focus"
    shutil.copytree(project, root)
    (root / "scenarios" / "broken.toml").write_text(BROKEN)
    (root / "scenarios" / "nested").mkdir()
    (root / "scenarios" / "nested" / "typo.toml").write_text(
        '# a misspelled key\n[scenario]\nhost = "manual"\n[[step]]\ninventory = true\n'
        '[[step]]\ncall = { id = "s1", conversation = "c1", method = "pomodoro.start", '
        "parms = {} }\n"
    )
    return root


def test_every_template_scenario_passes_from_a_subfolder(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "scenarios")  # the project is found upward
    code, out, err = run_cli(["test", "--format", "json"], capsys)
    assert code == 0, out + err
    doc = json.loads(out)
    names = [s["name"] for s in doc["scenarios"]]
    assert names == sorted(f"scenarios/{p.name}" for p in (project / "scenarios").glob("*.toml"))
    assert doc["ok"] is True and doc["failed"] == 0 and doc["passed"] == len(names)
    assert all(s["ok"] and s["seconds"] >= 0 and s["steps"] > 0 for s in doc["scenarios"])


def test_a_failing_scenario_names_the_step_and_field(
    broken: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(["test", str(broken / "scenarios" / "broken.toml")], capsys)
    assert code == 1
    assert "FAIL scenarios/broken.toml" in out
    assert (
        "scenarios/broken.toml:13: step 3 (clock +5m): message 1 `result.status`: expected "
        '"interrupted", actual "completed"' in out
    )
    assert "0 passed, 1 failed" in out


def test_junit_has_one_testcase_per_scenario(
    broken: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "junit.xml"
    code, _, _ = run_cli(["test", str(broken), "--junit", str(report)], capsys)
    assert code == 1
    suite = ET.parse(report).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {
        *(f"scenarios/{p.name}" for p in (broken / "scenarios").glob("*.toml")),
        "scenarios/nested/typo.toml",
    }
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == "1" and suite.get("errors") == "1"
    failure = cases["scenarios/broken.toml"].find("failure")
    assert failure is not None and failure.get("type") == "expectation_failed"
    assert "step 3" in (failure.get("message") or "") and "result.status" in (failure.text or "")
    error = cases["scenarios/nested/typo.toml"].find("error")
    assert error is not None and error.get("type") == "scenario_invalid"
    assert "step 2: `call.parms`: unknown key" in (error.get("message") or "")
    assert cases["scenarios/happy.toml"].find("failure") is None
    assert float(cases["scenarios/happy.toml"].get("time") or -1) >= 0


def test_github_annotations_point_at_the_failing_step_line(
    broken: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(broken)
    code, out, _ = run_cli(["test", "--format", "github", "-k", "broken"], capsys)
    assert code == 1
    annotations = [line for line in out.splitlines() if line.startswith("::error ")]
    line = BROKEN.splitlines().index("[[step]]", 12) + 1  # the third [[step]]
    assert annotations == [
        f"::error file=scenarios/broken.toml,line={line}::step 3 (clock +5m): message 1 "
        '`result.status`: expected "interrupted", actual "completed"'
    ]


def test_github_annotation_of_a_malformed_scenario_names_its_step_line(
    broken: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(broken)
    code, out, _ = run_cli(["test", "--format", "github", "-k", "typo"], capsys)
    assert code == 1
    annotations = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 1
    assert annotations[0].startswith("::error file=scenarios/nested/typo.toml,line=6::")
    assert "scenario_invalid" in annotations[0] and "`call.parms`" in annotations[0]


def test_k_selects_by_name_or_glob(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["test", str(project), "-k", "happy", "--format", "json"], capsys)
    assert code == 0
    assert [s["name"] for s in json.loads(out)["scenarios"]] == ["scenarios/happy.toml"]
    code, out, _ = run_cli(["test", str(project), "-k", "*/*re*.toml", "--format", "json"], capsys)
    assert {s["name"] for s in json.loads(out)["scenarios"]} == {
        "scenarios/restart_while_focusing.toml"
    }
    code, _, err = run_cli(["test", str(project), "-k", "nothing-like-this"], capsys)
    assert code == 2 and "usage_invalid" in err


@pytest.mark.parametrize(
    "args",
    [["test", "/no/such/folder"], ["test", "--format", "xml"]],
    ids=["missing-path", "bad-format"],
)
def test_test_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "usage_invalid" in err


def test_outside_a_project_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["test"], capsys)
    assert code == 2 and "usage_invalid" in err and "lineup.toml" in err


def test_schema_scenario_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["schema", "scenario"], capsys)
    assert code == 0
    schema = json.loads(out)
    assert schema["additionalProperties"] is False and "step" in schema["properties"]
    code, _, err = run_cli(["schema", "manifesto"], capsys)
    assert code == 2 and "usage_invalid" in err


def test_repeated_scenario_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    happy = str(project / "scenarios" / "happy.toml")
    code, out, _ = run_cli(
        ["run", str(project), "--scenario", happy, "--scenario", happy, "--json"], capsys
    )
    assert code == 2
    assert json.loads(out)["error"]["code"] == "usage_invalid"


def test_session_data_without_scope_in_a_scenario(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.toml"
    path.write_text(
        '[[step]]\nsession_data = { conversation = "c1" }\n'
        'expect = [{ revision = 0, "$null" = ["data"] }]\n'
    )
    code, out, err = run_cli(["run", str(project), "--scenario", str(path), "--json"], capsys)
    assert code == 0, out + err
    assert json.loads(out.splitlines()[0])["messages"] == [{"revision": 0, "data": None}]


def test_session_data_without_scope_at_the_prompt(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = iter(["data c1", "quit"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(commands))
    code, out, _ = run_cli(["run", str(project), "--json"], capsys)
    assert code == 0, out
    (step,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert step["description"] == "session_data c1"
    assert step["messages"] == [{"revision": 0, "data": None}]


def test_reopening_a_kept_db_shows_what_recovery_emits(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Agent that never received a message gets it on the next open: shown as step 0."""
    db = tmp_path / "state.db"
    built = build_with_dev_key(project)
    with Runtime.open(
        db, trust=built.trust, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(built.bundle)
        rt.call("s1", "c1", "pomodoro.start", {"minutes": 5})
    later = tmp_path / "later.toml"
    later.write_text('[[step]]\nim_records = { conversation = "c1" }\nexpect = []\n')
    code, out, err = run_cli(
        ["run", str(project), "--scenario", str(later), "--db", str(db), "--json"], capsys
    )
    assert code == 0, out + err
    steps = [json.loads(line) for line in out.splitlines()]
    assert steps[0]["step"] == 0 and steps[0]["action"] == "open"
    assert [m["id"] for m in steps[0]["messages"]] == ["s1:accepted"]
    assert steps[1]["step"] == 1 and steps[1]["messages"] == []


def test_the_scenario_reference_example_passes(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "scenario-format.md"
    readme = page.read_text("utf-8")
    section = readme[readme.index("## An example") :]
    example = section[
        section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml\n"))
    ]
    path = tmp_path / "readme.toml"
    path.write_text(example)
    code, out, err = run_cli(["test", str(project), str(path), "-k", "readme"], capsys)
    assert code == 2  # outside the project: a scenario file belongs to the project above it
    inside = project / "scenarios" / "readme_example.toml"
    inside.write_text(example)
    try:
        code, out, err = run_cli(["test", str(inside)], capsys)
    finally:
        inside.unlink()
    assert code == 0, out + err
    assert "PASS scenarios/readme_example.toml" in out


def test_restart_shows_what_recovery_emits(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "down.toml"
    path.write_text(
        '[scenario]\nhost = "manual"\n'
        '[[step]]\ncall = { id = "s1", conversation = "c1", method = "pomodoro.start", '
        "params = { minutes = 5 } }\n"
        '[[step]]\nhost = { event = "foreground_confirmed", conversation = "c1" }\n'
        '[[step]]\nrestart = { advance = "1h" }\n'
        'expect = [{ call_id = "s1", stage = "result", result = { status = "completed", '
        'ends_at = "2026-01-01T00:05:00.000Z" } }]\n'
        "[[step]]\nrestart = true\nexpect = []\n"
        '[[step]]\nclock = { advance = "1m" }\nexpect = []\n'
    )
    code, out, err = run_cli(["run", str(project), "--scenario", str(path), "--json"], capsys)
    assert code == 0, out + err
    steps = [json.loads(line) for line in out.splitlines()]
    assert steps[2]["at"] == "2026-01-01T01:00:00.000Z"  # the downtime passed on the clock
    assert steps[4]["at"] == "2026-01-01T01:01:00.000Z"  # and a plain restart keeps it


def test_every_template_scenario_passes_under_session_isolation_too(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    code, out, err = run_cli(["test", "--isolation", "session", "--format", "json"], capsys)
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["ok"] is True and doc["passed"] == len(list((project / "scenarios").glob("*.toml")))


@pytest.mark.parametrize("command", ["test", "run"])
def test_an_unknown_isolation_is_usage_invalid(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.chdir(project)
    args = [command, "--isolation", "conversation", "--json"]
    if command == "run":
        args[1:1] = [str(project), "--scenario", str(project / "scenarios" / "happy.toml")]
    code, out, err = run_cli(args, capsys)
    assert code == 2, out + err
    assert "usage_invalid" in out + err and "isolation" in out + err
