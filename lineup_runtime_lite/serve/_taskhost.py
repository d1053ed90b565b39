"""What the MCP tasks parts (`_tasks`, `_tasks_ext`) need of the server they plug into: a
small protocol that `Bridge` satisfies, so they depend on it and not on the bridge (which
installs them; no import circle)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server

from lineup_runtime_lite.serve._mapping import McpTool

if TYPE_CHECKING:
    from lineup_runtime_lite.api.runtime import Runtime

__all__ = ["TaskHost"]


class TaskHost(Protocol):
    """One runtime behind one MCP server, as the tasks parts see it."""

    @property
    def rt(self) -> Runtime: ...

    @property
    def server(self) -> Server[Any]: ...

    def tool(self, name: str) -> McpTool:
        """The tool an MCP name denotes (a JSON-RPC error for an unknown name)."""
        ...

    def tool_of_method(self, method: str) -> McpTool | None: ...

    def answers_at_acceptance(self, ctx: ServerRequestContext[Any, Any], name: str) -> bool:
        """Whether a call of `name` answers at acceptance for this request (no task)."""
        ...

    def ids(self, meta: Any) -> tuple[str, str]:
        """`(call_id, conversation_id)` from a request's `_meta`."""
        ...

    async def send(self, call_id: Any, conversation: Any, method: str, args: Any) -> dict[str, Any]:
        """Send one call; a runtime failure becomes a final error message."""
        ...

    async def task_record(self, task_id: str, meta: Any) -> dict[str, Any] | None:
        """A task's call record, when a request with `meta` may see it (else None)."""
        ...

    async def mark_task(self, call_id: str) -> None:
        """Remember that a request created this call as a task."""
        ...

    async def own_tasks(
        self, meta: Any, cursor: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the tasks a request with `meta` may see, and the next page's cursor."""
        ...

    async def wait_final(self, call_id: str) -> dict[str, Any]:
        """Wait for a call's persisted final."""
        ...

    def add_middleware(
        self, fn: Callable[[ServerRequestContext[Any, Any], CallNext], Awaitable[HandlerResult]]
    ) -> None:
        """Wrap every inbound request."""
        ...
