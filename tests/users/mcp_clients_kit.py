"""Four real MCP clients as blocking drivers of `lineup serve`, each with its own defaults.

A driver opens its client (which starts the server over stdio, as the client's users
configure it), lists tool names, and calls a tool with optional request `_meta`; every
answer comes back as one `Answer`, whatever the client's own result type. Every operation
takes a deadline. What each client does by default was read in its installed sources:

- the official Python SDK (`mcp.ClientSession`, `mcp/client/session.py`): no request timeout;
  a progress token only with a `progress_callback` (`shared/jsonrpc_dispatcher.py`);
- fastmcp's `Client` (`fastmcp/client/client.py`, `mixins/tools.py`): no request timeout; it
  always passes `default_progress_handler`, so every call carries a progress token;
  `call_tool` raises `ToolError` on `isError` (`raise_on_error=True`); its stdio transport keeps
  the server alive after the context (`keep_alive=True`) until `close()`;
- the TypeScript SDK (`@modelcontextprotocol/sdk` 1.32, `shared/protocol.d.ts`): 60 s
  (`DEFAULT_REQUEST_TIMEOUT_MSEC`), a progress token only with `onprogress`; driven by
  `mcp_ts/client.mjs`;
- the MCP Inspector CLI (2.12, `clients/cli/build/index.js`): one process a request, built
  with `progress: false` and no `timeout`, so the SDK's 60 s; `--tool-metadata k=v` becomes
  the request's `_meta` (values parsed as JSON); exit 5 for a result with `isError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, cast

import anyio
import anyio.from_thread
import mcp.types as mt

__all__ = [
    "HERE",
    "INSPECTOR_ENV",
    "TS_CLIENT_ENV",
    "Answer",
    "Driver",
    "FastMcpDriver",
    "InspectorDriver",
    "PythonSdkDriver",
    "TsSdkDriver",
    "kill_strays",
    "lineup_command",
    "locate_inspector",
    "locate_ts_client",
]

HERE = Path(__file__).resolve().parent
#: CI installs the MCP Inspector and names its binary here (see .ci/run).
INSPECTOR_ENV = "LINEUP_MCP_INSPECTOR"
#: CI runs `npm ci` for mcp_ts/ into a folder and names it here (see .ci/run).
TS_CLIENT_ENV = "LINEUP_MCP_TS_CLIENT"
NPM_CI_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Answer:
    """One `tools/call` answer as any client reports it."""

    is_error: bool
    structured: dict[str, Any] | None = None
    text: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    #: the client raised instead of answering (a timeout, a validation failure): its message
    raised: str | None = None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Answer:
        """An answer from a `CallToolResult` in its wire form (the TS SDK, the Inspector)."""
        content = doc.get("content") or []
        return cls(
            is_error=bool(doc.get("isError")),
            structured=doc.get("structuredContent"),
            text="\n".join(str(c.get("text", "")) for c in content if c.get("type") == "text"),
            meta=dict(doc.get("_meta") or {}),
        )


class Driver(Protocol):
    """What the suite does with a client."""

    name: str
    #: whether the client's default `tools/call` carries a progress token
    sends_progress_token: bool

    def list_tools(self, timeout_s: float) -> list[str]: ...

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None, timeout_s: float
    ) -> Answer: ...

    def close(self) -> None: ...


def lineup_command() -> str:
    """The `lineup` script of this interpreter's environment, as a user's client config names it."""
    script = Path(sys.executable).parent / "lineup"
    assert script.exists(), f"{script} is missing: install the checkout (pip install -e .)"
    return str(script)


def _text(content: list[mt.ContentBlock]) -> str:
    return "\n".join(c.text for c in content if isinstance(c, mt.TextContent))


def _deadline_error(client: str, what: str, timeout_s: float) -> AssertionError:
    return AssertionError(f"{client}: {what}: no answer within {timeout_s:.0f}s")


class _PortalDriver:
    """An async client kept open in a blocking portal's event loop thread."""

    name = ""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())

    def _run(self, what: str, timeout_s: float, fn: Any, *args: Any) -> Any:
        async def bounded() -> Any:
            with anyio.fail_after(timeout_s):
                return await fn(*args)

        try:
            return self._portal.call(bounded)
        except TimeoutError:
            raise _deadline_error(self.name, what, timeout_s) from None

    def close(self) -> None:
        self._stack.close()


class PythonSdkDriver(_PortalDriver):
    """`mcp.ClientSession` over `stdio_client`, initialized, with no option set."""

    name = "python-sdk"
    sends_progress_token = False

    def __init__(self, cwd: Path, args: list[str], log: Path, open_timeout_s: float) -> None:
        super().__init__()
        self._session: Any = None
        self.log = log

        @asynccontextmanager
        async def connected() -> AsyncIterator[Any]:
            from mcp import ClientSession
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=lineup_command(), args=args, cwd=str(cwd))
            with log.open("a") as err:
                async with (
                    stdio_client(params, errlog=err) as (r, w),
                    ClientSession(r, w) as session,
                ):
                    with anyio.fail_after(open_timeout_s):
                        await session.initialize()
                    yield session

        try:
            self._session = self._stack.enter_context(
                self._portal.wrap_async_context_manager(connected())
            )
        except BaseException:
            self._stack.close()
            raise

    def list_tools(self, timeout_s: float) -> list[str]:
        listed: mt.ListToolsResult = self._run("tools/list", timeout_s, self._session.list_tools)
        return [t.name for t in listed.tools]

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None, timeout_s: float
    ) -> Answer:
        async def call() -> mt.CallToolResult:
            result: mt.CallToolResult = await self._session.call_tool(
                name, arguments, meta=cast(mt.RequestParamsMeta, meta) if meta else None
            )
            return result

        result: mt.CallToolResult = self._run(f"tools/call {name}", timeout_s, call)
        return Answer(
            is_error=bool(result.is_error),
            structured=result.structured_content,
            text=_text(result.content),
            meta=dict(result.meta or {}),
        )


class FastMcpDriver(_PortalDriver):
    """fastmcp's `Client` over its `StdioTransport`, with no option set."""

    name = "fastmcp"
    sends_progress_token = True  # its default_progress_handler is always passed

    def __init__(self, cwd: Path, args: list[str], log: Path, open_timeout_s: float) -> None:
        super().__init__()
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport

        self._transport: Any = StdioTransport(lineup_command(), args, cwd=str(cwd), log_file=log)
        client: Any = Client(self._transport)  # its __aenter__/__aexit__ are untyped

        @asynccontextmanager
        async def connected() -> AsyncIterator[Any]:
            try:
                with anyio.fail_after(open_timeout_s):
                    await client.__aenter__()
                try:
                    yield client
                finally:
                    await client.__aexit__(None, None, None)
            finally:
                await self._transport.close()  # keep_alive=True: the server outlives the context

        try:
            self._client: Any = self._stack.enter_context(
                self._portal.wrap_async_context_manager(connected())
            )
        except BaseException:
            self._stack.close()
            raise

    def list_tools(self, timeout_s: float) -> list[str]:
        tools: list[mt.Tool] = self._run("tools/list", timeout_s, self._client.list_tools)
        return [t.name for t in tools]

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None, timeout_s: float
    ) -> Answer:
        from fastmcp.exceptions import ToolError

        async def call() -> Answer:
            try:
                got = await self._client.call_tool(name, arguments, meta=meta)
            except ToolError as exc:  # its default for a result with isError
                return Answer(is_error=True, text=str(exc))
            return Answer(
                is_error=bool(got.is_error),
                structured=got.structured_content,
                text=_text(got.content),
                meta=dict(got.meta or {}),
            )

        answer: Answer = self._run(f"tools/call {name}", timeout_s, call)
        return answer


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


class TsSdkDriver:
    """The TypeScript SDK's `Client` over `StdioClientTransport`, through `mcp_ts/client.mjs`."""

    name = "ts-sdk"
    sends_progress_token = False

    def __init__(
        self, folder: Path, cwd: Path, args: list[str], log: Path, open_timeout_s: float
    ) -> None:
        self._err = log.open("a")
        self._proc = subprocess.Popen(
            ["node", str(folder / "client.mjs"), lineup_command(), *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,  # the server's stderr too: the transport inherits it
            text=True,
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        self._answers: dict[int | None, dict[str, Any]] = {}
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(
            target=_pump, args=(self._proc.stdout, self._lines), daemon=True
        )
        self._reader.start()
        self._next = 0
        self._lock = threading.Lock()
        try:
            hello = self._await(None, "connect", open_timeout_s)
            assert "error" not in hello, f"{self.name}: connect: {hello['error']}"
        except BaseException:
            self.close()
            raise

    def _await(self, key: int | None, what: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while key not in self._answers:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _deadline_error(self.name, what, timeout_s)
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"{self.name}: {what}: the driver exited")
            doc: dict[str, Any] = json.loads(line)
            self._answers[doc.get("id")] = doc
        return self._answers.pop(key)

    def _request(self, body: dict[str, Any], what: str, timeout_s: float) -> dict[str, Any]:
        assert self._proc.stdin is not None
        with self._lock:
            self._next += 1
            key = self._next
            self._proc.stdin.write(json.dumps({"id": key, **body}) + "\n")
            self._proc.stdin.flush()
            return self._await(key, what, timeout_s)

    def list_tools(self, timeout_s: float) -> list[str]:
        doc = self._request({"op": "list"}, "tools/list", timeout_s)
        assert "error" not in doc, f"{self.name}: tools/list: {doc['error']}"
        return [t["name"] for t in doc["result"]["tools"]]

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None, timeout_s: float
    ) -> Answer:
        body: dict[str, Any] = {"op": "call", "name": name, "arguments": arguments}
        if meta:
            body["_meta"] = meta
        doc = self._request(body, f"tools/call {name}", timeout_s)
        if "error" in doc:
            return Answer(is_error=True, raised=f"{doc['error']}")
        return Answer.from_json(doc["result"])

    def op(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        """Another request of client.mjs (`resources`, `templates`, `read` with `uri`): its
        result, or `{"error": ...}` as the SDK raised it."""
        doc = self._request({"op": op, **fields}, op, timeout_s)
        return {"error": doc["error"]} if "error" in doc else dict(doc["result"])

    def close(self) -> None:
        try:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
        finally:
            _kill_group(self._proc)
            self._reader.join(timeout=10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._err.close()


class InspectorDriver:
    """`mcp-inspector --cli`: one process per request, which starts the server itself."""

    name = "inspector"
    sends_progress_token = False

    def __init__(self, binary: str, cwd: Path, args: list[str], log: Path) -> None:
        self._argv = [binary, "--cli", "--format", "json", "-q", lineup_command(), *args]
        self._cwd = cwd
        self._log = log

    def _run(self, what: str, timeout_s: float, *method: str) -> tuple[int, dict[str, Any]]:
        with self._log.open("a") as err:
            proc = subprocess.Popen(
                [*self._argv, *method],
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
            try:
                out, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise _deadline_error(self.name, what, timeout_s) from None
            finally:
                _kill_group(proc)
                if proc.stdout is not None:
                    proc.stdout.close()
        try:
            doc: dict[str, Any] = json.loads(out) if out.strip() else {}
        except json.JSONDecodeError:
            raise AssertionError(f"{self.name}: {what}: not JSON: {out[:500]!r}") from None
        return proc.returncode, doc

    def list_tools(self, timeout_s: float) -> list[str]:
        code, doc = self._run("tools/list", timeout_s, "--method", "tools/list")
        assert code == 0, f"{self.name}: tools/list: exit {code}: {doc}"
        return [t["name"] for t in doc.get("result", doc)["tools"]]

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, str] | None, timeout_s: float
    ) -> Answer:
        method = ["--method", "tools/call", "--tool-name", name]
        method += ["--tool-args-json", json.dumps(arguments)]
        for key, value in (meta or {}).items():
            # values are parsed as JSON: a quoted string stays a string whatever it holds
            method += ["--tool-metadata", f"{key}={json.dumps(value)}"]
        code, doc = self._run(f"tools/call {name}", timeout_s, *method)
        if "result" in doc and code in (0, 5):  # 5: the result has isError
            return Answer.from_json(doc["result"])
        return Answer(is_error=True, raised=f"exit {code}: {doc}")

    def close(self) -> None:
        pass


def locate_inspector() -> str | None:
    """The Inspector binary CI names in LINEUP_MCP_INSPECTOR, or None when it is not set."""
    path = os.environ.get(INSPECTOR_ENV)
    if not path:
        return None
    assert Path(path).exists(), f"{INSPECTOR_ENV}={path} does not exist"
    return path


def locate_ts_client() -> Path | str:
    """The folder holding mcp_ts/ with its node_modules: LINEUP_MCP_TS_CLIENT (CI), else an
    `npm ci` into a temporary folder cached by the lock file's hash. A string says why not."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    named = os.environ.get(TS_CLIENT_ENV)
    source = HERE / "mcp_ts"
    if named:
        folder = Path(named)
        assert (folder / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
            f"{TS_CLIENT_ENV}={named} holds no node_modules/@modelcontextprotocol/sdk"
        )
    else:
        if shutil.which("npm") is None:
            return "npm is not on PATH"
        lock = (source / "package-lock.json").read_bytes()
        folder = (
            Path(tempfile.gettempdir()) / f"lineup-mcp-ts-{hashlib.sha256(lock).hexdigest()[:12]}"
        )
        folder.mkdir(exist_ok=True)
        with (folder / ".lock").open("w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # one npm ci at a time per cache folder
            if not (folder / ".installed").exists():
                for name in ("package.json", "package-lock.json"):
                    shutil.copyfile(source / name, folder / name)
                done = subprocess.run(
                    ["npm", "ci", "--no-audit", "--no-fund", "--silent"],
                    cwd=folder,
                    capture_output=True,
                    text=True,
                    timeout=NPM_CI_TIMEOUT_S,
                    check=False,
                )
                assert done.returncode == 0, f"npm ci in {folder}: {done.stdout}{done.stderr}"
                (folder / ".installed").write_text("ok\n")
    script = folder / "client.mjs"
    wanted = (source / "client.mjs").read_bytes()
    if not script.exists() or script.read_bytes() != wanted:
        script.write_bytes(wanted)
    return folder


def kill_strays(root: Path) -> list[int]:
    """Kill (by pid) any process still running whose command line names `root` — a server
    a client failed to stop; returns their pids."""
    killed: list[int] = []
    needle = str(root).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


@contextlib.contextmanager
def closing(driver: Driver) -> Iterator[Driver]:
    """`driver`, closed however the block ends."""
    try:
        yield driver
    finally:
        driver.close()
