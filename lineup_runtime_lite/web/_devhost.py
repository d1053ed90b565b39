"""The web dev Host's state over one `Runtime` (SPEC 14): Surface tokens per instance, the
timeline, Host events from the panel and from `sdk.host.ready()`, the test-only fault seam,
and a rebuild that moves the dev build's sessions to the new build. No HTTP here: the ASGI
apps in `_apps` call into this."""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.core.timestamps import format_ts
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.api.runtime import Runtime

__all__ = [
    "FAULTS_ENV",
    "Binding",
    "BridgeLimits",
    "DevHost",
    "failure_of",
    "faults_enabled",
]

log = logging.getLogger("lineup.dev")

#: The test-only fault seam (drop a frame, close a bridge) is off unless this is `1`.
FAULTS_ENV = "LINEUP_DEV_FAULTS"

#: Entries the timeline keeps per conversation (build entries count as one more).
TIMELINE_PER_CONVERSATION = 1_000
#: A result over this many bytes of JSON is kept in the timeline as its size and a preview
#: (the console's own answer and the outbox keep it whole): 1,000 entries of 4 MiB results
#: would hold 4 GiB per conversation.
TIMELINE_RESULT_BYTES = 16 * 1024
#: Characters of such a result's JSON the preview keeps.
TIMELINE_PREVIEW_CHARS = 400
#: Page loads remembered per instance, so a repeated `ready` of one load is ignored.
LOADS_REMEMBERED = 16

#: A token longer than this (characters) is refused unread.
MAX_TOKEN = 1024

#: Panel buttons → the Host lifecycle event each sends (`close` only unloads the Surface).
PANEL_EVENTS = {
    "confirm": "foreground_confirmed",
    "decline": "activation_failed",
    "leave": "user_left",
}


#: A timeline entry's `source` → its `origin` (SPEC 17's `data-origin`).
ORIGINS = {"agent": "agent", "ui": "ui", "host": "host", "runtime": "runtime", "build": "build"}

#: Console calls whose method the timeline remembers (for its entries' labels).
METHODS_REMEMBERED = 1_000
#: Outbox messages one read of the dev Host's poll takes (it reads on until none are left).
OUTBOX_PAGE = 500
#: Ids of the latest outbox messages remembered (was an answer stored?).
IDS_REMEMBERED = 4_096
#: Problems of a failed build kept for the page.
PROBLEMS_SHOWN = 20


def faults_enabled(env: dict[str, str] | None = None) -> bool:
    """Whether `LINEUP_DEV_FAULTS=1` turned the fault seam on."""
    return (env if env is not None else os.environ).get(FAULTS_ENV) == "1"


@dataclass(frozen=True)
class BridgeLimits:
    """What one Surface bridge may hold (SPEC 16.3).

    Attributes:
        frames: Answers and frames queued for a client, at most (one more closes it, 1008).
        wire_bytes: Their encoded size, at most (whichever bound comes first).
        all_wire_bytes: The encoded size queued for all bridges of the Host together (the
            bridge that passes it is closed, 1008): many unread bridges stay bounded too.
        subscriptions: Bridge subscriptions at once (`limit_exceeded` beyond).
        actions: UI Actions accepted on one bridge and not answered yet, at most (one more
            is refused before acceptance with `limit_exceeded`: nothing persisted).
        close_grace_s: How long a closed client has to read its close frame before its
            connection is dropped.
    """

    frames: int = 64
    wire_bytes: int = 16 * 1024 * 1024
    all_wire_bytes: int = 24 * 1024 * 1024
    subscriptions: int = 16
    actions: int = 256
    close_grace_s: float = 10.0


@dataclass(frozen=True)
class Binding:
    """What one Surface token grants: `get`, `subscribe` and `ready` of this instance."""

    token: str
    conversation_id: str
    scope: str
    instance: str


class Connection:
    """A Surface bridge, as the dev Host sees it: where to push, and its fault counters."""

    def __init__(self, binding: Binding, push: Callable[[dict[str, Any]], None]) -> None:
        self.binding = binding
        self.push = push
        self.drop_changed = 0
        self.close_requested: Callable[[], None] | None = None
        self.operation_subs: set[int] = set()
        #: The page load of a client that names none: this bridge.
        self.load = secrets.token_hex(8)


@dataclass
class DevHost:
    """One runtime shown to the author.

    Args:
        rt: The embedded runtime (its Host simulator on the `manual` policy: this Host sends
            the events).
        scope: The app being developed.
        apps_dir: The runtime's apps folder.
        policy: `manual` (the author confirms foreground in the panel) or `auto` (a Surface's
            `ready()` is followed by a confirmation).
        rebuild: Builds the project again and returns the new bundle (the CLI's builder);
            None: no rebuild on edit.
        faults: The test-only fault seam (`LINEUP_DEV_FAULTS=1`).
        bridge_limits: The bounds of each Surface bridge.
    """

    rt: Runtime
    scope: str
    apps_dir: Path
    policy: str = "manual"
    rebuild: Callable[[], Path] | None = None
    faults: bool = False
    bridge_limits: BridgeLimits = field(default_factory=BridgeLimits)
    #: What every bridge has queued, encoded (kept by the bridges, on the server's loop).
    bridge_bytes: int = 0
    host_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _bindings: dict[str, Binding] = field(default_factory=dict)
    _by_instance: dict[str, Binding] = field(default_factory=dict)
    _connections: set[Connection] = field(default_factory=set)
    #: conversation (None: build entries) -> its last entries, as (sequence, entry)
    _timeline: dict[str | None, deque[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    _timeline_next: int = 0
    #: instance -> the page loads whose `ready` counted
    _loads: dict[str, deque[str]] = field(default_factory=dict)
    #: The outbox position read up to (`rt.outbox.after`): each poll reads what is new.
    _outbox_seen: int = 0
    #: The ids of the messages polled last, newest last (is an answer stored?).
    _recent_ids: dict[str, None] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _call_ids: Any = field(default_factory=lambda: itertools.count(1))
    _session: str = field(default_factory=lambda: secrets.token_hex(3))
    #: The running build: its number (1 at start, one more per rebuild that changed it)
    #: and version; `failure` is the latest edit's failed build, while it stands (the
    #: running build is then the last good one).
    build: int = 1
    version: str = ""
    failure: dict[str, Any] | None = None
    #: call_id -> method of the console's and /mcp's calls (outbox messages do not name it)
    _methods: dict[str, str] = field(default_factory=dict)
    #: /mcp answers that were errors: rejected unless the outbox holds them (checked by poll)
    _maybe_rejected: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    # -- tokens --------------------------------------------------------------------------
    def surface_token(self, instance: str) -> Binding:
        """The Surface token of an instance (minted once; stable while the Host runs).

        Raises:
            LineupError: `usage_invalid` for an instance the runtime does not know.
        """
        with self._lock:
            known = self._by_instance.get(instance)
            if known is not None:
                return known
        for s in self.rt.sessions():
            if s["instance"] == instance:
                binding = Binding(
                    secrets.token_urlsafe(24), s["conversation_id"], s["scope"], instance
                )
                with self._lock:
                    self._bindings[binding.token] = binding
                    self._by_instance[instance] = binding
                return binding
        raise LineupError("usage_invalid", f"no instance {instance!r}")

    def binding(self, token: str) -> Binding | None:
        """The instance a Surface token grants, or None (a malformed token too)."""
        if len(token) > MAX_TOKEN:
            return None
        with self._lock:
            return self._bindings.get(token)

    def app_info(self, binding: Binding) -> dict[str, Any]:
        """`sdk.app` of an instance."""
        session = self._session_of(binding)
        return {
            "scope": binding.scope,
            "appSessionId": session["app_session_id"] if session else None,
            "conversationId": binding.conversation_id,
            "instance": binding.instance,
        }

    def _session_of(self, binding: Binding) -> dict[str, Any] | None:
        for s in self.rt.sessions(binding.scope):
            if s["conversation_id"] == binding.conversation_id:
                return s
        return None

    def surface_file(self, binding: Binding, rel: str) -> bytes | None:
        """A file of the `surface/` of the build the instance's session runs (for
        `index.html`, the Surface document the build wrote), as that build's manifest lists it, read from the version's verified install folder with
        its hash checked (`Runtime.app_file`); None for a file the manifest does not list.

        Raises:
            LineupError: `install_tampered` when the installed copy changed since install.
        """
        session = self._session_of(binding)
        if session is None:
            return None
        if rel == "index.html":  # the page: the built, signed document hosts render (18.2)
            document = self.rt.surface_document(binding.scope, session["version"])
            if document is not None:
                return document
        return self.rt.app_file(binding.scope, session["version"], f"surface/{rel}")

    # -- what the Host page shows --------------------------------------------------------
    def state(self, since: int = 0) -> dict[str, Any]:
        """Conversations with their App instances, the Inventory, the timeline from `since`."""
        self.poll()
        conversations: dict[str, list[dict[str, Any]]] = {}
        for s in self.rt.sessions():
            conversations.setdefault(s["conversation_id"], []).append(s)
        with self._lock:
            timeline = [
                entry
                for _, entry in sorted(
                    (e for q in self._timeline.values() for e in q if e[0] >= since),
                    key=lambda e: e[0],
                )
            ]
            total = self._timeline_next
        return {
            "conversations": [
                {"conversation_id": c, "instances": v} for c, v in conversations.items()
            ],
            "inventory": self.rt.inventory(),
            "timeline": timeline,
            "timeline_next": total,
            "build": self.build,
            "version": self.version,
            "build_failure": self.failure,
            "policy": self.policy,
        }

    def _note(self, entry: dict[str, Any]) -> None:
        """Add a timeline entry; a conversation keeps its last 1,000 (SPEC 16.3). Each
        carries its `origin` (SPEC 17): `agent`, `ui`, `host`, `runtime` or `build`."""
        entry = {**entry, "origin": ORIGINS[entry["source"]]}
        if "result" in entry:
            entry["result"] = _kept_result(entry["result"])
        if "at" not in entry:  # Host and build entries: when, on the runtime's clock
            entry["at"] = format_ts(self.rt.clock.now_ms())
        with self._lock:
            key = entry.get("conversation_id")
            kept = self._timeline.get(key)
            if kept is None:
                kept = self._timeline[key] = deque(maxlen=TIMELINE_PER_CONVERSATION)
            kept.append((self._timeline_next, entry))
            self._timeline_next += 1

    def poll(self) -> bool:
        """Move new outbox messages into the timeline; True when there were any (then
        Surfaces subscribed to operations are told)."""
        with self._lock:
            fresh = self._read_new()
            for m in fresh:
                self._note(self._agent_entry(m))
            if self._maybe_rejected:  # /mcp answers refused before acceptance: not stored
                for answer, conversation in self._maybe_rejected:
                    if not self._stored(answer):
                        self._note(
                            self._agent_entry(answer, rejected=True, conversation_id=conversation)
                        )
                self._maybe_rejected.clear()
        if fresh:
            self.operations_changed()
        return bool(fresh)

    def _read_new(self) -> list[AgentMessage]:
        """The outbox messages written since the last poll (a page at a time), never the
        history before: the outbox grows with every call the runtime ever answered."""
        fresh: list[AgentMessage] = []
        while True:
            page, self._outbox_seen = self.rt.outbox.after(self._outbox_seen, OUTBOX_PAGE)
            fresh += page
            for m in page:
                self._recent_ids[str(m.get("id"))] = None
            while len(self._recent_ids) > IDS_REMEMBERED:
                self._recent_ids.pop(next(iter(self._recent_ids)))
            if len(page) < OUTBOX_PAGE:
                return fresh

    def _agent_entry(self, message: Mapping[str, Any], **more: Any) -> dict[str, Any]:
        """An Agent message as a timeline entry: its method when the console sent it, and
        the build that answered (`last_good` while a later edit's build has failed)."""
        entry = {**message, "source": "agent", "build": self.build, **more}
        method = self._methods.get(str(message.get("call_id")))
        if method is not None:
            entry["method"] = method
        if self.failure is not None:
            entry["last_good"] = True
        return entry

    # -- the Agent console ---------------------------------------------------------------
    def call(self, conversation: Any, method: Any, params: Any) -> AgentMessage:
        """One console call with a fresh call_id; its answer (results arrive later too). A
        call refused before it was accepted (`invalid_params`, `unknown_method`: nothing is
        stored for it) still gets its timeline entry, marked `rejected`."""
        call_id = f"dev-{self._session}-{next(self._call_ids)}"
        with self._lock:
            self._remember(call_id, method)
        answer = self.rt.call(call_id, conversation, method, params)
        self.poll()
        if answer.get("kind") == "error" and not self._stored(answer):
            self._note(self._agent_entry(answer, rejected=True, conversation_id=str(conversation)))
        return answer

    def answered(self, answer: dict[str, Any], conversation: Any, method: Any) -> None:
        """A `/mcp` call's first answer (on the server's loop: nothing blocking here): its
        method for the timeline's labels, and an error queued for `poll`, which notes it as
        `rejected` when the outbox does not hold it (refused before acceptance)."""
        with self._lock:
            self._remember(str(answer.get("call_id")), method)
            if answer.get("kind") == "error":
                self._maybe_rejected.append((answer, str(conversation)[:200]))

    def _remember(self, call_id: str, method: Any) -> None:
        self._methods[call_id] = str(method)[:200]
        while len(self._methods) > METHODS_REMEMBERED:
            self._methods.pop(next(iter(self._methods)))

    def _stored(self, message: Mapping[str, Any]) -> bool:
        """Whether the outbox holds `message` (an accepted call's answers are all there),
        asked after a poll: an answer is stored before it is returned, so a stored one is
        among the last messages polled."""
        with self._lock:
            return str(message.get("id")) in self._recent_ids

    # -- UI Actions from Surfaces (SPEC 17) ----------------------------------------------
    def check_live(self, binding: Binding) -> None:
        """A Surface token acts only while its instance is its App session's: the session's
        latest activation.

        Raises:
            LineupError: `app_not_running` once the session is gone or another instance
                (a later activation) took its place.
        """
        session = self._session_of(binding)
        if session is None or session["instance"] != binding.instance:
            raise LineupError(
                "app_not_running",
                f"instance {binding.instance!r} is no longer its App session's",
                hint="a Surface acts only while the App session it shows lives; reload it",
            )

    def action_noted(
        self,
        binding: Binding,
        name: Any,
        client: Any,
        seq: Any,
        *,
        outcome: dict[str, Any] | None = None,
        error: LineupError | None = None,
        accepted: bool = True,
    ) -> None:
        """A UI Action's outcome (or its rejection before acceptance) in the timeline,
        origin `ui`."""
        entry: dict[str, Any] = {
            "source": "ui",
            "conversation_id": binding.conversation_id,
            "instance": binding.instance,
            "name": str(name)[:200],
            "action_id": f"{str(client)[:64]}:{seq}" if accepted else None,
            "stage": "error" if error is not None else "result",
        }
        if outcome is not None:
            entry["result"] = outcome.get("result")
            entry["revision"] = outcome.get("revision")
        if error is not None:
            entry["error"] = {"code": error.code, "message": error.message}
        self._note(entry)

    # -- Host events ---------------------------------------------------------------------
    def panel(self, button: str, instance: str) -> bool:
        """A Host panel button for an instance: `confirm`, `decline`, `leave` (`close`
        unloads the Surface in the page and sends nothing).

        Raises:
            LineupError: `usage_invalid` for an unknown button or instance.
        """
        if button == "close":
            return False
        if button not in PANEL_EVENTS:
            raise LineupError(
                "usage_invalid", f"unknown panel button {button!r}", hint="confirm, decline, leave"
            )
        binding = self.surface_token(instance)
        return self._event(PANEL_EVENTS[button], binding)

    def ready(self, binding: Binding, load: str) -> bool:
        """`sdk.host.ready()` of one page load of the instance: the Host (this server, not
        the Surface) emits `surface_loaded` for the instance, then, on the `auto` policy,
        confirms it. A repeat within one load is ignored (False, no timeline entry)."""
        with self._lock:
            loads = self._loads.get(binding.instance)
            if loads is None:
                loads = self._loads[binding.instance] = deque(maxlen=LOADS_REMEMBERED)
            if load in loads:
                return False
            loads.append(load)
        applied = self._event("surface_loaded", binding)
        if self.policy == "auto":
            applied = self._event("foreground_confirmed", binding) or applied
        return applied

    def _event(self, event: str, binding: Binding) -> bool:
        applied = self.rt.host.event(
            event,
            conversation=binding.conversation_id,
            scope=binding.scope,
            instance=binding.instance,
        )
        self._note(
            {
                "source": "host",
                "event": event,
                "conversation_id": binding.conversation_id,
                "instance": binding.instance,
                "applied": applied,
            }
        )
        self.poll()
        return applied

    # -- Surface bridges -----------------------------------------------------------------
    def attach(self, conn: Connection) -> None:
        with self._lock:
            self._connections.add(conn)

    def detach(self, conn: Connection) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _connections_of(self, instance: str | None) -> list[Connection]:
        with self._lock:
            return [
                c for c in self._connections if instance is None or c.binding.instance == instance
            ]

    def operations(self, binding: Binding) -> list[dict[str, Any]]:
        return self.rt.surface(binding.conversation_id, binding.scope).operations()

    def operations_changed(self) -> None:
        """Push the operation facts to every Surface subscribed to them."""
        for conn in self._connections_of(None):
            if not conn.operation_subs:
                continue
            try:
                ops = self.operations(conn.binding)
            except LineupError:
                continue
            for sub in list(conn.operation_subs):
                conn.push({"sub": sub, "frame": "operations", "operations": ops})

    # -- the fault seam ------------------------------------------------------------------
    def fault(self, kind: str, instance: str | None, count: int = 1) -> int:
        """Test-only (`LINEUP_DEV_FAULTS=1`): `drop_frame` drops the next `count` change
        frames of the instance's bridges; `reconnect` closes them; `crash_worker` kills the
        app's running workers (what they run ends `delivery_interrupted`). Returns how many
        bridges (workers, for `crash_worker`).

        Raises:
            LineupError: `usage_invalid` when the seam is off or the fault is unknown.
        """
        if not self.faults:
            raise LineupError(
                "usage_invalid",
                "the dev Host's fault seam is off",
                hint=f"start lineup dev with {FAULTS_ENV}=1 (tests only)",
            )
        if kind == "crash_worker":  # kill the app's workers, as a crash would
            return self.rt.kill_workers(self.scope)
        conns = self._connections_of(instance)
        if kind == "drop_frame":
            for c in conns:
                c.drop_changed += count
        elif kind == "reconnect":
            for c in conns:
                if c.close_requested is not None:
                    c.close_requested()
        else:
            raise LineupError(
                "usage_invalid",
                f"unknown fault {kind!r}",
                hint="drop_frame, reconnect, crash_worker",
            )
        return len(conns)

    # -- rebuild on edit -----------------------------------------------------------------
    def rebuilt(self) -> dict[str, Any]:
        """The project changed: build, install as a dev build, move the dev sessions to it
        (in-flight deliveries end `delivery_interrupted`), and reload every open Surface.

        Raises:
            LineupError: the build's problem (the previous build keeps running).
        """
        assert self.rebuild is not None
        bundle = self.rebuild()
        installed = self.rt.install(bundle, dev_build=True)
        moved = self.rt.move_dev_sessions(self.scope) if installed.action != "unchanged" else 0
        self.poll()
        if installed.action != "unchanged":
            self.build += 1
            for conn in self._connections_of(None):
                conn.push({"type": "reload"})
        self.version = installed.version
        self.failure = None
        entry = {
            "source": "build",
            "build": self.build,
            "version": installed.version,
            "action": installed.action,
            "moved_sessions": moved,
        }
        self._note(entry)
        if moved:
            self._note({"source": "runtime", "event": "sessions_moved", "moved_sessions": moved})
        return entry

    def build_failed(self, exc: LineupError) -> dict[str, Any]:
        """An edit's build failed: the running build stays (the last good one); the page
        shows the failure, each problem with its file and line, until a build succeeds."""
        self.failure = failure_of(exc, running=self.build)
        entry = {"source": "build", "action": "failed", **self.failure}
        self._note(entry)
        return entry


def failure_of(exc: LineupError, *, running: int) -> dict[str, Any]:
    """A failed build for the page: its code and message, and each problem (`file`,
    `line`, `code`, `message`) from the build's diagnostics."""
    problems = []
    details = exc.details if isinstance(exc.details, list) else []
    for d in details[:PROBLEMS_SHOWN]:
        if not isinstance(d, dict) or d.get("severity", "error") != "error":
            continue
        problems.append(
            {
                "code": str(d.get("code") or exc.code),
                "message": str(d.get("message") or ""),
                "file": d.get("file"),
                "line": d.get("line"),
            }
        )
    return {
        "code": exc.code,
        "message": exc.message,
        "hint": exc.hint,
        "problems": problems,
        "running": running,
    }


def _kept_result(result: Any) -> Any:
    """`result` as the timeline keeps it: whole up to `TIMELINE_RESULT_BYTES` of JSON, else
    `{"truncated": {"bytes": n, "preview": the first characters}}`."""
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
    size = len(text.encode("utf-8"))
    if size <= TIMELINE_RESULT_BYTES:
        return result
    return {"truncated": {"bytes": size, "preview": text[:TIMELINE_PREVIEW_CHARS]}}
