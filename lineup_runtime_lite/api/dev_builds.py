"""`lineup dev` after a rebuild (SPEC 14): the sessions pinned to an older dev build of a
scope move to its current dev build — the one exception to SPEC 5.2's pinning — and the
old build's worker stops (what it was running ended `delivery_interrupted` already)."""

from __future__ import annotations

from typing import Any

from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.core.decisions import MoveSession
from lineup_runtime_lite.core.deliveries import move_dev_sessions as decide_moves
from lineup_sdk.errors import LineupError

__all__ = ["move_dev_sessions"]


async def move_dev_sessions(engine: Engine, scope: str) -> int | None:
    """Move the sessions of `scope` to its current version when that is a dev build; how
    many moved, or None when nothing was decided (nothing to settle).

    Raises:
        LineupError: `usage_invalid` for a scope that is not installed.
    """
    current = engine.facts.app_version(scope)
    if current is None:
        raise LineupError("usage_invalid", f"{scope!r} is not installed")
    dev = engine.facts.dev_builds(scope)
    if current not in dev:
        return None
    now = engine.now()

    def step(tx: Any) -> Any:
        sessions = tx.sessions_of(scope)
        # a call or a UI Action delivered to the old build ends `delivery_interrupted`
        delivered = {s.app_session_id: tx.delivered_in(s.app_session_id) for s in sessions}
        return decide_moves(sessions, delivered, tx.dev_builds(scope), current, now)

    old = {s.version for s in engine.facts.sessions_of(scope)} - {current}
    decision = await engine.decide(step)
    if decision is None:
        return None
    for version in old & dev:  # its in-flight deliveries already ended: stop it
        worker = engine.workers.get((scope, version))
        if worker is not None:
            await worker.kill()
    return sum(1 for c in decision.changes if isinstance(c, MoveSession))
