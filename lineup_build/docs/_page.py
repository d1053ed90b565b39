"""The Markdown page of `lineup docs`, generated from a typed `Manifest`.

For a person deciding whether to use the MiniApp: per tool its description, activation in
plain words, long-running behaviour, hints, a parameter table (name, type, required,
constraints, default, description), the result's shape, an example call, the tool as an
MCP client meets it under `lineup serve`, and the errors it can answer; then the UI
Actions, each with example params. Deterministic: tools sorted
by method, fields required-first then by name (bundle manifests store keys sorted, so
the source order is not available everywhere), no dates. Manifest text is escaped so it
cannot break the tables or inject HTML.
"""

from __future__ import annotations

from lineup_build.docs._calls import (
    action_example_section,
    errors_section,
    example_section,
    mcp_section,
)
from lineup_build.docs._schema import SchemaReader
from lineup_build.docs._text import DASH, cell, code, html, inert, paragraph
from lineup_build.model import MINIAPP_SDK, Manifest, Tool, UiAction

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


def _activation(tool: Tool) -> str:
    words = _ACTIVATION[tool.activation]
    if tool.activation == "activation_not_required" and tool.delivery == MINIAPP_SDK:
        words += _NOT_REQUIRED_SDK
    return f"{code(tool.activation)} — {words[0].upper()}{words[1:]}"


def _long_running(tool: Tool) -> str:
    if tool.long_running:
        return (
            "yes — the call first gets receipts (`accepted`, then `started` with "
            "`started_at` and `ends_at`) and the result only when the operation ends, "
            "which survives runtime restarts. A receipt is never the result."
        )
    if tool.is_runtime:
        return "no — the runtime answers at once with the result."
    timeout = tool.timeout_s
    limit = (
        ""
        if timeout is None
        else f", within {timeout:g} s (`timeout_s`; later is `handler_timeout`)"
    )
    return f"no — one answer: the result or an error when the handler returns{limit}."


def _delivery(tool: Tool) -> str:
    if tool.is_runtime:
        key = code(tool.handler_key or "")
        return f"by the runtime itself (handler {key}); no MiniApp code runs for it."
    return "by the MiniApp's own handler, in a worker process of its own."


def _hints(tool: Tool) -> str:
    hints = tool.hint_map
    if not hints:
        return "none declared."
    parts = []
    for key in sorted(hints, key=list(_HINTS).index):
        name, yes, no = _HINTS[key]
        parts.append(f"{name} ({yes})" if hints[key] else f"not {name} ({no})")
    return "; ".join(parts) + ". Declared by the author, not enforced."


def _params(schema: SchemaReader, tool: Tool | UiAction) -> list[str]:
    node = tool.input_schema
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


def _result(schema: SchemaReader, tool: Tool | UiAction) -> list[str]:
    node = tool.result_schema
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


def _summary(tool: Tool | UiAction) -> str:
    first = tool.description.strip().split("\n\n", 1)[0]
    return cell(first) if first else DASH


def docs_markdown(manifest: Manifest) -> str:
    """The Markdown reference of `manifest` (deterministic: same manifest, same bytes)."""
    app = manifest.app
    scope = app.scope
    tools = sorted(manifest.tools, key=lambda t: t.method)
    lines = [
        f"# {html(app.name)} ({code(scope)}) {html(app.version)}",
        "",
        f"Reference of the Agent tools of this MiniApp, generated by `lineup docs` from its "
        f"manifest. Methods are called as `{inert(scope)}.<verb>`.",
        "",
        f"- **Tools:** {len(tools)}",
        "- **Permissions:** "
        + (
            "; ".join(f"{code(p)} ({_PERMISSIONS[p]})" for p in app.permissions)
            if app.permissions
            else "none (its code gets no network)"
        ),
        "- **Dependencies:** "
        + (", ".join(code(d) for d in app.dependencies) if app.dependencies else "none"),
        "",
    ]
    if manifest.ui_actions:  # only then: a page without actions is unchanged
        lines.insert(-3, f"- **UI Actions:** {len(manifest.ui_actions)} (for its Surface)")
    if tools:
        lines += ["| tool | activation | long-running | summary |", "|---|---|---|---|"]
        for t in tools:
            anchor = "".join(ch for ch in t.method.lower() if ch.isalnum() or ch in "-_")
            lines.append(
                f"| [{code(t.method)}](#{anchor}) | {code(t.activation)} | "
                f"{'yes' if t.long_running else 'no'} | {_summary(t)} |"
            )
        lines.append("")
    for t in tools:
        schema_in = SchemaReader(t.input_schema)
        schema_out = SchemaReader(t.result_schema)
        description = t.description.strip()
        lines += [f"## {code(t.method)}", ""]
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
        lines += example_section(t)
        lines += mcp_section(t)
        lines += errors_section(t)
    lines += _actions(manifest)
    return "\n".join(lines).rstrip("\n") + "\n"


_ACTIONS_INTRO = (
    "What this MiniApp's Surface may ask for (SPEC 17). These are not Agent tools: an "
    "Agent never sees or calls them. Each runs in the App session's one order with the "
    "Agent's calls, on the latest data, and what its handler writes is applied only when "
    "it returns."
)


def _actions(manifest: Manifest) -> list[str]:
    """The UI Actions section, after the tools (nothing when the app declares none)."""
    actions = sorted(manifest.ui_actions, key=lambda a: a.name)
    if not actions:
        return []
    lines = ["## UI Actions", "", _ACTIONS_INTRO, ""]
    lines += ["| action | timeout | summary |", "|---|---|---|"]
    for a in actions:
        anchor = "action-" + "".join(ch for ch in a.name.lower() if ch.isalnum() or ch in "-_")
        lines.append(f"| [{code(a.name)}](#{anchor}) | {a.timeout_s:g} s | {_summary(a)} |")
    lines.append("")
    for a in actions:
        description = a.description.strip()
        lines += [f"## Action {code(a.name)}", ""]
        lines += [paragraph(description) if description else "_No description._", ""]
        lines += [
            "- **Handled:** by the MiniApp's own handler, in a worker process of its own, "
            f"within {a.timeout_s:g} s (`timeout_s`; later is `handler_timeout`).",
            "",
        ]
        lines += _params(SchemaReader(a.input_schema), a)
        lines += _result(SchemaReader(a.result_schema), a)
        lines += action_example_section(a)
    return lines
