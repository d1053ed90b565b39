"""The async spellings `AsyncRuntime` had before SPEC 5.0's shape (`outbox`, `host`,
`surface`): deprecated for one release, each warns and calls its new spelling. A base of
`AsyncRuntime` only so that the class itself holds the API that stays; it goes, whole, with
the release that drops them."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_sdk.context import Snapshot

if TYPE_CHECKING:
    from lineup_runtime_lite.api.async_faces import AsyncOutbox, AsyncSurface, _AsyncHostPort

__all__ = ["DeprecatedSpellings"]


class DeprecatedSpellings:
    """`simulator`, `host_event`, `outbox_fetch`, `outbox_ack`, `outbox_all`, `surface_get`,
    `subscribe`, `operations`: the old names of `AsyncRuntime`'s members."""

    if TYPE_CHECKING:
        host: _AsyncHostPort
        outbox: AsyncOutbox

        def surface(self, conversation_id: str, scope: str) -> AsyncSurface: ...

    @property
    def simulator(self) -> HostSimulator:
        """Deprecated: `host.simulator`."""
        _deprecated("simulator", "host.simulator")
        return self.host.simulator

    def host_event(
        self, event: str, *, conversation: str, scope: str, instance: str | None = None
    ) -> Coroutine[Any, Any, bool]:
        """Deprecated: `await host.event(...)`."""
        _deprecated("host_event(...)", "host.event(...)")
        return self.host.event(event, conversation=conversation, scope=scope, instance=instance)

    def outbox_fetch(self, limit: int = 100) -> Coroutine[Any, Any, list[AgentMessage]]:
        """Deprecated: `await outbox.fetch(limit)`."""
        _deprecated("outbox_fetch(limit)", "outbox.fetch(limit)")
        return self.outbox.fetch(limit)

    def outbox_ack(self, ids: list[str]) -> Coroutine[Any, Any, None]:
        """Deprecated: `await outbox.ack(ids)`."""
        _deprecated("outbox_ack(ids)", "outbox.ack(ids)")
        return self.outbox.ack(ids)

    def outbox_all(self) -> Coroutine[Any, Any, list[AgentMessage]]:
        """Deprecated: `await outbox.all()`."""
        _deprecated("outbox_all()", "outbox.all()")
        return self.outbox.all()

    def surface_get(self, conversation_id: str, scope: str) -> Coroutine[Any, Any, Snapshot]:
        """Deprecated: `await surface(conversation_id, scope).get()`."""
        _deprecated("surface_get(conversation_id, scope)", "surface(conversation_id, scope).get()")
        return self.surface(conversation_id, scope).get()

    def subscribe(
        self, conversation_id: str, scope: str, listener: Callable[[str, Snapshot], None]
    ) -> Coroutine[Any, Any, Callable[[], None]]:
        """Deprecated: `await surface(conversation_id, scope).subscribe(listener)`."""
        _deprecated(
            "subscribe(conversation_id, scope, listener)",
            "surface(conversation_id, scope).subscribe(listener)",
        )
        return self.surface(conversation_id, scope).subscribe(listener)

    def operations(
        self, conversation_id: str, scope: str
    ) -> Coroutine[Any, Any, list[dict[str, Any]]]:
        """Deprecated: `await surface(conversation_id, scope).operations()`."""
        _deprecated(
            "operations(conversation_id, scope)", "surface(conversation_id, scope).operations()"
        )
        return self.surface(conversation_id, scope).operations()


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"AsyncRuntime.{old} is deprecated and goes in the next release; use {new}",
        DeprecationWarning,
        stacklevel=3,
    )
