"""The part of an Agent call before the engine (any thread): the envelope checked, the tool
looked up in the Registry, and its input schema's problems found — or the rejection to
answer at once (SPEC 5.2). `AsyncRuntime.call` runs it on its loop when the params are
plainly small and the schema plain, else in the default executor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lineup_runtime_lite.api.arguments import small
from lineup_runtime_lite.api.engine import Engine
from lineup_runtime_lite.api.input_checks import ainput_problems, input_problems
from lineup_runtime_lite.core.messages import AgentMessage, error_body, reject
from lineup_runtime_lite.core.rows import RegistryEntry
from lineup_runtime_lite.validation.checks import Checked, validator_for
from lineup_runtime_lite.validation.params import Envelope, Rejection, check_envelope

__all__ = ["Prepared", "inline", "prepare", "prepare_off_loop"]

#: What the engine takes to accept a call: its envelope, its tool and the input problems.
Prepared = tuple[Envelope, RegistryEntry | None, Checked | None]


def prepare(
    engine: Engine,
    max_bytes: int,
    call: tuple[Any, Any, Any, Any],
    pooled: bool = True,
) -> AgentMessage | Prepared:
    """The envelope and the input schema of `call` (`call_id, conversation_id, method,
    params`). Returns the rejection to answer, or what the engine needs to go on. With `pooled` False, an input schema that is not plain
    is left unchecked (problems None) for the caller to await from the validator pool."""
    call_id, conversation_id, method, params = call
    checked = check_envelope(call_id, conversation_id, method, params, max_bytes=max_bytes)
    registry = engine.registry  # swapped whole, never edited in place
    if isinstance(checked, Rejection):
        tool = registry.get(method) if type(method) is str else None
        scope = tool.scope if tool else method.split(".")[0] if type(method) is str else ""
        body = error_body(checked.code, checked.message, details=checked.details)
        return reject(checked.call_id, scope, engine.now(), body)
    tool = registry.get(checked.method)
    problems = (
        input_problems(tool, checked.params, engine.validators)
        if tool is not None and (pooled or validator_for(tool.input_schema).plain)
        else None
    )
    return checked, tool, problems


def inline(engine: Engine, method: Any, params: Any) -> bool:
    """Whether a call may be checked on the caller's loop: plainly small params and an
    input schema that is plain (any other waits for a validator process)."""
    if not small(params):
        return False
    tool = engine.registry.get(method) if type(method) is str else None
    return tool is None or validator_for(tool.input_schema).plain


async def prepare_off_loop(
    engine: Engine,
    prepare_call: Callable[..., AgentMessage | Prepared],
    call: tuple[Any, Any, Any, Any],
) -> AgentMessage | Prepared:
    """`prepare_call(*call, pooled=False)` in the default executor (the envelope, and a
    plain schema), then a schema that is not plain awaited in its app's turn in the
    validator pool, holding no thread (SPEC 16.4)."""
    prepared = await asyncio.get_running_loop().run_in_executor(None, prepare_call, *call, False)
    if isinstance(prepared, tuple) and prepared[1] is not None and prepared[2] is None:
        env, tool, _ = prepared
        assert tool is not None
        problems = await ainput_problems(tool, env.params, engine.validators)
        prepared = (env, tool, problems)
    return prepared
