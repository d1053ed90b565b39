"""An Agent call's params against its tool's input schema (SPEC 5.2, 16.4): on any thread,
or awaited on an event loop when the schema is not plain (the validator pool, in the app's
turn)."""

from __future__ import annotations

from typing import Any

from lineup_runtime_lite.core.rows import RegistryEntry
from lineup_runtime_lite.validation.checks import Checked, acheck_value, check_value, clip
from lineup_runtime_lite.validation.pool import ValidatorPool

__all__ = ["ainput_problems", "input_problems", "not_an_object"]


def not_an_object(params: Any) -> Checked:
    return [
        {
            "path": "",
            "message": "params must be a JSON object",
            "expected": 'type "object"',
            "value": clip(params),
        }
    ]


def input_problems(tool: RegistryEntry, params: Any, pool: ValidatorPool) -> Checked:
    """The input schema's problems with strict-JSON `params` (any thread; a schema that is
    not plain waits for `pool` here, in the app's turn, so never on an event loop)."""
    if not isinstance(params, dict):
        return not_an_object(params)
    return check_value(tool.input_schema, params, pool, tool.scope)


async def ainput_problems(tool: RegistryEntry, params: Any, pool: ValidatorPool) -> Checked:
    """`input_problems` awaited on an event loop (a schema that is not plain waits for
    `pool` in the app's turn without holding a thread)."""
    if not isinstance(params, dict):
        return not_an_object(params)
    return await acheck_value(tool.input_schema, params, pool, tool.scope)
