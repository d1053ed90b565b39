"""Tools linked to their Surface (SPEC 18.2): `surface=True` on `tool()`, `declare()` and
`runtime_tool()` reaches the manifest (a closed field, written only when true, so existing
bundles stay byte-identical) and the Agent Inventory; anything but a boolean is refused."""

from __future__ import annotations

import copy

from jsonschema import Draft202012Validator

from lineup_build.build import build_project, check_project
from lineup_build.manifest import manifest_schema
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import Runtime, VirtualClock
from tests.conftest import MakeApp

PLAIN = """
@tools.tool("demo.ping", activation="app_ready")
async def ping(ctx: ToolContext) -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"
"""
LINKED = """
@tools.tool("demo.look", activation="app_ready", surface=True)
async def look(ctx: ToolContext) -> str:
    \"\"\"Look at the list.\"\"\"
    return "seen"

tools.declare(
    "demo.peek",
    input_schema={"type": "object", "additionalProperties": False},
    result_schema={"type": "string"},
    activation="app_ready",
    description="Peek at the list.",
    surface=True,
)

@tools.handler("demo.peek")
async def peek(ctx: ToolContext) -> str:
    return "peeked"

"""
FOCUS = """
tools.runtime_tool(
    "pomodoro.start", handler_key="pomodoro.start", activation="foreground_required", surface=True
)
"""


def test_surface_reaches_manifest_and_inventory_only_when_true(
    make_app: MakeApp, signing_key: SigningKey
) -> None:
    plain = build_project(make_app(PLAIN).root, signing_key=signing_key)
    off = build_project(
        make_app(PLAIN.replace('"app_ready")', '"app_ready", surface=False)')).root,
        signing_key=signing_key,
    )
    assert plain.manifest is not None and off.manifest is not None
    assert off.manifest["tools"] == plain.manifest["tools"]  # False writes nothing
    result = build_project(make_app(PLAIN + LINKED).root, signing_key=signing_key)
    assert result.ok and result.manifest is not None and result.bundle is not None
    tools = {t["method"]: t for t in result.manifest["tools"]}
    assert [m for m, t in tools.items() if t.get("surface") is True] == [
        "demo.look",
        "demo.peek",
    ]
    assert "surface" not in tools["demo.ping"]
    store = TrustStore.from_keys([TrustedKey(signing_key.key_id, signing_key.public_raw, ("*",))])
    with Runtime.open(":memory:", trust=store, clock=VirtualClock()) as rt:
        rt.install(result.bundle)
        inventory = {t["method"]: t for t in rt.inventory()}
    assert inventory["demo.look"]["surface"] is True
    assert "surface" not in inventory["demo.ping"]


def test_a_runtime_tool_is_linked_too(make_app: MakeApp, signing_key: SigningKey) -> None:
    result = build_project(make_app(FOCUS, scope="pomodoro").root, signing_key=signing_key)
    assert result.ok and result.manifest is not None, result.check
    assert result.manifest["tools"][0]["surface"] is True


def test_the_manifest_field_is_closed(make_app: MakeApp, signing_key: SigningKey) -> None:
    result = build_project(make_app(PLAIN + LINKED).root, signing_key=signing_key)
    assert result.manifest is not None
    validator = Draft202012Validator(manifest_schema())
    assert not list(validator.iter_errors(result.manifest))
    for value in (False, "yes", 1):
        broken = copy.deepcopy(result.manifest)
        broken["tools"][1]["surface"] = value
        assert list(validator.iter_errors(broken)), value


def test_a_surface_that_is_not_a_boolean_is_config_invalid(make_app: MakeApp) -> None:
    body = PLAIN.replace('"app_ready")', '"app_ready", surface="yes")')
    result = check_project(make_app(body).root)
    assert [d.code for d in result.diagnostics if d.severity == "error"] == ["config_invalid"]
