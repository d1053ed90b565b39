"""One runtime on its database: nothing to coordinate (`Coordination` with no statements)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lineup_runtime_lite.coordination import Statement

__all__ = ["Solo"]

_NONE: tuple[Statement, ...] = ()


class Solo:
    """The only runtime: every App session is its own, its single writer is the mutex, and
    nobody else waits for what it commits."""

    def mine(self, column: str, *, or_none: bool = False) -> tuple[str, tuple[Any, ...]]:
        return "", ()

    def lock(self, where: str, args: tuple[Any, ...]) -> Sequence[Statement]:
        return _NONE

    def lock_all(self, pairs: Sequence[tuple[str, str]]) -> Sequence[Statement]:
        return _NONE

    def new_step(self) -> None:
        return None

    def owner(self, app_session_id: str) -> Sequence[Statement]:
        return _NONE

    def wake(self, payloads: Sequence[str]) -> Sequence[Statement]:
        return _NONE

    def tell(self, payload: str) -> Sequence[Statement]:
        return _NONE

    def several(self) -> bool:
        return False

    def join(
        self,
        *,
        on_wake: Callable[[list[str]], None],
        on_taken: Callable[[list[str]], None],
        on_lost: Callable[[], None],
    ) -> None:
        return None

    def rejoin(self) -> None:
        return None
