"""Import a MiniApp's entry module and dump its registry as data (run by `lineup build`).

Started by the sandbox launcher (`lineup_sdk.sandbox.launch ... lineup_sdk._extract
RESULT_FD STAGING_DIR ENTRY`) with `LINEUP_SDK_COLLECT=1`, so declaration mistakes are
recorded instead of raised. The result goes to the RESULT_FD pipe, never stdout, so an
author's `print()` cannot corrupt it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from lineup_sdk._registry import (
    ActionRegistry,
    Declaration,
    Location,
    Problem,
    ToolRegistry,
    collected,
    collected_actions,
)
from lineup_sdk._schema import (
    HandlerShape,
    HandlerShapeError,
    analyze_handler,
    closed_model_schema,
    describe,
    doc_summary,
    result_schema_of,
)
from lineup_sdk.catalog import CATALOG

# Keywords whose value maps names (of properties, definitions) to subschemas: their keys
# are names, never annotations, so a property called `title` is kept.
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _strip_titles(schema: Any) -> Any:
    """The schema without `title`/`description` annotations (for comparing shapes)."""
    if isinstance(schema, dict):
        return {
            k: (
                {name: _strip_titles(sub) for name, sub in v.items()}
                if k in _NAME_MAPS and isinstance(v, dict)
                else _strip_titles(v)
            )
            for k, v in schema.items()
            if k not in ("title", "description")
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _prop_shape(schema: Any) -> tuple[set[str], set[str]]:
    if not isinstance(schema, dict):
        return set(), set()
    props = schema.get("properties")
    names = set(props) if isinstance(props, dict) else set()
    req = schema.get("required")
    return names, set(req) if isinstance(req, list) else set()


class _Extractor:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[dict[str, Any]] = []

    def loc(self, location: Location | None) -> dict[str, Any] | None:
        if location is None:
            return None
        path = Path(location.file)
        try:
            rel = path.resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            rel = location.file
        return {"file": rel, "line": location.line}

    def problem(self, p: Problem) -> None:
        self.problems.append(
            {
                "code": p.code,
                "message": p.message,
                "hint": p.hint,
                "location": self.loc(p.location),
                "related": [self.loc(r) for r in p.related],
            }
        )

    def add(
        self, code: str, message: str, where: Location | None, related: list[Location] | None = None
    ) -> None:
        self.problem(Problem(code, message, where, related or []))

    def tool(self, registry: ToolRegistry, decl: Declaration) -> dict[str, Any] | None:
        out: dict[str, Any] = {
            "method": decl.method,
            "delivery": decl.delivery,
            "activation": decl.activation,
            "location": self.loc(decl.location),
        }
        if decl.hints:
            out["hints"] = dict(sorted(decl.hints.items()))
        if decl.delivery == "runtime":
            assert decl.handler_key is not None
            entry = CATALOG[decl.handler_key]
            out.update(
                description=decl.description or "",
                long_running=entry.long_running,
                handler_key=decl.handler_key,
                declared_input_schema=decl.input_schema,
                declared_result_schema=decl.result_schema,
                input_schema=entry.input_schema,
                result_schema=entry.result_schema,
            )
            return out
        out["long_running"] = False
        out["timeout_s"] = decl.timeout_s
        fn = decl.handler
        schema_first = decl.origin != "tool"
        if schema_first:
            # The declared schemas are checked whatever is wrong with the handler, so one
            # run reports every problem.
            out["description"] = decl.description or ""
            out["input_schema"] = decl.input_schema if decl.input_schema is not None else {}
            out["result_schema"] = decl.result_schema if decl.result_schema is not None else {}
        if fn is None:
            self.add(
                "missing_handler",
                f"tool {decl.method!r} is declared but has no handler",
                decl.location,
            )
            return out if schema_first else None
        hloc = decl.handler_location or decl.location
        name = "".join(p.title() for p in decl.method.replace(".", "_").split("_")) + "Params"
        try:
            shape = analyze_handler(fn, model_name=name)
        except HandlerShapeError as exc:
            related = [decl.location] if schema_first and hloc != decl.location else []
            self.add("handler_signature_mismatch", str(exc), hloc, related)
            return out if schema_first else None
        out["description"] = decl.description or doc_summary(fn) or ""
        if not schema_first:
            return self._typed(decl, fn, shape, hloc, out)
        # schema-first: compare the handler with what was declared (input and result
        # independently, so both mismatches are reported)
        related = [decl.location]
        self._compare_input(decl, shape, out["input_schema"], hloc, related)
        self._compare_result(decl, shape, out["result_schema"], hloc, related)
        return out

    def _typed(
        self,
        decl: Declaration,
        fn: Any,
        shape: HandlerShape,
        hloc: Location,
        out: dict[str, Any],
    ) -> dict[str, Any] | None:
        """`out` with the schemas of a decorated handler's typed parameters and return."""
        what = "a UI Action" if decl.origin == "action" else "a decorated tool"
        if shape.form == "dict" or shape.model is None:
            hint = (
                ""
                if decl.origin == "action"
                else " (use tools.declare(...) for schema-first tools)"
            )
            self.add(
                "handler_signature_mismatch",
                f"{decl.method!r}: {what} needs typed parameters or a model, not a "
                f"plain dict{hint}",
                hloc,
            )
            return None
        if not shape.has_return:
            self.add(
                "handler_signature_mismatch",
                f"{decl.method!r}: the handler has no return annotation, so the result "
                "schema is unknown (annotate it; use `-> None` for no result)",
                hloc,
            )
            return None
        try:
            input_schema = closed_model_schema(shape.model)
            describe(input_schema, fn)
            result_schema = result_schema_of(shape.returns)
        except Exception as exc:
            self.add(
                "handler_signature_mismatch",
                f"{decl.method!r}: cannot derive a JSON Schema: {type(exc).__name__}: {exc}",
                hloc,
            )
            return None
        out["input_schema"] = input_schema
        out["result_schema"] = result_schema
        return out

    def action(self, decl: Declaration) -> dict[str, Any] | None:
        """A UI Action as data (`name`, description, timeout and schemas), or None when
        its schemas cannot be derived (the problem is recorded)."""
        fn = decl.handler
        assert fn is not None  # `@actions.action` always attaches one
        out: dict[str, Any] = {
            "method": decl.method,
            "kind": "action",
            "timeout_s": decl.timeout_s,
            "location": self.loc(decl.location),
        }
        name = "".join(p.title() for p in decl.method.replace(".", "_").split("_")) + "Params"
        try:
            shape = analyze_handler(fn, model_name=name)
        except HandlerShapeError as exc:
            self.add("handler_signature_mismatch", str(exc), decl.location)
            return None
        out["description"] = decl.description or doc_summary(fn) or ""
        return self._typed(decl, fn, shape, decl.location, out)

    def _compare_input(
        self,
        decl: Declaration,
        shape: HandlerShape,
        declared: Any,
        hloc: Location,
        related: list[Location],
    ) -> None:
        if shape.model is None:  # `(ctx, params: dict)` takes whatever was declared
            return
        try:
            theirs = closed_model_schema(shape.model)
        except Exception as exc:
            self.add("handler_signature_mismatch", f"{decl.method!r}: {exc}", hloc, related)
            return
        if shape.form == "model":
            if _strip_titles(theirs) != _strip_titles(declared):
                self.add(
                    "handler_signature_mismatch",
                    f"{decl.method!r}: the handler's model {shape.model.__name__} does not "
                    "produce the declared input schema",
                    hloc,
                    related,
                )
        elif _prop_shape(theirs) != _prop_shape(declared):
            names, req = _prop_shape(declared)
            got_names, got_req = _prop_shape(theirs)
            self.add(
                "handler_signature_mismatch",
                f"{decl.method!r}: handler parameters {sorted(got_names)} (required "
                f"{sorted(got_req)}) disagree with the declared properties {sorted(names)} "
                f"(required {sorted(req)})",
                hloc,
                related,
            )

    def _compare_result(
        self,
        decl: Declaration,
        shape: HandlerShape,
        declared: Any,
        hloc: Location,
        related: list[Location],
    ) -> None:
        ret = shape.returns
        if not (shape.has_return and isinstance(ret, type) and issubclass(ret, BaseModel)):
            return
        try:
            theirs = _strip_titles(result_schema_of(ret))
        except Exception as exc:
            self.add("handler_signature_mismatch", f"{decl.method!r}: {exc}", hloc, related)
            return
        if theirs != _strip_titles(declared):
            self.add(
                "handler_signature_mismatch",
                f"{decl.method!r}: the return annotation {ret.__name__} does not "
                "produce the declared result schema",
                hloc,
                related,
            )


def _json_problems(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A problem per schema of `spec` that is not JSON (NaN, a set, an object, ...)."""
    out: list[dict[str, Any]] = []
    for field, code in (
        ("input_schema", "invalid_input_schema"),
        ("result_schema", "invalid_result_schema"),
        ("declared_input_schema", "invalid_input_schema"),
        ("declared_result_schema", "invalid_result_schema"),
    ):
        try:
            json.dumps(spec.get(field), allow_nan=False)
        except (TypeError, ValueError) as exc:
            out.append(
                {
                    "code": code,
                    "message": f"{spec['method']}: {field} is not JSON-serializable: {exc}",
                    "hint": "defaults and examples must be JSON values (no NaN)",
                    "location": spec.get("location"),
                    "related": [],
                }
            )
    return out


def _rel(root: Path, filename: str | None) -> str | None:
    """`filename` relative to the staging root, or None for files outside it.

    Pseudo-files such as `<frozen importlib._bootstrap>` are never inside it (resolving
    them would wrongly land under the working directory, which is the root).
    """
    if not filename or not os.path.isabs(filename):
        return None
    try:
        return Path(filename).resolve().relative_to(root).as_posix()
    except (ValueError, OSError):
        return None


def _import_failure(root: Path, exc: BaseException) -> dict[str, Any]:
    where = None
    if isinstance(exc, SyntaxError) and (rel := _rel(root, exc.filename)):
        where = {"file": rel, "line": exc.lineno or 1}  # the broken line itself
    else:
        for fr in reversed(traceback.extract_tb(exc.__traceback__)):
            if rel := _rel(root, fr.filename):
                where = {"file": rel, "line": fr.lineno}
                break
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    text = text.replace(f"{root}{os.sep}", "")  # staging paths mean nothing to the author
    return {
        "code": "entry_import_failed",
        "message": f"importing the entry failed: {text}",
        "hint": "the bundle holds only the `include`d files; check the import and the globs",
        "location": where,
        "related": [],
    }


def extract(root: Path, entry: str) -> dict[str, Any]:
    """Import `entry` from `root` and return the registry as data plus problems."""
    root = root.resolve()
    if str(root) not in sys.path:  # after the standard library: a bundle shadows nothing
        sys.path.append(str(root))
    ex = _Extractor(root)
    try:
        module = importlib.import_module(entry)
    except BaseException as exc:  # the author's import may raise anything, SystemExit too
        return {"registry": None, "tools": [], "problems": [_import_failure(root, exc)]}
    registries, stray = collected()
    for p in stray:
        ex.problem(p)
    if not registries:
        module_file = getattr(module, "__file__", None)
        ex.problems.append(
            {
                "code": "registry_missing",
                "message": f"entry {entry!r} defines no registry",
                "hint": "call `tools = define_agent_tools(app_scope=...)` in the entry module",
                "location": ex.loc(Location(module_file, 1)) if module_file else None,
                "related": [],
            }
        )
        return {"registry": None, "tools": [], "problems": ex.problems}
    registry = registries[0]
    tools: list[dict[str, Any]] = []
    action_registries: list[ActionRegistry] = collected_actions()
    for problems in [r.problems for r in registries] + [r.problems for r in action_registries]:
        for p in problems:
            ex.problem(p)
    for decl in registry.declarations():
        spec = ex.tool(registry, decl)
        if spec is not None:
            tools.append(spec)
    out: dict[str, Any] = {
        "registry": {"app_scope": registry.app_scope, "location": ex.loc(registry.location)},
        "tools": tools,
        "actions": [],
        "problems": ex.problems,
    }
    if action_registries:
        actions = action_registries[0]
        out["action_registry"] = {
            "app_scope": actions.app_scope,
            "location": ex.loc(actions.location),
        }
        for decl in actions.declarations():
            spec = ex.action(decl)
            if spec is not None:
                out["actions"].append(spec)
    return out


def _serialize(result: dict[str, Any]) -> str:
    try:
        return json.dumps(result, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        # Drop only the tools and actions whose schemas are not JSON, each reported at its
        # declaration.
        problems = list(result["problems"])
        kept: dict[str, list[dict[str, Any]]] = {"tools": [], "actions": []}
        for key, specs in kept.items():
            for spec in result.get(key, []):
                bad = _json_problems(spec)
                problems.extend(bad)
                if not bad:
                    specs.append(spec)
        result = {**result, **kept, "problems": problems}
        # Anything else that is not JSON (say, a description object) becomes its str().
        return json.dumps(result, allow_nan=False, sort_keys=True, default=str)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main(argv: list[str], sandbox: dict[str, Any]) -> None:
    """Entry point of the build's import subprocess, called by the sandbox launcher."""
    out_fd, root, entry = int(argv[0]), Path(argv[1]), argv[2]
    # first line: what is enforced, written before any author code runs
    _write_all(out_fd, json.dumps(sandbox, sort_keys=True).encode("utf-8") + b"\n")
    if sandbox.get("refused"):
        problem: dict[str, Any] = {
            "code": "sandbox_unavailable",
            "message": str(sandbox["refused"]),
            "location": None,
            "related": [],
        }
        result: dict[str, Any] = {"registry": None, "tools": [], "problems": [problem]}
    else:
        result = extract(root, entry)
    sys.stdout.flush()
    _write_all(out_fd, _serialize(result).encode("utf-8"))
    os.close(out_fd)
    sys.stdout.flush()
    os._exit(0)  # skip an author's atexit hooks and non-daemon threads
