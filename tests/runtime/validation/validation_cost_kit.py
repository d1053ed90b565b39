"""Two MiniApp sources for the validation-cost tests and benchmark: `SLOW`, whose schema is
exponential to check (17 levels of `anyOf` of one `$ref` twice), and `FAST`, answering at once."""

from __future__ import annotations

from typing import Any

#: 17 levels of `anyOf` of one `$ref` twice: 2^17 applications for a value that fails
#: every leaf, seconds of jsonschema; passes build (with the `schema_expensive` warning).
LEVELS = 17


def exponential_defs(levels: int = LEVELS) -> dict[str, Any]:
    defs: dict[str, Any] = {f"a{levels}": {"type": "integer"}}
    for i in range(levels - 1, -1, -1):
        ref = {"$ref": f"#/$defs/a{i + 1}"}
        defs[f"a{i}"] = {"anyOf": [ref, dict(ref)]}
    return defs


SLOW = f'''
from __future__ import annotations

from typing import Any

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="slow")
DEFS = {exponential_defs()!r}

tools.declare(
    "slow.check",
    input_schema={{
        "type": "object",
        "properties": {{"x": {{"$ref": "#/$defs/a0"}}}},
        "required": ["x"],
        "additionalProperties": False,
        "$defs": DEFS,
    }},
    result_schema={{"type": "string"}},
    activation="app_ready",
    description="An exponential input schema.",
)


@tools.handler("slow.check")
def check(ctx: ToolContext, params: dict[str, Any]) -> str:
    return "checked"


tools.declare(
    "slow.give",
    input_schema={{"type": "object", "properties": {{}}, "additionalProperties": False}},
    result_schema={{"$defs": DEFS, "$ref": "#/$defs/a0"}},
    activation="app_ready",
    description="An exponential result schema.",
)


@tools.handler("slow.give")
def give(ctx: ToolContext, params: dict[str, Any]) -> Any:
    return "not a number"


@tools.tool("slow.ping", activation="app_ready")
def ping(ctx: ToolContext) -> str:
    """Answer at once."""
    return "pong"
'''


FAST = '''
from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="fast")


@tools.tool("fast.ping", activation="app_ready")
def ping(ctx: ToolContext, n: int = 0) -> int:
    """Answer at once."""
    return n + 1
'''
