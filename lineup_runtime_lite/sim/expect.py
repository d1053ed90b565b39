"""Expectations of scenario steps: partial matches with `$` directives and field-level diffs
(SPEC 9)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DIRECTIVES", "Difference", "compare", "directive_problems", "explain", "matches"]

#: Matcher keys that are directives, never field names.
DIRECTIVES = ("$absent", "$null")

_MISSING = object()


@dataclass(frozen=True)
class Difference:
    """One field that differs: in message `index` (1-based; 0 for the list itself) at `path`."""

    index: int
    path: str
    expected: Any
    actual: Any

    def describe(self) -> str:
        if self.index == 0:
            return f"expected {self.expected} message(s), actual {self.actual}"
        where = f"message {self.index}" if self.index else "messages"
        field = f" `{self.path}`" if self.path else ""
        return f"{where}{field}: expected {_show(self.expected)}, actual {_show(self.actual)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.index,
            "field": self.path,
            "expected": None if isinstance(self.expected, _Absent) else self.expected,
            "expected_absent": isinstance(self.expected, _Absent),
            "actual": None if self.actual is _MISSING else self.actual,
            "actual_absent": self.actual is _MISSING,
        }


class _Absent:
    """How a key that must be absent, or a value that is missing, is shown."""

    def __init__(self, text: str) -> None:
        self.text = text


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    if isinstance(value, _Absent):
        return value.text
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def directive_problems(expected: Any, path: str = "") -> list[str]:
    """Malformed directives in a matcher (unknown `$` keys, or a value that is not a list of
    key names), each with its path."""
    out: list[str] = []
    if isinstance(expected, dict):
        for key, value in expected.items():
            here = f"{path}.{key}" if path else key
            if key.startswith("$"):
                if key not in DIRECTIVES:
                    out.append(f"{here}: unknown directive; known: {', '.join(DIRECTIVES)}")
                elif not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                    out.append(f"{here}: must be a list of key names")
            else:
                out.extend(directive_problems(value, here))
    elif isinstance(expected, list):
        for i, item in enumerate(expected):
            out.extend(directive_problems(item, f"{path}[{i}]"))
    return out


def _diff(expected: Any, actual: Any, path: str, index: int, out: list[Difference]) -> None:
    def at(key: str) -> str:
        return f"{path}.{key}" if path else key

    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            out.append(Difference(index, path, expected, actual))
            return
        for key, value in expected.items():
            if key == "$absent":
                for name in value:
                    if name in actual:
                        out.append(Difference(index, at(name), _Absent("(absent)"), actual[name]))
            elif key == "$null":
                for name in value:
                    got = actual.get(name, _MISSING)
                    if got is not None:
                        out.append(Difference(index, at(name), None, got))
            elif key not in actual:
                out.append(Difference(index, at(key), value, _MISSING))
            else:
                _diff(value, actual[key], at(key), index, out)
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            out.append(Difference(index, path, expected, actual))
            return
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _diff(e, a, f"{path}[{i}]", index, out)
        return
    # bool is an int in Python; `true` must never match `1`
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        out.append(Difference(index, path, expected, actual))


def compare(expected: list[Any], actual: list[Any]) -> list[Difference]:
    """Every difference between a step's expectation and what it emitted, in order: item by
    item, and in number (a count mismatch is index 0 with the counts)."""
    out: list[Difference] = []
    if len(expected) != len(actual):
        out.append(Difference(0, "", len(expected), len(actual)))
    for i, (e, a) in enumerate(zip(expected, actual, strict=False), start=1):
        _diff(e, a, "", i, out)
    return out


def _error_of(message: Any) -> str | None:
    err = message.get("error") if isinstance(message, dict) else None
    if not isinstance(err, dict) or "code" not in err:
        return None
    return f"error {err['code']}: {err.get('message', '')}"


def explain(differences: list[Difference], actual: list[Any]) -> list[str]:
    """Each difference as a line; when the message it is about is an error (a step that
    expected a stage and got an error), the line names the error's code and message, and
    a count mismatch names every other error the step emitted."""
    about = {d.index for d in differences if d.index > 0}
    out = []
    for d in differences:
        text = d.describe()
        if d.index == 0:
            others = [
                f"message {i} is {got}"
                for i, m in enumerate(actual, start=1)
                if i not in about and (got := _error_of(m)) is not None
            ]
            if others:
                text += f" ({'; '.join(others)})"
        elif d.index <= len(actual) and not d.path.startswith("error"):
            got = _error_of(actual[d.index - 1])
            if got is not None:
                text += f" (got {got})"
        out.append(text)
    return out


def matches(expected: Any, actual: Any) -> bool:
    """Partial match: every key of an expected table must match (directives included);
    lists match item by item and in number."""
    out: list[Difference] = []
    _diff(expected, actual, "", 1, out)
    return not out
