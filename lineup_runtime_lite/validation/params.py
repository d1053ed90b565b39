"""The Agent call envelope, checked before the runtime's loop sees it (SPEC 5.2, 12).

Pure functions: `check_envelope` runs in the caller's thread, so a huge or hostile value
delays only its own caller. It walks the params without recursion, so no nesting depth
can raise `RecursionError`, and it stops early once the params are known to be too large.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite.core.messages import MAX_DETAILS, cap_details, schema_rejection

__all__ = [
    "DEFAULT_MAX_PARAMS_BYTES",
    "MAX_DEPTH",
    "MAX_DETAILS",
    "MAX_ID_CHARS",
    "MAX_SAFE_INT",
    "Envelope",
    "Rejection",
    "canonical_text",
    "cap_details",
    "check_envelope",
    "id_problem",
    "schema_rejection",
    "strict_json_problems",
    "yield_gil",
]

DEFAULT_MAX_PARAMS_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_SAFE_INT = 2**53 - 1
MAX_ID_CHARS = 200

_SCALARS = frozenset({int, float, str, bool, type(None)})
#: Items one C-speed step handles between two `yield_gil()` calls.
_CHUNK = 2048
#: Steps of a long pure-Python check between two `yield_gil()` calls.
YIELD_EVERY = 128
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Envelope:
    """A call whose ids and params passed the envelope checks."""

    call_id: str
    conversation_id: str
    method: str
    params: Any
    params_json: str
    fingerprint: str


@dataclass(frozen=True)
class Rejection:
    """An envelope problem: the error body parts of the answer (nothing is persisted)."""

    call_id: str
    code: str
    message: str
    details: list[dict[str, Any]] | None = None


def _pointer(parts: list[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ never escapes
        text = f"<{type(value).__name__}>"
    text = _SURROGATE.sub("\ufffd", text)
    return text if len(text) <= 120 else text[:119] + "…"


def _clip_text(text: str) -> str:
    shown = json.dumps(text, ensure_ascii=False)
    return shown if len(shown) <= 120 else shown[:119] + "…"


def _problem(path: list[str | int], message: str, expected: str, value: Any) -> dict[str, Any]:
    return {"path": _pointer(path), "message": message, "expected": expected, "value": value}


def strict_json_problems(
    params: Any, *, max_bytes: int | None = None
) -> tuple[list[dict[str, Any]], int, bool]:
    """Every place where `params` is not strict JSON (I-JSON numbers, valid Unicode).

    Returns (problems, total, too_large): at most `MAX_DETAILS` problems as
    `{path, message, expected, value}`, how many there were in all, and whether the value
    is already known to exceed `max_bytes` of canonical JSON (then the walk stopped early).
    Iterative: no nesting depth raises `RecursionError`.
    """
    problems: list[dict[str, Any]] = []
    total = 0
    # a lower bound of the canonical JSON size, so a 50 MB string stops the walk at once
    size = 0

    def add(path: list[str | int], message: str, expected: str, value: str) -> None:
        nonlocal total
        total += 1
        if len(problems) < MAX_DETAILS:
            problems.append(_problem(path, message, expected, value))

    stack: list[tuple[Any, list[str | int], int]] = [(params, [], 0)]
    steps = 0
    while stack:
        value, path, depth = stack.pop()
        steps += 1
        if steps % YIELD_EVERY == 0:
            yield_gil()
        if max_bytes is not None and size > max_bytes:
            return problems, total, True
        if value is None or value is True or value is False:
            size += 4
        elif isinstance(value, str) and type(value) is str:
            size += len(value) + 2
            if _SURROGATE.search(value):
                shown = _clip_text(_SURROGATE.sub("\ufffd", value))
                add(
                    path,
                    "string holds a lone surrogate (not valid Unicode)",
                    "valid Unicode",
                    shown,
                )
        elif isinstance(value, int) and type(value) is int:
            if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
                size += 1
            else:
                size += 17
                digits = int(value.bit_length() * 0.30103) + 1
                add(
                    path,
                    "integer outside ±(2^53 − 1)",
                    "an integer within ±9007199254740991",
                    f"{'-' if value < 0 else ''}an integer of about {digits} digits",
                )
        elif isinstance(value, float) and type(value) is float:
            size += 1
            if value != value or value in (float("inf"), float("-inf")):
                add(path, f"{value!r} is not a JSON number", "a finite number", repr(value))
        elif type(value) is dict:
            size += 2
            if depth >= MAX_DEPTH:
                add(path, f"nested deeper than {MAX_DEPTH} levels", f"depth ≤ {MAX_DEPTH}", "")
                continue
            for key, item in value.items():
                if type(key) is not str:
                    add(
                        [*path, _safe_repr(key)],
                        f"object key of type {type(key).__name__} (JSON keys are strings)",
                        "string keys",
                        _safe_repr(key),
                    )
                    continue
                size += len(key) + 3
                if _SURROGATE.search(key):
                    add(
                        [*path, _SURROGATE.sub("\ufffd", key)],
                        "object key holds a lone surrogate (not valid Unicode)",
                        "valid Unicode",
                        "",
                    )
                    continue
                stack.append((item, [*path, key], depth + 1))
        elif type(value) is list:
            size += 2
            if depth >= MAX_DEPTH:
                add(path, f"nested deeper than {MAX_DEPTH} levels", f"depth ≤ {MAX_DEPTH}", "")
                continue
            size += len(value)
            fast = _scalar_list_size(value)
            if fast is not None:  # all valid scalars, checked at C speed
                size += fast
                continue
            for i in range(len(value) - 1, -1, -1):
                stack.append((value[i], [*path, i], depth + 1))
        else:
            add(
                path,
                f"a {type(value).__name__} is not a JSON value",
                "null, boolean, number, string, array or object",
                _safe_repr(value),
            )
    return problems, total, False


def yield_gil() -> None:
    """Let other threads (the runtime's loop) run now, not after the switch interval.

    Long pure-Python checks call this every `YIELD_EVERY` steps, so a huge call in one
    thread adds well under a millisecond per step to another thread's call."""
    time.sleep(0)


def _scalar_list_size(items: list[Any]) -> int | None:
    """The size of a list of valid JSON scalars beyond one byte each, or None when it
    holds containers or anything invalid (then the walk looks at each item).

    Checked at C speed, a slice at a time with `yield_gil()` between slices."""
    extra = 0
    for start in range(0, len(items), _CHUNK):
        if start:
            yield_gil()
        part = items[start : start + _CHUNK]
        kinds = set(map(type, part))
        if not kinds <= _SCALARS:
            return None
        if int in kinds:
            ints = part if kinds == {int} else [x for x in part if type(x) is int]
            if min(ints) < -MAX_SAFE_INT or max(ints) > MAX_SAFE_INT:
                return None
        if float in kinds:
            floats = part if kinds == {float} else [x for x in part if type(x) is float]
            if not all(map(math.isfinite, floats)):
                return None
        if str in kinds:
            strs = part if kinds == {str} else [x for x in part if type(x) is str]
            if any(map(_SURROGATE.search, strs)):
                return None
            extra += sum(map(len, strs)) + 2 * len(strs)
    return extra


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` of
    strict-JSON `value`, the same text, but built in slices with `yield_gil()` between them:
    one C call over a megabyte would hold the GIL (and stall the loop thread) for tens of
    milliseconds. Recursion is bounded by the nesting limit checked before."""
    if type(value) is list:
        parts = []
        for start in range(0, len(value), _CHUNK):
            if start:
                yield_gil()
            part = value[start : start + _CHUNK]
            if set(map(type, part)) <= _SCALARS:  # valid already: dump the slice in C
                parts.append(_dump(part)[1:-1])
            else:
                parts.append(",".join(canonical_text(v) for v in part))
        return "[" + ",".join(p for p in parts if p) + "]"
    if type(value) is dict:
        items = sorted(value.items())
        out = []
        for n, (k, v) in enumerate(items, start=1):
            out.append(_dump(k) + ":" + canonical_text(v))
            if n % _CHUNK == 0:
                yield_gil()
        return "{" + ",".join(out) + "}"
    return _dump(value)


def id_problem(name: str, value: Any) -> str | None:
    """Why `value` is not a usable id (a string of 1–200 characters, valid Unicode, no
    control characters), or None."""
    if type(value) is not str:
        return f"{name} must be a string, not {type(value).__name__}"
    if not 1 <= len(value) <= MAX_ID_CHARS:
        return f"{name} must be 1–{MAX_ID_CHARS} characters (it has {len(value)})"
    if _CONTROL.search(value):
        return f"{name} must not contain control characters"
    if _SURROGATE.search(value):
        return f"{name} holds a lone surrogate (not valid Unicode)"
    return None


def _shown_id(value: Any) -> str:
    if type(value) is str and 1 <= len(value) <= MAX_ID_CHARS and not _SURROGATE.search(value):
        return value
    return ""


def check_envelope(
    call_id: Any, conversation_id: Any, method: Any, params: Any, *, max_bytes: int
) -> Envelope | Rejection:
    """Check an Agent call's ids, method and params before anything else sees them.

    Returns the canonical form (params JSON and fingerprint) or the rejection to answer:
    `invalid_params` (ids, method type, non-JSON params) or `params_too_large`.
    """
    for name, value in (("call_id", call_id), ("conversation_id", conversation_id)):
        why = id_problem(name, value)
        if why is not None:
            return Rejection(_shown_id(call_id), "invalid_params", why)
    if type(method) is not str or _SURROGATE.search(method) or not 1 <= len(method) <= 200:
        return Rejection(
            call_id, "invalid_params", "method must be a string of 1–200 valid characters"
        )
    problems, total, too_large = strict_json_problems(params, max_bytes=max_bytes)
    if too_large:
        return _too_large(call_id, method, max_bytes, None)
    if problems:
        details, suffix = cap_details(problems, total)
        return Rejection(
            call_id, "invalid_params", f"params of {method} are not strict JSON{suffix}", details
        )
    text = canonical_text(params)
    blob = text.encode("utf-8")
    if len(blob) > max_bytes:
        return _too_large(call_id, method, max_bytes, len(blob))
    # the same bytes `messages.fingerprint` hashes, without serializing the params twice
    head = json.dumps([conversation_id, method], ensure_ascii=False, separators=(",", ":"))
    fp = hashlib.sha256(f"{head[:-1]},{text}]".encode()).hexdigest()
    return Envelope(call_id, conversation_id, method, params, text, fp)


def _too_large(call_id: str, method: str, max_bytes: int, size: int | None) -> Rejection:
    what = f"{size} bytes" if size is not None else "larger than that"
    return Rejection(
        call_id,
        "params_too_large",
        f"params of {method} are {what}; this runtime accepts at most {max_bytes} bytes "
        "of canonical JSON",
    )
