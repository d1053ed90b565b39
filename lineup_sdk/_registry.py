"""`define_agent_tools` and the registry it returns: declarations as inert data + handlers."""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lineup_sdk.catalog import CATALOG
from lineup_sdk.errors import DeclarationError
from lineup_sdk.names import method_name_problem, scope_problem

__all__ = [
    "ACTIVATIONS",
    "COLLECT_ENV",
    "ActionRegistry",
    "Declaration",
    "Location",
    "Problem",
    "ToolRegistry",
    "collected",
    "collected_actions",
    "define_agent_tools",
    "define_ui_actions",
    "method_name_problem",
]

ACTIVATIONS = ("app_ready", "foreground_required", "activation_not_required")
#: Set by `lineup build` in its import subprocess: record declaration mistakes, keep going.
COLLECT_ENV = "LINEUP_SDK_COLLECT"

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Location:
    """Where a declaration was made."""

    file: str
    line: int


@dataclass
class Problem:
    """A declaration mistake recorded in collecting mode (what normal mode raises)."""

    code: str
    message: str
    location: Location | None
    related: list[Location] = field(default_factory=list)
    hint: str | None = None

    def to_error(self) -> DeclarationError:
        loc = self.location
        return DeclarationError(
            self.code,
            self.message,
            file=loc.file if loc else None,
            line=loc.line if loc else None,
            related=[(r.file, r.line) for r in self.related],
            hint=self.hint,
        )


@dataclass
class Declaration:
    """One declared tool, as data plus (for `miniapp_sdk`) a handler reference.

    Attributes:
        method: `<scope>.<verb>`.
        activation: One of `ACTIVATIONS`.
        delivery: `miniapp_sdk` or `runtime`.
        origin: How it was declared: `tool`, `declare`, `runtime_tool`, or `action` for a
            UI Action (which has no activation: `activation` is then empty).
        location: The declaring call site.
        description: Explicit description (else the docstring's first paragraph).
        timeout_s: Handler timeout in seconds.
        input_schema: Declared input schema (schema-first and runtime tools).
        result_schema: Declared result schema (schema-first and runtime tools).
        handler_key: Catalog key of a runtime tool.
        handler: The local handler function (never stored in the manifest).
        handler_location: Where the handler was attached.
        hints: The author's behaviour hints for Agents (`read_only`, `destructive`,
            `idempotent`, `open_world`), only those set; data, never behaviour.
        surface: Linked to the app's Surface: MCP Apps hosts show the Surface beside its
            answers (SPEC 18.2).
    """

    method: str
    activation: str
    delivery: str
    origin: str
    location: Location
    description: str | None = None
    timeout_s: float = 30
    input_schema: dict[str, Any] | None = None
    result_schema: dict[str, Any] | None = None
    handler_key: str | None = None
    handler: Callable[..., Any] | None = None
    handler_location: Location | None = None
    hints: dict[str, bool] = field(default_factory=dict)
    surface: bool = False


#: Behaviour hints an author may state on a tool (SPEC 10: they become MCP annotations).
HINTS = ("read_only", "destructive", "idempotent", "open_world")


def _caller(depth: int = 2) -> Location:
    frame = sys._getframe(depth)
    return Location(frame.f_code.co_filename, frame.f_lineno)


class ToolRegistry:
    """A MiniApp's tools. Create it with `define_agent_tools(app_scope=...)`.

    The registry is inert data plus handler references: the build reads it as data and the
    SDK's receive entry maps `method → handler` inside the bundle.
    """

    def __init__(self, app_scope: str, *, location: Location, collecting: bool) -> None:
        self.app_scope = app_scope
        self.location = location
        self.problems: list[Problem] = []
        self._collecting = collecting
        self._decls: dict[str, Declaration] = {}
        #: The defining module (normal mode), to find the app's other registry.
        self.module: str | None = None

    # -- reporting ---------------------------------------------------------------------
    def _report(self, problem: Problem) -> None:
        if self._collecting:
            self.problems.append(problem)
            return
        raise problem.to_error()

    def _peer(self) -> ActionRegistry | None:
        """The app's UI Action registry (names are unique across tools and actions)."""
        if self._collecting:
            return _COLLECTED_ACTIONS[0] if _COLLECTED_ACTIONS else None
        return _LIVE_ACTIONS.get(self.module) if self.module else None

    def _check_new(self, method: str, activation: str, where: Location) -> bool:
        """Validate a new declaration; False (in collecting mode) means skip it."""
        if activation not in ACTIVATIONS:
            self._report(
                Problem(
                    "config_invalid",
                    f"activation {activation!r} of {method!r} must be one of {', '.join(ACTIVATIONS)}",
                    where,
                    hint="app_ready (app running), foreground_required (user sees it) or "
                    "activation_not_required (never starts the app)",
                )
            )
            return False
        if not self._collecting:
            bad = method_name_problem(method, self.app_scope)
            if bad:
                self._report(Problem(bad[0], bad[1], where))
        first = self._decls.get(method)
        if first is not None:
            self._report(
                Problem(
                    "duplicate_method",
                    f"method {method!r} is declared twice",
                    where,
                    [first.location],
                )
            )
            return False
        peer = self._peer()
        action = peer.get(method) if peer is not None else None
        if action is not None:
            self._report(
                Problem(
                    "duplicate_method",
                    f"{method!r} is declared as a tool and as a UI Action",
                    where,
                    [action.location],
                    hint="tools and UI Actions share one namespace; rename one of them",
                )
            )
            return False
        return True

    def _hints(self, method: str, where: Location, **given: bool | None) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for name, value in given.items():
            if value is None:
                continue
            if not isinstance(value, bool):
                self._report(
                    Problem(
                        "config_invalid",
                        f"hint {name}={value!r} of {method!r} must be True, False or None",
                        where,
                        hint="hints are booleans that describe the tool to Agents",
                    )
                )
                continue
            out[name] = value
        return out

    def _surface(self, method: str, where: Location, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        self._report(
            Problem(
                "config_invalid",
                f"surface={value!r} of {method!r} must be True or False",
                where,
                hint="surface=True links the tool to the app's Surface in MCP Apps hosts",
            )
        )
        return False

    # -- declaring ---------------------------------------------------------------------
    def tool(
        self,
        method: str,
        *,
        activation: str,
        description: str | None = None,
        timeout_s: float = 30,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        surface: bool = False,
    ) -> Callable[[F], F]:
        """Declare a `miniapp_sdk` tool and its handler in one place.

        Args:
            method: `<app_scope>.<verb>`.
            activation: `app_ready`, `foreground_required` or `activation_not_required`.
            description: Overrides the docstring's first paragraph.
            timeout_s: How long the handler may run before `handler_timeout`.
            read_only: Hint: the tool changes nothing.
            destructive: Hint: the tool may delete or overwrite what it changes.
            idempotent: Hint: repeating the call with the same arguments changes nothing more.
            open_world: Hint: the tool reaches beyond the app (the network, other systems).
            surface: Link the tool to the app's Surface: hosts that render MCP Apps show
                the Surface beside each of its answers (SPEC 18.2).
        """
        where = _caller()
        surface = self._surface(method, where, surface)
        hints = self._hints(
            method,
            where,
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
        )

        def decorate(fn: F) -> F:
            if self._check_new(method, activation, where):
                self._decls[method] = Declaration(
                    method=method,
                    activation=activation,
                    delivery="miniapp_sdk",
                    origin="tool",
                    location=where,
                    description=description,
                    timeout_s=timeout_s,
                    handler=fn,
                    handler_location=where,
                    hints=hints,
                    surface=surface,
                )
            return fn

        return decorate

    def declare(
        self,
        method: str,
        *,
        input_schema: dict[str, Any],
        result_schema: dict[str, Any],
        activation: str,
        description: str | None = None,
        timeout_s: float = 30,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        surface: bool = False,
    ) -> None:
        """Declare a `miniapp_sdk` tool schema-first; attach its handler with `handler()`.

        The hints and `surface` are those of `tool()`.
        """
        where = _caller()
        surface = self._surface(method, where, surface)
        hints = self._hints(
            method,
            where,
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent,
            open_world=open_world,
        )
        if self._check_new(method, activation, where):
            self._decls[method] = Declaration(
                method=method,
                activation=activation,
                delivery="miniapp_sdk",
                origin="declare",
                location=where,
                description=description,
                timeout_s=timeout_s,
                input_schema=input_schema,
                result_schema=result_schema,
                hints=hints,
                surface=surface,
            )

    def handler(self, method: str) -> Callable[[F], F]:
        """Attach the handler of a method declared with `declare()`."""
        where = _caller()

        def decorate(fn: F) -> F:
            decl = self._decls.get(method)
            if decl is None:
                self._report(
                    Problem(
                        "handler_without_declaration",
                        f"handler for {method!r}, which is not declared",
                        where,
                        hint=f"call tools.declare({method!r}, ...) before the handler",
                    )
                )
            elif decl.delivery == "runtime":
                self._report(
                    Problem(
                        "handler_without_declaration",
                        f"{method!r} is a runtime tool; the runtime serves it, so it takes no handler",
                        where,
                        [decl.location],
                    )
                )
            elif decl.handler is not None:
                assert decl.handler_location is not None
                self._report(
                    Problem(
                        "duplicate_method",
                        f"method {method!r} already has a handler",
                        where,
                        [decl.handler_location],
                    )
                )
            else:
                decl.handler = fn
                decl.handler_location = where
            return fn

        return decorate

    def runtime_tool(
        self,
        method: str,
        *,
        handler_key: str,
        activation: str,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        result_schema: dict[str, Any] | None = None,
        surface: bool = False,
    ) -> None:
        """Declare a `delivery = runtime` tool served by a catalog handler key.

        The schemas come from the catalog; pass them only to restate the catalog's.
        `surface` is that of `tool()`.
        """
        where = _caller()
        surface = self._surface(method, where, surface)
        if handler_key not in CATALOG:
            self._report(
                Problem(
                    "unknown_runtime_handler",
                    f"runtime handler key {handler_key!r} of {method!r} is not in the catalog",
                    where,
                    hint=f"known keys: {', '.join(sorted(CATALOG))}",
                )
            )
            return
        if self._check_new(method, activation, where):
            entry = CATALOG[handler_key]
            self._decls[method] = Declaration(
                method=method,
                activation=activation,
                delivery="runtime",
                origin="runtime_tool",
                location=where,
                description=description if description is not None else entry.description,
                input_schema=input_schema,
                result_schema=result_schema,
                handler_key=handler_key,
                surface=surface,
            )

    # -- reading -----------------------------------------------------------------------
    def declarations(self) -> list[Declaration]:
        """Every declaration, sorted by method."""
        return [self._decls[m] for m in sorted(self._decls)]

    def get(self, method: str) -> Declaration | None:
        """The declaration of `method`, if any."""
        return self._decls.get(method)

    def __repr__(self) -> str:
        return f"ToolRegistry(app_scope={self.app_scope!r}, tools={len(self._decls)})"


class ActionRegistry:
    """A MiniApp's UI Actions. Create it with `define_ui_actions(app_scope=...)`.

    A UI Action is a named business operation a Surface asks for (SPEC 17); its handler
    applies it to the latest session data in the App session's one order, as a tool
    handler does. Like the tool registry, it is inert data plus handler references.
    """

    def __init__(self, app_scope: str, *, location: Location, collecting: bool) -> None:
        self.app_scope = app_scope
        self.location = location
        self.problems: list[Problem] = []
        self._collecting = collecting
        self._decls: dict[str, Declaration] = {}
        #: The defining module (normal mode), to find the app's tool registry.
        self.module: str | None = None

    def _report(self, problem: Problem) -> None:
        if self._collecting:
            self.problems.append(problem)
            return
        raise problem.to_error()

    def _peer(self) -> ToolRegistry | None:
        if self._collecting:
            return _COLLECTED[0] if _COLLECTED else None
        return _LIVE.get(self.module) if self.module else None

    def _check_new(self, name: str, where: Location) -> bool:
        if not self._collecting:
            bad = method_name_problem(name, self.app_scope)
            if bad:
                self._report(Problem(bad[0], bad[1], where))
        first = self._decls.get(name)
        if first is not None:
            self._report(
                Problem(
                    "duplicate_method",
                    f"action {name!r} is declared twice",
                    where,
                    [first.location],
                )
            )
            return False
        peer = self._peer()
        tool = peer.get(name) if peer is not None else None
        if tool is not None:
            self._report(
                Problem(
                    "duplicate_method",
                    f"{name!r} is declared as a UI Action and as a tool",
                    where,
                    [tool.location],
                    hint="tools and UI Actions share one namespace; rename one of them",
                )
            )
            return False
        return True

    def action(
        self, name: str, *, description: str | None = None, timeout_s: float = 30
    ) -> Callable[[F], F]:
        """Declare a UI Action and its handler in one place.

        The handler is `(ctx: ActionContext, **typed params) -> Model | None`, sync or
        async, typed exactly as a tool's: the input schema (closed) comes from the
        parameters, the result schema from the return annotation, the descriptions from
        the docstring. Raise `ToolError` for a business refusal.

        Args:
            name: `<app_scope>.<verb>`, unique across the app's tools and actions.
            description: Overrides the docstring's first paragraph.
            timeout_s: How long the handler may run before `handler_timeout`.
        """
        where = _caller()

        def decorate(fn: F) -> F:
            if self._check_new(name, where):
                self._decls[name] = Declaration(
                    method=name,
                    activation="",
                    delivery="miniapp_sdk",
                    origin="action",
                    location=where,
                    description=description,
                    timeout_s=timeout_s,
                    handler=fn,
                    handler_location=where,
                )
            return fn

        return decorate

    def declarations(self) -> list[Declaration]:
        """Every action, sorted by name."""
        return [self._decls[m] for m in sorted(self._decls)]

    def get(self, name: str) -> Declaration | None:
        """The declaration of action `name`, if any."""
        return self._decls.get(name)

    def names(self) -> list[str]:
        """Every action name, sorted."""
        return sorted(self._decls)

    def __repr__(self) -> str:
        return f"ActionRegistry(app_scope={self.app_scope!r}, actions={len(self._decls)})"


# Registries alive per defining module, to catch a second registry in normal use.
_LIVE: weakref.WeakValueDictionary[str, ToolRegistry] = weakref.WeakValueDictionary()
_LIVE_ACTIONS: weakref.WeakValueDictionary[str, ActionRegistry] = weakref.WeakValueDictionary()
# Every registry created while collecting (the build's import subprocess).
_COLLECTED: list[ToolRegistry] = []
_COLLECTED_ACTIONS: list[ActionRegistry] = []
_STRAY: list[Problem] = []


def collected() -> tuple[list[ToolRegistry], list[Problem]]:
    """Registries created in collecting mode, and problems not tied to one registry."""
    return list(_COLLECTED), list(_STRAY)


def collected_actions() -> list[ActionRegistry]:
    """UI Action registries created in collecting mode (problems go to `collected()`'s)."""
    return list(_COLLECTED_ACTIONS)


R = TypeVar("R", ToolRegistry, ActionRegistry)


def _enrol(
    registry: R,
    module: str,
    collecting: bool,
    collected: list[R],
    live: weakref.WeakValueDictionary[str, R],
    noun: str,
) -> R:
    """Check a new registry's scope and that it is its kind's first, then record it: while
    collecting (the build), problems are kept for the build to report; in normal use they
    raise at the definition."""
    where, bad = registry.location, scope_problem(registry.app_scope)
    if collecting:
        if bad:
            _STRAY.append(Problem("scope_invalid", bad, where))
        if collected:
            second = f"a second {noun} was defined"
            _STRAY.append(Problem("registry_multiple", second, where, [collected[0].location]))
        collected.append(registry)
        return registry
    if bad:
        raise DeclarationError("scope_invalid", bad, file=where.file, line=where.line)
    first = live.get(module)
    if first is not None:
        raise DeclarationError(
            "registry_multiple",
            f"module {module!r} defines a second {noun}",
            file=where.file,
            line=where.line,
            related=[(first.location.file, first.location.line)],
        )
    registry.module = module
    live[module] = registry
    return registry


def live_action_registries(app_scope: str) -> list[ActionRegistry]:
    """The UI Action registries alive in this process for `app_scope` (normal mode: the
    worker finds an app's actions wherever the entry's imports defined them)."""
    return [r for r in list(_LIVE_ACTIONS.values()) if r.app_scope == app_scope]


def define_ui_actions(*, app_scope: str) -> ActionRegistry:
    """Create the MiniApp's UI Action registry (at most one per MiniApp, SPEC 17).

    Args:
        app_scope: The app scope from `lineup.toml`; every action name starts with it.

    Raises:
        DeclarationError: `scope_invalid`, or `registry_multiple` when the module already
            defined a UI Action registry.
    """
    where = _caller()
    collecting = os.environ.get(COLLECT_ENV) == "1"
    registry = ActionRegistry(app_scope, location=where, collecting=collecting)
    module = sys._getframe(1).f_globals.get("__name__", "?")
    return _enrol(
        registry, module, collecting, _COLLECTED_ACTIONS, _LIVE_ACTIONS, "UI Action registry"
    )


def define_agent_tools(*, app_scope: str) -> ToolRegistry:
    """Create the MiniApp's tool registry (one per MiniApp).

    Args:
        app_scope: The app scope from `lineup.toml`; every method starts with it.

    Raises:
        DeclarationError: `scope_invalid`, or `registry_multiple` when the module already
            defined a registry.
    """
    where = _caller()
    collecting = os.environ.get(COLLECT_ENV) == "1"
    registry = ToolRegistry(app_scope, location=where, collecting=collecting)
    module = sys._getframe(1).f_globals.get("__name__", "?")
    return _enrol(registry, module, collecting, _COLLECTED, _LIVE, "registry")
