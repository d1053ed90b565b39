"""Scenario format v2 (SPEC 9): one strict model for `lineup run`, `lineup test` and the
conformance fixtures (TOML for people, JSON for fixtures), validated naming the step and key."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lineup_build.fsutil import TomlTooDeep, parse_toml, read_regular
from lineup_runtime_lite.api.clock import LAST_MS, VirtualClock, parse_duration
from lineup_runtime_lite.sim.expect import directive_problems, matches
from lineup_sdk.errors import LineupError

__all__ = [
    "ACTIONS",
    "HOST_NAMES",
    "Scenario",
    "ScenarioDocument",
    "Step",
    "load_scenario",
    "matches",
    "parse_scenario",
    "scenario_json_schema",
]

#: The largest scenario file read (SPEC 12).
MAX_SCENARIO_BYTES = 1024 * 1024
ACTIONS = (
    "call",
    "calls",
    "host",
    "clock",
    "restart",
    "session_data",
    "subscribe",
    "frames",
    "drop_frame",
    "reconnect",
    "surface_replace",
    "im_records",
    "inventory",
    "ui_action",
    "crash_worker",
)
#: The Hosts that replay scenarios here: the Python runtime's replay and `lineup dev` in a
#: browser (another Host names itself the same way in a step's `hosts`).
HOST_NAMES = ("python", "web")
_HOST_EVENTS = Literal[
    "preload", "surface_loaded", "foreground_confirmed", "activation_failed", "user_left"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


def _duration(value: str) -> str:
    parse_duration(value)  # a ValueError names the bad text
    return value


def _json_params(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError("params must be JSON (no TOML dates or times, no NaN)") from None
    return value


class AgentCall(_Strict):
    """An Agent call."""

    id: str
    conversation: str
    method: str
    params: Any = Field(default_factory=dict, description="JSON params (an object, normally).")

    _json = field_validator("params")(_json_params)


class HostEventAction(_Strict):
    """A Host lifecycle event for the conversation's activation."""

    event: _HOST_EVENTS
    conversation: str
    scope: str | None = None
    instance: str | None = None


class ClockMove(_Strict):
    """Move the virtual clock forward, e.g. `advance = "25m"`."""

    advance: str

    _check = field_validator("advance")(_duration)


class Restart(_Strict):
    """Close the runtime, optionally move the virtual clock while it is down, reopen."""

    advance: str | None = None

    @field_validator("advance")
    @classmethod
    def _check(cls, value: str | None) -> str | None:
        return None if value is None else _duration(value)


class SessionDataRead(_Strict):
    """Read a conversation's session data (`scope` optional when unambiguous)."""

    conversation: str
    scope: str | None = None


class Subscribe(_Strict):
    """Subscribe a named Surface listener; `frames = { as }` reads what it received."""

    conversation: str
    scope: str | None = None
    as_: str = Field(alias="as")


class Frames(_Strict):
    """The frames a named subscription has received so far."""

    as_: str = Field(alias="as")


class DropFrame(_Strict):
    """A fault: the next `count` change frames on the way to a named subscription are lost
    (the client sees a revision gap and resynchronizes, TIS2-04)."""

    as_: str = Field(alias="as")
    count: int = Field(default=1, ge=1, le=100)


class Reconnect(_Strict):
    """A fault: the bridge of a named subscription closes; the client reconnects, gets the
    data again and resubscribes (TIS2-04)."""

    as_: str = Field(alias="as")


class SurfaceReplace(_Strict):
    """A Surface tries to write session data (refused this iteration:
    `session_data_write_not_allowed`)."""

    conversation: str
    scope: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    expected_revision: int = Field(ge=0)


class ImRecords(_Strict):
    """The IM records of a conversation."""

    conversation: str


class InventoryRead(_Strict):
    """The Agent Inventory (optionally one scope's tools)."""

    scope: str | None = None


class UiActionStep(_Strict):
    """A Surface's UI Action (SPEC 17): `client` numbers its actions 1, 2, 3… (`seq`); the
    step emits the outcome `{action_id, result, revision}` or `{error: {code, message,
    details?}}` (`action_id` beside it once the action was accepted). An action queued
    behind a starting activation emits `action_pending` at once: a later step (the same
    `client` and `seq` again) reads its outcome."""

    conversation: str
    scope: str | None = None
    name: str
    params: Any = Field(default_factory=dict, description="JSON params (an object, normally).")
    client: str
    seq: int

    _json = field_validator("params")(_json_params)


class CrashWorker(_Strict):
    """A fault: the app's worker is killed now, as a crash would (what it was running ends
    `delivery_interrupted`; the next delivery starts a new one)."""

    scope: str | None = None


def _or_true(schema: dict[str, Any]) -> None:
    schema["anyOf"].insert(0, {"const": True})


def _true_is_empty(value: Any) -> Any:
    if value is True:
        return {}
    if value is False:
        raise ValueError("must be `true` or a table")
    return value


class StepModel(_Strict):
    """One `[[step]]`: exactly one action, and optionally what it must emit."""

    call: AgentCall | None = None
    calls: list[AgentCall] | None = Field(default=None, min_length=1)
    host: HostEventAction | None = None
    clock: ClockMove | None = None
    restart: Restart | None = Field(
        default=None, description="`true` or `{ advance = ... }`", json_schema_extra=_or_true
    )
    session_data: SessionDataRead | None = None
    subscribe: Subscribe | None = None
    frames: Frames | None = None
    drop_frame: DropFrame | None = None
    reconnect: Reconnect | None = None
    surface_replace: SurfaceReplace | None = None
    im_records: ImRecords | None = None
    inventory: InventoryRead | None = Field(
        default=None, description="`true` or `{ scope }`", json_schema_extra=_or_true
    )
    ui_action: UiActionStep | None = None
    crash_worker: CrashWorker | None = None
    expect: list[Any] | None = Field(
        default=None,
        description="Ordered partial matches against what the step emitted; keys starting "
        "with `$` are directives: `$absent` and `$null` (lists of key names).",
    )
    outbox_grew: bool | None = None
    hosts: list[str] | None = Field(
        default=None,
        min_length=1,
        description="The Hosts that replay this step (default: every Host): `python` (the "
        "runtime's replay), `web` (`lineup dev` in a browser), or another Host's name.",
    )
    note: str | None = None

    _true = field_validator("restart", "inventory", mode="before")(_true_is_empty)

    @model_validator(mode="after")
    def _one_action(self) -> StepModel:
        present = [a for a in ACTIONS if getattr(self, a) is not None]
        if len(present) != 1:
            raise ValueError(
                f"needs exactly one action of {', '.join(ACTIONS)} (found "
                f"{', '.join(present) or 'none'})"
            )
        for name in self.hosts or ():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
                raise ValueError(f"`hosts`: {name!r} is not a Host name (like python or web)")
        problems = directive_problems(self.expect or [], "expect")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Header(_Strict):
    """The `[scenario]` table."""

    version: Literal[2] = 2
    description: str | None = None
    host: Literal["auto", "manual"] | None = None
    review: str | None = None
    title: str | None = None
    app: str | None = None
    note: str | None = None


class ScenarioDocument(_Strict):
    """A whole scenario file: the `[scenario]` header and its `[[step]]` tables."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        strict=True,
        title="LineUp scenario (format v2)",
    )
    scenario: Header = Field(default_factory=Header)
    step: list[StepModel] = Field(min_length=1)

    @model_validator(mode="after")
    def _clock_in_range(self) -> ScenarioDocument:
        # the virtual clock starts at 2026-01-01; timestamps are RFC 3339, so every move
        # together must stay within the year 9999 (a traceback otherwise, SPEC 13.3)
        total = 0
        for step in self.step:
            move = step.clock.advance if step.clock else step.restart and step.restart.advance
            if move:
                total += parse_duration(move)
        if total > LAST_MS - VirtualClock().now_ms():
            raise ValueError(
                "the clock moves of this scenario together go beyond the year 9999 "
                "(timestamps are RFC 3339); advance by less"
            )
        return self


@dataclass(frozen=True)
class Step:
    """One scenario step: one action (its arguments as data), and what it must emit."""

    index: int
    action: str
    args: Any
    expect: list[Any] | None
    note: str | None = None
    outbox_grew: bool | None = None
    line: int | None = None
    hosts: tuple[str, ...] | None = None

    def runs_on(self, host: str) -> bool:
        """Whether the Host named `host` replays this step."""
        return self.hosts is None or host in self.hosts

    def describe(self) -> str:
        a = self.args
        if self.action == "call":
            return f"call {a['id']} {a['method']} {a['conversation']}"
        if self.action == "calls":
            return "calls " + ", ".join(f"{c['id']} {c['method']}" for c in a)
        if self.action == "host":
            return f"host {a['event']} {a['conversation']}"
        if self.action == "clock":
            return f"clock +{a['advance']}"
        if self.action == "restart":
            return f"restart (+{a['advance']} while down)" if a.get("advance") else "restart"
        if self.action in ("session_data", "subscribe"):
            scope = f" {a['scope']}" if a.get("scope") else ""
            extra = f" as {a['as']}" if self.action == "subscribe" else ""
            return f"{self.action} {a['conversation']}{scope}{extra}"
        if self.action == "frames":
            return f"frames {a['as']}"
        if self.action == "drop_frame":
            return f"drop_frame {a['as']} x{a['count']}"
        if self.action == "reconnect":
            return f"reconnect {a['as']}"
        if self.action == "surface_replace":
            return f"surface_replace {a['conversation']} at {a['expected_revision']}"
        if self.action == "inventory":
            return f"inventory {a['scope']}" if a.get("scope") else "inventory"
        if self.action == "ui_action":
            return f"ui_action {a['client']}:{a['seq']} {a['name']} {a['conversation']}"
        if self.action == "crash_worker":
            return f"crash_worker {a['scope']}" if a.get("scope") else "crash_worker"
        return f"im_records {a['conversation']}"


@dataclass(frozen=True)
class Scenario:
    """A validated scenario."""

    steps: list[Step]
    host_policy: str | None = None
    description: str | None = None
    source: str = "scenario"
    header: Header = field(default_factory=Header)


def _where(loc: tuple[int | str, ...]) -> str:
    if len(loc) >= 2 and loc[0] == "step" and isinstance(loc[1], int):
        rest = ".".join(str(p) for p in loc[2:])
        return f"step {loc[1] + 1}" + (f": `{rest}`" if rest else "")
    if loc and loc[0] == "scenario":
        rest = ".".join(str(p) for p in loc[1:])
        return "[scenario]" + (f": `{rest}`" if rest else "")
    return "top level" + (f": `{'.'.join(str(p) for p in loc)}`" if loc else "")


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "missing":
        return "missing"
    return str(err["msg"]).removeprefix("Value error, ")


def _step_of(loc: tuple[int | str, ...]) -> int | None:
    return loc[1] + 1 if len(loc) >= 2 and loc[0] == "step" and isinstance(loc[1], int) else None


def _invalid(
    source: str, problems: list[tuple[int | None, str]], lines: list[int] | None
) -> LineupError:
    """`scenario_invalid` with every problem, each with its step and that step's line."""
    details = []
    for step, text in problems:
        item: dict[str, Any] = {"problem": text, "step": step}
        if step is not None and lines is not None and step - 1 < len(lines):
            item["line"] = lines[step - 1]
        details.append(item)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return LineupError(
        "scenario_invalid",
        f"{source}: {problems[0][1]}{more}",
        hint="see `lineup schema scenario` for the format",
        details=details,
    )


def parse_scenario(
    doc: Any, *, source: str = "scenario", lines: list[int] | None = None
) -> Scenario:
    """Validate a scenario document (parsed TOML or JSON).

    Args:
        doc: The document.
        source: How problems name the file.
        lines: The line of each `[[step]]`, when known (for annotations).

    Raises:
        LineupError: `scenario_invalid` naming the step and the key of every problem.
    """
    try:
        model = ScenarioDocument.model_validate(doc)
    except ValidationError as exc:
        raise _invalid(
            source,
            [
                (_step_of(tuple(e["loc"])), f"{_where(tuple(e['loc']))}: {_message(e)}")
                for e in exc.errors()
            ],
            lines,
        ) from None
    subscribed: set[str] = set()
    for i, raw in enumerate(model.step, start=1):
        if raw.subscribe is not None:
            subscribed.add(raw.subscribe.as_)
        for action in ("frames", "drop_frame", "reconnect"):
            named = getattr(raw, action)
            if named is not None and named.as_ not in subscribed:
                raise _invalid(
                    source,
                    [(i, f"step {i}: `{action}.as`: no earlier step subscribes as {named.as_!r}")],
                    lines,
                )
    steps = []
    for i, raw in enumerate(model.step, start=1):
        action = next(a for a in ACTIONS if getattr(raw, a) is not None)
        value = getattr(raw, action)
        args: Any = (
            [c.model_dump(by_alias=True) for c in value]
            if isinstance(value, list)
            else value.model_dump(by_alias=True)
        )
        line = lines[i - 1] if lines is not None and i - 1 < len(lines) else None
        hosts = tuple(raw.hosts) if raw.hosts is not None else None
        steps.append(Step(i, action, args, raw.expect, raw.note, raw.outbox_grew, line, hosts))
    header = model.scenario
    return Scenario(steps, header.host, header.description, source, header)


_STEP_LINE = re.compile(r"^[ \t]*\[\[[ \t]*step[ \t]*\]\]", re.MULTILINE)


def step_lines(text: str) -> list[int]:
    """The 1-based line of each `[[step]]` header in a TOML scenario."""
    return [text.count("\n", 0, m.start()) + 1 for m in _STEP_LINE.finditer(text)]


def _read_text(path: Path) -> str:
    """The one place a scenario file is read: a regular file of at most 1 MiB."""
    raw = read_regular(
        path,
        limit=MAX_SCENARIO_BYTES,
        code="scenario_invalid",
        what="scenario",
        missing_hint="check the path; `lineup test` plays and lists every scenarios/**/*.toml of the project",
    )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LineupError("scenario_invalid", f"{path}: not UTF-8") from None


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file (a regular file of at most 1 MiB): TOML, or JSON
    for a `.json` fixture; TOML nested at most 32 levels.

    Raises:
        LineupError: `scenario_invalid`.
    """
    text = _read_text(path)
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise LineupError("scenario_invalid", f"{path}: not valid JSON ({exc})") from None
        return parse_scenario(doc, source=str(path))
    try:
        doc = parse_toml(text)
    except TomlTooDeep as exc:
        raise LineupError("scenario_invalid", f"{path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LineupError("scenario_invalid", f"{path}: not valid TOML ({exc})") from None
    return parse_scenario(doc, source=str(path), lines=step_lines(text))


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files (what `lineup schema scenario` prints)."""
    schema = ScenarioDocument.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
