"""Resumable response streams over streamable HTTP (SPEC 18.1).

Each SSE event of a `tools/call` stream carries the id `<index>.<call_id>`: the client has
seen the call's stored messages 1..index (receipts as progress, the final as the answer);
the priming event (sent first, with `retry`, on every revision up to 2025-11-25, 2025-03-26
included) is `0.<call_id>`. A `GET` with `Last-Event-ID` replays what follows from the facts
already stored — nothing is written per event — then follows the call to its answer. What a
replay needs beyond the facts (the request id, the progress token, the answer this request
got) is kept in the process, per MCP session: resumption needs the node that holds the
session; after a restart the old session id answers 404 and a repeat `tools/call` with the
same `io.lineup/call_id` replays as always (section 15).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
import mcp.types as mt
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

if TYPE_CHECKING:
    from lineup_runtime_lite.api.runtime import Runtime


class _Waits(Protocol):
    """What a replay needs of the bridge that answered the call (the bridge imports this
    module, so it is named by what it does, not by its class)."""

    @property
    def rt(self) -> Runtime: ...

    @property
    def options(self) -> Any: ...

    def _focus(self, m: dict[str, Any]) -> tuple[float | None, float | None]: ...

    def _waiting_text(self, latest: dict[str, Any]) -> str: ...


__all__ = [
    "RETRY_MS",
    "CallStreams",
    "event_id",
    "install",
    "parse_event_id",
    "usable_call_id",
]

#: The `retry` a priming event suggests (ms): how soon a dropped client reconnects.
RETRY_MS = 1000
#: The most calls a session remembers for resumption (oldest forgotten first).
MAX_CALLS = 256
#: Where the HTTP wrapper leaves, in the ASGI scope, what the bridge reads back.
SCOPE_STREAMS = "lineup.call_streams"
SCOPE_CALL_ID = "lineup.call_id"


def event_id(index: int, call_id: str) -> str:
    """The SSE id of a call's event: the client has seen stored messages 1..index."""
    return f"{index}.{call_id}"


def parse_event_id(text: str) -> tuple[int, str] | None:
    """`(index, call_id)` from an event id, None when it is not a call's."""
    index, dot, call_id = text.partition(".")
    if not dot or not index.isdigit() or not call_id or len(index) > 9:
        return None
    return int(index), call_id


@dataclass
class OpenCall:
    """One open (or answered) `tools/call` request of the session, kept in the process."""

    call_id: str
    request_id: StreamId
    token: str | int | None = None
    #: the stored-message index of each message sent, in the order the bridge sent them
    sent: deque[int] = field(default_factory=deque)
    last: int = 0
    value: float = 0.0
    #: the answer this request got (a result or a JSON-RPC error), as routed to its stream
    response: Any = None
    answer_index: int = 0
    answered: anyio.Event = field(default_factory=anyio.Event)


class CallStreams(EventStore):
    """The event store of one MCP session: ids from the calls' stored facts, nothing
    stored per event."""

    def __init__(self, bridge: _Waits) -> None:
        self._bridge = bridge
        self._by_request: dict[StreamId, OpenCall] = {}
        self._by_call: dict[str, OpenCall] = {}
        self._other = itertools.count(1)
        #: replays served, and the events each sent (the benchmark reads them)
        self.replays: list[int] = []

    # -- bookkeeping from the HTTP wrapper and the bridge ----------------------------------
    def expect(self, request_id: StreamId, call_id: str) -> None:
        """A `tools/call` request is about to be dispatched for `call_id`."""
        call = OpenCall(call_id, request_id)
        self._by_request[request_id] = call
        self._by_call[call_id] = call
        while len(self._by_call) > MAX_CALLS:
            oldest = next(iter(self._by_call))
            dropped = self._by_call.pop(oldest)
            self._by_request.pop(dropped.request_id, None)

    def call(self, request_id: StreamId) -> OpenCall | None:
        return self._by_request.get(request_id)

    # -- EventStore -------------------------------------------------------------------------
    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        call = self._by_request.get(stream_id)
        if call is None:  # not a call's stream (tools/list, the GET stream, ...)
            return f"x{next(self._other)}"
        if message is None:  # the priming event
            return event_id(0, call.call_id)
        if isinstance(message, mt.JSONRPCResponse | mt.JSONRPCError):
            call.last = max(call.last, call.answer_index)
            call.response = message
            call.answered.set()
        elif call.sent:
            call.last = call.sent.popleft()
        return event_id(call.last, call.call_id)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send what follows `last_event_id` from the stored facts, then follow the call to
        the answer its request got; None (the stream ends with the answer). An id this
        session did not give replays nothing."""
        parsed = parse_event_id(last_event_id)
        call = self._by_call.get(parsed[1]) if parsed is not None else None
        if parsed is None or call is None:
            self.replays.append(0)
            return None
        seen, sent = parsed[0], 0
        bridge = self._bridge
        latest: dict[str, Any] | None = None
        beat = time.monotonic()
        while True:
            answered = call.answered.is_set()
            record = await anyio.to_thread.run_sync(bridge.rt.call_record, call.call_id)
            messages: list[dict[str, Any]] = record["messages"] if record else []
            limit = call.answer_index if answered else len(messages)
            for index in range(seen + 1, limit + 1):
                m = messages[index - 1]
                if m["kind"] in ("result", "error"):
                    break
                latest, seen = m, index
                if call.token is not None:
                    elapsed, total = bridge._focus(m)
                    await self._progress(send_callback, call, index, _text(m), elapsed, total)
                    sent += 1
                beat = time.monotonic()
            if answered:
                await send_callback(
                    EventMessage(call.response, event_id(call.answer_index, call.call_id))
                )
                self.replays.append(sent + 1)
                return None
            if (
                call.token is not None
                and latest is not None
                and time.monotonic() - beat >= bridge.options.heartbeat_s
            ):
                elapsed, total = bridge._focus(latest)
                text = bridge._waiting_text(latest)
                await self._progress(send_callback, call, seen, text, elapsed, total)
                beat = time.monotonic()
            with anyio.move_on_after(bridge.options.poll_s):
                await call.answered.wait()

    async def _progress(
        self,
        send: EventCallback,
        call: OpenCall,
        index: int,
        text: str,
        value: float | None,
        total: float | None,
    ) -> None:
        assert call.token is not None
        call.value = max(call.value + 1, value if value is not None else 0.0)
        note = mt.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/progress",
            params={
                "progressToken": call.token,
                "progress": call.value,
                **({"total": total} if total is not None else {}),
                "message": text,
            },
        )
        await send(EventMessage(note, event_id(index, call.call_id)))


def _text(m: dict[str, Any]) -> str:
    from lineup_runtime_lite.serve._mapping import progress_text

    return progress_text(m)


async def _prime(
    transport: Any, stream_id: StreamId, protocol_version: str
) -> dict[str, Any] | None:
    """The priming event of a `tools/call` stream on every revision up to 2025-11-25,
    2025-03-26 included (the SDK primes only 2025-11-25 by itself): an id, empty data and
    `retry`. Other streams (`tools/list`, `ping`) answer at once and have nothing to resume."""
    store = transport._event_store
    if not isinstance(store, CallStreams) or protocol_version > "2025-11-25":
        return None
    if store.call(stream_id) is None:  # not a call's stream: nothing to resume
        return None
    return {"id": await store.store_event(stream_id, None), "data": "", "retry": RETRY_MS}


def install(bridge: _Waits, manager: Any) -> None:
    """Give each MCP session the SDK's streamable HTTP manager admits its own `CallStreams`
    and the priming rule above (the SDK's transport takes one event store for all
    sessions, and request ids repeat across sessions)."""
    admit = manager._admit_session

    def admit_with_streams(requestor: Any) -> Any:
        transport = admit(requestor)
        if transport is not None:
            transport._event_store = CallStreams(bridge)
            transport._retry_interval = RETRY_MS
            transport._mint_priming_event = partial(_prime, transport)
        return transport

    manager._admit_session = admit_with_streams


def streams_of(manager: Any, session_id: str | None) -> CallStreams | None:
    """The `CallStreams` of a live session (None for an unknown one)."""
    if not session_id:
        return None
    transport = manager._server_instances.get(session_id)
    store = getattr(transport, "_event_store", None)
    return store if isinstance(store, CallStreams) else None


def usable_call_id(call_id: Any) -> bool:
    """A call_id the runtime accepts (1–200 characters, no control characters): only
    such an id goes into an SSE event id, where a line break would end the field."""
    return (
        isinstance(call_id, str)
        and 1 <= len(call_id) <= 200
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in call_id)
    )


def tools_call_of(body: bytes) -> tuple[StreamId, Any] | None:
    """`(request id, the _meta call_id or None)` when a POST body is one `tools/call`."""
    if b"tools/call" not in body:  # most POSTs: parse nothing
        return None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("method") != "tools/call" or "id" not in doc:
        return None
    request_id = doc["id"]
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    params = doc.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    call_id = meta.get("io.lineup/call_id") if isinstance(meta, dict) else None
    return str(request_id), call_id
