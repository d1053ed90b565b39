"""Scenario files for `lineup run` (SPEC 5.8): parse and validate them, naming the step."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_build.fsutil import TomlTooDeep, parse_toml, read_regular
from lineup_runtime_lite.clock import parse_duration
from lineup_runtime_lite.host import EVENTS
from lineup_sdk.errors import LineupError

__all__ = ["ACTIONS", "Scenario", "Step", "load_scenario", "matches", "parse_scenario"]

#: The largest scenario file read (SPEC 12).
MAX_SCENARIO_BYTES = 1024 * 1024
ACTIONS = ("call", "host", "clock", "restart", "session_data", "im_records")
_STEP_KEYS = {*ACTIONS, "expect", "note"}


@dataclass(frozen=True)
class Step:
    """One scenario step: one action, and optionally what it must emit."""

    index: int
    action: str
    args: dict[str, Any]
    expect: list[Any] | None
    note: str | None = None

    def describe(self) -> str:
        a = self.args
        if self.action == "call":
            return f"call {a['id']} {a['method']} {a['conversation']}"
        if self.action == "host":
            return f"host {a['event']} {a['conversation']}"
        if self.action == "clock":
            return f"clock +{a['advance']}"
        if self.action == "restart":
            return "restart"
        if self.action == "session_data":
            return f"session_data {a['conversation']} {a['scope']}"
        return f"im_records {a['conversation']}"


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario."""

    steps: list[Step]
    host_policy: str | None = None
    description: str | None = None
    source: str = "scenario"
    extra: dict[str, Any] = field(default_factory=dict)


def _bad(source: str, where: str, message: str) -> LineupError:
    return LineupError("scenario_invalid", f"{source}: {where}: {message}")


def _need(
    source: str, where: str, table: Any, keys: dict[str, type | tuple[type, ...]]
) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise _bad(source, where, "must be a table")
    for key, kind in keys.items():
        if key not in table:
            raise _bad(source, where, f"missing `{key}`")
        if not isinstance(table[key], kind):
            raise _bad(source, where, f"`{key}` has the wrong type")
    return table


def parse_scenario(doc: dict[str, Any], *, source: str = "scenario") -> Scenario:
    """Validate a scenario document.

    Raises:
        LineupError: `scenario_invalid` naming the step and the problem.
    """
    unknown = set(doc) - {"scenario", "step"}
    if unknown:
        raise _bad(
            source, "top level", f"unknown key(s) {sorted(unknown)}; steps are [[step]] tables"
        )
    meta = doc.get("scenario", {})
    if not isinstance(meta, dict) or set(meta) - {"description", "host"}:
        raise _bad(source, "[scenario]", "only `description` and `host` are allowed")
    policy = meta.get("host")
    if policy not in (None, "auto", "manual"):
        raise _bad(source, "[scenario]", "host must be auto or manual")
    raw_steps = doc.get("step")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _bad(source, "top level", "no [[step]] tables")
    steps = []
    for i, raw in enumerate(raw_steps, start=1):
        where = f"step {i}"
        if not isinstance(raw, dict):
            raise _bad(source, where, "must be a table")
        extra = set(raw) - _STEP_KEYS
        if extra:
            raise _bad(
                source, where, f"unknown key(s) {sorted(extra)}; actions: {', '.join(ACTIONS)}"
            )
        actions = [a for a in ACTIONS if a in raw]
        if len(actions) != 1:
            raise _bad(source, where, f"needs exactly one action of {', '.join(ACTIONS)}")
        action = actions[0]
        args = raw[action]
        if action == "call":
            _need(source, where, args, {"id": str, "conversation": str, "method": str})
            args = {**args, "params": args.get("params", {})}
        elif action == "host":
            _need(source, where, args, {"event": str, "conversation": str})
            if args["event"] not in EVENTS:
                raise _bad(
                    source,
                    where,
                    f"unknown Host event {args['event']!r}; known: {', '.join(EVENTS)}",
                )
            if "scope" in args and not isinstance(args["scope"], str):
                raise _bad(source, where, "`scope` must be a string")
        elif action == "clock":
            _need(source, where, args, {"advance": str})
            try:
                parse_duration(args["advance"])
            except ValueError as exc:
                raise _bad(source, where, str(exc)) from None
        elif action == "restart":
            if args is not True:
                raise _bad(source, where, "restart must be `true`")
            args = {}
        elif action == "session_data":
            _need(source, where, args, {"conversation": str})
        else:
            _need(source, where, args, {"conversation": str})
        expect = raw.get("expect")
        if expect is not None and not isinstance(expect, list):
            raise _bad(source, where, "`expect` must be a list of partial matches")
        steps.append(Step(i, action, dict(args), expect, raw.get("note")))
    return Scenario(steps, policy, meta.get("description"), source)


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file (a regular file of at most 1 MiB).

    Raises:
        LineupError: `scenario_invalid`.
    """
    raw = read_regular(path, limit=MAX_SCENARIO_BYTES, code="scenario_invalid", what="scenario")
    try:
        doc = parse_toml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise LineupError("scenario_invalid", f"{path}: not UTF-8") from None
    except TomlTooDeep as exc:
        raise LineupError("scenario_invalid", f"{path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LineupError("scenario_invalid", f"{path}: not valid TOML ({exc})") from None
    return parse_scenario(doc, source=str(path))


def matches(expected: Any, actual: Any) -> bool:
    """Partial match: every key of an expected table must match; lists match item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and matches(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)
