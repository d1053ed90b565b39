"""The Markdown page of `lineup docs`, generated from a manifest.

For a person deciding whether to use the MiniApp: per tool its description, activation in
plain words, long-running behaviour, hints, a parameter table (name, type, required,
constraints, default, description) and the result's shape. Deterministic: tools sorted
by method, fields required-first then by name (bundle manifests store keys sorted, so
the source order is not available everywhere), no dates. Manifest text is escaped so it
cannot break the tables or inject HTML.
"""

from __future__ import annotations

from typing import Any

from lineup_build.docs._schema import SchemaReader
from lineup_build.docs._text import DASH, as_list, cell, code, html, inert, json_text, paragraph

__all__ = ["docs_markdown"]

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


def _field_table(rows: list[dict[str, str]], *, result: bool) -> list[str]:
    required = "always present" if result else "required"
    head = f"| name | type | {required} | constraints | default | description |"
    if result:
        head = f"| name | type | {required} | constraints | description |"
    lines = [head, "|" + "---|" * (5 if result else 6)]
    for r in rows:
        cells = [code(r["name"]), cell(r["type"]), r["required"], cell(r["constraints"])]
        if not result:
            cells.append(r["default"])
        cells.append(cell(r["description"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _activation(tool: dict[str, Any]) -> str:
    activation = str(tool.get("activation"))
    words = _ACTIVATION.get(activation, "an activation this version of lineup does not know.")
    if activation == "activation_not_required" and tool.get("delivery") == "miniapp_sdk":
        words += _NOT_REQUIRED_SDK
    return f"{code(activation)} — {words[0].upper()}{words[1:]}"


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
        key = code(str(tool.get("handler_key", "")))
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
            parts.append(f"{html(key)}: {html(json_text(value))}")
    return "; ".join(parts) + ". Declared by the author, not enforced."


def _params(schema: SchemaReader, tool: dict[str, Any]) -> list[str]:
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


def _result(schema: SchemaReader, tool: dict[str, Any]) -> list[str]:
    node = tool.get("result_schema")
    lines = ["### Result", ""]
    type_text = schema.type_text(node)
    rows = schema.rows(node)
    items = schema.array_items(node)
    item_rows = schema.rows(items) if items is not None and not rows else []
    if type_text == "null":
        lines.append("Nothing: the result is `null`.")
    elif rows:
        lines += [f"{_article(type_text)} {html(type_text)}:", ""]
        lines += _field_table(rows, result=True)
    elif item_rows:
        lines += [f"{_article(type_text)} {html(type_text)}; each item:", ""]
        lines += _field_table(item_rows, result=True)
    else:
        constraints = schema.constraints(node)
        more = f" ({html(constraints)})" if constraints else ""
        lines.append(f"{html(type_text[0].upper() + type_text[1:])}{more}.")
    lines.append("")
    return lines


def _article(text: str) -> str:
    return "An" if text[:1] in ("a", "e", "i", "o", "u") else "A"


def _summary(tool: dict[str, Any]) -> str:
    text = str(tool.get("description") or "")
    first = text.strip().split("\n\n", 1)[0]
    return cell(first) if first else DASH


def docs_markdown(manifest: dict[str, Any]) -> str:
    """The Markdown reference of `manifest` (deterministic: same manifest, same bytes)."""
    app: dict[str, Any] = manifest["app"] if isinstance(manifest.get("app"), dict) else {}
    scope, name, version = app.get("scope", ""), app.get("name", ""), app.get("version", "")
    tools = sorted(
        (t for t in as_list(manifest.get("tools")) if isinstance(t, dict)),
        key=lambda t: str(t.get("method")),
    )
    perms: dict[str, Any] = app["permissions"] if isinstance(app.get("permissions"), dict) else {}
    granted = sorted(k for k, v in perms.items() if v is True)
    deps = [d for d in as_list(app.get("dependencies")) if isinstance(d, str)]
    lines = [
        f"# {html(name)} ({code(str(scope))}) {html(version)}",
        "",
        f"Reference of the Agent tools of this MiniApp, generated by `lineup docs` from its "
        f"manifest. Methods are called as `{inert(scope)}.<verb>`.",
        "",
        f"- **Tools:** {len(tools)}",
        "- **Permissions:** "
        + (
            "; ".join(
                f"{code(p)} ({_PERMISSIONS.get(p, 'granted by the operator')})" for p in granted
            )
            if granted
            else "none (its code gets no network)"
        ),
        "- **Dependencies:** " + (", ".join(code(d) for d in deps) if deps else "none"),
        "",
    ]
    if tools:
        lines += ["| tool | activation | long-running | summary |", "|---|---|---|---|"]
        for t in tools:
            method = str(t.get("method"))
            anchor = "".join(ch for ch in method.lower() if ch.isalnum() or ch in "-_")
            lines.append(
                f"| [{code(method)}](#{anchor}) | {code(str(t.get('activation')))} | "
                f"{'yes' if t.get('long_running') else 'no'} | {_summary(t)} |"
            )
        lines.append("")
    for t in tools:
        schema_in = SchemaReader(t.get("input_schema"))
        schema_out = SchemaReader(t.get("result_schema"))
        description = str(t.get("description") or "").strip()
        lines += [f"## {code(str(t.get('method')))}", ""]
        lines += [paragraph(description) if description else "_No description._", ""]
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
