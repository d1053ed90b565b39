"""Scenario format v2: the strict model, its shipped JSON Schema, and field-level diffs."""

from __future__ import annotations

import datetime as dt
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lineup_runtime_lite.sim.expect import compare, matches
from lineup_runtime_lite.sim.format import (
    load_scenario,
    parse_scenario,
    scenario_json_schema,
    step_lines,
)
from lineup_sdk.errors import LineupError

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE_SCENARIOS = sorted((ROOT / "templates").glob("*/scenarios/**/*.toml"))
FIXTURES = sorted((ROOT / "tests" / "conformance" / "fixtures").glob("*.json"))
CALL = {"id": "c", "conversation": "c1", "method": "notes.add", "params": {}}


def _invalid(doc: Any) -> str:
    with pytest.raises(LineupError) as exc:
        parse_scenario(doc, source="s.toml")
    assert exc.value.code == "scenario_invalid"
    return "\n".join([exc.value.message, *(d["problem"] for d in exc.value.details or [])])


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (
            {"step": [{"call": CALL}, {"call": {**CALL, "parms": {}}}]},
            "step 2: `call.parms`: unknown key",
        ),
        ({"step": [{"call": CALL, "expct": []}]}, "step 1: `expct`: unknown key"),
        ({"scenario": {"host_policy": "auto"}, "step": [{"call": CALL}]}, "`host_policy`"),
        ({"scenario": {"version": 1}, "step": [{"call": CALL}]}, "[scenario]: `version`"),
        ({"scenario": {"host": "sometimes"}, "step": [{"call": CALL}]}, "[scenario]: `host`"),
        ({"step": [{"call": {"id": "x"}}]}, "step 1: `call.conversation`: missing"),
        (
            {"step": [{"call": {**CALL, "params": {"when": dt.date(2026, 1, 1)}}}]},
            "params must be JSON",
        ),
        ({"step": [{"restart": True, "clock": {"advance": "1m"}}]}, "exactly one action"),
        ({"step": [{}]}, "exactly one action"),
        ({"step": [{"restart": False}]}, "step 1: `restart`"),
        ({"step": [{"restart": {"advance": "soon"}}]}, "'soon' is not a duration"),
        ({"step": [{"clock": {"advance": "5 minutes"}}]}, "step 1: `clock.advance`"),
        ({"step": [{"calls": []}]}, "step 1: `calls`"),
        ({"step": [{"subscribe": {"conversation": "c1"}}]}, "step 1: `subscribe.as`: missing"),
        ({"step": [{"frames": {"as": "s", "scope": "x"}}]}, "`frames.scope`: unknown key"),
        ({"step": [{"host": {"event": "teleport", "conversation": "c1"}}]}, "`host.event`"),
        ({"step": [{"call": CALL, "expect": [{"$present": ["a"]}]}]}, "unknown directive"),
        ({"step": [{"call": CALL, "expect": [{"$absent": "a"}]}]}, "list of key names"),
        ({"step": [{"call": CALL, "outbox_grew": "no"}]}, "step 1: `outbox_grew`"),
        ({"step": []}, "top level: `step`"),
        ({"steps": [{"call": CALL}]}, "`steps`: unknown key"),
        (
            {"step": [{"frames": {"as": "ui"}}, {"subscribe": {"conversation": "c", "as": "ui"}}]},
            "step 1: `frames.as`: no earlier step subscribes as 'ui'",
        ),
        ({"step": [{"reconnect": {"as": "ui"}}]}, "`reconnect.as`: no earlier step subscribes"),
        (
            {
                "step": [
                    {"subscribe": {"conversation": "c", "as": "ui"}},
                    {"drop_frame": {"as": "ui", "count": 0}},
                ]
            },
            "step 2: `drop_frame.count`",
        ),
        ({"step": [{"call": CALL, "hosts": ["Web Host"]}]}, "`hosts`"),
        ({"step": [{"call": CALL, "hosts": []}]}, "step 1: `hosts`"),
        (
            {"step": [{"surface_replace": {"conversation": "c", "data": {}}}]},
            "`surface_replace.expected_revision`: missing",
        ),
    ],
    ids=[
        "misspelled-params",
        "misspelled-expect",
        "old-host-policy-key",
        "version-1",
        "bad-host-policy",
        "call-missing-fields",
        "params-not-json",
        "two-actions",
        "no-action",
        "restart-false",
        "restart-bad-advance",
        "bad-duration",
        "empty-calls",
        "subscribe-without-as",
        "frames-extra-key",
        "unknown-host-event",
        "unknown-directive",
        "directive-not-a-list",
        "outbox-grew-not-bool",
        "no-steps",
        "old-steps-key",
        "frames-before-subscribe",
        "reconnect-before-subscribe",
        "drop-no-frame",
        "bad-host-name",
        "no-hosts",
        "surface-replace-without-revision",
    ],
)
def test_scenario_invalid_names_the_step_and_key(doc: Any, says: str) -> None:
    assert says in _invalid(doc)


def test_every_problem_is_listed() -> None:
    with pytest.raises(LineupError) as exc:
        parse_scenario({"step": [{"call": {**CALL, "parms": 1}}, {"clock": {"advance": "x"}}]})
    problems = [d["problem"] for d in exc.value.details or []]
    assert any(p.startswith("step 1") for p in problems)
    assert any(p.startswith("step 2") for p in problems)
    assert "and 1 more" in exc.value.message


def test_header_and_actions_parse() -> None:
    scenario = parse_scenario(
        {
            "scenario": {"version": 2, "description": "d", "host": "manual", "review": "R"},
            "step": [
                {"calls": [CALL, {**CALL, "id": "d"}]},
                {"restart": True},
                {"restart": {"advance": "40m"}},
                {"session_data": {"conversation": "c1"}},
                {"subscribe": {"conversation": "c1", "as": "ui"}},
                {"frames": {"as": "ui"}, "expect": [{"$absent": ["x"], "$null": ["y"]}]},
                {"inventory": True},
                {"im_records": {"conversation": "c1"}, "outbox_grew": False},
            ],
        }
    )
    assert scenario.host_policy == "manual" and scenario.header.review == "R"
    actions = [s.action for s in scenario.steps]
    assert actions == [
        "calls",
        "restart",
        "restart",
        "session_data",
        "subscribe",
        "frames",
        "inventory",
        "im_records",
    ]
    assert [c["id"] for c in scenario.steps[0].args] == ["c", "d"]
    assert scenario.steps[1].args == {"advance": None}
    assert scenario.steps[2].args == {"advance": "40m"}
    assert scenario.steps[3].args["scope"] is None
    assert scenario.steps[4].args["as"] == "ui"
    assert scenario.steps[7].outbox_grew is False
    descriptions = [s.describe() for s in scenario.steps]
    assert descriptions[3] == "session_data c1"  # no scope: no KeyError
    assert descriptions[2] == "restart (+40m while down)"


def test_problems_carry_the_step_line(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[step]]\ninventory = true\n\n[[step]]\nclock = { advance = "x" }\n')
    with pytest.raises(LineupError) as exc:
        load_scenario(path)
    assert exc.value.code == "scenario_invalid"
    assert exc.value.details[0]["step"] == 2 and exc.value.details[0]["line"] == 4


def test_a_file_without_header_is_version_2() -> None:
    scenario = parse_scenario({"step": [{"call": CALL}]})
    assert scenario.header.version == 2 and scenario.host_policy is None


def test_load_toml_records_step_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        "[scenario]\nversion = 2\n\n[[step]]\ninventory = true\n\n  [[ step ]]\nrestart = true\n"
    )
    assert [s.line for s in load_scenario(path).steps] == [4, 7]
    assert step_lines("x = 1\n[[step]]\n") == [2]


@pytest.mark.parametrize(
    ("name", "text"),
    [("bad.toml", "not toml ==="), ("bad.json", "{"), ("latin.toml", b"\xff\xfe")],
    ids=["not-toml", "not-json", "not-utf8"],
)
def test_unreadable_files_are_scenario_invalid(tmp_path: Path, name: str, text: Any) -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(LineupError) as exc:
        load_scenario(path)
    assert exc.value.code == "scenario_invalid"
    with pytest.raises(LineupError) as missing:
        load_scenario(tmp_path / "missing.toml")
    assert missing.value.code == "scenario_invalid"


@pytest.mark.parametrize(
    "path",
    [*TEMPLATE_SCENARIOS, *FIXTURES],
    ids=[p.parent.parent.name + "/" + p.name for p in [*TEMPLATE_SCENARIOS, *FIXTURES]],
)
def test_templates_and_fixtures_share_the_model(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.header.version == 2
    schema = json.loads(
        files("lineup_runtime_lite.sim").joinpath("scenario.schema.json").read_text()
    )
    import tomllib

    text = path.read_text("utf-8")
    doc = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    jsonschema.validate(doc, schema)


def test_shipped_schema_is_the_model() -> None:
    shipped = json.loads(
        files("lineup_runtime_lite.sim").joinpath("scenario.schema.json").read_text()
    )
    assert shipped == scenario_json_schema()
    jsonschema.Draft202012Validator.check_schema(shipped)
    validator = jsonschema.Draft202012Validator(shipped)
    bad = {"step": [{"call": {**CALL, "parms": {}}}]}
    assert list(validator.iter_errors(bad))
    assert not list(validator.iter_errors({"step": [{"restart": True}, {"inventory": True}]}))


def test_diff_names_each_field_with_expected_and_actual() -> None:
    expected = [{"stage": "result", "result": {"status": "completed", "minutes": 25}}]
    actual = [{"stage": "result", "result": {"status": "interrupted"}}]
    diffs = compare(expected, actual)
    assert [(d.index, d.path) for d in diffs] == [(1, "result.status"), (1, "result.minutes")]
    assert (
        diffs[0].describe()
        == 'message 1 `result.status`: expected "completed", actual "interrupted"'
    )
    assert diffs[1].describe() == "message 1 `result.minutes`: expected 25, actual (absent)"
    assert diffs[1].to_dict()["actual_absent"] is True


def test_diff_counts_messages_and_still_compares_the_first() -> None:
    diffs = compare([{"a": 1}, {"a": 2}], [{"a": 9}])
    assert diffs[0].describe() == "expected 2 message(s), actual 1"
    assert diffs[1].describe() == "message 1 `a`: expected 1, actual 9"
    assert compare([], []) == []


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ({"$absent": ["operation_id"]}, {"status": "x"}, True),
        ({"$absent": ["operation_id"]}, {"operation_id": "op_1"}, False),
        ({"$null": ["reason"]}, {"reason": None}, True),
        ({"$null": ["reason"]}, {"reason": "timeout"}, False),
        ({"$null": ["reason"]}, {}, False),
        ({"r": {"$absent": ["x"]}}, {"r": {"x": 1}}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
        ({"a": [{"b": 1}]}, {"a": [{"b": 1, "c": 2}]}, True),
        ({"a": {}}, {"a": 3}, False),
    ],
    ids=[
        "absent-holds",
        "absent-present",
        "null-holds",
        "null-has-value",
        "null-missing",
        "nested-absent",
        "true-is-not-1",
        "1-is-not-true",
        "list-length",
        "partial-in-list",
        "table-vs-scalar",
    ],
)
def test_directives_and_partial_matches(expected: Any, actual: Any, ok: bool) -> None:
    assert matches(expected, actual) is ok
    assert (compare([expected], [actual]) == []) is ok


def test_absent_difference_shows_the_actual_value() -> None:
    (diff,) = compare([{"$absent": ["operation_id"]}], [{"operation_id": "op_1"}])
    assert diff.describe() == 'message 1 `operation_id`: expected (absent), actual "op_1"'
    assert diff.to_dict()["expected_absent"] is True


@pytest.mark.parametrize(
    "steps",
    [
        [{"clock": {"advance": "3000000d"}}],
        [{"clock": {"advance": "2000000d"}}, {"restart": {"advance": "1000000d"}}],
    ],
    ids=["one-huge-advance", "advances-adding-up"],
)
def test_a_clock_move_beyond_the_year_9999_is_scenario_invalid(steps: list[Any]) -> None:
    assert "beyond the year 9999" in _invalid({"step": [{"call": CALL}, *steps]})


def test_a_clock_move_within_the_year_9999_parses() -> None:
    assert len(parse_scenario({"step": [{"clock": {"advance": "2000000d"}}]}).steps) == 1
