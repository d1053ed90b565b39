"""What `lineup diff` reports: each change, and the verdict of the version gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lineup_build.semver import next_major, parse_version
from lineup_sdk.errors import LineupError

__all__ = ["Change", "DiffReport", "field_name"]


@dataclass(frozen=True)
class Change:
    """One change an Agent can meet.

    Attributes:
        tool: The tool's method, or None for a change to the app (permissions, scope) or
            to a UI Action.
        pointer: JSON pointer into the tool's manifest entry (schemas resolved, so it
            runs through `$ref` targets), or into the manifest for an app change.
        kind: The rule (`tool_removed`, `constraint_tightened`, `permission_added`, ...).
        breaking: Whether an Agent written against OLD can fail against NEW.
        message: What changed, in words.
        old: The old value, where there is a small one to show.
        new: The new value.
        action: The UI Action's name for a change to one (SPEC 17), else None.
    """

    tool: str | None
    pointer: str
    kind: str
    breaking: bool
    message: str
    old: Any = None
    new: Any = None
    action: str | None = None

    @property
    def subject(self) -> str | None:
        """The tool or UI Action the change is about (None for the app)."""
        return self.tool if self.action is None else self.action

    @property
    def field(self) -> str:
        """The parameter or result field the change is about, e.g. `params.owner.name`."""
        return field_name(self.pointer)

    def to_dict(self) -> dict[str, Any]:
        """The change as data (for `--json`): `action` in place of `tool` for a UI
        Action's."""
        head: dict[str, Any] = (
            {"tool": self.tool} if self.action is None else {"action": self.action}
        )
        return {
            **head,
            "pointer": self.pointer,
            "field": self.field,
            "kind": self.kind,
            "breaking": self.breaking,
            "message": self.message,
            "old": self.old,
            "new": self.new,
        }


@dataclass
class DiffReport:
    """Every change from OLD to NEW plus the version verdict.

    Attributes:
        old_version: OLD's `app.version`.
        new_version: NEW's `app.version`.
        bump: `major`, `minor`, `patch`, `prerelease`, `none` or `downgrade`.
        major_bump: Whether the bump counts as major (SPEC 11: `0.y.z` and `0.0.z` rules,
            a pre-release of the next major counts as that major).
        changes: Every change, app changes first, then tools by method, then UI Actions
            by name (`action` set; `to_dict` lists them in their own `ui_actions`).
        old_source: Where OLD came from (a path, for reports).
        new_source: Where NEW came from.
        scope: NEW's app scope.
    """

    old_version: str
    new_version: str
    bump: str
    major_bump: bool
    changes: list[Change] = field(default_factory=list)
    old_source: str = "OLD"
    new_source: str = "NEW"
    scope: str = ""

    @property
    def action_changes(self) -> list[Change]:
        """The changes to UI Actions (their own section of the report)."""
        return [c for c in self.changes if c.action is not None]

    @property
    def breaking(self) -> list[Change]:
        """The breaking changes."""
        return [c for c in self.changes if c.breaking]

    @property
    def ok(self) -> bool:
        """False exactly when a breaking change comes without a major version bump."""
        return self.major_bump or not self.breaking

    def verdict(self) -> LineupError | None:
        """`breaking_change` when the gate fails, else None."""
        if self.ok:
            return None
        old = parse_version(self.old_version)
        target = next_major(old) if old is not None else None
        n = len(self.breaking)
        first = self.breaking[0]
        subject = first.subject if first.action is None else f"UI Action {first.action}"
        where = f"{subject or ''} {first.field or first.pointer}".strip()
        return LineupError(
            "breaking_change",
            f"{n} breaking change(s) without a major version bump "
            f"({self.old_version} -> {self.new_version} is {_bump_words(self.bump)}); "
            f"first: {where}: {first.kind}: {first.message}",
            hint=(
                f"restore compatibility, or release this as {target} (a major bump)"
                if target is not None
                else None
            ),
            details={"breaking": n, "bump": self.bump},
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as data (for `--json`)."""
        return {
            "ok": self.ok,
            "scope": self.scope,
            "old": {"source": self.old_source, "version": self.old_version},
            "new": {"source": self.new_source, "version": self.new_version},
            "bump": self.bump,
            "major_bump": self.major_bump,
            "breaking": len(self.breaking),
            "changes": [c.to_dict() for c in self.changes if c.action is None],
            "ui_actions": [c.to_dict() for c in self.action_changes],
            "error": None if (v := self.verdict()) is None else v.to_dict(),
        }


def _bump_words(bump: str) -> str:
    return {
        "none": "no version change",
        "downgrade": "a downgrade",
        "prerelease": "a pre-release step",
    }.get(bump, f"a {bump} bump")


def field_name(pointer: str) -> str:
    """A readable name for what a pointer is about: `params.title`, `result.items[]`, ..."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    if not parts:
        return ""
    head = {"input_schema": "params", "result_schema": "result"}.get(parts[0])
    if head is None:
        return ".".join(parts)
    out = head
    i = 1
    while i < len(parts):
        part = parts[i]
        if part == "properties" and i + 1 < len(parts):
            out += f".{parts[i + 1]}"
            i += 2
            continue
        if part == "items":
            out += "[]"
        elif part == "additionalProperties":
            out += ".*"
        elif part == "prefixItems" and i + 1 < len(parts):
            out += f"[{parts[i + 1]}]"
            i += 1
        i += 1
    return out
