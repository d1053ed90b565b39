"""`MemoryFacts`: the `Facts` port in plain Python (dicts and lists, no SQL).

A second implementation of the port `SqliteFacts` implements, with the same reads (the same
typed records, in the orders of its ORDER BY clauses) and the same guarded writes (a guard
that finds no row raises `LostRace`). It shows the port is narrow, and it is what the
transition-level model tests and conformance replay run on. `snapshot()` / `restore()` (or
`savepoint()`) give a step the savepoint semantics of a group commit.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from lineup_runtime_lite.decisions import (
    ActivationUpdate,
    CallState,
    Change,
    EndOperation,
    IntentDelivered,
    MoveSession,
    NewActivation,
    NewCall,
    NewIMRecord,
    NewIntent,
    NewOperation,
    NewSession,
    Record,
    ReopenActivation,
    ReplaceSessionData,
    SupersedeIntents,
)
from lineup_runtime_lite.store.facts import LostRace
from lineup_runtime_lite.store.records import Activation, Call, Intent, Operation, Session
from lineup_sdk.context import Snapshot

__all__ = ["ConstraintViolation", "MemoryFacts"]

_FINAL = ("result", "error")
_CALL_STATES = ("queued", "delivered", "running", "done")
_ACTIVATION_STATES = ("starting", "ready", "failed", "cancelled")
_OPERATION_STATES = ("focusing", "completed", "interrupted")


class ConstraintViolation(Exception):
    """A write broke a key or CHECK constraint the SQLite schema declares (a bug in the
    decision, not a lost race)."""


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(slots=True)
class _SessionRow:
    app_session_id: str
    conversation_id: str
    scope: str
    version: str
    created_ms: int
    next_seq: int = 1


@dataclass(slots=True)
class _ActivationRow:
    rowid: int
    activation_id: str
    app_session_id: str
    trigger_call_id: str
    state: str
    requires_foreground: bool
    deadline_ms: int
    created_ms: int
    worker_ready: bool = False
    foreground: bool = False
    reason: str | None = None
    ended_ms: int | None = None


@dataclass(slots=True)
class _CallRow:
    rowid: int
    record: Call
    created_ms: int


@dataclass(slots=True)
class _Receipt:
    stage: str
    n: int
    body: str


@dataclass(slots=True)
class _OutboxRow:
    id: int
    msg_id: str
    call_id: str
    body: str
    acked: bool = False


@dataclass(slots=True)
class _OperationRow:
    rowid: int
    record: Operation
    ended_ms: int | None = None


@dataclass(slots=True)
class _IntentRow:
    id: int
    dedup_key: str
    body: str
    instance: str
    delivered: bool = False
    superseded: bool = False


@dataclass(slots=True)
class _Tables:
    """Every table, and the counters SQLite keeps (rowids, AUTOINCREMENT)."""

    meta: dict[str, str] = field(default_factory=dict)
    versions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    apps: dict[str, str] = field(default_factory=dict)
    sessions: dict[str, _SessionRow] = field(default_factory=dict)
    activations: dict[str, _ActivationRow] = field(default_factory=dict)
    calls: dict[str, _CallRow] = field(default_factory=dict)
    receipts: dict[str, list[_Receipt]] = field(default_factory=dict)
    outbox: list[_OutboxRow] = field(default_factory=list)
    session_data: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    operations: dict[str, _OperationRow] = field(default_factory=dict)
    im_records: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    intents: list[_IntentRow] = field(default_factory=list)
    rowid: int = 0
    outbox_seq: int = 0
    intent_seq: int = 0

    def next_rowid(self) -> int:
        self.rowid += 1
        return self.rowid


class MemoryFacts:
    """`Facts` in memory. Not thread-safe: one owner, like the loop's connection."""

    def __init__(self) -> None:
        self._t = _Tables()

    # -- savepoints ----------------------------------------------------------------------
    def snapshot(self) -> object:
        """An opaque copy of every table, for `restore()`."""
        return copy.deepcopy(self._t)

    def restore(self, snapshot: object) -> None:
        """Go back to what `snapshot()` returned (a rollback to a savepoint)."""
        assert isinstance(snapshot, _Tables)
        self._t = copy.deepcopy(snapshot)

    @contextmanager
    def savepoint(self) -> Iterator[MemoryFacts]:
        """Run a step: any exception (a `LostRace` among them) undoes all it wrote."""
        saved = self.snapshot()
        try:
            yield self
        except BaseException:
            self.restore(saved)
            raise

    def dump(self) -> dict[str, Any]:
        """Every table as plain data (for tests comparing two states)."""
        return {
            name: copy.deepcopy(getattr(self._t, name))
            for name in (
                "apps",
                "sessions",
                "activations",
                "calls",
                "receipts",
                "outbox",
                "session_data",
                "operations",
                "im_records",
                "intents",
            )
        }

    # -- calls and messages --------------------------------------------------------------
    def call(self, call_id: str) -> Call | None:
        row = self._t.calls.get(call_id)
        return row.record if row is not None else None

    def latest_message(self, call_id: str) -> dict[str, Any] | None:
        receipts = self._t.receipts.get(call_id)
        if not receipts:
            return None
        out: dict[str, Any] = json.loads(max(receipts, key=lambda r: r.n).body)
        return out

    def messages(self, call_id: str) -> list[dict[str, Any]]:
        receipts = sorted(self._t.receipts.get(call_id, []), key=lambda r: r.n)
        return [json.loads(r.body) for r in receipts]

    def finals(self, call_ids: list[str]) -> list[dict[str, Any]]:
        """The committed final messages among `call_ids`."""
        out = []
        for call_id in call_ids:
            msg = self.latest_message(call_id)
            if msg is not None and msg["stage"] in _FINAL:
                out.append(msg)
        return out

    # -- sessions and activations --------------------------------------------------------
    def session(self, conversation_id: str, scope: str) -> Session | None:
        for row in self._t.sessions.values():
            if row.conversation_id == conversation_id and row.scope == scope:
                return _session(row)
        return None

    def session_and_activation(
        self, conversation_id: str, scope: str
    ) -> tuple[Session | None, Activation | None]:
        session = self.session(conversation_id, scope)
        if session is None:
            return None, None
        return session, self.current_activation(session.app_session_id)

    def session_by_id(self, app_session_id: str) -> Session | None:
        row = self._t.sessions.get(app_session_id)
        return _session(row) if row is not None else None

    def app_version(self, scope: str) -> str | None:
        return self._t.apps.get(scope)

    def activation(self, activation_id: str) -> Activation | None:
        row = self._t.activations.get(activation_id)
        return _activation(row) if row is not None else None

    def current_activation(self, app_session_id: str) -> Activation | None:
        rows = [a for a in self._t.activations.values() if a.app_session_id == app_session_id]
        if not rows:
            return None
        return _activation(max(rows, key=lambda a: (a.created_ms, a.rowid)))

    def _calls_where(self, **match: Any) -> list[_CallRow]:
        return [
            row
            for row in self._t.calls.values()
            if all(getattr(row.record, k) == v for k, v in match.items())
        ]

    def waiting_calls(self, activation_id: str) -> list[Call]:
        rows = self._calls_where(activation_id=activation_id, state="queued")
        return [r.record for r in sorted(rows, key=_by_seq)]

    def delivered_calls(self, app_session_id: str | None = None) -> list[Call]:
        """Calls left `delivered` (of one session, or all, oldest first)."""
        if app_session_id is None:
            rows = sorted(
                self._calls_where(state="delivered"), key=lambda r: (r.created_ms, r.rowid)
            )
        else:
            rows = sorted(
                self._calls_where(app_session_id=app_session_id, state="delivered"), key=_by_seq
            )
        return [r.record for r in rows]

    def queue_head(self, app_session_id: str) -> tuple[Call, str] | None:
        """The session's oldest queued call and its activation's state."""
        rows = [
            r
            for r in self._calls_where(app_session_id=app_session_id, state="queued")
            if r.record.activation_id in self._t.activations
        ]
        if not rows:
            return None
        head = min(rows, key=_by_seq).record
        assert head.activation_id is not None
        return head, self._t.activations[head.activation_id].state

    def call_activation(self, call_id: str) -> tuple[Call, Activation] | None:
        row = self._t.calls.get(call_id)
        if row is None or row.record.activation_id is None:
            return None
        act = self.activation(row.record.activation_id)
        return (row.record, act) if act is not None else None

    # -- runtime operations (Pomodoro) ---------------------------------------------------
    def active_calls(self, conversation_id: str, methods: list[str]) -> bool:
        """Whether a call of one of `methods` is queued or running in the conversation."""
        return any(
            r.record.conversation_id == conversation_id
            and r.record.method in methods
            and r.record.state in ("queued", "running")
            for r in self._t.calls.values()
        )

    def starting_trigger(self, conversation_id: str, methods: list[str]) -> str | None:
        """The starting activation a queued call of `methods` triggered, if any."""
        for act in sorted(self._t.activations.values(), key=lambda a: a.rowid):
            call = self._t.calls.get(act.trigger_call_id)
            if (
                call is not None
                and act.state == "starting"
                and call.record.conversation_id == conversation_id
                and call.record.method in methods
                and call.record.state == "queued"
            ):
                return act.activation_id
        return None

    def focusing(self, conversation_id: str) -> Operation | None:
        for row in sorted(self._t.operations.values(), key=lambda o: o.rowid):
            if row.record.conversation_id == conversation_id and row.record.state == "focusing":
                return row.record
        return None

    def operation(self, operation_id: str) -> Operation | None:
        row = self._t.operations.get(operation_id)
        return row.record if row is not None else None

    def operations_of(self, conversation_id: str, scope: str) -> list[dict[str, Any]]:
        out = []
        for row in sorted(
            self._t.operations.values(), key=lambda o: (o.record.started_ms, o.rowid)
        ):
            session = self._t.sessions.get(row.record.app_session_id)
            if session is None or session.conversation_id != conversation_id:
                continue
            if session.scope != scope:
                continue
            op = row.record
            out.append(
                {
                    "kind": op.kind,
                    "state": op.state,
                    "started_ms": op.started_ms,
                    "ends_ms": op.ends_ms,
                    "ended_ms": row.ended_ms,
                }
            )
        return out

    def im_records(self, conversation_id: str) -> list[dict[str, Any]]:
        rows = sorted(
            (
                (created, op_id, body)
                for op_id, (conv, body, created) in self._t.im_records.items()
                if conv == conversation_id
            ),
        )
        return [json.loads(body) for _, _, body in rows]

    # -- clock ---------------------------------------------------------------------------
    def due_activations(self, now_ms: int) -> list[str]:
        rows = [
            a
            for a in self._t.activations.values()
            if a.state == "starting" and a.deadline_ms <= now_ms
        ]
        return [a.activation_id for a in sorted(rows, key=lambda a: (a.deadline_ms, a.rowid))]

    def due_operations(self, now_ms: int) -> list[tuple[Operation, str]]:
        """Focusing operations whose deadline passed, with their session's scope."""
        rows = [
            o
            for o in self._t.operations.values()
            if o.record.state == "focusing" and o.record.ends_ms <= now_ms
        ]
        out = []
        for row in sorted(rows, key=lambda o: (o.record.ends_ms, o.rowid)):
            session = self._t.sessions.get(row.record.app_session_id)
            out.append((row.record, session.scope if session is not None else "pomodoro"))
        return out

    def next_deadline(self) -> int | None:
        times = [a.deadline_ms for a in self._t.activations.values() if a.state == "starting"]
        times += [
            o.record.ends_ms for o in self._t.operations.values() if o.record.state == "focusing"
        ]
        return min(times) if times else None

    # -- Host intents --------------------------------------------------------------------
    def intent_heads(self) -> list[Intent]:
        """The lowest pending intent of each instance, oldest first (SPEC 5.7)."""
        heads: dict[str, _IntentRow] = {}
        for row in sorted(self._t.intents, key=lambda i: i.id):
            if not row.delivered and not row.superseded and row.instance not in heads:
                heads[row.instance] = row
        out = []
        for row in sorted(heads.values(), key=lambda i: i.id):
            act = self._t.activations.get(row.instance)
            out.append(Intent(row.id, row.instance, row.body, act.state if act else None))
        return out

    def intents_pending(self) -> bool:
        return any(not i.delivered and not i.superseded for i in self._t.intents)

    def intents(self) -> list[dict[str, Any]]:
        """Every Host intent row (tests: what was superseded, what delivered)."""
        return [
            {
                "id": i.id,
                "instance": i.instance,
                "body": json.loads(i.body),
                "delivered": i.delivered,
                "superseded": i.superseded,
            }
            for i in sorted(self._t.intents, key=lambda i: i.id)
        ]

    # -- reconcile -----------------------------------------------------------------------
    def activations_to_drive(self) -> list[str]:
        """Starting activations that are not just waiting for the Host."""
        rows = [
            a
            for a in self._t.activations.values()
            if a.state == "starting"
            and (not a.worker_ready or not a.requires_foreground or a.foreground)
        ]
        return [a.activation_id for a in sorted(rows, key=lambda a: (a.created_ms, a.rowid))]

    def sessions_to_pump(self) -> list[str]:
        """Sessions with queued calls of a ready activation, or a call left `delivered`
        (distinct; like SQLite's DISTINCT, in no promised order)."""
        out: list[str] = []
        for row in sorted(self._t.calls.values(), key=lambda r: r.rowid):
            call = row.record
            act = self._t.activations.get(call.activation_id or "")
            if act is None:  # the SQL joins on the activation
                continue
            if (call.state == "queued" and act.state == "ready") or call.state == "delivered":
                assert call.app_session_id is not None
                if call.app_session_id not in out:
                    out.append(call.app_session_id)
        return out

    # -- session data --------------------------------------------------------------------
    def session_data(self, scope: str, app_session_id: str) -> Snapshot:
        row = self._t.session_data.get((scope, app_session_id))
        if row is None:
            return Snapshot(None, 0)
        return Snapshot(json.loads(row[1]), row[0])

    # -- the Agent channel ---------------------------------------------------------------
    def outbox_pending(self, limit: int) -> list[dict[str, Any]]:
        rows = [o for o in self._t.outbox if not o.acked][:limit]
        return [json.loads(o.body) for o in rows]

    def outbox_all(self) -> list[dict[str, Any]]:
        return [json.loads(o.body) for o in self._t.outbox]

    def ack(self, ids: list[str]) -> None:
        wanted = set(ids)
        for row in self._t.outbox:
            if row.msg_id in wanted:
                row.acked = True

    def call_summary(self, call_id: str) -> tuple[str, str] | None:
        row = self._t.calls.get(call_id)
        return (row.record.method, row.record.conversation_id) if row is not None else None

    # -- installed apps ------------------------------------------------------------------
    def installed(self) -> list[tuple[str, str]]:
        """Every current `(scope, version)`."""
        return sorted(self._t.apps.items())

    def version_row(self, scope: str, version: str) -> dict[str, Any] | None:
        row = self._t.versions.get((scope, version))
        if row is None:
            return None
        return {k: row[k] for k in ("manifest", "manifest_sha256", "key_id", "dir")}

    def app_rows(self) -> list[dict[str, Any]]:
        out = []
        for scope, version in sorted(self._t.apps.items()):
            row = self._t.versions.get((scope, version))
            if row is not None:  # the SQL joins on the version
                out.append(
                    {
                        "scope": scope,
                        "version": version,
                        "key_id": row["key_id"],
                        "manifest_sha256": row["manifest_sha256"],
                        "manifest": row["manifest"],
                    }
                )
        return out

    def add_version(
        self,
        scope: str,
        version: str,
        manifest: bytes,
        digest: str,
        key_id: str,
        folder: str,
        now_ms: int,
    ) -> None:
        if (scope, version) in self._t.versions:
            raise ConstraintViolation(f"app_versions: {scope} {version} exists")
        self._t.versions[(scope, version)] = {
            "manifest": manifest,
            "manifest_sha256": digest,
            "key_id": key_id,
            "dir": folder,
            "installed_ms": now_ms,
        }

    def make_current(self, scope: str, version: str) -> None:
        self._t.apps[scope] = version

    def remove_app(self, scope: str) -> None:
        self._t.apps.pop(scope, None)

    def set_meta(self, key: str, value: str) -> None:
        self._t.meta[key] = value

    def sessions_of(self, scope: str | None = None) -> list[Session]:
        rows = [r for r in self._t.sessions.values() if scope is None or r.scope == scope]
        return [_session(r) for r in rows]

    def dev_builds(self, scope: str) -> set[str]:
        prefix = f"dev_build:{scope}:"
        return {k[len(prefix) :] for k in self._t.meta if k.startswith(prefix)}

    # -- writes --------------------------------------------------------------------------
    def apply(self, change: Change) -> None:
        """Write one guarded change.

        Raises:
            LostRace: its guard found no row in the expected state.
            ConstraintViolation: it broke a key or CHECK constraint of the schema.
        """
        t = self._t
        if isinstance(change, Record):
            self._record(change.message)
        elif isinstance(change, NewCall):
            self._new_call(change)
        elif isinstance(change, CallState):
            row = t.calls.get(change.call_id)
            if row is None or row.record.state != change.expect:
                raise LostRace()
            _check(change.to, _CALL_STATES, "calls.state")
            row.record = replace(row.record, state=change.to)
        elif isinstance(change, ActivationUpdate):
            self._update_activation(change)
        elif isinstance(change, ReopenActivation):
            act = t.activations.get(change.activation_id)
            if act is None or act.state != "ready":
                raise LostRace()
            act.state = "starting"
        elif isinstance(change, NewSession):
            self._new_session(change)
        elif isinstance(change, MoveSession):
            srow = t.sessions.get(change.app_session_id)
            if srow is None or srow.version != change.from_version:
                raise LostRace()
            srow.version = change.to_version
        elif isinstance(change, NewActivation):
            if change.activation_id in t.activations:
                raise ConstraintViolation(f"activations: {change.activation_id} exists")
            t.activations[change.activation_id] = _ActivationRow(
                t.next_rowid(),
                change.activation_id,
                change.app_session_id,
                change.trigger_call_id,
                "starting",
                change.requires_foreground,
                change.deadline_ms,
                change.created_ms,
            )
        elif isinstance(change, NewIntent):
            # INSERT OR IGNORE on an AUTOINCREMENT key: an ignored row still uses up its id
            t.intent_seq += 1
            if all(i.dedup_key != change.dedup_key for i in t.intents):
                t.intents.append(
                    _IntentRow(t.intent_seq, change.dedup_key, _dump(change.body), change.instance)
                )
        elif isinstance(change, IntentDelivered):
            for intent in t.intents:
                if intent.id == change.id:
                    intent.delivered = True
        elif isinstance(change, SupersedeIntents):
            for intent in t.intents:
                if intent.instance == change.instance and not intent.delivered:
                    intent.superseded = True
        elif isinstance(change, NewOperation):
            self._new_operation(change)
        elif isinstance(change, EndOperation):
            op = t.operations.get(change.operation_id)
            if op is None or op.record.state != "focusing":
                raise LostRace()
            _check(change.state, _OPERATION_STATES, "operations.state")
            op.record = replace(op.record, state=change.state)
            op.ended_ms = change.ended_ms
        elif isinstance(change, NewIMRecord):
            if change.operation_id in t.im_records:
                raise ConstraintViolation(f"im_records: {change.operation_id} exists")
            t.im_records[change.operation_id] = (
                change.conversation_id,
                _dump(change.body),
                change.created_ms,
            )
        elif isinstance(change, ReplaceSessionData):
            key = (change.scope, change.app_session_id)
            current = t.session_data.get(key)
            revision = 0 if current is None else current[0]
            if revision != change.expected_revision:
                raise LostRace()
            t.session_data[key] = (revision + 1, change.data)
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"unknown change {change!r}")

    def _new_call(self, change: NewCall) -> None:
        t = self._t
        if change.app_session_id is not None:
            session = t.sessions.get(change.app_session_id)
            if session is None or session.next_seq != change.seq:
                raise LostRace()
        if change.call_id in t.calls:
            raise ConstraintViolation(f"calls: {change.call_id} exists")
        if change.app_session_id is not None and change.seq is not None:
            for row in t.calls.values():
                if (row.record.app_session_id, row.record.seq) == (
                    change.app_session_id,
                    change.seq,
                ):
                    raise ConstraintViolation(f"calls: seq {change.seq} is taken")
        _check(change.state, _CALL_STATES, "calls.state")
        if change.app_session_id is not None:
            t.sessions[change.app_session_id].next_seq += 1
        record = Call(
            change.call_id,
            change.fingerprint,
            change.conversation_id,
            change.scope,
            change.method,
            change.params,
            change.app_session_id,
            change.activation_id,
            change.seq,
            change.state,
        )
        t.calls[change.call_id] = _CallRow(t.next_rowid(), record, change.created_ms)

    def _new_session(self, change: NewSession) -> None:
        t = self._t
        if change.app_session_id in t.sessions:
            raise ConstraintViolation(f"app_sessions: {change.app_session_id} exists")
        if self.session(change.conversation_id, change.scope) is not None:
            raise ConstraintViolation(
                f"app_sessions: {change.conversation_id} already has a {change.scope} session"
            )
        t.sessions[change.app_session_id] = _SessionRow(
            change.app_session_id,
            change.conversation_id,
            change.scope,
            change.version,
            change.created_ms,
        )

    def _update_activation(self, change: ActivationUpdate) -> None:
        act = self._t.activations.get(change.activation_id)
        fields = (
            "state",
            "reason",
            "ended_ms",
            "worker_ready",
            "foreground",
            "requires_foreground",
        )
        values = {name: getattr(change, name) for name in fields}
        if all(v is None for v in values.values()):
            raise ValueError("an ActivationUpdate that sets nothing")  # SQL would not parse
        if act is None or act.state != "starting":
            raise LostRace()
        if change.state is not None:
            _check(change.state, _ACTIVATION_STATES, "activations.state")
        for name, value in values.items():
            if value is not None:
                setattr(act, name, value)

    def _new_operation(self, change: NewOperation) -> None:
        t = self._t
        if change.operation_id in t.operations:
            raise ConstraintViolation(f"operations: {change.operation_id} exists")
        if any(o.record.call_id == change.call_id for o in t.operations.values()):
            raise ConstraintViolation(f"operations: call {change.call_id} has one")
        record = Operation(
            change.operation_id,
            change.call_id,
            change.conversation_id,
            change.app_session_id,
            change.kind,
            "focusing",
            change.started_ms,
            change.ends_ms,
            change.params,
        )
        t.operations[change.operation_id] = _OperationRow(t.next_rowid(), record)

    def _record(self, msg: dict[str, Any]) -> None:
        t = self._t
        call_id, stage = msg["call_id"], msg["stage"]
        body = json.dumps(msg, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        receipts = t.receipts.setdefault(call_id, [])
        if any(r.stage == stage for r in receipts):
            raise LostRace()
        row = t.calls.get(call_id)
        if stage in _FINAL and (row is None or row.record.state == "done"):
            raise LostRace()  # one final per call, whichever stage it is
        if any(o.msg_id == msg["id"] for o in t.outbox):
            raise ConstraintViolation(f"outbox: {msg['id']} exists")
        receipts.append(_Receipt(stage, max((r.n for r in receipts), default=0) + 1, body))
        t.outbox_seq += 1
        t.outbox.append(_OutboxRow(t.outbox_seq, msg["id"], call_id, body))
        if stage in _FINAL and row is not None:
            row.record = replace(row.record, state="done")


def _check(value: str, allowed: tuple[str, ...], column: str) -> None:
    if value not in allowed:
        raise ConstraintViolation(f"CHECK {column} IN {allowed}: {value!r}")


def _by_seq(row: _CallRow) -> tuple[bool, int, int]:
    seq = row.record.seq
    return (seq is not None, seq if seq is not None else 0, row.rowid)


def _session(row: _SessionRow) -> Session:
    return Session(row.app_session_id, row.conversation_id, row.scope, row.version, row.next_seq)


def _activation(row: _ActivationRow) -> Activation:
    return Activation(
        row.activation_id,
        row.app_session_id,
        row.trigger_call_id,
        row.state,
        row.requires_foreground,
        row.worker_ready,
        row.foreground,
        row.deadline_ms,
    )
