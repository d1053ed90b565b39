"""What `lineup serve` serves: project folders built with their dev keys (an edited folder
re-installs over its previous dev build) and bundles verified against a trust store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lineup_sdk.errors import LineupError

__all__ = ["Prepared", "install_targets", "prepare_targets"]


@dataclass(frozen=True)
class Prepared:
    """A bundle ready to install, and whether it is a local dev build."""

    bundle: Path
    scope: str
    dev_build: bool


def _build(folder: Path, trust: Any, sandbox: str) -> Prepared:
    from lineup_build.build import build_dev

    result, key = build_dev(folder, out_dir=folder.resolve() / ".lineup" / "serve", sandbox=sandbox)
    assert result.bundle is not None and result.model is not None
    app = result.model.app
    scope = app.scope
    # the project's own dev key: trusted for its scope and what it asks for; a --trust
    # file may already trust that key, so its scopes and grants are only widened
    known = trust.keys.get(key.key_id)
    trust.add(
        key.public_raw,
        sorted({*(known.scopes if known else ()), scope}),
        known.label if known else "lineup serve dev key",
        sorted({*(known.allow if known else ()), *app.permissions}),
    )
    return Prepared(result.bundle, scope, True)


def prepare_targets(
    targets: list[Path], trust_file: Path | None, *, sandbox: str = "best_effort"
) -> tuple[Any, list[Prepared]]:
    """`(trust store, bundles)`: folders are built (their entry imported under `sandbox`)
    and their dev keys trusted, in memory only; bundles need `trust_file`.

    Raises:
        LineupError: a build problem, `usage_invalid` for a bundle without a trust store or
            a missing target, or whatever verification of a bundle reports.
    """
    from lineup_build.trust import TrustStore
    from lineup_build.verify import check_bundle

    if not targets:
        raise LineupError(
            "usage_invalid", "name at least one MiniApp folder or bundle", exit_code=2
        )
    trust = TrustStore.load(trust_file) if trust_file is not None else TrustStore()
    prepared: list[Prepared] = []
    for target in targets:
        if target.is_dir():
            prepared.append(_build(target, trust, sandbox))
        elif target.is_file():
            if trust_file is None:
                raise LineupError(
                    "usage_invalid",
                    f"{target} is a bundle; pass --trust FILE to say whose keys you trust",
                    hint="lineup serve BUNDLE --trust trust.toml",
                    exit_code=2,
                )
            report = check_bundle(target, trust)
            if not report.ok or report.model is None:
                raise report.problems[0]
            prepared.append(Prepared(target, report.model.app.scope, False))
        else:
            raise LineupError(
                "usage_invalid", f"{target} is neither a MiniApp folder nor a bundle", exit_code=2
            )
    scopes = [p.scope for p in prepared]
    twice = sorted({s for s in scopes if scopes.count(s) > 1})
    if twice:
        raise LineupError(
            "usage_invalid", f"scope(s) named more than once: {', '.join(twice)}", exit_code=2
        )
    return trust, prepared


def install_targets(rt: Any, prepared: list[Prepared]) -> list[dict[str, Any]]:
    """Install each bundle (dev builds beside an older build of the same version)."""
    return [rt.install(p.bundle, dev_build=p.dev_build).to_dict() for p in prepared]
