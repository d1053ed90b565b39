"""End-to-end tests of a MiniApp project: build it with its dev key and install it into an
in-memory `Runtime` on a `VirtualClock` (workers, activations, the Host simulator and all).

```python
from lineup_runtime_lite.testing import open_app

with open_app("path/to/project", host="auto") as app:
    app.call("a1", "todo.add", {"title": "milk"})
    assert app.messages()[-1]["result"]["count"] == 1
    app.advance("25m")
```

With pytest, `pytest_plugins = ["lineup_runtime_lite.pytest_plugin"]` in a `conftest.py`
gives the `lineup_app` fixture (a factory; every app it opened is closed after the test).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_build.dev import build_with_dev_key
from lineup_runtime_lite.api.clock import VirtualClock, parse_duration
from lineup_runtime_lite.api.options import RuntimeOptions
from lineup_runtime_lite.api.runtime import Runtime
from lineup_runtime_lite.core.messages import AgentMessage
from lineup_runtime_lite.host.simulator import HostSimulator
from lineup_sdk.context import Snapshot

__all__ = ["AppUnderTest", "open_app"]


@dataclass
class AppUnderTest:
    """One project installed into an in-memory runtime; the test plays the Agent and, with
    `host="manual"`, the Host."""

    runtime: Runtime
    clock: VirtualClock
    scope: str
    bundle: Path
    conversation: str = "c1"
    _tmp: Path | None = field(default=None, repr=False)

    def call(
        self, call_id: str, method: str, params: Any = None, *, conversation: str | None = None
    ) -> AgentMessage:
        """Send an Agent call, let what it started settle, and return its AgentMessage."""
        msg = self.runtime.call(
            call_id, conversation or self.conversation, method, {} if params is None else params
        )
        self.runtime.settle()
        return msg

    def host(self, event: str, *, conversation: str | None = None) -> None:
        """A Host event (`foreground_confirmed`, `user_left`, ...) for this app."""
        self.runtime.host.event(
            event, conversation=conversation or self.conversation, scope=self.scope
        )
        self.runtime.settle()

    def advance(self, duration: str | int) -> None:
        """Move the virtual clock (`"25m"`, or milliseconds); due deadlines fire."""
        self.clock.advance(parse_duration(duration) if isinstance(duration, str) else duration)

    def messages(self) -> list[AgentMessage]:
        """Every outbox message not returned before (and acknowledges them), oldest first."""
        out: list[AgentMessage] = []
        while batch := self.runtime.outbox.fetch(500):
            self.runtime.outbox.ack([m["id"] for m in batch])
            out.extend(batch)
        return out

    def session_data(self, *, conversation: str | None = None) -> Snapshot:
        """The conversation's session data for this app, as the Surface reads it."""
        return self.runtime.surface(conversation or self.conversation, self.scope).get()

    def close(self) -> None:
        """Stop the workers and drop the in-memory runtime."""
        self.runtime.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> AppUnderTest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_app(
    project: str | Path,
    *,
    host: str = "auto",
    sandbox: str = "best_effort",
    activation_timeout_s: float = 60.0,
    out_dir: Path | None = None,
) -> AppUnderTest:
    """Build `project` with its dev key (created on first use) and install the bundle into
    an in-memory runtime on a virtual clock that trusts only that key.

    Args:
        project: The project folder (holding `lineup.toml`).
        host: The Host simulator's policy: `auto` or `manual`.
        sandbox: How workers are contained (`best_effort`, `required`, `off`).
        activation_timeout_s: Virtual seconds before a starting activation fails.
        out_dir: Where the bundle is written (default: a temporary folder).

    Raises:
        LineupError: a build problem, with every diagnostic in `details`.
    """
    tmp = Path(tempfile.mkdtemp(prefix="lineup-testing-"))
    try:
        built = build_with_dev_key(Path(project), out_dir=out_dir or tmp / "dist", sandbox=sandbox)
        clock = VirtualClock()
        options = RuntimeOptions(
            ":memory:",
            built.trust,
            clock=clock,
            host=HostSimulator(host),
            apps_dir=tmp / "apps",
            activation_timeout_s=activation_timeout_s,
            sandbox=sandbox,
        )
        rt = Runtime._from_options(options)
        try:
            rt.install(built.bundle)
        except BaseException:
            rt.close()
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return AppUnderTest(rt, clock, built.scope, built.bundle, _tmp=tmp)
