"""The stable error and diagnostic codes, public: `CODES` maps each code to its meaning and
fix (the error reference, `docs/reference/errors.md`). Never rename or reuse a code; add a new one."""

from __future__ import annotations

from lineup_sdk._codes import CODES

__all__ = ["CODES"]
