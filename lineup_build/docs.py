"""`lineup docs`: a Markdown reference of a MiniApp's tools, generated from its manifest.

For a person deciding whether to use the MiniApp: per tool its description, activation in
plain words, long-running behaviour, hints, a parameter table (name, type, required,
constraints, default, description) and the result's shape. Deterministic: tools sorted
by method, fields required-first then by name (bundle manifests store keys sorted, so
the source order is not available everywhere), no dates. Manifest text is escaped so it
cannot break the tables or inject HTML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineup_build.schema_diff import resolve_schema
from lineup_sdk.errors import LineupError

__all__ = ["docs_markdown", "write_docs"]

_MAX_DEPTH = 4
_DASH = "—"

_ACTIVATION = {
    "app_ready": (
        "needs the app running, not on screen. If the MiniApp is not running in this "
        "conversation, the call starts it in the background and waits until it is ready; "
        "if it cannot start, the call ends with `activation_failed` and nothing runs."
    ),
    "foreground_required": (
        "needs the app on the user's screen. The call starts the MiniApp if needed and "
        "waits until the Host confirms the user sees it; if that does not happen (the "
        "Host fails, the user leaves, or it times out), the call ends without running."
    ),
    "activation_not_required": (
        "never starts or opens the app. The call acts only on what already exists in this "
        "conversation."
    ),
}
_NOT_REQUIRED_SDK = (
    " If the MiniApp is not already running here, the call fails with `app_not_running`."
)
_HINTS = {
    "read_only": ("read-only", "changes nothing", "may change data"),
    "destructive": ("destructive", "may delete or overwrite data", "only adds or updates"),
    "idempotent": (
        "idempotent",
        "repeating a call with the same arguments has no further effect",
        "repeating a call can have a further effect",
    ),
    "open_world": (
        "open world",
        "reaches outside the app (for example the network)",
        "stays within the app's own data",
    ),
}
_PERMISSIONS = {"network": "its workers may use the network"}


def _inert(text: Any) -> str:
    return "".join(
        ch if ch.isprintable() or ch in " \n" else ch.encode("unicode_escape").decode("ascii")
        for ch in str(text)
    )


def _html(text: Any) -> str:
    return _inert(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: Any) -> str:
    """Text for one table cell: one line, pipes escaped."""
    out = " ".join(_html(text).split())
    return out.replace("|", "\\|") or _DASH


def _code(text: str) -> str:
    text = " ".join(_inert(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _paragraph(text: Any) -> str:
    lines = [line.rstrip() for line in _html(text).strip().splitlines()]
    return "\n".join(lines)


class _Schema:
    """Read one tool schema for people: types, constraints and nested fields."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, node: Any) -> tuple[Any, str | None]:
        node, ref = resolve_schema(node, self.root)
        if node is True or not isinstance(node, dict | bool):
            return {}, ref
        return node, ref

    def branches(self, node: Any, depth: int = 0) -> list[tuple[Any, str | None]]:
        node, ref = self.resolve(node)
        if node is False:
            return []
        for key in ("anyOf", "oneOf"):
            items = node.get(key)
            if isinstance(items, list) and items and depth < 8:
                return [b for sub in items for b in self.branches(sub, depth + 1)]
        return [(node, ref)]

    def type_text(self, node: Any, seen: frozenset[str] = frozenset()) -> str:
        parts: list[str] = []
        for branch, ref in self.branches(node):
            parts.append(self._one_type(branch, ref, seen))
        if not parts:
            return "nothing (no value is valid)"
        parts = list(dict.fromkeys(parts))
        parts.sort(key=lambda p: p == "null")
        return " or ".join(parts)

    def _one_type(self, node: Any, ref: str | None, seen: frozenset[str]) -> str:
        name = ref.rsplit("/", 1)[-1] if ref else None
        types = node.get("type")
        if isinstance(types, list) and types:
            return " or ".join(dict.fromkeys(str(t) for t in types))
        if "const" in node:
            return f"{_json(node['const'])} (constant)"
        if types == "array" or (types is None and "items" in node):
            items = node.get("items")
            if isinstance(items, dict | bool) and items is not True and items != {}:
                _, item_ref = self.resolve(items)
                if item_ref is not None and item_ref in seen:
                    return f"array of {item_ref.rsplit('/', 1)[-1]}"
                return f"array of {self.type_text(items, seen)}"
            return "array"
        if types == "object" or (types is None and "properties" in node):
            return f"object ({name})" if name else "object"
        if isinstance(types, str):
            return types
        if isinstance(node.get("enum"), list) and node["enum"]:
            kinds = dict.fromkeys(_json_kind(v) for v in node["enum"])
            return " or ".join(kinds)
        return "any JSON value"

    def constraints(self, node: Any) -> str:
        phrases: list[str] = []
        for branch, _ in self.branches(node):
            for p in _constraints(branch):
                if p not in phrases:
                    phrases.append(p)
        return "; ".join(phrases)

    def rows(
        self,
        node: Any,
        prefix: str = "",
        seen: frozenset[str] = frozenset(),
        depth: int = 0,
    ) -> list[dict[str, str]]:
        """One row per field of the object `node` (nested objects as `a.b`, arrays `a[]`)."""
        objects = [
            (b, r) for b, r in self.branches(node) if b.get("type") == "object" or "properties" in b
        ]
        if len(objects) != 1:
            return []
        obj, ref = objects[0]
        if ref is not None:
            seen = seen | {ref}
        props = obj.get("properties") if isinstance(obj.get("properties"), dict) else {}
        required = obj.get("required") if isinstance(obj.get("required"), list) else []
        names = sorted(props, key=lambda n: (n not in required, n))
        out: list[dict[str, str]] = []
        for name in names:
            schema = props[name]
            resolved, sub_ref = self.resolve(schema)
            description = self.description(resolved)
            full = f"{prefix}{name}"
            items = self.array_items(schema)
            item_ref = self.resolve(items)[1] if items is not None else None
            recursive = sub_ref in seen or item_ref in seen
            type_text = self.type_text(schema, seen)
            if recursive:
                type_text += " (recursive, see above)"
            out.append(
                {
                    "name": full,
                    "type": type_text,
                    "required": "yes" if name in required else "no",
                    "constraints": self.constraints(schema),
                    "default": _default(resolved),
                    "description": str(description),
                }
            )
            if recursive or depth >= _MAX_DEPTH:
                continue
            out.extend(self.rows(schema, f"{full}.", seen, depth + 1))
            if items is not None:
                out.extend(self.rows(items, f"{full}[].", seen, depth + 1))
        return out

    def description(self, node: Any) -> str:
        """A field's own description, else that of the one model an `X | None` names."""
        if not isinstance(node, dict):
            return ""
        if isinstance(node.get("description"), str):
            return str(node["description"])
        values = [b for b, _ in self.branches(node) if b.get("type") != "null"]
        if len(values) == 1 and values[0] is not node:
            text = values[0].get("description")
            return text if isinstance(text, str) else ""
        return ""

    def array_items(self, node: Any) -> Any:
        arrays = [b for b, _ in self.branches(node) if b.get("type") == "array"]
        if len(arrays) == 1 and isinstance(arrays[0].get("items"), dict):
            return arrays[0]["items"]
        return None

    def closed(self, node: Any) -> bool:
        resolved, _ = self.resolve(node)
        return isinstance(resolved, dict) and resolved.get("additionalProperties") is False


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _range(low: Any, high: Any, unit: str) -> str | None:
    def units(n: Any) -> str:
        return f"{unit}" if n == 1 else f"{unit}s"

    if low is not None and high is not None:
        return f"{low}–{high} {units(high)}"
    if low is not None:
        return f"at least {low} {units(low)}"
    if high is not None:
        return f"at most {high} {units(high)}"
    return None


def _constraints(node: dict[str, Any]) -> list[str]:
    out: list[str] = []
    text = _range(node.get("minLength"), node.get("maxLength"), "character")
    if text:
        out.append(text)
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        out.append(f"{low}–{high}")
    else:
        if low is not None:
            out.append(f"≥ {low}")
        if high is not None:
            out.append(f"≤ {high}")
    if node.get("exclusiveMinimum") is not None:
        out.append(f"> {node['exclusiveMinimum']}")
    if node.get("exclusiveMaximum") is not None:
        out.append(f"< {node['exclusiveMaximum']}")
    if node.get("multipleOf") is not None:
        out.append(f"multiple of {node['multipleOf']}")
    text = _range(node.get("minItems"), node.get("maxItems"), "item")
    if text:
        out.append(text)
    if node.get("uniqueItems") is True:
        out.append("unique items")
    if isinstance(node.get("pattern"), str):
        out.append(f"matches {_code(node['pattern'])}")
    if isinstance(node.get("format"), str):
        out.append(f"format {_code(node['format'])}")
    if isinstance(node.get("enum"), list):
        out.append("one of " + ", ".join(_code(_json(v)) for v in node["enum"]))
    return out


def _default(node: Any) -> str:
    if isinstance(node, dict) and "default" in node:
        return _code(_json(node["default"]))
    return _DASH


def _field_table(rows: list[dict[str, str]], *, result: bool) -> list[str]:
    required = "always present" if result else "required"
    head = f"| name | type | {required} | constraints | default | description |"
    if result:
        head = f"| name | type | {required} | constraints | description |"
    lines = [head, "|" + "---|" * (5 if result else 6)]
    for r in rows:
        cells = [_code(r["name"]), _cell(r["type"]), r["required"], _cell(r["constraints"])]
        if not result:
            cells.append(r["default"])
        cells.append(_cell(r["description"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _activation(tool: dict[str, Any]) -> str:
    activation = str(tool.get("activation"))
    words = _ACTIVATION.get(activation, "an activation this version of lineup does not know.")
    if activation == "activation_not_required" and tool.get("delivery") == "miniapp_sdk":
        words += _NOT_REQUIRED_SDK
    return f"{_code(activation)} — {words[0].upper()}{words[1:]}"


def _long_running(tool: dict[str, Any]) -> str:
    if tool.get("long_running"):
        return (
            "yes — the call first gets receipts (`accepted`, then `started` with "
            "`started_at` and `ends_at`) and the result only when the operation ends, "
            "which survives runtime restarts. A receipt is never the result."
        )
    if tool.get("delivery") == "runtime":
        return "no — the runtime answers at once with the result."
    timeout = tool.get("timeout_s")
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
    limit = f", within {timeout:g} s (`timeout_s`; later is `handler_timeout`)" if number else ""
    return f"no — one answer: the result or an error when the handler returns{limit}."


def _delivery(tool: dict[str, Any]) -> str:
    if tool.get("delivery") == "runtime":
        key = _code(str(tool.get("handler_key", "")))
        return f"by the runtime itself (handler {key}); no MiniApp code runs for it."
    return "by the MiniApp's own handler, in a worker process of its own."


def _hints(tool: dict[str, Any]) -> str:
    hints = tool.get("hints")
    if not isinstance(hints, dict) or not hints:
        return "none declared."
    parts = []
    for key in sorted(
        hints, key=lambda k: (k not in _HINTS, list(_HINTS).index(k) if k in _HINTS else 0, k)
    ):
        value = hints[key]
        name, yes, no = _HINTS.get(key, (key, "yes", "no"))
        if value is True:
            parts.append(f"{name} ({yes})")
        elif value is False:
            parts.append(f"not {name} ({no})")
        else:
            parts.append(f"{_html(key)}: {_html(_json(value))}")
    return "; ".join(parts) + ". Declared by the author, not enforced."


def _params(schema: _Schema, tool: dict[str, Any]) -> list[str]:
    node = tool.get("input_schema")
    rows = schema.rows(node)
    lines = ["### Parameters", ""]
    if rows:
        lines += _field_table(rows, result=False)
    else:
        lines.append("No parameters.")
    lines.append("")
    if not schema.closed(node):
        lines += ["Parameters not listed here are accepted too.", ""]
    else:
        lines += ["Any other parameter is refused (`invalid_params`).", ""]
    return lines


def _result(schema: _Schema, tool: dict[str, Any]) -> list[str]:
    node = tool.get("result_schema")
    lines = ["### Result", ""]
    type_text = schema.type_text(node)
    rows = schema.rows(node)
    items = schema.array_items(node)
    item_rows = schema.rows(items) if items is not None and not rows else []
    if type_text == "null":
        lines.append("Nothing: the result is `null`.")
    elif rows:
        lines += [f"{_article(type_text)} {_html(type_text)}:", ""]
        lines += _field_table(rows, result=True)
    elif item_rows:
        lines += [f"{_article(type_text)} {_html(type_text)}; each item:", ""]
        lines += _field_table(item_rows, result=True)
    else:
        constraints = schema.constraints(node)
        more = f" ({_html(constraints)})" if constraints else ""
        lines.append(f"{_html(type_text[0].upper() + type_text[1:])}{more}.")
    lines.append("")
    return lines


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _article(text: str) -> str:
    return "An" if text[:1] in ("a", "e", "i", "o", "u") else "A"


def _summary(tool: dict[str, Any]) -> str:
    text = str(tool.get("description") or "")
    first = text.strip().split("\n\n", 1)[0]
    return _cell(first) if first else _DASH


def docs_markdown(manifest: dict[str, Any]) -> str:
    """The Markdown reference of `manifest` (deterministic: same manifest, same bytes)."""
    app: dict[str, Any] = manifest["app"] if isinstance(manifest.get("app"), dict) else {}
    scope, name, version = app.get("scope", ""), app.get("name", ""), app.get("version", "")
    tools = sorted(
        (t for t in _list(manifest.get("tools")) if isinstance(t, dict)),
        key=lambda t: str(t.get("method")),
    )
    perms: dict[str, Any] = app["permissions"] if isinstance(app.get("permissions"), dict) else {}
    granted = sorted(k for k, v in perms.items() if v is True)
    deps = [d for d in _list(app.get("dependencies")) if isinstance(d, str)]
    lines = [
        f"# {_html(name)} ({_code(str(scope))}) {_html(version)}",
        "",
        f"Reference of the Agent tools of this MiniApp, generated by `lineup docs` from its "
        f"manifest. Methods are called as `{_inert(scope)}.<verb>`.",
        "",
        f"- **Tools:** {len(tools)}",
        "- **Permissions:** "
        + (
            "; ".join(
                f"{_code(p)} ({_PERMISSIONS.get(p, 'granted by the operator')})" for p in granted
            )
            if granted
            else "none (its code gets no network)"
        ),
        "- **Dependencies:** " + (", ".join(_code(d) for d in deps) if deps else "none"),
        "",
    ]
    if tools:
        lines += ["| tool | activation | long-running | summary |", "|---|---|---|---|"]
        for t in tools:
            method = str(t.get("method"))
            anchor = "".join(ch for ch in method.lower() if ch.isalnum() or ch in "-_")
            lines.append(
                f"| [{_code(method)}](#{anchor}) | {_code(str(t.get('activation')))} | "
                f"{'yes' if t.get('long_running') else 'no'} | {_summary(t)} |"
            )
        lines.append("")
    for t in tools:
        schema_in = _Schema(t.get("input_schema"))
        schema_out = _Schema(t.get("result_schema"))
        description = str(t.get("description") or "").strip()
        lines += [f"## {_code(str(t.get('method')))}", ""]
        lines += [_paragraph(description) if description else "_No description._", ""]
        lines += [
            f"- **Activation:** {_activation(t)}",
            f"- **Long-running:** {_long_running(t)}",
            f"- **Handled:** {_delivery(t)}",
            f"- **Hints:** {_hints(t)}",
            "",
        ]
        lines += _params(schema_in, t)
        lines += _result(schema_out, t)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_docs(path: Path, text: str) -> None:
    """Write the reference to `path` (UTF-8, `\\n` line ends).

    Raises:
        LineupError: `output_unwritable` (exit status 2) when the file cannot be written.
    """
    if path.is_dir():
        raise LineupError("output_unwritable", f"--out {path} is a folder", exit_code=2)
    try:
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise LineupError(
            "output_unwritable", f"cannot write {path}: {exc.strerror or exc}", exit_code=2
        ) from None
