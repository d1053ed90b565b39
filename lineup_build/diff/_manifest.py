"""`diff_manifests`: two manifests compared as an Agent written against OLD meets NEW.

Tools removed, added or changed (delivery, long-running, activation, timeout, description,
hints, runtime handler), the app's scope, permissions and dependencies, the Surface's
`csp` (SPEC 18.2), and every change
in the input and result schemas (`_schema`). UI Actions (SPEC 17) in their own section,
by the same rules as an open Surface of the old build meets them: removed or params
narrowed is breaking. Pure: two typed `Manifest`s in, a
`DiffReport` out; the fields are read typed, the schemas stay JSON data.
"""

from __future__ import annotations

from typing import Any

from lineup_build.diff._report import Change, DiffReport
from lineup_build.diff._rules import INPUT, RESULT
from lineup_build.diff._schema import compare_schemas
from lineup_build.model import AppInfo, Manifest, Tool, UiAction
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


def _version(manifest: Manifest, role: str) -> Version:
    text = manifest.app.version
    parsed = parse_version(text)
    if parsed is None:
        raise LineupError(
            "manifest_invalid",
            f"{role}: app.version {text!r} is not a semantic version",
            exit_code=2,
        )
    return parsed


def _app_changes(old: AppInfo, new: AppInfo) -> list[Change]:
    out: list[Change] = []
    if old.scope != new.scope:
        out.append(
            Change(
                None,
                "/app/scope",
                "app_scope_changed",
                True,
                f"app scope {old.scope!r} -> {new.scope!r}: every method is new",
                old.scope,
                new.scope,
            )
        )
    granted, asked = set(old.permissions), set(new.permissions)
    for name in sorted(granted ^ asked):
        ptr = f"/app/permissions/{escape_pointer(name)}"
        if name in asked:
            out.append(
                Change(
                    None,
                    ptr,
                    "permission_added",
                    True,
                    f"the app now asks for the {name!r} permission; operators must grant it",
                    None,
                    True,
                )
            )
        else:
            out.append(
                Change(
                    None,
                    ptr,
                    "permission_removed",
                    False,
                    f"the app no longer asks for the {name!r} permission",
                    True,
                    None,
                )
            )
    for dep in sorted(set(new.dependencies) - set(old.dependencies)):
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
    for dep in sorted(set(old.dependencies) - set(new.dependencies)):
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


def _csp_changes(old: Manifest, new: Manifest) -> list[Change]:
    """A changed `surface.csp` key: breaking when it lets the Surface reach a domain it did
    not (a host's operator reviews what a View may connect to), not when it only narrows."""
    before = dict(old.surface.csp) if old.surface is not None else {}
    after = dict(new.surface.csp) if new.surface is not None else {}
    out: list[Change] = []
    for key in sorted(set(before) | set(after)):
        was, now = list(before.get(key, ())), list(after.get(key, ()))
        if was == now:
            continue
        added = sorted(set(now) - set(was))
        what = f"added {', '.join(added)}" if added else "narrowed"
        out.append(
            Change(
                None,
                f"/surface/csp/{key}",
                "surface_csp_changed",
                bool(added),
                f"the Surface's csp {key} changed ({what}); hosts apply the new policy",
                was or None,
                now or None,
            )
        )
    return out


def _tool_changes(old: Tool, new: Tool) -> list[Change]:
    out: list[Change] = []

    def add(
        ptr: str, kind: str, breaking: bool, message: str, a: Any = None, b: Any = None
    ) -> None:
        out.append(Change(old.method, ptr, kind, breaking, message, a, b))

    if old.delivery != new.delivery:
        add(
            "/delivery",
            "delivery_changed",
            True,
            f"delivery {old.delivery} -> {new.delivery}",
            old.delivery,
            new.delivery,
        )
    elif old.handler_key != new.handler_key:  # same delivery: both runtime, or both None
        add(
            "/handler_key",
            "handler_key_changed",
            True,
            f"runtime handler {old.handler_key} -> {new.handler_key}",
            old.handler_key,
            new.handler_key,
        )
    if old.long_running != new.long_running:
        a, b = old.long_running, new.long_running
        how = (
            "the result now arrives after receipts, when the operation ends"
            if b
            else "the result now comes at once, without receipts"
        )
        add("/long_running", "long_running_changed", True, f"long_running {a} -> {b}: {how}", a, b)
    oa, na = old.activation, new.activation
    if oa != na:
        compatible = (oa, na) == ("foreground_required", "app_ready")
        add(
            "/activation",
            "activation_changed",
            not compatible,
            f"activation {oa} -> {na}: {_ACTIVATION_EFFECT[oa, na]}",
            oa,
            na,
        )
    ot, nt = old.timeout_s, new.timeout_s
    if ot is not None and nt is not None and ot != nt:
        kind = "timeout_lowered" if nt < ot else "timeout_raised"
        add("/timeout_s", kind, False, f"timeout {ot} s -> {nt} s", ot, nt)
    if old.description != new.description:
        add(
            "/description",
            "description_changed",
            False,
            "description changed",
            old.description,
            new.description,
        )
    oh, nh = old.hint_map, new.hint_map
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
    schemas = (
        (INPUT, "/input_schema", old.input_schema, new.input_schema),
        (RESULT, "/result_schema", old.result_schema, new.result_schema),
    )
    for side, ptr, a_schema, b_schema in schemas:
        if a_schema != b_schema:
            for c in compare_schemas(a_schema, b_schema, side, ptr):
                add(c.pointer, c.kind, c.breaking, c.message, c.old, c.new)
    return out


def _action_changes(old: UiAction, new: UiAction) -> list[Change]:
    """A UI Action changed: timeout and description reported, schemas by the tools'
    rules (the Surface sends the params and receives the result)."""
    out: list[Change] = []

    def add(
        ptr: str, kind: str, breaking: bool, message: str, a: Any = None, b: Any = None
    ) -> None:
        out.append(Change(None, ptr, kind, breaking, message, a, b, action=old.name))

    ot, nt = old.timeout_s, new.timeout_s
    if ot != nt:
        kind = "timeout_lowered" if nt < ot else "timeout_raised"
        add("/timeout_s", kind, False, f"timeout {ot} s -> {nt} s", ot, nt)
    if old.description != new.description:
        add(
            "/description",
            "description_changed",
            False,
            "description changed",
            old.description,
            new.description,
        )
    schemas = (
        (INPUT, "/input_schema", old.input_schema, new.input_schema),
        (RESULT, "/result_schema", old.result_schema, new.result_schema),
    )
    for side, ptr, a_schema, b_schema in schemas:
        if a_schema != b_schema:
            for c in compare_schemas(a_schema, b_schema, side, ptr):
                add(c.pointer, c.kind, c.breaking, c.message, c.old, c.new)
    return out


def _ui_action_changes(old: Manifest, new: Manifest) -> list[Change]:
    before = {a.name: a for a in old.ui_actions}
    after = {a.name: a for a in new.ui_actions}
    out: list[Change] = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            out.append(
                Change(
                    None,
                    "",
                    "action_removed",
                    True,
                    "UI Action removed: an open Surface of the old build still asks for it",
                    action=name,
                )
            )
        elif name not in before:
            out.append(Change(None, "", "action_added", False, "new UI Action", action=name))
        elif before[name] != after[name]:
            out.extend(_action_changes(before[name], after[name]))
    return out


def _hint_word(value: bool | None) -> str:
    return "unset" if value is None else str(value).lower()


def diff_manifests(
    old: Manifest,
    new: Manifest,
    *,
    old_source: str = "OLD",
    new_source: str = "NEW",
) -> DiffReport:
    """Compare two manifests as an Agent written against `old` would meet `new`.

    Args:
        old: The previous release's manifest (schema-valid: a verified bundle's, or one
            a project builds).
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
        scope=new.app.scope,
    )
    report.changes.extend(_app_changes(old.app, new.app))
    report.changes.extend(_csp_changes(old, new))
    before = {t.method: t for t in old.tools}
    after = {t.method: t for t in new.tools}
    for method in sorted(set(before) | set(after)):
        if method not in after:
            report.changes.append(
                Change(method, "", "tool_removed", True, "tool removed: Agents calling it fail")
            )
        elif method not in before:
            report.changes.append(Change(method, "", "tool_added", False, "new tool"))
        elif before[method] != after[method]:
            report.changes.extend(_tool_changes(before[method], after[method]))
    report.changes.extend(_ui_action_changes(old, new))
    return report
