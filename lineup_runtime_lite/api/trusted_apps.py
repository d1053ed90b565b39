"""The installed apps as this node may run them (SPEC 16.1): the trust store (re-read when
its file changes), install, and the re-verification of recorded bundles on a store that
keeps them (PostgreSQL), cached per process by (manifest sha256, trust-store fingerprint).

`AsyncRuntime` holds one `TrustedApps`; the engine's hooks (`check_app`, `check_trust`,
`model_of`, `verify_ahead`) are its methods.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lineup_build.model import Manifest
from lineup_build.reader import Limits
from lineup_runtime_lite.drivers.install import (
    InstalledApp,
    InstallResult,
    RecordedBundle,
    check_folder,
    check_trusted,
    install_verified,
    installed_row,
    local_app,
    recorded_app,
    verify_recorded,
)
from lineup_runtime_lite.store.database import Database
from lineup_runtime_lite.store.sqlite import StoreRace
from lineup_sdk.errors import LineupError

__all__ = ["TrustedApps", "absolute", "file_stamp"]

#: How often `install` decides again after another node's install of the same version
#: got there first (SPEC 16.1: the two converge, `installed` and `unchanged`).
_INSTALL_TRIES = 3


class TrustedApps:
    """The trust store and the installed versions of one runtime's store and apps folder."""

    def __init__(
        self,
        store: Database,
        apps_dir: Path,
        limits: Limits,
        trust: Any,
        trust_path: Path | None = None,
        stamp: tuple[int, int, int] | None = None,
    ) -> None:
        """`trust` as loaded; from `trust_path` (its file stamp then `stamp`) when given,
        so it is re-read when that file changes."""
        self.store, self.apps_dir, self.limits = store, apps_dir, limits
        self.trust: Any = trust
        self.trust_path, self._stamp = trust_path, stamp
        #: Recorded bundles this process verified, by (manifest sha256, trust stamp).
        self._verified: dict[tuple[str, str], RecordedBundle] = {}
        #: ... and those it refused (a bad signature, an untrusted key, no bundle).
        self._refused: dict[tuple[str, str], LineupError] = {}

    def current_trust(self) -> Any:
        """The trust store, re-read when its file changed since it was last read."""
        if self.trust_path is not None:
            stamp = file_stamp(self.trust_path)
            if stamp != self._stamp:
                from lineup_build.trust import TrustStore

                self.trust = TrustStore.load(self.trust_path)
                self._stamp = stamp
        return self.trust

    def trust_stamp(self) -> str:
        """The trust store's fingerprint now (re-read when its file changed)."""
        return self._trust_key()[1]

    def _trust_key(self) -> tuple[Any, str]:
        """The trust store now and its fingerprint (a store given as an object may have
        changed in place)."""
        trust = self.current_trust()
        return trust, _trust_fingerprint(trust)

    def _recorded(
        self, scope: str, version: str, trust: Any, fingerprint: str, *, unpack: bool
    ) -> tuple[InstalledApp | None, Callable[[], RecordedBundle]]:
        """An installed version of a store that keeps bundles (PostgreSQL) as this node
        verified it: the app when this process verified its recorded bundle with this
        trust store already (the row compared again; with `unpack`, not when its folder
        was removed since), else None and the blocking verification to run.

        Raises:
            LineupError: the cached refusal of its bundle; `UntrustedRecord` when the row
                disagrees with the verified bundle.
        """
        row = installed_row(self.store, scope, version)
        key = (str(row["manifest_sha256"]), fingerprint)
        refused = self._refused.get(key)
        if refused is not None:
            raise refused
        bundle = self._verified.get(key)
        if bundle is not None:  # verified in this process: the row must still agree
            app = recorded_app(self.apps_dir, bundle, row, scope, version)
            if not unpack or os.path.lexists(app.root):
                return app, lambda: bundle
        data = self.store.load_bundle(key[0])  # the bytes read here, by the store's reader

        def verify() -> RecordedBundle:
            def keep(done: RecordedBundle) -> None:
                self._verified[(done.digest, fingerprint)] = done

            try:
                return verify_recorded(
                    data, self.apps_dir, trust, row, scope, version, keep, limits=self.limits
                )
            except LineupError as exc:
                if exc.code != "install_tampered":  # the bundle's own verdict, kept
                    self._refused[key] = exc  # until it is installed again
                raise

        return None, verify

    def model_of(self, scope: str, version: str) -> Manifest:
        """The manifest an installed version's tools come from on a store that keeps
        bundles: the one verified from its recorded bundle (SPEC 16.1), never the row's.
        Verified ahead off the loop (`verify_ahead`); a version that was not (one a
        session pins, no longer current) is verified here once, in the caller's thread.

        Raises:
            LineupError: the record is not what the signer signed.
        """
        trust, fingerprint = self._trust_key()
        app, verify = self._recorded(scope, version, trust, fingerprint, unpack=False)
        if app is not None:
            return app.model
        bundle = verify()
        row = installed_row(self.store, scope, version)
        return recorded_app(self.apps_dir, bundle, row, scope, version).model

    async def verify_ahead(self, versions: list[tuple[str, str]]) -> None:
        """Verify, off the loop, the recorded bundles of `versions` this process has not
        (a store that keeps bundles); a refusal is kept for the Registry to report."""
        if not self.store.keeps_bundles:
            return
        trust, fingerprint = self._trust_key()
        for scope, version in versions:
            try:
                app, verify = self._recorded(scope, version, trust, fingerprint, unpack=False)
                if app is None:
                    await asyncio.to_thread(verify)
            except (LineupError, KeyError):
                continue  # `load_registry` meets it again and lists the version untrusted

    async def installed(self, scope: str, version: str) -> tuple[InstalledApp, Any]:
        """An installed version as this node may run it, and the trust store it was
        checked with. On a store that keeps bundles (PostgreSQL) the database is untrusted
        input (SPEC 16.1): the recorded bundle is verified with this node's trust store —
        once per process per (manifest sha256, trust-store stamp), off the event loop —
        and the row must agree with it; the folder is `<apps_dir>/<manifest sha256>`.
        The one place that names an installed version's folder, on either store.

        Raises:
            LineupError: the verification's code, `UntrustedRecord`, or the key's
                (`key_revoked`, `untrusted_key`, `scope_not_allowed`, ...).
        """
        store = self.store
        if not store.keeps_bundles:
            trust = self.current_trust()
            app = local_app(store, self.apps_dir, scope, version)
        else:
            trust, fingerprint = self._trust_key()
            found, verify = self._recorded(scope, version, trust, fingerprint, unpack=True)
            if found is None:  # checked off the loop
                bundle = await asyncio.to_thread(verify)
                row = installed_row(store, scope, version)
                found = recorded_app(self.apps_dir, bundle, row, scope, version)
            app = found
        check_trusted(app, trust)
        return app, trust

    async def check_app(self, scope: str, version: str) -> InstalledApp:
        """Before a worker starts: the app as `installed` gives it, its folder holding
        exactly the manifest's files (hashes too), the runtime user's own."""
        app, _ = await self.installed(scope, version)
        check_folder(app, self.apps_dir)
        return app

    async def check_trust(self, scope: str, version: str) -> None:
        """At every activation: the key still trusted for the app, nothing planted."""
        app, _ = await self.installed(scope, version)
        check_folder(app, self.apps_dir, hashes=False)

    async def verify(self, bundle: str | Path) -> Any:
        """A bundle verified against the trust store now, in the default executor."""
        from lineup_build.verify import verify_bundle

        trust = self.current_trust()
        limits = self.limits
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: verify_bundle(Path(bundle), trust, limits=limits)
        )

    def install(self, verified: Any, now_ms: int, *, dev_build: bool) -> InstallResult:
        """Install a verified bundle; another node's install of the same version meanwhile
        is decided again on its facts."""
        for attempt in range(_INSTALL_TRIES):
            try:
                result = install_verified(
                    self.store, self.apps_dir, verified, now_ms, dev_build=dev_build
                )
                break
            except StoreRace:  # another node installed it first: decide again on its facts
                if attempt == _INSTALL_TRIES - 1:
                    raise
        self._refused.clear()  # what was refused may be recorded again, verified
        return result


def absolute(path: str | os.PathLike[str]) -> Path:
    """`path` against today's working folder, normalised (`..` folded, links kept)."""
    return Path(os.path.abspath(path))


def _trust_fingerprint(trust: Any) -> str:
    """What changes when a trust store's keys, scopes, permissions or revocations do."""
    return hashlib.sha256(trust.dumps().encode("utf-8")).hexdigest()


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is rewritten (atomically or in place)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
