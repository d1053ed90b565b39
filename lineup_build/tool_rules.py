"""The tool rules, once: method names, tool schemas, runtime tools against the catalog.

`lineup build` (`checks`, over the extracted declarations) and `lineup verify`
(`manifest_checks`, over a manifest) ask the same functions here. Each rule returns facts
(a code and what differs); each path words them as it always has, so the rule cannot
drift between the two while their reports stay what users know. Pure: no IO, no imports
of bundle code; cheap to import (the verify path loads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineup_build.schema_cost import MAX_EXPANSION, MAX_NESTING, schema_cost
from lineup_build.schemas import check_schema
from lineup_sdk.catalog import CATALOG, key_allowed_for_scope
from lineup_sdk.names import method_name_problem

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_TIMEOUT_S",
    "SCHEMA_FIELDS",
    "ContractFinding",
    "SchemaFinding",
    "contract_findings",
    "description_ok",
    "method_problem",
    "schema_findings",
    "timeout_ok",
    "too_complex",
]

#: Characters a tool description may hold (the manifest schema's `maxLength`).
MAX_DESCRIPTION = 4096
#: The largest `timeout_s` (the manifest schema's `maximum`; the minimum is exclusive 0).
MAX_TIMEOUT_S = 3600

#: `(field, code, must be an object)` for the two schemas of a tool.
SCHEMA_FIELDS = (
    ("input_schema", "invalid_input_schema", True),
    ("result_schema", "invalid_result_schema", False),
)


def method_problem(method: str, scope: str) -> tuple[str, str] | None:
    """`(code, message)` when `method` breaks the naming rule or leaves `scope`."""
    return method_name_problem(method, scope)


@dataclass(frozen=True, slots=True)
class SchemaFinding:
    """One problem with one of a tool's schemas.

    Attributes:
        field: `input_schema` or `result_schema`.
        code: `invalid_input_schema`, `invalid_result_schema`, `remote_ref` or
            `schema_too_complex`.
        pointer: Where in the schema (a JSON pointer).
        message: `<method>: <field> at <pointer>: <what is wrong>`.
        hint: How to fix it, where the code's general fix is not enough.
    """

    field: str
    code: str
    pointer: str
    message: str
    hint: str | None = None


def schema_findings(method: str, schemas: dict[str, Any]) -> list[SchemaFinding]:
    """Every problem with the tool's `input_schema` and `result_schema` (keys of
    `schemas`): valid 2020-12, input an object, local refs only, no forbidden keyword,
    linear-time patterns, and within the static validation bound (`schema_too_complex`)."""
    out = []
    for field, code, require_object in SCHEMA_FIELDS:
        found = check_schema(schemas[field], require_object=require_object)
        for p in found:
            out.append(
                SchemaFinding(
                    field,
                    "remote_ref" if p.kind == "remote_ref" else code,
                    p.pointer,
                    f"{method}: {field} at {p.pointer}: {p.message}",
                )
            )
        if not found:
            complex_ = too_complex(method, field, schemas[field])
            if complex_ is not None:
                out.append(complex_)
    return out


def too_complex(method: str, field: str, schema: Any) -> SchemaFinding | None:
    """`schema_too_complex` when validating one value may apply more than `MAX_EXPANSION`
    subschemas or the schema nests deeper than `MAX_NESTING` (`$ref`s followed)."""
    cost = schema_cost(schema)
    if not cost.too_complex:
        return None
    return SchemaFinding(
        field,
        "schema_too_complex",
        "",
        f"{method}: {field} may apply {cost.expansion} subschemas to one value and nests "
        f"{cost.nesting} levels (the bounds are {MAX_EXPANSION} and {MAX_NESTING})",
        "do not nest anyOf/oneOf/allOf of the same $ref inside each other; share one "
        "definition per level, or move the alternatives into one enum or a discriminated union",
    )


@dataclass(frozen=True, slots=True)
class ContractFinding:
    """One way a runtime tool differs from the runtime handler catalog.

    Attributes:
        kind: `unknown_key` (not in the catalog), `scope` (the key belongs to another
            app scope), `activation`, `long_running`, `input_schema` or `result_schema`.
        key: The handler key.
        expected: The catalog's value (the key's own scope for `scope`).
        actual: The tool's value (the app scope for `scope`).
    """

    kind: str
    key: str
    expected: Any = None
    actual: Any = None

    @property
    def code(self) -> str:
        """`unknown_runtime_handler` or `runtime_contract_mismatch`."""
        return (
            "unknown_runtime_handler"
            if self.kind == "unknown_key"
            else ("runtime_contract_mismatch")
        )


_UNCHECKED: Any = object()


def contract_findings(
    key: str,
    scope: str,
    *,
    activation: str,
    long_running: bool,
    input_schema: Any = _UNCHECKED,
    result_schema: Any = _UNCHECKED,
) -> list[ContractFinding]:
    """A runtime tool against the catalog entry of `key`, in a fixed order: the key, its
    scope, activation, long-running, then each schema given (a schema left out, or
    `None` from a declaration that named none, is not compared)."""
    entry = CATALOG.get(key)
    if entry is None:
        return [ContractFinding("unknown_key", key)]
    out = []
    if not key_allowed_for_scope(key, scope):
        out.append(ContractFinding("scope", key, key.split(".")[0], scope))
    if activation != entry.activation:
        out.append(ContractFinding("activation", key, entry.activation, activation))
    if long_running != entry.long_running:
        out.append(ContractFinding("long_running", key, entry.long_running, long_running))
    for kind, given, frozen in (
        ("input_schema", input_schema, entry.input_schema),
        ("result_schema", result_schema, entry.result_schema),
    ):
        if given is not _UNCHECKED and given is not None and given != frozen:
            out.append(ContractFinding(kind, key, frozen, given))
    return out


def description_ok(description: Any) -> bool:
    """Text of at most `MAX_DESCRIPTION` characters."""
    return isinstance(description, str) and len(description) <= MAX_DESCRIPTION


def timeout_ok(timeout: Any) -> bool:
    """A number of seconds in (0, `MAX_TIMEOUT_S`], not a bool."""
    return (
        not isinstance(timeout, bool)
        and isinstance(timeout, int | float)
        and 0 < timeout <= MAX_TIMEOUT_S
    )
