"""The checks of arguments both runtimes share (`Runtime` checks some before it hops to
the loop, `AsyncRuntime` and its faces on it): ids, outbox limits, and the walk that says
whether a call's params are plainly small."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from lineup_runtime_lite.validation.params import id_problem
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.api.clock import Clock
    from lineup_runtime_lite.api.engine import Engine

__all__ = [
    "MAX_FETCH",
    "Owner",
    "check_ids",
    "check_limit",
    "check_position",
    "small",
    "usable_id",
]

#: The most messages one `outbox.fetch` returns.
MAX_FETCH = 1000


def check_limit(limit: Any) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_FETCH:
        raise LineupError(
            "usage_invalid",
            f"outbox.fetch(limit) takes an integer from 1 to {MAX_FETCH}, not {limit!r}",
        )


def check_position(position: Any) -> None:
    if type(position) is not int or position < 0:
        raise LineupError(
            "usage_invalid",
            f"outbox.after(position) takes an integer of 0 or more, not {position!r}",
            hint="0 for the first message, then the position the last read returned",
        )


def check_ids(ids: Any) -> None:
    if not isinstance(ids, list | tuple) or not all(type(i) is str for i in ids):
        raise LineupError("usage_invalid", "outbox.ack(ids) takes a list of message ids")


def usable_id(name: str, value: Any) -> None:
    """A conversation id or scope argument the store can look up (`usage_invalid`)."""
    why = id_problem(name, value)
    if why is not None:
        raise LineupError("usage_invalid", why)


def small(value: Any, *, nodes: int = 256, chars: int = 16_384) -> bool:
    """Whether `value` is plainly small: at most `nodes` containers and scalars and
    `chars` characters of strings, found by a walk that stops as soon as it is not."""
    stack = [value]
    while stack:
        item = stack.pop()
        nodes -= 1
        if nodes < 0:
            return False
        if isinstance(item, str):
            chars -= len(item)
            if chars < 0:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


class Owner(Protocol):
    """What the parts of an `AsyncRuntime` (its faces, its deadline timer) use of it: its
    engine (replaced when a node registers again), its clock and bounds, whether it is
    closed. A protocol, so that no part imports the runtime back."""

    clock: Clock
    _engine: Engine
    _closed: bool
    _max_params_bytes: int

    def _check_open(self) -> None: ...

    def settle(self) -> Coroutine[Any, Any, None]: ...
