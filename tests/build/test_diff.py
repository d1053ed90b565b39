"""`diff_manifests`: every SPEC 11 rule, both directions, inputs and results, and the gate.

Each pair starts from the one `shop` app of `diff_app.py`, edits a copy, and states the
exact set of changes `(tool, pointer, kind, breaking)` and whether the gate passes for the
version step of that pair — so a rule that flips, a change that goes unreported or a
spurious one, and a wrong exit all fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from pydantic import Field

from lineup_build.diff import diff_manifests, field_name
from lineup_build.manifest_checks import schema_problems
from lineup_build.semver import bump_kind, is_major_bump, next_major, parse_version
from tests.build.diff_app import base_manifest, edited, field, tool, typed

Edit = Callable[[dict[str, Any]], None]
Expect = tuple[str | None, str, str, bool]


def _container(m: dict[str, Any], method: str | None, path: tuple[Any, ...]) -> Any:
    node: Any = m if method is None else tool(m, method)
    for key in path:
        node = node[key]
    return node


def put(method: str | None, *path_value: Any) -> Edit:
    """Set the value at `path` (the last argument is the value)."""
    *path, key, value = path_value

    def edit(m: dict[str, Any]) -> None:
        _container(m, method, tuple(path))[key] = value

    return edit


def drop(method: str | None, *path: Any) -> Edit:
    """Delete the key at `path`, or remove the value from the list at `path[:-1]`."""
    *parent, key = path

    def edit(m: dict[str, Any]) -> None:
        target = _container(m, method, tuple(parent))
        if isinstance(target, list):
            target.remove(key)
        else:
            del target[key]

    return edit


def append(method: str | None, *path_value: Any) -> Edit:
    *path, value = path_value
    return lambda m: _container(m, method, tuple(path)).append(value)


def both(*edits: Edit) -> Edit:
    def edit(m: dict[str, Any]) -> None:
        for e in edits:
            e(m)

    return edit


def remove_tool(method: str) -> Edit:
    return lambda m: m["tools"].remove(tool(m, method))


def add_tool(method: str, like: str) -> Edit:
    def edit(m: dict[str, Any]) -> None:
        m["tools"].append({**tool(m, like), "method": method})

    return edit


@dataclass
class Case:
    id: str
    edit: Edit
    expect: set[Expect]
    ok: bool
    old: str = "1.4.2"
    new: str = "1.5.0"
    old_edit: Edit | None = None


IN = "/input_schema/properties"
OUT = "/result_schema/properties"
ADD, CAT, SEARCH, CANCEL, FOCUS = (
    "shop.add",
    "shop.categories",
    "shop.search",
    "shop.cancel",
    "shop.focus",
)
P = ("input_schema", "properties")
R = ("result_schema", "properties")
SAVED = ("result_schema",)  # shop.add returns Saved at the root
OWNER = ("input_schema", "$defs", "Owner")
NODE = ("result_schema", "$defs", "Node")
TITLE = Annotated[str, Field(min_length=1, max_length=200, pattern="^[^\\n]+$")]

CASES = [
    # --- tools -------------------------------------------------------------------------------
    Case("tool_removed", remove_tool(SEARCH), {(SEARCH, "", "tool_removed", True)}, False),
    Case(
        "tool_added",
        add_tool("shop.export", SEARCH),
        {("shop.export", "", "tool_added", False)},
        True,
    ),
    Case(
        "delivery_changed",
        both(
            put(ADD, "delivery", "runtime"),
            put(ADD, "handler_key", "shop.add"),
            drop(ADD, "timeout_s"),
        ),
        {(ADD, "/delivery", "delivery_changed", True)},
        False,
    ),
    Case(
        "handler_key_changed",
        put(CANCEL, "handler_key", "shop.stop"),
        {(CANCEL, "/handler_key", "handler_key_changed", True)},
        False,
    ),
    Case(
        "long_running_turned_off",
        put(FOCUS, "long_running", False),
        {(FOCUS, "/long_running", "long_running_changed", True)},
        False,
    ),
    Case(
        "long_running_turned_on",
        put(CANCEL, "long_running", True),
        {(CANCEL, "/long_running", "long_running_changed", True)},
        False,
    ),
    Case(
        "activation_foreground_to_app_ready_is_compatible",
        put(FOCUS, "activation", "app_ready"),
        {(FOCUS, "/activation", "activation_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "activation_app_ready_to_foreground",
        put(ADD, "activation", "foreground_required"),
        {(ADD, "/activation", "activation_changed", True)},
        False,
    ),
    Case(
        "activation_app_ready_to_not_required",
        put(ADD, "activation", "activation_not_required"),
        {(ADD, "/activation", "activation_changed", True)},
        False,
    ),
    Case(
        "activation_not_required_to_app_ready",
        put(CANCEL, "activation", "app_ready"),
        {(CANCEL, "/activation", "activation_changed", True)},
        False,
    ),
    Case(
        "activation_not_required_to_foreground",
        put(CANCEL, "activation", "foreground_required"),
        {(CANCEL, "/activation", "activation_changed", True)},
        False,
    ),
    Case(
        "activation_foreground_to_not_required",
        put(FOCUS, "activation", "activation_not_required"),
        {(FOCUS, "/activation", "activation_changed", True)},
        False,
    ),
    Case(
        "timeout_lowered_is_reported_not_breaking",
        put(ADD, "timeout_s", 10),
        {(ADD, "/timeout_s", "timeout_lowered", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "timeout_raised",
        put(ADD, "timeout_s", 60),
        {(ADD, "/timeout_s", "timeout_raised", False)},
        True,
    ),
    Case(
        "description_changed",
        put(ADD, "description", "Add a record."),
        {(ADD, "/description", "description_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "hints_changed",
        put(SEARCH, "hints", {"read_only": False, "idempotent": True}),
        {
            (SEARCH, "/hints/idempotent", "hint_changed", False),
            (SEARCH, "/hints/read_only", "hint_changed", False),
        },
        True,
        new="1.4.3",
    ),
    Case(
        "hints_added",
        put(ADD, "hints", {"destructive": True}),
        {(ADD, "/hints/destructive", "hint_changed", False)},
        True,
    ),
    # --- the app's permissions ------------------------------------------------------------------
    Case(
        "permission_added",
        put(None, "app", "permissions", {"network": True}),
        {(None, "/app/permissions/network", "permission_added", True)},
        False,
    ),
    Case(
        "permission_added_with_0y_minor_bump",
        put(None, "app", "permissions", {"network": True}),
        {(None, "/app/permissions/network", "permission_added", True)},
        True,
        old="0.3.1",
        new="0.4.0",
    ),
    Case(
        "permission_removed",
        lambda m: None,
        {(None, "/app/permissions/network", "permission_removed", False)},
        True,
        new="1.4.3",
        old_edit=put(None, "app", "permissions", {"network": True}),
    ),
    Case(
        "app_scope_changed",
        put(None, "app", "scope", "store"),
        {(None, "/app/scope", "app_scope_changed", True)},
        False,
    ),
    Case(
        "dependency_added",
        put(None, "app", "dependencies", ["requests>=2"]),
        {(None, "/app/dependencies", "dependency_added", False)},
        True,
    ),
    Case(
        "dependency_removed",
        lambda m: None,
        {(None, "/app/dependencies", "dependency_removed", False)},
        True,
        old_edit=put(None, "app", "dependencies", ["requests>=2"]),
    ),
    # --- input: what Agents send --------------------------------------------------------------
    Case(
        "input_required_property_added",
        both(
            put(ADD, *P, "sku", {"type": "string", "title": "Sku"}),
            append(ADD, "input_schema", "required", "sku"),
        ),
        {(ADD, f"{IN}/sku", "required_property_added", True)},
        False,
    ),
    Case(
        "input_optional_property_added",
        put(ADD, *P, "color", field("color", str | None, None)),
        {(ADD, f"{IN}/color", "property_added", False)},
        True,
    ),
    Case(
        "input_property_removed_from_closed_schema",
        drop(ADD, *P, "note"),
        {(ADD, f"{IN}/note", "property_removed", True)},
        False,
    ),
    Case(
        "input_property_removed_from_open_schema",
        both(drop(ADD, *P, "note"), put(ADD, "input_schema", "additionalProperties", True)),
        {(ADD, f"{IN}/note", "property_removed", False)},
        True,
        old_edit=put(ADD, "input_schema", "additionalProperties", True),
    ),
    Case(
        "input_property_now_required",
        append(ADD, "input_schema", "required", "quantity"),
        {(ADD, "/input_schema/required", "property_required", True)},
        False,
    ),
    Case(
        "input_property_now_optional",
        drop(ADD, "input_schema", "required", "title"),
        {(ADD, "/input_schema/required", "property_optional", False)},
        True,
    ),
    Case(
        "input_optional_field_made_plain_pydantic",
        put(ADD, *P, "note", field("note", str, "")),
        {
            (ADD, f"{IN}/note/default", "default_changed", False),
            (ADD, f"{IN}/note/type", "type_narrowed", True),
        },
        False,
    ),
    Case(
        "input_plain_field_made_optional_pydantic",
        both(
            put(ADD, *P, "title", field("title", TITLE | None, None)),
            drop(ADD, "input_schema", "required", "title"),
        ),
        {
            (ADD, f"{IN}/title/default", "default_changed", False),
            (ADD, f"{IN}/title/type", "type_widened", False),
            (ADD, "/input_schema/required", "property_optional", False),
        },
        True,
    ),
    Case(
        "input_model_field_made_optional_pydantic",
        lambda m: None,
        {
            (ADD, f"{IN}/owner/default", "default_changed", False),
            (ADD, f"{IN}/owner/type", "type_widened", False),
            (ADD, "/input_schema/required", "property_optional", False),
        },
        True,
        old_edit=both(
            put(ADD, *P, "owner", {"$ref": "#/$defs/Owner"}),
            append(ADD, "input_schema", "required", "owner"),
        ),
    ),
    Case(
        "input_type_changed",
        put(ADD, *P, "quantity", "type", "string"),
        {(ADD, f"{IN}/quantity/type", "type_changed", True)},
        False,
    ),
    Case(
        "input_integer_widened_to_number",
        put(ADD, *P, "quantity", "type", "number"),
        {(ADD, f"{IN}/quantity/type", "type_widened", False)},
        True,
    ),
    Case(
        "input_number_narrowed_to_integer",
        lambda m: None,
        {(ADD, f"{IN}/quantity/type", "type_narrowed", True)},
        False,
        old_edit=put(ADD, *P, "quantity", "type", "number"),
    ),
    Case(
        "input_max_length_lowered",
        put(ADD, *P, "title", "maxLength", 100),
        {(ADD, f"{IN}/title/maxLength", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_max_length_raised",
        put(ADD, *P, "title", "maxLength", 300),
        {(ADD, f"{IN}/title/maxLength", "constraint_loosened", False)},
        True,
    ),
    Case(
        "input_min_length_raised",
        put(ADD, *P, "title", "minLength", 3),
        {(ADD, f"{IN}/title/minLength", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_minimum_lowered",
        put(ADD, *P, "quantity", "minimum", 0),
        {(ADD, f"{IN}/quantity/minimum", "constraint_loosened", False)},
        True,
    ),
    Case(
        "input_maximum_removed",
        drop(ADD, *P, "quantity", "maximum"),
        {(ADD, f"{IN}/quantity/maximum", "constraint_loosened", False)},
        True,
    ),
    Case(
        "input_maximum_added",
        put(FOCUS, *P, "minutes", "multipleOf", 5),
        {(FOCUS, f"{IN}/minutes/multipleOf", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_max_items_lowered",
        put(ADD, *P, "tags", "maxItems", 5),
        {(ADD, f"{IN}/tags/maxItems", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_pattern_changed",
        put(ADD, *P, "title", "pattern", "^[a-z]+$"),
        {(ADD, f"{IN}/title/pattern", "constraint_changed", True)},
        False,
    ),
    Case(
        "input_pattern_removed",
        drop(ADD, *P, "title", "pattern"),
        {(ADD, f"{IN}/title/pattern", "constraint_loosened", False)},
        True,
    ),
    Case(
        "input_pattern_added",
        put(SEARCH, *P, "query", "pattern", "^[a-z]+$"),
        {(SEARCH, f"{IN}/query/pattern", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_enum_value_removed_through_ref",
        drop(ADD, "input_schema", "$defs", "Priority", "enum", "high"),
        {(ADD, f"{IN}/priority/enum", "enum_value_removed", True)},
        False,
    ),
    Case(
        "input_enum_value_added_through_ref",
        append(ADD, "input_schema", "$defs", "Priority", "enum", "urgent"),
        {(ADD, f"{IN}/priority/enum", "enum_value_added", False)},
        True,
    ),
    Case(
        "input_enum_added",
        put(SEARCH, *P, "query", "enum", ["a", "b"]),
        {(SEARCH, f"{IN}/query/enum", "enum_added", True)},
        False,
    ),
    Case(
        "input_enum_removed",
        lambda m: None,
        {(SEARCH, f"{IN}/query/enum", "enum_removed", False)},
        True,
        old_edit=put(SEARCH, *P, "query", "enum", ["a", "b"]),
    ),
    Case(
        "input_parameter_description_changed",
        put(ADD, *P, "quantity", "description", "How many copies."),
        {(ADD, f"{IN}/quantity/description", "description_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "input_parameter_title_changed",
        put(ADD, *P, "title", "title", "Name"),
        {(ADD, f"{IN}/title/title", "annotation_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "input_additional_properties_opened",
        put(ADD, "input_schema", "additionalProperties", True),
        {(ADD, "/input_schema/additionalProperties", "additional_properties_opened", False)},
        True,
    ),
    Case(
        "input_additional_properties_closed",
        lambda m: None,
        {(ADD, "/input_schema/additionalProperties", "additional_properties_closed", True)},
        False,
        old_edit=put(ADD, "input_schema", "additionalProperties", True),
    ),
    Case(
        "input_nested_model_tightened_through_ref_in_any_of",
        put(ADD, *OWNER, "properties", "name", "maxLength", 40),
        {(ADD, f"{IN}/owner/anyOf/0/properties/name/maxLength", "constraint_tightened", True)},
        False,
    ),
    Case(
        "input_nested_model_required_property_added",
        both(
            put(ADD, *OWNER, "properties", "team", {"type": "string", "title": "Team"}),
            append(ADD, *OWNER, "required", "team"),
        ),
        {(ADD, f"{IN}/owner/anyOf/0/properties/team", "required_property_added", True)},
        False,
    ),
    Case(
        "input_unknown_keyword_changed",
        put(SEARCH, *P, "query", "not", {"const": "x"}),
        {(SEARCH, f"{IN}/query/not", "keyword_changed", True)},
        False,
    ),
    # --- result: what Agents receive (the opposite direction) -----------------------------------
    Case(
        "result_property_removed",
        both(drop(ADD, *R, "revision"), drop(ADD, "result_schema", "required", "revision")),
        {(ADD, f"{OUT}/revision", "property_removed", True)},
        False,
    ),
    Case(
        "result_optional_property_added",
        put(ADD, *R, "created", {"type": "string", "title": "Created"}),
        {(ADD, f"{OUT}/created", "property_added", False)},
        True,
    ),
    Case(
        "result_required_property_added",
        both(
            put(ADD, *R, "created", {"type": "string"}),
            append(ADD, "result_schema", "required", "created"),
        ),
        {(ADD, f"{OUT}/created", "required_property_added", False)},
        True,
    ),
    Case(
        "result_property_no_longer_required",
        drop(ADD, "result_schema", "required", "revision"),
        {(ADD, "/result_schema/required", "property_optional", True)},
        False,
    ),
    Case(
        "result_property_now_required",
        append(CAT, *NODE, "required", "children"),
        {(CAT, "/result_schema/required", "property_required", False)},
        True,
    ),
    Case(
        "result_field_made_optional_pydantic",
        put(ADD, *R, "id", {**field("id", str | None, None), "description": "Stable id."}),
        {
            (ADD, f"{OUT}/id/default", "default_changed", False),
            (ADD, f"{OUT}/id/type", "type_widened", True),
        },
        False,
    ),
    Case(
        "result_optional_field_made_plain_pydantic",
        lambda m: None,
        {
            (ADD, f"{OUT}/id/default", "default_changed", False),
            (ADD, f"{OUT}/id/type", "type_narrowed", False),
        },
        True,
        old_edit=put(ADD, *R, "id", {**field("id", str | None, None), "description": "Stable id."}),
    ),
    Case(
        "result_type_changed",
        put(ADD, *R, "revision", "type", "string"),
        {(ADD, f"{OUT}/revision/type", "type_changed", True)},
        False,
    ),
    Case(
        "result_null_to_string",
        put(SEARCH, "result_schema", {"type": "string"}),
        {(SEARCH, "/result_schema/type", "type_changed", True)},
        False,
        old_edit=put(SEARCH, "result_schema", {"type": "null"}),
    ),
    Case(
        "result_enum_value_added",
        append(ADD, *R, "status", "enum", "deleted"),
        {(ADD, f"{OUT}/status/enum", "enum_value_added", True)},
        False,
    ),
    Case(
        "result_enum_value_removed",
        drop(ADD, *R, "status", "enum", "updated"),
        {(ADD, f"{OUT}/status/enum", "enum_value_removed", False)},
        True,
    ),
    Case(
        "result_enum_removed",
        put(CANCEL, *R, "status", {"type": "string"}),
        {(CANCEL, f"{OUT}/status/enum", "enum_removed", True)},
        False,
    ),
    Case(
        "result_enum_added",
        put(ADD, *R, "id", "enum", ["a", "b"]),
        {(ADD, f"{OUT}/id/enum", "enum_added", False)},
        True,
    ),
    Case(
        "result_unknown_keyword_changed",
        put(ADD, *R, "id", "not", {"const": ""}),
        {(ADD, f"{OUT}/id/not", "keyword_changed", True)},
        False,
    ),
    Case(
        "result_field_description_changed",
        put(ADD, *R, "id", "description", "The id."),
        {(ADD, f"{OUT}/id/description", "description_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "result_model_title_changed",
        put(ADD, "result_schema", "title", "Stored"),
        {(ADD, "/result_schema/title", "annotation_changed", False)},
        True,
        new="1.4.3",
    ),
    Case(
        "result_constraint_loosened",
        drop(ADD, *R, "revision", "minimum"),
        {(ADD, f"{OUT}/revision/minimum", "constraint_loosened", True)},
        False,
    ),
    Case(
        "result_constraint_tightened",
        put(ADD, *R, "revision", "maximum", 1000),
        {(ADD, f"{OUT}/revision/maximum", "constraint_tightened", False)},
        True,
    ),
    Case(
        "result_pattern_added",
        put(ADD, *R, "id", "pattern", "^[0-9a-f]+$"),
        {(ADD, f"{OUT}/id/pattern", "constraint_tightened", False)},
        True,
    ),
    Case(
        "result_pattern_changed",
        put(ADD, *R, "id", "pattern", "^[a-z]+$"),
        {(ADD, f"{OUT}/id/pattern", "constraint_changed", True)},
        False,
        old_edit=put(ADD, *R, "id", "pattern", "^[0-9a-f]+$"),
    ),
    Case(
        "result_additional_properties_opened",
        put(ADD, "result_schema", "additionalProperties", True),
        {(ADD, "/result_schema/additionalProperties", "additional_properties_opened", True)},
        False,
    ),
    Case(
        "result_additional_properties_closed",
        lambda m: None,
        {(ADD, "/result_schema/additionalProperties", "additional_properties_closed", False)},
        True,
        old_edit=put(ADD, "result_schema", "additionalProperties", True),
    ),
    Case(
        "result_model_in_array_through_ref",
        both(
            drop(SEARCH, "result_schema", "$defs", "Saved", "properties", "revision"),
            drop(SEARCH, "result_schema", "$defs", "Saved", "required", "revision"),
        ),
        {(SEARCH, "/result_schema/items/properties/revision", "property_removed", True)},
        False,
    ),
    Case(
        "result_recursive_model_field_removed_once",
        both(drop(CAT, *NODE, "properties", "name"), drop(CAT, *NODE, "required", "name")),
        {(CAT, f"{OUT}/name", "property_removed", True)},
        False,
    ),
    Case(
        "result_recursive_model_field_added_once",
        put(CAT, *NODE, "properties", "size", {"type": "integer"}),
        {(CAT, f"{OUT}/size", "property_added", False)},
        True,
    ),
    Case(
        "result_recursive_model_description_changed_once",
        put(CAT, *NODE, "description", "A category."),
        {(CAT, "/result_schema/description", "description_changed", False)},
        True,
    ),
    Case(
        "result_recursive_model_tightened_inside",
        put(CAT, *NODE, "properties", "children", "maxItems", 50),
        {(CAT, f"{OUT}/children/maxItems", "constraint_tightened", False)},
        True,
    ),
    # --- the version gate -----------------------------------------------------------------------
    Case(
        "breaking_with_major_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        True,
        new="2.0.0",
    ),
    Case(
        "breaking_with_patch_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        new="1.4.3",
    ),
    Case(
        "breaking_without_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        new="1.4.2",
    ),
    Case(
        "breaking_with_0y_minor_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        True,
        old="0.3.1",
        new="0.4.0",
    ),
    Case(
        "breaking_with_0y_patch_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        old="0.3.1",
        new="0.3.2",
    ),
    Case(
        "breaking_with_00z_patch_bump",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        True,
        old="0.0.3",
        new="0.0.4",
    ),
    Case(
        "breaking_from_0y_to_1",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        True,
        old="0.9.0",
        new="1.0.0",
    ),
    Case(
        "breaking_with_prerelease_of_next_major",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        True,
        new="2.0.0-rc.1",
    ),
    Case(
        "breaking_with_prerelease_of_next_minor",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        new="1.5.0-rc.1",
    ),
    Case(
        "breaking_from_prerelease_to_its_release",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        old="2.0.0-rc.1",
        new="2.0.0",
    ),
    Case(
        "breaking_with_downgrade_to_lower_major",
        remove_tool(SEARCH),
        {(SEARCH, "", "tool_removed", True)},
        False,
        old="2.1.0",
        new="1.9.0",
    ),
    Case(
        "compatible_with_downgrade",
        add_tool("shop.export", SEARCH),
        {("shop.export", "", "tool_added", False)},
        True,
        new="1.4.0",
    ),
    Case("no_changes", lambda m: None, set(), True, new="1.4.2"),
]


_SURFACE = {"document": "_lineup/surface.html", "sha256": "0" * 64, "size": 1, "csp": {}}


def _with_csp(**csp: list[str]) -> Edit:
    """The Surface document listed, with `csp` (SPEC 18.2)."""

    def edit(m: dict[str, Any]) -> None:
        m["surface"] = {**_SURFACE, "csp": dict(csp)}

    return edit


CASES += [
    Case(
        "surface_csp_widened",
        _with_csp(connect_domains=["https://api.example.com"]),
        {(None, "/surface/csp/connect_domains", "surface_csp_changed", True)},
        False,
        new="1.5.0",
        old_edit=_with_csp(),
    ),
    Case(
        "surface_csp_narrowed",
        _with_csp(resource_domains=["https://cdn.example.com"]),
        {(None, "/surface/csp/resource_domains", "surface_csp_changed", False)},
        True,
        new="1.4.3",
        old_edit=_with_csp(resource_domains=["https://cdn.example.com", "https://x.example"]),
    ),
    Case(
        "surface_unchanged_csp",
        _with_csp(connect_domains=["https://api.example.com"]),
        set(),
        True,
        new="1.4.3",
        old_edit=_with_csp(connect_domains=["https://api.example.com"]),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pair(case: Case) -> None:
    base = base_manifest(case.old)
    old, new = edited(base), edited(base)
    if case.old_edit is not None:
        case.old_edit(old)
    new["app"]["version"] = case.new
    case.edit(new)
    # every pair is one users can meet: both sides pass the manifest schema
    assert schema_problems(old) == [] and schema_problems(new) == []

    report = diff_manifests(typed(old), typed(new))

    got = {(c.tool, c.pointer, c.kind, c.breaking) for c in report.changes}
    assert got == case.expect
    assert len(report.changes) == len(case.expect), "a change was reported twice"
    assert report.ok is case.ok
    assert (report.verdict() is None) is case.ok
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["ok"] is case.ok and doc["breaking"] == sum(1 for e in case.expect if e[3])


BOUNDED = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "minLength": 2, "maxLength": 10},
        "n": {"type": "integer", "minimum": 2, "maximum": 10},
        "a": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 10},
    },
    "required": ["s", "n", "a"],
    "additionalProperties": False,
}
TIGHT, LOOSE = "constraint_tightened", "constraint_loosened"
BOUNDS = [
    ("minLength", "s", 3, "up", TIGHT),
    ("minLength", "s", 1, "down", LOOSE),
    ("maxLength", "s", 5, "down", TIGHT),
    ("maxLength", "s", 20, "up", LOOSE),
    ("minimum", "n", 3, "up", TIGHT),
    ("minimum", "n", 1, "down", LOOSE),
    ("maximum", "n", 5, "down", TIGHT),
    ("maximum", "n", 20, "up", LOOSE),
    ("minItems", "a", 3, "up", TIGHT),
    ("minItems", "a", 1, "down", LOOSE),
    ("maxItems", "a", 5, "down", TIGHT),
    ("maxItems", "a", 20, "up", LOOSE),
]


@pytest.mark.parametrize("side", ["input_schema", "result_schema"])
@pytest.mark.parametrize(
    ("keyword", "prop", "value", "direction", "kind"),
    BOUNDS,
    ids=[f"{k}_{d}" for k, _, _, d, _ in BOUNDS],
)
def test_bounds_in_both_directions(
    side: str, keyword: str, prop: str, value: int, direction: str, kind: str
) -> None:
    """SPEC 11: minLength/minimum/minItems up and maxLength/maximum/maxItems down tighten;
    tightening breaks inputs, loosening breaks results."""
    old = base_manifest()
    tool(old, SEARCH)[side] = json.loads(json.dumps(BOUNDED))
    new = edited(old)
    new["app"]["version"] = "1.5.0"
    tool(new, SEARCH)[side]["properties"][prop][keyword] = value
    report = diff_manifests(typed(old), typed(new))
    breaking = (kind == TIGHT) if side == "input_schema" else (kind == LOOSE)
    assert [(c.pointer, c.kind, c.breaking) for c in report.changes] == [
        (f"/{side}/properties/{prop}/{keyword}", kind, breaking)
    ]
    assert report.ok is not breaking


def test_every_breaking_kind_is_covered_on_both_sides() -> None:
    """Each schema rule appears in the table for inputs and for results."""
    from lineup_build.diff import RULES

    seen: dict[str, set[str]] = {}
    for case in CASES:
        for _, pointer, kind, _ in case.expect:
            side = pointer.split("/")[1] if pointer.startswith("/") else ""
            seen.setdefault(kind, set()).add(side)
    untested = {"schema_not_compared", "description_changed", "annotation_changed"}
    for kind in set(RULES) - untested:
        if kind in (
            "keyword_changed",
            "default_changed",
            "constraint_changed",
            "enum_added",
            "enum_removed",
        ):
            assert seen.get(kind), kind
            continue
        assert {"input_schema", "result_schema"} <= seen.get(kind, set()), kind


def test_the_gate_message_names_tool_field_and_rule() -> None:
    old = base_manifest()
    new = edited(old)
    new["app"]["version"] = "1.5.0"
    put(ADD, *P, "title", "maxLength", 100)(new)

    verdict = diff_manifests(typed(old), typed(new)).verdict()

    assert verdict is not None and verdict.code == "breaking_change"
    assert "shop.add" in verdict.message and "params.title" in verdict.message
    assert "constraint_tightened" in verdict.message and "maxLength" in verdict.message
    assert verdict.hint is not None and "2.0.0" in verdict.hint


def test_the_report_names_the_new_scope_and_the_sources() -> None:
    old = base_manifest()
    new = edited(old)
    put(None, "app", "scope", "store")(new)
    report = diff_manifests(typed(old), typed(new), old_source="v1", new_source="here")
    doc = report.to_dict()
    assert (doc["scope"], doc["old"]["source"], doc["new"]["source"]) == ("store", "v1", "here")


def test_breaking_changes_are_still_listed_under_a_major_bump() -> None:
    old = base_manifest()
    new = edited(old)
    new["app"]["version"] = "2.0.0"
    remove_tool(SEARCH)(new)
    report = diff_manifests(typed(old), typed(new))
    assert report.ok and report.major_bump and [c.kind for c in report.breaking] == ["tool_removed"]


def test_a_cycle_of_bare_references_ends() -> None:
    loop: dict[str, Any] = {
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        "$ref": "#/$defs/A",
    }
    old = base_manifest()
    new = edited(old)
    tool(old, SEARCH)["result_schema"] = loop
    tool(new, SEARCH)["result_schema"] = {**loop, "$defs": {**loop["$defs"], "C": {}}}
    report = diff_manifests(typed(old), typed(new))
    assert report.changes == []


def test_mutually_recursive_models_end_and_report_once() -> None:
    schema = {
        "$defs": {
            "A": {
                "type": "object",
                "properties": {"b": {"$ref": "#/$defs/B"}, "x": {"type": "string"}},
            },
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
        },
        "$ref": "#/$defs/A",
    }
    old = base_manifest()
    new = edited(old)
    tool(old, CAT)["result_schema"] = schema
    changed = json.loads(json.dumps(schema))
    changed["$defs"]["A"]["properties"]["x"]["maxLength"] = 5
    tool(new, CAT)["result_schema"] = changed
    report = diff_manifests(typed(old), typed(new))
    assert [(c.pointer, c.kind) for c in report.changes] == [
        ("/result_schema/properties/x/maxLength", "constraint_tightened")
    ]


@pytest.mark.parametrize("side", ["input_schema", "result_schema"])
def test_deep_nesting_does_not_exhaust_the_stack(side: str) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(150):
        deep = {"type": "object", "properties": {"n": deep}}
    old = base_manifest()
    new = edited(old)
    tool(old, CAT)[side] = deep
    tool(new, CAT)[side] = json.loads(json.dumps(deep).replace('"string"', '"integer"'))
    report = diff_manifests(typed(old), typed(new))
    assert [(c.kind, c.breaking) for c in report.changes] == [("schema_not_compared", True)]
    assert not report.ok


@pytest.mark.parametrize(
    ("pointer", "name"),
    [
        ("/input_schema/properties/owner/anyOf/0/properties/name/maxLength", "params.owner.name"),
        ("/result_schema/items/properties/revision", "result[].revision"),
        ("/result_schema/properties/a~1b/type", "result.a/b"),
        ("/activation", "activation"),
        ("", ""),
    ],
    ids=["through_any_of", "array_items", "escaped", "tool_field", "whole_tool"],
)
def test_field_name(pointer: str, name: str) -> None:
    assert field_name(pointer) == name


@pytest.mark.parametrize(
    ("old", "new", "bump", "major"),
    [
        ("1.4.2", "2.0.0", "major", True),
        ("1.4.2", "1.5.0", "minor", False),
        ("1.4.2", "1.4.3", "patch", False),
        ("0.3.1", "0.4.0", "minor", True),
        ("0.3.1", "0.3.2", "patch", False),
        ("0.0.3", "0.0.4", "patch", True),
        ("1.4.2", "2.0.0-rc.1", "major", True),
        ("2.0.0-rc.1", "2.0.0-rc.2", "prerelease", False),
        ("2.0.0-rc.1", "2.0.0", "prerelease", False),
        ("2.0.0-alpha.10", "2.0.0-alpha.9", "downgrade", False),
        ("1.4.2", "1.4.2+build.5", "none", False),
        ("2.0.0", "1.9.9", "downgrade", False),
    ],
    ids=[
        "major",
        "minor",
        "patch",
        "0y_minor",
        "0y_patch",
        "00z_patch",
        "prerelease_of_next_major",
        "prerelease_step",
        "release_of_prerelease",
        "numeric_prerelease_ids",
        "build_metadata",
        "downgrade",
    ],
)
def test_semver_bumps(old: str, new: str, bump: str, major: bool) -> None:
    a, b = parse_version(old), parse_version(new)
    assert a is not None and b is not None
    assert bump_kind(a, b) == bump
    assert is_major_bump(a, b) is major


@pytest.mark.parametrize(
    ("version", "target"),
    [("1.4.2", "2.0.0"), ("0.3.1", "0.4.0"), ("0.0.3", "0.0.4"), ("2.0.0-rc.1", "3.0.0")],
    ids=["x", "0y", "00z", "prerelease"],
)
def test_next_major(version: str, target: str) -> None:
    parsed = parse_version(version)
    assert parsed is not None and str(next_major(parsed)) == target


@pytest.mark.parametrize("text", ["1.0", "01.0.0", "1.0.0-", "v1.0.0", 1, None, "1.0.0-01"])
def test_parse_version_refuses(text: Any) -> None:
    assert parse_version(text) is None


def test_a_version_that_is_not_semver_is_refused() -> None:
    from lineup_sdk.errors import LineupError

    old = base_manifest()
    new = edited(old)
    new["app"]["version"] = "one"
    with pytest.raises(LineupError) as exc:
        diff_manifests(typed(old), typed(new))
    assert exc.value.code == "manifest_invalid" and exc.value.exit_code == 2


def _optional_chain(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """`levels` nested `anyOf [$ref, null]` (pydantic's `X | None`) down to `leaf`."""
    defs: dict[str, Any] = {f"n{levels}": leaf}
    for i in range(levels - 1, -1, -1):
        defs[f"n{i}"] = {"anyOf": [{"$ref": f"#/$defs/n{i + 1}"}, {"type": "null"}]}
    return {"$defs": defs, "$ref": "#/$defs/n0"}


@pytest.mark.parametrize("side", ["input_schema", "result_schema"])
def test_a_breaking_change_under_17_levels_of_optional_anyof_is_found(side: str) -> None:
    old = base_manifest()
    new = edited(old)
    tool(old, CAT)[side] = _optional_chain(17, {"type": "integer"})
    tool(new, CAT)[side] = _optional_chain(17, {"type": "string"})
    report = diff_manifests(typed(old), typed(new))
    assert report.changes and all(c.breaking for c in report.changes)
    assert {c.kind for c in report.changes} == {"type_changed"}
    assert not report.ok


def test_unions_past_the_validation_depth_are_schema_not_compared_and_breaking() -> None:
    old = base_manifest()
    new = edited(old)
    tool(old, CAT)["result_schema"] = _optional_chain(70, {"type": "integer"})
    tool(new, CAT)["result_schema"] = _optional_chain(70, {"type": "string"})
    report = diff_manifests(typed(old), typed(new))
    assert [(c.kind, c.breaking) for c in report.changes] == [("schema_not_compared", True)]
    assert not report.ok
