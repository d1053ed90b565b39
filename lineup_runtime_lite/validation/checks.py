"""Compiled, cached JSON Schema validators for tool params and results.

Which path validates a value is chosen by the schema's class, never the value's size
(SPEC 13.3): a plain schema (`lineup_build.schema_cost`) on the calling thread, any other
in a killable validator process under a time budget per value (`_validator_pool`).

`pattern` is evaluated by pydantic-core's linear-time Rust regex engine, never Python `re`
on Agent-controlled strings; formats pydantic emits (date-time, date, time, uuid, email)
are checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Callable
from datetime import date, datetime, time
from typing import Any

from lineup_build.schema_cost import schema_cost
from lineup_build.schemas import canonical_json, compile_pattern
from lineup_runtime_lite.core.messages import BUDGET_REASON, Checked, Unchecked
from lineup_runtime_lite.validation.params import YIELD_EVERY, yield_gil
from lineup_runtime_lite.validation.pool import OverBudget, ValidatorPool

__all__ = [
    "BUDGET_REASON",
    "Checked",
    "Unchecked",
    "Validator",
    "acheck_value",
    "check_value",
    "clip",
    "validator_for",
]

_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}\Z")  # fixed, linear: no Agent-made patterns


def _pattern_matches(pattern: str, value: str) -> bool:
    try:
        compile_pattern(pattern).validate_python(value)
    except ValueError:
        return False
    return True


def _build_validator_class() -> Any:
    from jsonschema import Draft202012Validator, FormatChecker, validators
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Any:
        if isinstance(instance, str) and not _pattern_matches(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, pp: dict[str, Any], instance: Any, schema: Any) -> Any:
        if not isinstance(instance, dict):
            return
        for patrn, sub in pp.items():
            for k, v in instance.items():
                if _pattern_matches(patrn, k):
                    yield from validator.descend(v, sub, path=k, schema_path=patrn)

    base_items = Draft202012Validator.VALIDATORS["items"]

    def items(validator: Any, sub: Any, instance: Any, schema: Any) -> Any:
        # the stock keyword, but yielding the GIL on long arrays: a huge call validating in
        # its caller's thread must not starve the runtime's loop thread
        if sub is False or not isinstance(instance, list) or len(instance) < YIELD_EVERY:
            yield from base_items(validator, sub, instance, schema)
            return
        for index in range(len(schema.get("prefixItems", [])), len(instance)):
            if index % YIELD_EVERY == 0:
                yield_gil()
            yield from validator.descend(instance[index], sub, path=index)

    checker = FormatChecker(formats=())

    def _dt(s: object) -> bool:
        if not isinstance(s, str):
            return True
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", s):
            return False
        datetime.fromisoformat(s.replace("Z", "+00:00"))
        return True

    def _d(s: object) -> bool:
        if isinstance(s, str):
            if not re.fullmatch(r"\d{4}-\d\d-\d\d", s):
                return False
            date.fromisoformat(s)
        return True

    def _t(s: object) -> bool:
        if isinstance(s, str):
            if not re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", s):
                return False
            time.fromisoformat(s.replace("Z", "+00:00"))
        return True

    def _u(s: object) -> bool:
        if isinstance(s, str):
            uuid.UUID(s)
        return True

    def _e(s: object) -> bool:
        return not isinstance(s, str) or bool(_EMAIL.match(s))

    checker.checks("date-time", raises=ValueError)(_dt)
    checker.checks("date", raises=ValueError)(_d)
    checker.checks("time", raises=ValueError)(_t)
    checker.checks("uuid", raises=ValueError)(_u)
    checker.checks("email")(_e)
    cls = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        {"pattern": pattern, "patternProperties": pattern_properties, "items": items},
    )
    return cls, checker


_CLS: Any = None
_CACHE: dict[bytes, Validator] = {}


def clip(value: Any, limit: int = 120) -> str:
    """JSON of `value`, clipped to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _expected(err: Any) -> str:
    kw = err.validator
    val = err.validator_value
    if kw in ("type", "enum", "const", "format", "pattern"):
        return f"{kw} {json.dumps(val) if kw != 'pattern' else val}"
    if kw == "additionalProperties":
        return "no properties beyond those declared"
    if kw == "required":
        return f"required {json.dumps(val)}"
    return f"{kw} {clip(val, 60)}"


#: Keywords that only annotate (they never make an instance invalid).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$comment"})
_SCALAR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,  # 1.0 is an integer to JSON Schema: jsonschema decides
    "number": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def _plain_check(schema: Any) -> Callable[[Any], bool] | None:
    """For a plain schema (objects of typed scalars and plain objects: `type`,
    `properties`, `required`, `additionalProperties` as a boolean, annotations), a quick
    test that says True only when the instance is valid; None for anything else.

    False never means invalid: the caller then asks jsonschema, which has the last word.
    """
    if schema is True:
        return lambda v: True
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _ANNOTATIONS
    kind = schema.get("type")
    if not isinstance(kind, str):
        return None  # a list of types, or none: left to jsonschema
    if kind in _SCALAR_CHECKS and keys == {"type"}:
        return _SCALAR_CHECKS[kind]
    if kind != "object" or not keys <= {"type", "properties", "required", "additionalProperties"}:
        return None
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list) or type(extra) is not bool:
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, sub in props.items():
        check = _plain_check(sub)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)
    if not all(type(n) is str for n in needed):
        return None

    def accepts(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in needed:
            if name not in value:
                return False
        for key, item in value.items():
            check = checks.get(key)
            if check is None:
                if not extra:
                    return False
            elif not check(item):
                return False
        return True

    return accepts


class Validator:
    """A compiled validator for one schema."""

    def __init__(self, schema: dict[str, Any] | bool, key: bytes = b"") -> None:
        global _CLS
        if _CLS is None:
            _CLS = _build_validator_class()
        cls, checker = _CLS
        self.schema = schema
        self._v = cls(schema, format_checker=checker)
        self._accepts = _plain_check(schema)
        #: Plain: validated on the calling thread; else in a validator process.
        self.plain = schema_cost(schema).plain
        #: The schema's digest, naming it to validator processes.
        self.key = hashlib.sha256(key or canonical_json(schema)).hexdigest()

    def problems(self, instance: Any) -> list[dict[str, Any]]:
        """Every problem as `{path, message, expected, value}` (empty when valid)."""
        if self._accepts is not None and self._accepts(instance):
            return []  # a plain schema that plainly holds: no need to walk it with jsonschema
        out = []
        for n, err in enumerate(self._v.iter_errors(instance), start=1):
            if n % YIELD_EVERY == 0:
                yield_gil()
            leaves = [err]
            if err.context:  # anyOf/oneOf: report the branch errors that got furthest
                best = max(len(list(e.absolute_path)) for e in err.context)
                leaves = [e for e in err.context if len(list(e.absolute_path)) == best][:3]
            for e in leaves:
                if e.validator == "additionalProperties" and isinstance(e.instance, dict):
                    allowed = set((e.schema.get("properties") or {}).keys())
                    for extra in sorted(k for k in e.instance if k not in allowed):
                        out.append(
                            {
                                "path": _pointer([*e.absolute_path, extra]),
                                "message": f"unknown property {extra!r}",
                                "expected": _expected(e),
                                "value": clip(e.instance[extra]),
                            }
                        )
                    continue
                if e.validator == "required" and isinstance(e.instance, dict):
                    for name in e.validator_value:
                        if name not in e.instance:
                            out.append(
                                {
                                    "path": _pointer([*e.absolute_path, name]),
                                    "message": f"missing required property {name!r}",
                                    "expected": "present",
                                    "value": "undefined",
                                }
                            )
                    continue
                out.append(
                    {
                        "path": _pointer(e.absolute_path),
                        "message": e.message if len(e.message) <= 200 else e.message[:199] + "…",
                        "expected": _expected(e),
                        "value": clip(e.instance),
                    }
                )
        out.sort(key=lambda p: (p["path"], p["message"]))
        return out


#: id(schema) -> (schema, its validator): the Registry's schema objects, looked up per call.
_BY_ID: dict[int, tuple[Any, Validator]] = {}


def validator_for(schema: dict[str, Any] | bool) -> Validator:
    """The cached validator of `schema` (compiled once per distinct schema; the same
    schema object is found again without serializing it)."""
    known = _BY_ID.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    key = canonical_json(schema)
    v = _CACHE.get(key)
    if v is None:
        v = _CACHE[key] = Validator(schema, key)
    if len(_BY_ID) < 10_000:  # the schemas of installed tools; bounded all the same
        _BY_ID[id(schema)] = (schema, v)  # holding the schema keeps its id unique
    return v


def check_value(
    schema: dict[str, Any] | bool, value: Any, pool: ValidatorPool, scope: str = ""
) -> Checked:
    """Validate `value`: a plain schema on this thread, any other in `pool` in the turn of
    the app `scope`, waiting for it here. Never call it on an event loop with a schema that
    is not plain."""
    v = validator_for(schema)
    if v.plain:
        return v.problems(value)
    try:
        return pool.problems(v.key, v.schema, value, scope)
    except OverBudget as exc:
        return Unchecked(exc.budget_s or pool.budget_s)


async def acheck_value(
    schema: dict[str, Any] | bool, value: Any, pool: ValidatorPool, scope: str = ""
) -> Checked:
    """`check_value` on an event loop: a plain schema right here, as before; any other is
    awaited from `pool` (in the turn of the app `scope`) without blocking the loop."""
    v = validator_for(schema)
    if v.plain:
        return v.problems(value)
    try:
        return await pool.aproblems(v.key, v.schema, value, scope)
    except OverBudget as exc:
        return Unchecked(exc.budget_s or pool.budget_s)
