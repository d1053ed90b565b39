"""What every driver needs of the engine that composes them (a port: drivers never import
the engine, and the engine is the only module that knows them all)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from lineup_runtime_lite.core.decisions import Decision
from lineup_runtime_lite.core.port import Facts
from lineup_runtime_lite.core.rows import ActionEntry, RegistryEntry
from lineup_runtime_lite.store.database import Database
from lineup_runtime_lite.validation.pool import ValidatorPool

__all__ = ["Shell"]


class Shell(Protocol):
    store: Database
    #: Reads outside a batch (the loop's own connection; never inside another's step).
    facts: Facts
    activation_timeout_ms: int
    #: Where installed versions are unpacked (absolute; rows name folders relative to it).
    apps_dir: Path
    #: Validator processes for result schemas that are not plain (SPEC 13.3).
    validators: ValidatorPool

    def now(self) -> int: ...
    def owns(self, app_session_id: str) -> bool:
        """Whether this node delivers the App session's calls, drives its activations and
        relays its Host intents (always, on a store of one runtime)."""
        ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]: ...
    def tools_of(self, scope: str, version: str) -> dict[str, RegistryEntry]: ...
    def actions_of(self, scope: str, version: str) -> dict[str, ActionEntry]:
        """A version's UI Actions by name (SPEC 17)."""
        ...

    def methods_for(self, scope: str, handler_key: str) -> list[str]: ...

    async def decide(self, step: Callable[[Facts], Decision | None]) -> Decision | None:
        """Commit the decision `step` makes (inside its savepoint, in the next group
        commit) and perform its effects; None when it decided nothing or lost a race."""
        ...

    def wake_waiters(self) -> None:
        """Answer in-process waiters whose final is committed."""
        ...

    def give_up_waiters(self, app_session_id: str, exc: BaseException | None) -> None:
        """The session's pump gave up on a failing step: answer its in-process waiters
        (a final that is committed, else `store_unavailable`)."""
        ...
