"""The SDK's single receive entry: map a delivered `method` to its local handler.

The Runtime never stores or calls a handler; it delivers `method + params + context` and
this dispatcher, inside the bundle's worker, finds the handler and runs it. A delivery is
a tool call (`kind="tool"`) or a UI Action (`kind="action"`, SPEC 17); the two are looked
up in their own registries and answered alike.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, PydanticUserError, TypeAdapter, ValidationError

from lineup_sdk._registry import ActionRegistry, Declaration, ToolRegistry
from lineup_sdk._schema import HandlerShape, analyze_handler
from lineup_sdk.context import ActionContext, ToolContext
from lineup_sdk.errors import LineupError, ToolError

__all__ = ["KINDS", "Dispatcher", "Outcome"]

#: The kinds of delivery: an Agent's tool call, or a Surface's UI Action.
KINDS = ("tool", "action")

_SNAKE = re.compile(r"[a-z][a-z0-9_]*\Z")
log = logging.getLogger("lineup.worker")


@dataclass(frozen=True, slots=True)
class Outcome:
    """A handler's outcome: `ok` with a JSON `result`, or an `error` object."""

    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None


def _fail(code: str, message: str, details: Any = None) -> Outcome:
    err: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        err["details"] = details
    return Outcome(False, error=err)


@dataclass(frozen=True)
class _Route:
    fn: Callable[..., Any]
    shape: HandlerShape
    dump: Callable[[Any], Any]


#: pydantic turns a non-finite float into `null` in JSON mode by default: a NaN returned
#: under `Any` would reach the Agent as `null` instead of `handler_result_invalid`
_KEEP_NAN = ConfigDict(ser_json_inf_nan="constants")


def _dumper(shape: HandlerShape) -> Callable[[Any], Any]:
    ann = shape.returns
    if not shape.has_return or ann is None or ann is type(None):
        return lambda value: (
            value if not isinstance(value, BaseModel) else value.model_dump(mode="json")
        )
    if isinstance(ann, type) and issubclass(ann, BaseModel):

        def dump_model(value: Any) -> Any:
            if isinstance(value, BaseModel):
                return value.model_dump(mode="json")
            return value

        return dump_model
    try:  # NaN and ±Infinity stay floats, so the bridge refuses them (not `null` under Any)
        adapter: TypeAdapter[Any] = TypeAdapter(ann, config=_KEEP_NAN)
    except PydanticUserError:  # a type that carries its own config
        adapter = TypeAdapter(ann)
    return functools.partial(adapter.dump_python, mode="json")


def _pointer(loc: tuple[int | str, ...]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in loc)


class Dispatcher:
    """Routes delivered calls and actions to the registries' handlers (routes are built
    once, lazily).

    Args:
        registry: The app's tool registry.
        actions: The app's UI Action registry, if it declares actions.
    """

    def __init__(self, registry: ToolRegistry, actions: ActionRegistry | None = None) -> None:
        self.registry = registry
        self.action_registry = actions
        self._routes: dict[tuple[str, str], _Route] = {}

    def methods(self) -> list[str]:
        """The `miniapp_sdk` methods this bundle can serve (reported at worker start)."""
        return sorted(
            d.method
            for d in self.registry.declarations()
            if d.delivery == "miniapp_sdk" and d.handler is not None
        )

    def actions(self) -> list[str]:
        """The UI Actions this bundle can serve (reported at worker start), sorted."""
        if self.action_registry is None:
            return []
        return sorted(d.method for d in self.action_registry.declarations() if d.handler)

    def _decl(self, method: str, kind: str) -> Declaration | None:
        if kind == "action":
            return self.action_registry.get(method) if self.action_registry else None
        return self.registry.get(method) if kind == "tool" else None

    def _route(self, method: str, kind: str = "tool") -> _Route | None:
        route = self._routes.get((kind, method))
        if route is None:
            decl = self._decl(method, kind)
            if decl is None or decl.handler is None:
                return None
            name = "".join(p.title() for p in method.replace(".", "_").split("_")) + "Params"
            shape = analyze_handler(decl.handler, model_name=name)
            route = self._routes[kind, method] = _Route(decl.handler, shape, _dumper(shape))
        return route

    def prepare(self) -> None:
        """Build every route now (a warm image does, so that its forks share them instead
        of each building its own at its first delivery); a handler whose route cannot be
        built fails at its delivery, as without this."""
        wanted = [("tool", m) for m in self.methods()] + [("action", a) for a in self.actions()]
        for kind, method in wanted:
            try:
                self._route(method, kind)
            except Exception:  # reported by dispatch, as if never prepared
                continue

    def is_sync(self, method: str, kind: str = "tool") -> bool:
        """Whether `method`'s handler runs in a thread (a plain `def`)."""
        try:
            route = self._route(method, kind)
        except Exception:
            return False
        return route is not None and not route.shape.is_async

    async def dispatch(
        self,
        method: str,
        params: dict[str, Any],
        ctx: ToolContext | ActionContext,
        *,
        kind: str = "tool",
    ) -> Outcome:
        """Validate `params`, run the handler, and turn whatever happens into an Outcome.

        `kind` is `tool` (`method` names a tool) or `action` (a UI Action)."""
        what = "action" if kind == "action" else "handler"
        try:
            route = self._route(method, kind)
        except Exception as exc:
            log.exception("cannot prepare the handler of %s", method)
            return _fail("handler_failed", f"the handler of {method} cannot be prepared: {exc}")
        if route is None:
            return _fail("handler_failed", f"this app has no {what} for {method}")
        shape = route.shape
        try:
            if shape.form == "dict":
                args: tuple[Any, ...] = (params,)
                kwargs: dict[str, Any] = {}
            else:
                assert shape.model is not None
                model = shape.model.model_validate(params)
                if shape.form == "model":
                    args, kwargs = (model,), {}
                else:
                    args, kwargs = (), {n: getattr(model, n) for n in shape.field_names}
        except ValidationError as exc:
            details = [
                {"path": _pointer(tuple(e["loc"])), "message": e["msg"]} for e in exc.errors()
            ]
            return _fail("invalid_params", f"params of {method} are invalid", details)
        try:
            if shape.is_async:
                value = await route.fn(ctx, *args, **kwargs)
            else:
                value = await asyncio.to_thread(route.fn, ctx, *args, **kwargs)
        except ToolError as exc:
            if not isinstance(exc.code, str) or not _SNAKE.match(exc.code):
                log.error("ToolError with a non-snake_case code %r in %s", exc.code, method)
                return _fail("handler_failed", f"{method} failed")
            return _fail(f"app.{exc.code}", str(exc.message), exc.details)
        except LineupError as exc:
            if exc.code.startswith("session_data_"):
                return _fail(exc.code, exc.message)
            log.exception("handler %s raised %s", method, exc.code)
            return _fail("handler_failed", f"{method} failed")
        except Exception:
            log.exception("handler %s failed", method)
            return _fail("handler_failed", f"{method} failed")
        try:  # a value the declared type cannot turn into JSON (too deep, a cycle, …)
            return Outcome(True, result=route.dump(value))
        except Exception as exc:
            log.warning("the result of %s cannot be sent: %s", method, str(exc)[:200])
            return _fail("handler_result_invalid", f"the result of {method} cannot be sent")
