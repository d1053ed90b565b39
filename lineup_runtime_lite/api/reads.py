"""What `AsyncRuntime`'s read methods answer, built from the engine's facts: the installed
apps as this node verified them, the App sessions as a Host lists them, one call's record,
an installed version's files and Surface document, and the Surface view key (SPEC 5.1,
14, 16.1, 18.2). Functions over the engine; the runtime checks its arguments first."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from lineup_runtime_lite.api.arguments import usable_id
from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.drivers.appcache import read_listed
from lineup_runtime_lite.drivers.install import InstalledApp
from lineup_runtime_lite.store.facts import Facts
from lineup_sdk.errors import LineupError

__all__ = [
    "app_file",
    "app_list",
    "app_session",
    "call_record",
    "check_mark",
    "mark_call",
    "marked_calls",
    "session_list",
    "surface_document",
    "view_key",
    "worker_log",
]

#: What `mark_call` takes as a mark.
_MARK = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: The meta key of the Surface view signing key (SPEC 18.2).
VIEW_KEY = "surface_view_key"


async def app_list(engine: Engine) -> list[dict[str, Any]]:
    """`AsyncRuntime.apps()`: every installed app, `trusted` or with its `problem`."""
    await engine.refresh_registry()  # what is not verified yet, off this loop
    out = []
    for app in engine.facts.app_rows():
        del app["manifest"]
        try:
            manifest = engine.model_of(app["scope"], app["version"])
        except LineupError as exc:
            app["permissions"] = []
            app["trusted"] = False
            app["problem"] = {"code": exc.code, "message": exc.message}
            out.append(app)
            continue
        except KeyError:  # uninstalled meanwhile
            continue
        app["permissions"] = list(manifest.app.permissions)
        app["trusted"] = True
        out.append(app)
    return out


def session_list(facts: Facts, scope: str | None) -> list[dict[str, Any]]:
    """`AsyncRuntime.sessions()`: every App session (of one scope), oldest first."""
    out = []
    for s in facts.sessions_of(scope):
        act = facts.current_activation(s.app_session_id)
        out.append(
            {
                "app_session_id": s.app_session_id,
                "conversation_id": s.conversation_id,
                "scope": s.scope,
                "version": s.version,
                "instance": act.activation_id if act is not None else None,
                "state": act.state if act is not None else None,
                "waiting_for": _waiting_for(act),
            }
        )
    return out


def call_record(facts: Facts, call_id: str) -> dict[str, Any] | None:
    """`AsyncRuntime.call_record()`: an accepted call's method, conversation and messages."""
    found = facts.call_summary(call_id)
    if found is None:
        return None
    return {
        "call_id": call_id,
        "method": found[0],
        "conversation_id": found[1],
        "messages": facts.messages(call_id),
    }


def app_session(facts: Facts, conversation_id: str, scope: str) -> dict[str, Any] | None:
    """`AsyncRuntime.app_session()`: the session's id and the version it is pinned to."""
    session, _ = facts.session_and_activation(conversation_id, scope)
    if session is None:
        return None
    return {"app_session_id": session.app_session_id, "version": session.version}


def mark_call(engine: Engine, call_id: str, mark: str) -> None:
    """`AsyncRuntime.mark_call()`: keep `mark` with an accepted call (`call_marks`, kept as
    long as the call).

    Raises:
        LineupError: `usage_invalid` for a bad mark or a call never accepted.
    """
    check_mark(mark)
    if engine.facts.call_summary(call_id) is None:
        raise LineupError("usage_invalid", f"no accepted call {call_id!r} to mark")
    with engine.store.transaction():
        engine.facts.add_call_mark(mark, call_id)


def check_mark(mark: Any) -> None:
    """A call mark: a short snake_case name (`usage_invalid`)."""
    if not isinstance(mark, str) or not _MARK.fullmatch(mark):
        raise LineupError("usage_invalid", f"a call mark must match {_MARK.pattern}")


def marked_calls(
    facts: Facts, mark: Any, conversation_id: Any, after: Any, limit: Any
) -> list[str]:
    """`AsyncRuntime.marked_calls()`, its arguments checked (`usage_invalid`)."""
    check_mark(mark)
    if conversation_id is not None:
        usable_id("conversation_id", conversation_id)
    if after is not None and not isinstance(after, str):
        raise LineupError("usage_invalid", f"after names a marked call_id, not {after!r}")
    if limit is not None and (type(limit) is not int or limit < 1):
        raise LineupError("usage_invalid", f"limit is a positive integer, not {limit!r}")
    return facts.marked_calls(mark, conversation_id, after, limit)


def worker_log(engine: Engine, scope: str, version: Any) -> Path:
    """`AsyncRuntime.worker_log()`: the log path of an installed version.

    Raises:
        LineupError: `usage_invalid` when `scope` has no installed `version`.
    """
    if not isinstance(version, str) or engine.facts.version_row(scope, version) is None:
        raise LineupError(
            "usage_invalid",
            f"{scope!r} has no installed version {version!r}",
            hint="rt.apps() lists the installed scopes and versions",
        )
    return engine.pool.log_path(scope, version)


async def surface_document(app: InstalledApp, scope: str, version: str) -> bytes | None:
    """An installed version's Surface document as signed (its size and sha256 checked).

    Raises:
        LineupError: `install_tampered` when the file differs from its manifest entry.
    """
    surface = app.model.surface
    if surface is None:
        return None
    try:
        data = await asyncio.to_thread((app.root / surface.document).read_bytes)
    except OSError:
        data = b""
    if hashlib.sha256(data).hexdigest() != surface.sha256 or len(data) != surface.size:
        raise LineupError(
            "install_tampered",
            f"{scope} {version}: {surface.document} differs from its signed manifest entry",
            hint="install the bundle again",
        )
    return data


async def app_file(app: InstalledApp, path: str) -> bytes | None:
    """One file the version's manifest lists, read with its size and sha256 checked."""
    entry = next((e for e in app.model.files if e.path == path), None)
    if entry is None:
        return None
    return await asyncio.to_thread(
        read_listed, app.label, app.root, entry.path, entry.size, entry.sha256
    )


def view_key(engine: Engine) -> bytes:
    """The Surface view signing key, created at first use by whichever node asks first."""
    facts = engine.facts
    value = facts.meta_value(VIEW_KEY)
    if value is None:
        with engine.store.transaction():
            facts.add_meta(VIEW_KEY, os.urandom(32).hex())
        value = facts.meta_value(VIEW_KEY)
    assert value is not None
    return bytes.fromhex(value)


def _waiting_for(act: Any) -> str | None:
    """What a starting activation still waits for: the Host's foreground, or its worker."""
    if act is None or act.state != "starting":
        return None
    if act.requires_foreground and not act.foreground:
        return "foreground"
    return None if act.worker_ready else "worker"
