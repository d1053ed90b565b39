"""Derive a tool's schemas and description from its handler's signature and docstring."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = [
    "HandlerShape",
    "analyze_handler",
    "closed_model_schema",
    "describe",
    "doc_summary",
    "result_schema_of",
]

_NO_RETURN = object()
_JSON_SCALARS = frozenset({str, int, bool, type(None)})


class _ClosedSchema(GenerateJsonSchema):
    """Models are closed (`additionalProperties: false`) unless they opt in with extra='allow'.

    The schema the Agent sees is the schema the runtime enforces, so an unknown argument is
    `invalid_params` rather than silently dropped.
    """

    def encode_default(self, dft: Any) -> Any:
        # pydantic builds a fresh TypeAdapter per default; for JSON scalars its output is
        # the value itself, so skip that (the bulk of schema time for many small tools).
        kind = type(dft)
        if kind in _JSON_SCALARS or (kind is float and math.isfinite(dft)):
            return dft
        if _plain_class(kind) and set(self._config.config_dict) <= _NEUTRAL_CONFIG:
            # An enum member, list, ...: the config cannot change how it serializes, so
            # reuse one adapter per type instead of building one per default.
            try:
                adapter = _default_adapter(kind)  # type: ignore[arg-type]  # classes hash
                return adapter.dump_python(dft, by_alias=self.by_alias, mode="json")
            except Exception:
                pass  # let pydantic produce its own error below
        return super().encode_default(dft)

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        extra = schema["cls"].model_config.get("extra")
        if (
            extra != "allow"
            and json_schema.get("type") == "object"
            and "additionalProperties" not in json_schema
        ):
            json_schema["additionalProperties"] = False
        return json_schema


# Config keys that do not affect how a default value serializes to JSON.
_NEUTRAL_CONFIG = frozenset({"extra", "title", "frozen"})


def _plain_class(kind: type) -> bool:
    """Not a model, dataclass or TypedDict (those carry their own config)."""
    return not (issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind))


@functools.lru_cache(maxsize=256)
def _default_adapter(kind: type) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


@dataclass
class HandlerShape:
    """How a handler takes its params.

    Attributes:
        form: `model` (one pydantic model after ctx), `kwargs` (annotated keyword
            parameters), or `dict` (schema-first `(ctx, params: dict)`).
        model: The model that validates params (generated for `kwargs`).
        field_names: Keyword names for the `kwargs` form.
        returns: The return annotation, or `None` when the handler has none.
        has_return: Whether a return annotation was written.
        is_async: Whether the handler is a coroutine function.
    """

    form: str
    model: type[BaseModel] | None
    field_names: tuple[str, ...]
    returns: Any
    has_return: bool
    is_async: bool


class HandlerShapeError(Exception):
    """The handler's signature cannot take `(ctx, params)`; the message says why."""


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an unresolvable forward ref is an author mistake
        raise HandlerShapeError(f"cannot resolve the annotations of {fn.__name__}: {exc}") from exc


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def analyze_handler(fn: Callable[..., Any], *, model_name: str) -> HandlerShape:
    """Inspect a handler and build the model that validates its params.

    Raises:
        HandlerShapeError: the signature cannot accept `(ctx, params)`.
    """
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise HandlerShapeError(f"{fn.__name__} must take the ToolContext as its first parameter")
    hints = _hints(fn)
    rest = params[1:]
    has_return = "return" in hints
    returns = hints.get("return", _NO_RETURN)
    is_async = inspect.iscoroutinefunction(fn)
    if len(rest) == 1 and rest[0].kind != inspect.Parameter.VAR_KEYWORD:
        tp = hints.get(rest[0].name)
        if _is_model(tp):
            return HandlerShape("model", tp, (), returns, has_return, is_async)
        if tp is dict or typing.get_origin(tp) is dict:
            return HandlerShape("dict", None, (), returns, has_return, is_async)
    fields: dict[str, Any] = {}
    for p in rest:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise HandlerShapeError(
                f"{fn.__name__}: *args/**kwargs cannot be described by a schema"
            )
        if p.name not in hints:
            raise HandlerShapeError(f"{fn.__name__}: parameter {p.name!r} needs a type annotation")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], default)
    model = pydantic.create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    return HandlerShape("kwargs", model, tuple(fields), returns, has_return, is_async)


def closed_model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The input JSON Schema of a model, closed unless the model allows extras."""
    return model.model_json_schema(schema_generator=_ClosedSchema)


def result_schema_of(annotation: Any) -> dict[str, Any]:
    """The result JSON Schema of a return annotation (`None` → `{"type": "null"}`).

    Many tools share a result type, so schemas are cached per annotation; treat the
    returned dict as read-only.
    """
    try:
        return _cached_result_schema(annotation)
    except TypeError:  # an unhashable annotation: compute it every time
        return _result_schema(annotation)


@functools.lru_cache(maxsize=1024)
def _cached_result_schema(annotation: Any) -> dict[str, Any]:
    return _result_schema(annotation)


def _result_schema(annotation: Any) -> dict[str, Any]:
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    if _is_model(annotation):
        schema: dict[str, Any] = annotation.model_json_schema(
            mode="serialization", schema_generator=_ClosedSchema
        )
        return schema
    schema = TypeAdapter(annotation).json_schema(
        mode="serialization", schema_generator=_ClosedSchema
    )
    return schema


def doc_summary(fn: Callable[..., Any]) -> str | None:
    """The docstring's first paragraph, joined into one line."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in para.splitlines()) or None


#: docstring_parser's first `args` item for a parameter entry (not an attribute or raise)
_PARAM_KINDS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


def doc_args(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter descriptions from the docstring in Google (`Args:`), NumPy (`Parameters`
    and a dashed underline) or reST (`:param name:`) style, each joined into one line."""
    doc = inspect.getdoc(fn)
    if not doc:
        return {}
    import docstring_parser  # imported when schemas are derived, never by a worker's import

    try:
        parsed = docstring_parser.parse(doc)  # AUTO: the style that finds the most entries
    except docstring_parser.ParseError:
        return {}
    out: dict[str, str] = {}
    for param in parsed.params:
        if not param.args or param.args[0] not in _PARAM_KINDS:
            continue
        name = param.arg_name.lstrip("*")
        text = " ".join((param.description or "").split())
        if name and text:
            out.setdefault(name, text)
    return out


def describe(schema: dict[str, Any], fn: Callable[..., Any]) -> None:
    """Fill missing top-level property descriptions from the docstring's `Args:` section."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return
    docs = doc_args(fn)
    for name, prop in props.items():
        if isinstance(prop, dict) and "description" not in prop and docs.get(name):
            prop["description"] = docs[name]


def field_default_is_fieldinfo(value: Any) -> bool:
    """Whether a parameter default is a pydantic `Field(...)`."""
    return isinstance(value, FieldInfo)
