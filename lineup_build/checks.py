"""Checks over the extracted registry data: names, schemas, catalog contract, warnings."""

from __future__ import annotations

from typing import Any

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.schemas import canonical_json, check_schema
from lineup_sdk._registry import method_name_problem
from lineup_sdk.catalog import CATALOG, key_allowed_for_scope

__all__ = ["LARGE_SCHEMA_BYTES", "check_tools", "diagnostics_from_problems"]

LARGE_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION = 4096  # characters, as in the manifest schema
MAX_TIMEOUT_S = 3600


def _where(loc: dict[str, Any] | None) -> Where | None:
    return Where(loc["file"], loc.get("line")) if loc else None


def diagnostics_from_problems(problems: list[dict[str, Any]]) -> list[Diagnostic]:
    """Turn the import subprocess's recorded problems into diagnostics."""
    out = []
    for p in problems:
        related = tuple(w for w in (_where(r) for r in p.get("related") or []) if w)
        out.append(
            Diagnostic(
                p["code"],
                p["message"],
                where=_where(p.get("location")),
                related=related,
                hint=p.get("hint"),
            )
        )
    return out


def _has_description(prop: Any, root: dict[str, Any]) -> bool:
    if not isinstance(prop, dict):
        return True
    if prop.get("description"):
        return True
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        return isinstance(node, dict) and bool(node.get("description"))
    return False


def _schema_diags(tool: dict[str, Any], where: Where | None) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    method = tool["method"]
    for field, code, require_object in (
        ("input_schema", "invalid_input_schema", True),
        ("result_schema", "invalid_result_schema", False),
    ):
        schema = tool[field]
        for p in check_schema(schema, require_object=require_object):
            the_code = "remote_ref" if p.kind == "remote_ref" else code
            out.append(
                Diagnostic(the_code, f"{method}: {field} at {p.pointer}: {p.message}", where=where)
            )
        try:
            size = len(canonical_json(schema))
        except (TypeError, ValueError):
            continue
        if size > LARGE_SCHEMA_BYTES:
            out.append(
                Diagnostic(
                    "large_schema",
                    f"{method}: {field} is {size} bytes of canonical JSON (over 64 KiB)",
                    severity="warning",
                    where=where,
                )
            )
    return out


def _runtime_diags(tool: dict[str, Any], scope: str, where: Where | None) -> list[Diagnostic]:
    method, key = tool["method"], tool["handler_key"]
    entry = CATALOG[key]
    out = []
    if not key_allowed_for_scope(key, scope):
        out.append(
            Diagnostic(
                "runtime_contract_mismatch",
                f"{method}: handler key {key!r} belongs to scope {key.split('.')[0]!r}, "
                f"not {scope!r}",
                where=where,
            )
        )
    if tool["activation"] != entry.activation:
        out.append(
            Diagnostic(
                "runtime_contract_mismatch",
                f"{method}: activation {tool['activation']!r} differs from the catalog's "
                f"{entry.activation!r} for {key!r}",
                where=where,
                hint=f"declare it with activation={entry.activation!r}",
            )
        )
    for field, frozen in (
        ("declared_input_schema", entry.input_schema),
        ("declared_result_schema", entry.result_schema),
    ):
        declared = tool.get(field)
        if declared is not None and declared != frozen:
            out.append(
                Diagnostic(
                    "runtime_contract_mismatch",
                    f"{method}: its {field.removeprefix('declared_')} differs from the frozen "
                    f"catalog schema of {key!r}",
                    where=where,
                    hint="omit the schema; runtime tools take theirs from the catalog",
                )
            )
    return out


def _field_diags(tool: dict[str, Any], where: Where | None) -> list[Diagnostic]:
    """`description` and `timeout_s` within the manifest schema's bounds."""
    out = []
    method, description = tool["method"], tool.get("description")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        out.append(
            Diagnostic(
                "config_invalid",
                f"{method}: the description must be text of at most {MAX_DESCRIPTION} characters",
                where=where,
                hint="shorten the docstring's first paragraph or description=...",
            )
        )
    timeout = tool.get("timeout_s", 1)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        out.append(
            Diagnostic(
                "config_invalid",
                f"{method}: timeout_s={timeout!r} must be a number of seconds in (0, {MAX_TIMEOUT_S}]",
                where=where,
                hint="pass timeout_s= a positive number of seconds, at most one hour",
            )
        )
    return out


def check_tools(tools: list[dict[str, Any]], scope: str) -> list[Diagnostic]:
    """Every problem in the extracted tools, in one pass."""
    out: list[Diagnostic] = []
    for tool in tools:
        where = _where(tool.get("location"))
        method = tool["method"]
        bad = method_name_problem(method, scope)
        if bad:
            out.append(Diagnostic(bad[0], bad[1], where=where))
        if tool["delivery"] == "runtime":
            out.extend(_runtime_diags(tool, scope, where))
        out.extend(_schema_diags(tool, where))
        out.extend(_field_diags(tool, where))
        if not tool.get("description"):
            out.append(
                Diagnostic(
                    "missing_description",
                    f"{method}: the tool has no description",
                    severity="warning",
                    where=where,
                    hint="add a docstring or description=...",
                )
            )
        schema = tool["input_schema"]
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(props, dict):
            for name, prop in props.items():
                if not _has_description(prop, schema):
                    out.append(
                        Diagnostic(
                            "missing_description",
                            f"{method}: parameter {name!r} has no description",
                            severity="warning",
                            where=where,
                            hint="use Field(description=...) or document it in the docstring (Google `Args:`, "
                            "NumPy `Parameters` or reST `:param name:`)",
                        )
                    )
    return out
