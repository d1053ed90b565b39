"""A project folder built with its own dev key, and the trust store that trusts only that key.

What `lineup run`, `lineup test` and `lineup serve` (composed in `lineup_build.cli`) and
`lineup_runtime_lite.testing` install: the bundle, a store trusting the project's
`.lineup/` key for the app's scope and the permissions the project asks for (SPEC 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lineup_build.build import build_dev
from lineup_build.model import Manifest
from lineup_build.signing import SigningKey
from lineup_build.trust import TrustStore, dev_trust

__all__ = ["DevBuild", "build_with_dev_key"]


@dataclass(frozen=True)
class DevBuild:
    """A project built with its dev key, and a trust store that trusts only that key.

    Attributes:
        bundle: The bundle written.
        trust: A store trusting the dev key for the app's scope and permissions.
        scope: The app scope.
        model: The signed manifest.
        key: The project's dev key.
    """

    bundle: Path
    trust: TrustStore
    scope: str
    model: Manifest
    key: SigningKey


def build_with_dev_key(
    target: Path, *, out_dir: Path | None = None, sandbox: str = "best_effort"
) -> DevBuild:
    """Build a project folder with its `.lineup/` dev key (created on first use) into
    `out_dir` (default: `<project>/.lineup/run`).

    Raises:
        LineupError: the first build problem, with every diagnostic in `details`.
    """
    root = target.resolve()
    result, key = build_dev(root, out_dir=out_dir or root / ".lineup" / "run", sandbox=sandbox)
    assert result.bundle is not None and result.model is not None
    trust = dev_trust(key.public_raw, result.model)
    return DevBuild(result.bundle, trust, result.model.app.scope, result.model, key)
