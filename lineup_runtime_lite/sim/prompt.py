"""The language of `lineup run`'s interactive prompt: each command's usage line, and a typed
line read into one scenario step (the same model a scenario file uses, SPEC 9)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from lineup_runtime_lite.sim.format import Step, parse_scenario
from lineup_sdk.errors import LineupError

__all__ = ["COMMANDS", "help_text", "read_line", "usage"]


@dataclass(frozen=True)
class Command:
    """One prompt command: how it is typed and what it does."""

    usage: str
    does: str


COMMANDS: dict[str, Command] = {
    "call": Command(
        "call ID CONVERSATION METHOD [JSON]",
        'send an Agent call, e.g. call s1 c1 pomodoro.start {"minutes":25}',
    ),
    "act": Command(
        "act CLIENT:SEQ CONVERSATION NAME [JSON]",
        'ask for a UI Action, e.g. act ui1:1 c1 todo.toggle {"id":"t1"}',
    ),
    "crash": Command("crash [SCOPE]", "kill the app's worker, as a crash would"),
    "host": Command(
        "host EVENT CONVERSATION [SCOPE]",
        "a Host event: preload, surface_loaded, foreground_confirmed,\n"
        "activation_failed, user_left",
    ),
    "advance": Command("advance DURATION", "move the virtual clock, e.g. advance 25m"),
    "data": Command("data CONVERSATION [SCOPE]", "read session data"),
    "im": Command("im CONVERSATION", "list IM records"),
    "restart": Command("restart", "restart the runtime on the same database"),
    "help": Command("help", "this text"),
    "quit": Command("quit", "leave"),
}
#: Other spellings a user may type.
_ALIASES = {"clock": "advance", "exit": "quit"}
_WIDTH = 37


def help_text() -> str:
    """What `help` prints: every command's usage and what it does."""
    lines = ["commands:"]
    for cmd in COMMANDS.values():
        does = cmd.does.split("\n")
        lines.append(f"  {cmd.usage.ljust(_WIDTH)}{does[0]}")
        lines += [f"  {'':{_WIDTH}}{more}" for more in does[1:]]
    return "\n".join(lines)


def usage(command: str) -> str:
    """`usage: …` for `command` (an alias included)."""
    return f"usage: {COMMANDS[_ALIASES.get(command, command)].usage}"


def _mistake(command: str | None, message: str) -> LineupError:
    hint = usage(command) if command is not None else "type `help` for the commands"
    return LineupError("usage_invalid", message, hint=hint)


def _call(rest: str) -> dict[str, Any]:
    """`ID CONVERSATION METHOD [JSON]`: the params are everything from the first `{` on,
    so they keep their own spaces and quotes."""
    brace = rest.find("{")
    words, text = (rest[:brace].split(), rest[brace:]) if brace >= 0 else (rest.split(), "")
    if len(words) != 3:
        if len(words) < 3:
            got = f"; got only {' '.join(words)!r}" if words else ""
            raise _mistake("call", f"call needs an ID, a CONVERSATION and a METHOD{got}")
        raise _mistake("call", f"call takes one METHOD; {' '.join(words[3:])!r} is one too many")
    params: Any = {}
    if text:
        try:
            params = json.loads(text)
        except ValueError as exc:
            raise _mistake("call", f"the params are not JSON: {exc}") from None
        if not isinstance(params, dict):
            raise _mistake("call", "the params must be a JSON object, e.g. {}")
    ident, conversation, method = words
    return {"call": {"id": ident, "conversation": conversation, "method": method, "params": params}}


def _act(rest: str) -> dict[str, Any]:
    """`CLIENT:SEQ CONVERSATION NAME [JSON]` (params as for `call`)."""
    brace = rest.find("{")
    words, text = (rest[:brace].split(), rest[brace:]) if brace >= 0 else (rest.split(), "")
    if len(words) != 3:
        raise _mistake("act", "act needs a CLIENT:SEQ, a CONVERSATION and a NAME")
    client, _, seq = words[0].rpartition(":")
    if not client or not seq.isdigit():
        raise _mistake("act", f"{words[0]!r} is not CLIENT:SEQ, e.g. ui1:1")
    params: Any = {}
    if text:
        try:
            params = json.loads(text)
        except ValueError as exc:
            raise _mistake("act", f"the params are not JSON: {exc}") from None
        if not isinstance(params, dict):
            raise _mistake("act", "the params must be a JSON object, e.g. {}")
    action = {
        "conversation": words[1],
        "name": words[2],
        "params": params,
        "client": client,
        "seq": int(seq),
    }
    scope = words[2].split(".")[0]
    if scope:
        action["scope"] = scope
    return {"ui_action": action}


def _raw_step(command: str, args: list[str]) -> dict[str, Any]:
    def arity(low: int, high: int) -> None:
        if not low <= len(args) <= high:
            words = "nothing" if not args else " ".join(args)
            raise _mistake(command, f"{command}: wrong arguments ({words})")

    if command == "host":
        arity(2, 3)
        host: dict[str, Any] = {"event": args[0], "conversation": args[1]}
        if len(args) > 2:
            host["scope"] = args[2]
        return {"host": host}
    if command == "advance":
        arity(1, 1)
        return {"clock": {"advance": args[0]}}
    if command == "data":
        arity(1, 2)
        data: dict[str, Any] = {"conversation": args[0]}
        if len(args) > 1:
            data["scope"] = args[1]
        return {"session_data": data}
    if command == "im":
        arity(1, 1)
        return {"im_records": {"conversation": args[0]}}
    if command == "crash":
        arity(0, 1)
        return {"crash_worker": {"scope": args[0]} if args else {}}
    arity(0, 0)  # restart
    return {"restart": True}


def read_line(line: str) -> Step | None:
    """The step a typed line asks for; None for an empty line. `help` and `quit` are the
    caller's (they are not steps).

    Raises:
        LineupError: `usage_invalid` with a message saying what is wrong and, as the hint,
            the usage line of the command typed (or how to list the commands).
    """
    text = line.strip()
    if not text:
        return None
    head, _, rest = text.partition(" ")
    command = _ALIASES.get(head.lower(), head.lower())
    if command not in COMMANDS:
        raise _mistake(None, f"unknown command {head!r}")
    if command in ("help", "quit"):  # the caller's, when typed alone
        raise _mistake(command, f"{command} takes no arguments")
    if command == "call":
        raw = _call(rest)
    elif command == "act":
        raw = _act(rest)
    else:
        try:
            args = shlex.split(rest)
        except ValueError as exc:
            raise _mistake(command, f"cannot split the line: {exc}") from None
        raw = _raw_step(command, args)
    try:
        return parse_scenario({"step": [raw]}, source="prompt").steps[0]
    except LineupError as exc:
        message = exc.message.removeprefix("prompt: ").removeprefix("step 1: ")
        raise _mistake(command, f"{command}: {message}") from None
