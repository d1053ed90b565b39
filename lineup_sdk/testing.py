"""Call a MiniApp's tools in-process, as the runtime would, without a worker or a bundle.

```python
from lineup_sdk.testing import ToolClient
from my_app.tools import tools

client = ToolClient(tools)
added = client.call("todo.add", {"title": "milk"})
assert added.ok and added.result["count"] == 1
assert client.session_data.get_sync().revision == 1
assert client.call("todo.complete", {"item_id": "nope"}).code == "app.not_found"
```

Params are checked against the tool's input schema exactly as the build derives it (closed:
an unknown key or `"2"` for an integer is `invalid_params`), the handler runs with a real
`ToolContext` over in-memory session data (get / replace with revision CAS, subscribe), the
result is checked against the result schema (`handler_result_invalid`), and a `ToolError`
becomes `app.<code>`. For runtime-delivered tools (Pomodoro) and activation behaviour, use
`lineup_runtime_lite.testing`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk._extract import _Extractor
from lineup_sdk._receive import Dispatcher
from lineup_sdk._registry import ToolRegistry
from lineup_sdk.context import Snapshot, ToolContext, session_data_blob
from lineup_sdk.errors import LineupError

__all__ = ["CallResult", "MemorySessionData", "ToolClient"]


def _canonical(data: Any) -> bytes:
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


class MemorySessionData:
    """In-memory session data with the runtime's rules: `get()` → `Snapshot(None, 0)` at
    first; `replace(data, expected_revision=n)` → revision n+1, or
    `session_data_revision_conflict`; a JSON object of at most 1 MiB
    (`session_data_invalid`, `session_data_too_large`); subscribers get the current
    snapshot, then every change."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str, Snapshot], None]] = []
        self._snap = Snapshot(None, 0)
        if data is not None:
            self.replace_sync(data, expected_revision=0)

    async def get(self) -> Snapshot:
        """Read the current snapshot."""
        return self.get_sync()

    async def replace(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """Replace the whole object if the revision is still `expected_revision`."""
        return self.replace_sync(data, expected_revision=expected_revision)

    def get_sync(self) -> Snapshot:
        """`get()` for sync handlers and tests (a deep copy: the stored data never changes
        behind a handler's back)."""
        with self._lock:
            return Snapshot(copy.deepcopy(self._snap.data), self._snap.revision)

    def replace_sync(self, data: dict[str, Any], *, expected_revision: int) -> Snapshot:
        """`replace()` for sync handlers and tests.

        Raises:
            LineupError: `session_data_invalid`, `session_data_too_large`,
                `session_data_revision_conflict`.
        """
        blob = session_data_blob(data, expected_revision)  # the runtime's own rules
        with self._lock:
            if self._snap.revision != expected_revision:
                raise LineupError(
                    "session_data_revision_conflict",
                    f"session data is at revision {self._snap.revision}, not {expected_revision}",
                )
            self._snap = Snapshot(json.loads(blob), self._snap.revision + 1)
            snap, listeners = self._snap, list(self._listeners)
        for listener in listeners:
            listener("session_data.changed", Snapshot(copy.deepcopy(snap.data), snap.revision))
        return Snapshot(copy.deepcopy(snap.data), snap.revision)

    def subscribe(self, listener: Callable[[str, Snapshot], None]) -> Callable[[], None]:
        """Register a listener; it gets the current snapshot first. Returns the function
        that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)
            snap = Snapshot(copy.deepcopy(self._snap.data), self._snap.revision)
        listener("session_data.snapshot", snap)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe


@dataclass(frozen=True)
class CallResult:
    """What the Agent would receive: `ok` with a JSON `result`, or an `error` object
    `{code, message, details?}`."""

    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def code(self) -> str | None:
        """The error code (`invalid_params`, `app.not_found`, ...), or None when ok."""
        return None if self.error is None else str(self.error["code"])


def _problems(schema: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    from jsonschema import Draft202012Validator, FormatChecker

    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    out = []
    for err in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        path = "".join(
            "/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path
        )
        out.append({"path": path, "message": err.message})
    return out


class ToolClient:
    """Calls the tools of one registry the way the runtime delivers them.

    Args:
        registry: The app's `define_agent_tools(...)` registry.
        conversation_id: The conversation every call comes from.
        app_session_id: The App session the calls are delivered to.
        session_data: The session's data (default: empty `MemorySessionData`).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        conversation_id: str = "c1",
        app_session_id: str = "test-session",
        session_data: MemorySessionData | None = None,
    ) -> None:
        self.registry = registry
        self.conversation_id = conversation_id
        self.app_session_id = app_session_id
        self.session_data = session_data if session_data is not None else MemorySessionData()
        self._dispatcher = Dispatcher(registry)
        self._specs: dict[str, dict[str, Any]] = {}
        self._count = 0

    def spec(self, method: str) -> dict[str, Any]:
        """The tool's description and schemas as the build would put them in the manifest.

        Raises:
            LineupError: `unknown_method`; `usage_invalid` for a runtime-delivered tool;
                `handler_signature_mismatch` when its schemas cannot be derived.
        """
        if method in self._specs:
            return self._specs[method]
        decl = self.registry.get(method)
        if decl is None:
            raise LineupError("unknown_method", f"{self.registry.app_scope} declares no {method!r}")
        if decl.delivery == "runtime":
            raise LineupError(
                "usage_invalid",
                f"{method} is delivered by the runtime; test it with lineup_runtime_lite.testing",
                exit_code=2,
            )
        extractor = _Extractor(Path.cwd())
        spec = extractor.tool(self.registry, decl)
        if spec is None or extractor.problems:
            first = extractor.problems[0] if extractor.problems else None
            raise LineupError(
                first["code"] if first else "handler_signature_mismatch",
                first["message"] if first else f"cannot derive the schemas of {method}",
            )
        self._specs[method] = spec
        return spec

    async def acall(
        self, method: str, params: Any = None, *, call_id: str | None = None
    ) -> CallResult:
        """Call `method` with `params` (default `{}`) and return what the Agent would get."""
        spec = self.spec(method)
        params = {} if params is None else params
        problems = (
            [{"path": "", "message": "params must be a JSON object"}]
            if not isinstance(params, dict)
            else _problems(spec["input_schema"], params)
        )
        if problems:
            return CallResult(
                False,
                error={
                    "code": "invalid_params",
                    "message": f"params of {method} do not match its input schema",
                    "details": problems,
                },
            )
        self._count += 1
        ctx = ToolContext(
            call_id=call_id or f"call-{self._count}",
            app_scope=self.registry.app_scope,
            app_session_id=self.app_session_id,
            conversation_id=self.conversation_id,
            session_data=self.session_data,
        )
        outcome = await self._dispatcher.dispatch(method, copy.deepcopy(params), ctx)
        if not outcome.ok:
            return CallResult(False, error=outcome.error)
        try:
            result = json.loads(_canonical(outcome.result))
        except (TypeError, ValueError) as exc:
            problems = [{"path": "", "message": f"the result is not JSON: {exc}"}]
        else:
            problems = _problems(spec["result_schema"], result)
        if problems:
            return CallResult(
                False,
                error={
                    "code": "handler_result_invalid",
                    "message": f"the result of {method} does not match its result schema",
                    "details": problems,
                },
            )
        return CallResult(True, result=result)

    def call(self, method: str, params: Any = None, *, call_id: str | None = None) -> CallResult:
        """`acall()` from synchronous code (not inside a running event loop)."""
        return asyncio.run(self.acall(method, params, call_id=call_id))
