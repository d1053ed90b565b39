"""The error hierarchy: every failure a user can hit carries a stable snake_case code."""

from __future__ import annotations

from typing import Any

from lineup_sdk._codes import CODES

__all__ = ["DeclarationError", "LineupError", "ToolError"]


class LineupError(Exception):
    """Root of every toolchain error.

    Attributes:
        code: Stable snake_case code from the spec (never renamed or reused).
        message: What is wrong, in one sentence.
        hint: How to fix it, when there is a fix.
        details: Machine-readable extras (locations, JSON pointers, ...).
        exit_code: Process exit status for the CLI (1 = rejected, 2 = usage).
    """

    exit_code: int = 1

    def __init__(
        self,
        code: str,
        message: str,
        *,
        hint: str | None = None,
        details: Any = None,
        exit_code: int | None = None,
    ) -> None:
        if code not in CODES and not _app_code(code):
            raise ValueError(f"undocumented error code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.hint = hint if hint is not None else CODES[code][1] if code in CODES else None
        self.hint = self.hint or None
        self.details = details
        if exit_code is not None:
            self.exit_code = exit_code
        elif code == "usage_invalid":
            self.exit_code = 2  # an argument that cannot work is a usage error (SPEC 12)

    def to_dict(self) -> dict[str, Any]:
        """The same facts as data, for `--json` output and the Agent channel."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        if self.details is not None:
            out["details"] = self.details
        return out


def _app_code(code: str) -> bool:
    """A MiniApp's own code (`app.<snake_case>`, a `ToolError`'s, SPEC 5.2): never in the
    documented table (SPEC 7 excepts it)."""
    name = code[4:] if code.startswith("app.") else ""
    return (
        bool(name)
        and name[0].isalpha()
        and all(c.islower() or c.isdigit() or c == "_" for c in name)
        and name.isascii()
    )


class DeclarationError(LineupError):
    """A mistake in `define_agent_tools` declarations, raised at decoration time.

    Attributes:
        file: Source file of the offending declaration.
        line: Line of the offending declaration.
        related: Other places involved (for a duplicate, where the first one was made).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        related: list[tuple[str, int]] | None = None,
        hint: str | None = None,
    ) -> None:
        where = f" ({file}:{line})" if file else ""
        also = "".join(f"; see also {f}:{n}" for f, n in related or [])
        super().__init__(code, f"{message}{where}{also}", hint=hint)
        self.file = file
        self.line = line
        self.related = list(related or [])


class ToolError(Exception):
    """A business error raised by a handler; the Agent sees it as `app.<code>`.

    Args:
        code: snake_case code chosen by the MiniApp (`not_found`, `list_full`, ...).
        message: Human-readable explanation for the Agent.
        details: Optional JSON-compatible extras.
    """

    def __init__(self, code: str, message: str, *, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details
