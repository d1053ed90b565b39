"""The rules of `lineup diff` for schemas (SPEC 11) and the keyword tables they use."""

from __future__ import annotations

__all__ = ["INPUT", "RESULT", "RULES"]

INPUT = "input"
RESULT = "result"

#: kind -> (breaking in an input schema, breaking in a result schema).
RULES: dict[str, tuple[bool, bool]] = {
    "property_added": (False, False),
    "required_property_added": (True, False),
    "property_removed": (True, True),
    "property_required": (True, False),
    "property_optional": (False, True),
    "additional_properties_closed": (True, False),
    "additional_properties_opened": (False, True),
    "type_narrowed": (True, False),
    "type_widened": (False, True),
    "type_changed": (True, True),
    "enum_added": (True, False),
    "enum_removed": (False, True),
    "enum_value_added": (False, True),
    "enum_value_removed": (True, False),
    "constraint_tightened": (True, False),
    "constraint_loosened": (False, True),
    "constraint_changed": (True, True),
    "keyword_changed": (True, True),
    "schema_not_compared": (True, True),
    "description_changed": (False, False),
    "default_changed": (False, False),
    "annotation_changed": (False, False),
}

ANNOTATIONS = frozenset(
    {
        "title",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "contentMediaType",
        "contentEncoding",
        "discriminator",
    }
)

# Keys that assert nothing about an instance and are never compared as assertions.
INERT = ANNOTATIONS | {"description", "default", "$defs", "definitions", "$schema", "$anchor"}

LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties", "minContains")

UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties", "maxContains")

BY_TYPE: dict[str, frozenset[str]] = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"}
    ),
    "array": frozenset(
        {
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        }
    ),
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedProperties",
        }
    ),
}
BY_TYPE["integer"] = BY_TYPE["number"]

TYPED = frozenset().union(*BY_TYPE.values())

# Handled one by one below; anything else that asserts is compared as a whole.
HANDLED = frozenset(
    {
        *LOWER,
        *UPPER,
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "pattern",
        "format",
        "multipleOf",
        "uniqueItems",
        "$ref",
        "allOf",
    }
)

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")

ANY = "any"


def keywords_for(t: str) -> frozenset[str]:
    return TYPED if t == ANY else BY_TYPE.get(t, frozenset())
