"""Build diagnostics: a stable code, a location, a message and a hint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lineup_sdk.codes import CODES

__all__ = ["Diagnostic", "Where", "has_errors"]


@dataclass(frozen=True)
class Where:
    """A `file:line` in the MiniApp project (line may be unknown)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line}


@dataclass(frozen=True)
class Diagnostic:
    """One problem found by `lineup check` / `lineup build`.

    Attributes:
        code: Stable snake_case code (SPEC 2).
        message: What is wrong.
        severity: `error` (fails the build) or `warning` (fails only with `--strict`).
        where: The declaration's location, when known.
        related: Other places involved (both places of a duplicate).
        hint: How to fix it.
    """

    code: str
    message: str
    severity: str = "error"
    where: Where | None = None
    related: tuple[Where, ...] = field(default_factory=tuple)
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"undocumented diagnostic code {self.code!r}")

    @property
    def effective_hint(self) -> str | None:
        return self.hint if self.hint is not None else (CODES[self.code][1] or None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.where.file if self.where else None,
            "line": self.where.line if self.where else None,
            "related": [r.to_dict() for r in self.related],
            "hint": self.effective_hint,
        }

    def sort_key(self) -> tuple[str, int, str, str]:
        return (
            self.where.file if self.where else "",
            (self.where.line or 0) if self.where else 0,
            self.code,
            self.message,
        )


def has_errors(diags: list[Diagnostic], *, strict: bool = False) -> bool:
    """Whether `diags` fail the build (warnings count only with `strict`)."""
    return any(d.severity == "error" or strict for d in diags)
