"""`lineup build`'s checks over the extracted registry data: the tool rules of `tool_rules`
worded as diagnostics with locations, plus the build-only warnings and field bounds."""

from __future__ import annotations

from typing import Any

from lineup_build.diagnostics import Diagnostic, Where
from lineup_build.schema_cost import EXPENSIVE_EXPANSION, EXPENSIVE_NESTING, schema_cost
from lineup_build.schemas import canonical_json
from lineup_build.tool_rules import (
    MAX_DESCRIPTION,
    MAX_TIMEOUT_S,
    SCHEMA_FIELDS,
    ContractFinding,
    contract_findings,
    description_ok,
    method_problem,
    schema_findings,
    timeout_ok,
)

__all__ = ["LARGE_SCHEMA_BYTES", "check_actions", "check_tools", "diagnostics_from_problems"]

LARGE_SCHEMA_BYTES = 64 * 1024


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
    method = tool["method"]
    findings = schema_findings(method, tool)
    out = [Diagnostic(f.code, f.message, where=where, hint=f.hint) for f in findings]
    for field, _, _ in SCHEMA_FIELDS:
        cost = schema_cost(tool[field])
        if cost.expensive and not cost.too_complex:
            out.append(
                Diagnostic(
                    "schema_expensive",
                    f"{method}: {field} may apply {cost.expansion} subschemas to one value "
                    f"and nests {cost.nesting} levels (warned past {EXPENSIVE_EXPANSION} and "
                    f"{EXPENSIVE_NESTING}); each value is validated in a validator process "
                    "under the runtime's validation budget",
                    severity="warning",
                    where=where,
                    hint="flatten nested anyOf/oneOf/allOf of shared $refs",
                )
            )
        try:
            size = len(canonical_json(tool[field]))
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


def _contract_message(method: str, f: ContractFinding) -> tuple[str, str | None]:
    """How the build words a catalog finding: `(message, hint)`."""
    if f.kind == "unknown_key":
        return f"{method}: handler key {f.key!r} is not in the runtime handler catalog", None
    if f.kind == "scope":
        return (
            f"{method}: handler key {f.key!r} belongs to scope {f.expected!r}, not {f.actual!r}",
            None,
        )
    if f.kind in ("activation", "long_running"):
        return (
            f"{method}: {f.kind} {f.actual!r} differs from the catalog's {f.expected!r} "
            f"for {f.key!r}",
            f"declare it with {f.kind}={f.expected!r}" if f.kind == "activation" else None,
        )
    return (
        f"{method}: its {f.kind} differs from the frozen catalog schema of {f.key!r}",
        "omit the schema; runtime tools take theirs from the catalog",
    )


def _runtime_diags(tool: dict[str, Any], scope: str, where: Where | None) -> list[Diagnostic]:
    # the build takes a runtime tool's schemas from the catalog; what the author declared
    # (if anything) is what must agree with it
    findings = contract_findings(
        tool["handler_key"],
        scope,
        activation=tool["activation"],
        long_running=tool["long_running"],
        input_schema=tool.get("declared_input_schema"),
        result_schema=tool.get("declared_result_schema"),
    )
    out = []
    for f in findings:
        message, hint = _contract_message(tool["method"], f)
        out.append(Diagnostic(f.code, message, where=where, hint=hint))
    return out


def _field_diags(tool: dict[str, Any], where: Where | None) -> list[Diagnostic]:
    """`description` and `timeout_s` within the manifest schema's bounds."""
    out = []
    method, description = tool["method"], tool.get("description")
    if not description_ok(description):
        out.append(
            Diagnostic(
                "config_invalid",
                f"{method}: the description must be text of at most {MAX_DESCRIPTION} characters",
                where=where,
                hint="shorten the docstring's first paragraph or description=...",
            )
        )
    timeout = tool.get("timeout_s", 1)
    if not timeout_ok(timeout):
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
        bad = method_problem(method, scope)
        if bad:
            out.append(Diagnostic(bad[0], bad[1], where=where))
        if tool["delivery"] == "runtime":
            out.extend(_runtime_diags(tool, scope, where))
        out.extend(_schema_diags(tool, where))
        out.extend(_field_diags(tool, where))
        out.extend(_description_diags(tool, where, "tool"))
    return out


def _description_diags(spec: dict[str, Any], where: Where | None, what: str) -> list[Diagnostic]:
    """`missing_description` warnings for the tool or action and its parameters."""
    out = []
    method = spec["method"]
    if not spec.get("description"):
        out.append(
            Diagnostic(
                "missing_description",
                f"{method}: the {what} has no description",
                severity="warning",
                where=where,
                hint="add a docstring or description=...",
            )
        )
    schema = spec["input_schema"]
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


def check_actions(actions: list[dict[str, Any]], scope: str) -> list[Diagnostic]:
    """Every problem in the extracted UI Actions (SPEC 17), by the tools' rules: the name,
    both schemas, description and timeout bounds, and the description warnings. A name
    shared with a tool was already reported at declaration (`duplicate_method`)."""
    out: list[Diagnostic] = []
    for action in actions:
        where = _where(action.get("location"))
        bad = method_problem(action["method"], scope)
        if bad:
            out.append(Diagnostic(bad[0], bad[1], where=where))
        out.extend(_schema_diags(action, where))
        out.extend(_field_diags(action, where))
        out.extend(_description_diags(action, where, "action"))
    return out
