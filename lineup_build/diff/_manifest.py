"""`diff_manifests`: two manifests compared as an Agent written against OLD meets NEW.

Tools removed, added or changed (delivery, long-running, activation, timeout, description,
hints, runtime handler), the app's scope, permissions and dependencies, and every change
in the input and result schemas (`_schema`). Pure: data in, a `DiffReport` out.
"""

from __future__ import annotations

from typing import Any

from lineup_build.diff._report import Change, DiffReport
from lineup_build.diff._rules import INPUT, RESULT
from lineup_build.diff._schema import compare_schemas
from lineup_build.schema_refs import escape_pointer
from lineup_build.semver import Version, bump_kind, is_major_bump, parse_version
from lineup_sdk.errors import LineupError

__all__ = ["diff_manifests"]

_ACTIVATION_EFFECT = {
    ("foreground_required", "app_ready"): "calls no longer need the app in the foreground",
    ("app_ready", "foreground_required"): "calls now wait until the user sees the app",
    ("app_ready", "activation_not_required"): (
        "calls no longer start the app and fail app_not_running unless it already runs"
    ),
    ("foreground_required", "activation_not_required"): (
        "calls no longer start the app and fail app_not_running unless it already runs"
    ),
    ("activation_not_required", "app_ready"): "calls now start the app",
    ("activation_not_required", "foreground_required"): (
        "calls now start the app and wait until the user sees it"
    ),
}

_KNOWN_TOOL_KEYS = frozenset(
    {
        "method",
        "description",
        "delivery",
        "activation",
        "long_running",
        "timeout_s",
        "handler_key",
        "hints",
        "input_schema",
        "result_schema",
    }
)


def _version(manifest: dict[str, Any], role: str) -> Version:
    text = _app(manifest).get("version")
    parsed = parse_version(text)
    if parsed is None:
        raise LineupError(
            "manifest_invalid",
            f"{role}: app.version {text!r} is not a semantic version",
            exit_code=2,
        )
    return parsed


def _app(manifest: Any) -> dict[str, Any]:
    app = manifest.get("app") if isinstance(manifest, dict) else None
    return app if isinstance(app, dict) else {}


def _by_method(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tools = manifest.get("tools")
    out: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("method"), str):
            out.setdefault(tool["method"], tool)
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _granted(app: dict[str, Any]) -> dict[str, Any]:
    perms = app.get("permissions")
    return perms if isinstance(perms, dict) else {}


def _app_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    out: list[Change] = []
    oa, na = _app(old), _app(new)
    if oa.get("scope") != na.get("scope"):
        out.append(
            Change(
                None,
                "/app/scope",
                "app_scope_changed",
                True,
                f"app scope {oa.get('scope')!r} -> {na.get('scope')!r}: every method is new",
                oa.get("scope"),
                na.get("scope"),
            )
        )
    op, np_ = _granted(oa), _granted(na)
    for name in sorted(set(op) | set(np_)):
        was, now = op.get(name), np_.get(name)
        if was == now:
            continue
        ptr = f"/app/permissions/{escape_pointer(name)}"
        if now is True:
            out.append(
                Change(
                    None,
                    ptr,
                    "permission_added",
                    True,
                    f"the app now asks for the {name!r} permission; operators must grant it",
                    was,
                    now,
                )
            )
        elif was is True:
            out.append(
                Change(
                    None,
                    ptr,
                    "permission_removed",
                    False,
                    f"the app no longer asks for the {name!r} permission",
                    was,
                    now,
                )
            )
        else:
            out.append(
                Change(
                    None, ptr, "permission_changed", True, f"permission {name!r} changed", was, now
                )
            )
    od = [d for d in _list(oa.get("dependencies")) if isinstance(d, str)]
    nd = [d for d in _list(na.get("dependencies")) if isinstance(d, str)]
    for dep in sorted(set(nd) - set(od)):
        out.append(
            Change(
                None,
                "/app/dependencies",
                "dependency_added",
                False,
                f"new dependency {dep!r} (the runtime's environment must provide it)",
                None,
                dep,
            )
        )
    for dep in sorted(set(od) - set(nd)):
        out.append(
            Change(
                None,
                "/app/dependencies",
                "dependency_removed",
                False,
                f"dependency {dep!r} removed",
                dep,
                None,
            )
        )
    return out


def _tool_changes(method: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    out: list[Change] = []

    def add(
        ptr: str, kind: str, breaking: bool, message: str, a: Any = None, b: Any = None
    ) -> None:
        out.append(Change(method, ptr, kind, breaking, message, a, b))

    if old.get("delivery") != new.get("delivery"):
        add(
            "/delivery",
            "delivery_changed",
            True,
            f"delivery {old.get('delivery')} -> {new.get('delivery')}",
            old.get("delivery"),
            new.get("delivery"),
        )
    elif "handler_key" in old and old.get("handler_key") != new.get("handler_key"):
        add(
            "/handler_key",
            "handler_key_changed",
            True,
            f"runtime handler {old.get('handler_key')} -> {new.get('handler_key')}",
            old.get("handler_key"),
            new.get("handler_key"),
        )
    if old.get("long_running") != new.get("long_running"):
        a, b = old.get("long_running"), new.get("long_running")
        how = (
            "the result now arrives after receipts, when the operation ends"
            if b
            else "the result now comes at once, without receipts"
        )
        add("/long_running", "long_running_changed", True, f"long_running {a} -> {b}: {how}", a, b)
    oa, na = old.get("activation"), new.get("activation")
    if oa != na:
        effect = _ACTIVATION_EFFECT.get((str(oa), str(na)), "activation changed")
        compatible = (oa, na) == ("foreground_required", "app_ready")
        add(
            "/activation",
            "activation_changed",
            not compatible,
            f"activation {oa} -> {na}: {effect}",
            oa,
            na,
        )
    ot, nt = old.get("timeout_s"), new.get("timeout_s")
    if isinstance(ot, int | float) and isinstance(nt, int | float) and ot != nt:
        kind = "timeout_lowered" if nt < ot else "timeout_raised"
        add("/timeout_s", kind, False, f"timeout {ot} s -> {nt} s", ot, nt)
    if old.get("description") != new.get("description"):
        add(
            "/description",
            "description_changed",
            False,
            "description changed",
            old.get("description"),
            new.get("description"),
        )
    oh, nh = _hints(old), _hints(new)
    for name in sorted(set(oh) | set(nh)):
        if oh.get(name) != nh.get(name):
            add(
                f"/hints/{escape_pointer(name)}",
                "hint_changed",
                False,
                f"hint {name}: {_hint_word(oh.get(name))} -> {_hint_word(nh.get(name))}",
                oh.get(name),
                nh.get(name),
            )
    for side, key in ((INPUT, "input_schema"), (RESULT, "result_schema")):
        if old.get(key) != new.get(key):
            for c in compare_schemas(old.get(key), new.get(key), side, f"/{key}"):
                add(c.pointer, c.kind, c.breaking, c.message, c.old, c.new)
    for key in sorted((set(old) | set(new)) - _KNOWN_TOOL_KEYS):
        if old.get(key) != new.get(key):
            add(
                f"/{escape_pointer(key)}",
                "tool_field_changed",
                True,
                f"{key} changed (a field this version of lineup does not know)",
                old.get(key),
                new.get(key),
            )
    return out


def _hints(tool: dict[str, Any]) -> dict[str, Any]:
    hints = tool.get("hints")
    return hints if isinstance(hints, dict) else {}


def _hint_word(value: Any) -> str:
    return "unset" if value is None else str(value).lower()


def diff_manifests(
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    old_source: str = "OLD",
    new_source: str = "NEW",
) -> DiffReport:
    """Compare two manifests as an Agent written against `old` would meet `new`.

    Args:
        old: The previous release's manifest (as data).
        new: The candidate's manifest.
        old_source: Where `old` came from, for the report.
        new_source: Where `new` came from.

    Returns:
        The report; `report.ok` is False exactly when a breaking change comes without a
        major version bump.

    Raises:
        LineupError: `manifest_invalid` when a version is not semantic.
    """
    ov, nv = _version(old, old_source), _version(new, new_source)
    report = DiffReport(
        str(ov),
        str(nv),
        bump_kind(ov, nv),
        is_major_bump(ov, nv),
        old_source=old_source,
        new_source=new_source,
        scope=str(_app(new).get("scope", "")),
    )
    report.changes.extend(_app_changes(old, new))
    before, after = _by_method(old), _by_method(new)
    for method in sorted(set(before) | set(after)):
        if method not in after:
            report.changes.append(
                Change(method, "", "tool_removed", True, "tool removed: Agents calling it fail")
            )
        elif method not in before:
            report.changes.append(Change(method, "", "tool_added", False, "new tool"))
        elif before[method] != after[method]:
            report.changes.extend(_tool_changes(method, before[method], after[method]))
    return report
