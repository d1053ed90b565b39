"""Install verified bundles: downgrade refusal, unpack-then-rename, Registry and Inventory."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_build import semver
from lineup_build.model import Manifest
from lineup_runtime_lite.core.rows import ActionEntry, RegistryEntry
from lineup_runtime_lite.drivers.appcache import make_folder
from lineup_runtime_lite.store.database import Database
from lineup_sdk import __version__ as RUNTIME_SDK_VERSION
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_build.reader import Limits
    from lineup_build.verify import VerifiedBundle

__all__ = [
    "InstallResult",
    "InstalledApp",
    "RecordedBundle",
    "UntrustedRecord",
    "check_folder",
    "check_trusted",
    "compare_versions",
    "dev_version",
    "folder_name",
    "install_folder",
    "install_verified",
    "installed_model",
    "installed_row",
    "load_tools",
    "local_app",
    "recorded_app",
    "verify_recorded",
]


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 by Semantic Versioning precedence (`lineup_build.semver`)."""
    return semver.compare_versions(a, b)


def dev_version(version: str, digest: str) -> str:
    """The version a dev build installs as beside another build of `version`:
    `<version>+dev.<first 12 hex of its manifest sha256>` (`.dev.` after build metadata)."""
    return f"{version}{'.' if '+' in version else '+'}dev.{digest[:12]}"


def load_tools(
    scope: str, version: str, manifest: Manifest | Mapping[str, Any]
) -> list[RegistryEntry]:
    """The Registry projection of one installed manifest (`scope` and `version` as
    installed: a dev build's version carries its `+dev.` suffix).

    `manifest` is the typed model (`installed_model`); a manifest dict, as
    an installed row holds, is read through `Manifest.from_json` first.
    """
    model = manifest if isinstance(manifest, Manifest) else Manifest.from_json(manifest)
    return [
        RegistryEntry(
            method=t.method,
            scope=scope,
            version=version,
            description=t.description,
            delivery=t.delivery,
            activation=t.activation,
            long_running=bool(t.long_running),
            timeout_s=float(30 if t.timeout_s is None else t.timeout_s),
            input_schema=t.input_schema,
            result_schema=t.result_schema,
            handler_key=t.handler_key,
            hints=t.hints,
        )
        for t in model.tools
    ]


def load_actions(scope: str, version: str, model: Manifest) -> list[ActionEntry]:
    """The UI Actions of one installed manifest (SPEC 17; never in the Agent Inventory)."""
    return [
        ActionEntry(
            name=a.name,
            scope=scope,
            version=version,
            description=a.description,
            input_schema=a.input_schema,
            result_schema=a.result_schema,
            timeout_s=float(30 if a.timeout_s is None else a.timeout_s),
        )
        for a in getattr(model, "ui_actions", ())
    ]


@dataclass(frozen=True)
class InstallResult:
    """What `install()` did: `installed`, `upgraded` or `unchanged`."""

    scope: str
    version: str
    action: str
    key_id: str
    permissions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "version": self.version,
            "action": self.action,
            "key_id": self.key_id,
            "permissions": list(self.permissions),
        }


def _check_sdk(manifest: Manifest) -> None:
    ours = RUNTIME_SDK_VERSION.split(".")[0]
    if manifest.sdk.major != ours:
        raise LineupError(
            "sdk_incompatible",
            f"the bundle was built by SDK {manifest.sdk.version}; this runtime supports "
            f"SDK {ours}.x",
        )


def _check_dependencies(requirements: Iterable[str]) -> None:
    """Every requirement whose environment marker holds here must be installed in a version
    its specifier allows (pre-releases count: an environment has what it has)."""
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise LineupError(
                "dependency_missing", f"the app's dependency {text!r} cannot be read: {exc}"
            ) from None
        if req.marker is not None and not req.marker.evaluate():
            continue  # not needed in this environment (e.g. python_version < "3.11")
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            raise LineupError(
                "dependency_missing",
                f"the app needs {text!r}, which is not installed in the runtime's environment",
                hint=f"install {req.name} into the runtime's environment",
            ) from None
        if not req.specifier:
            continue
        try:
            ok = req.specifier.contains(Version(installed), prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            raise LineupError(
                "dependency_missing",
                f"the app needs {req.name}{req.specifier}; the runtime's environment has "
                f"{req.name} {installed}",
                hint=f"install a {req.name} version that satisfies {req.specifier}, or relax "
                "the app's dependencies",
                details={
                    "package": req.name,
                    "required": str(req.specifier),
                    "installed": installed,
                },
            )


def install_verified(
    store: Database, apps_dir: Path, bundle: VerifiedBundle, now_ms: int, *, dev_build: bool = False
) -> InstallResult:
    """Install a bundle that `verify` produced; atomic on disk and in the database.

    A `dev_build` whose scope and version are installed with another manifest is kept
    beside that build as `<version>+dev.<sha256 prefix>` (same precedence, so never a
    downgrade) instead of being refused; sessions pinned to the old build keep it.
    """
    manifest = bundle.model
    scope, version = manifest.app.scope, manifest.app.version
    digest = hashlib.sha256(bundle.manifest_bytes).hexdigest()
    facts = store.facts
    same = facts.version_row(scope, version)
    if dev_build and same is not None and same["manifest_sha256"] != digest:
        version = dev_version(version, digest)
        same = facts.version_row(scope, version)
    if same is not None:
        if same["manifest_sha256"] != digest:
            raise LineupError(
                "version_conflict",
                f"{scope} {version} is already installed with a different manifest",
            )
        current = facts.app_version(scope)
        if current == version:
            return InstallResult(
                scope, version, "unchanged", bundle.key_id, manifest.app.permissions
            )
    current = facts.app_version(scope)
    if current is not None and compare_versions(version, current) < 0:
        raise LineupError(
            "downgrade_refused",
            f"{scope} {current} is installed; refusing to install {version}",
        )
    _check_sdk(manifest)
    _check_dependencies(manifest.app.dependencies)
    # a store that keeps bundles (PostgreSQL) shares one cache among its databases and
    # nodes: a version's folder is named by its manifest's hash (SPEC 15), so the same
    # name always holds the same files
    folder = digest if store.keeps_bundles else folder_name(scope, version)
    target = apps_dir / folder
    shared = store.keeps_bundles and target.exists()  # the cache has it (checked before use)
    if same is None and not shared:
        if not target.parent.exists():  # a scope's folder (SQLite): 0700, the umask aside
            with contextlib.suppress(FileExistsError):
                make_folder(target.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=target.parent))
        try:
            bundle.extract_to(tmp)
            if target.exists() and not store.keeps_bundles:  # an install that never committed
                shutil.rmtree(target)
            if target.exists():  # another runtime of this cache unpacked it meanwhile
                shutil.rmtree(tmp)
            else:
                tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    data = bundle.path.read_bytes() if store.keeps_bundles and same is None else None
    with store.transaction():
        if data is not None:
            store.save_bundle(digest, data)
        if same is None:
            facts.add_version(
                scope,
                version,
                bundle.manifest_bytes,
                digest,
                bundle.key_id,
                folder,
                now_ms,
            )
        facts.make_current(scope, version)
        if dev_build:  # only a dev build's sessions may move to a newer build (SPEC 14)
            facts.set_meta(f"dev_build:{scope}:{version}", "1")
    action = "upgraded" if current else "installed"
    return InstallResult(scope, version, action, bundle.key_id, manifest.app.permissions)


def installed_model(store: Database, scope: str, version: str) -> Manifest:
    """The stored manifest of an installed version as the typed `Manifest` (it was
    verified, schema and all, when it was installed).

    Raises:
        KeyError: `(scope, version)` is not installed.
    """
    model = store.facts.manifest(scope, version)
    if model is None:
        raise KeyError((scope, version))
    return model


class UntrustedRecord(LineupError):
    """What the database says about an app version is not what its signer signed (SPEC
    16.1): `install_tampered`, and an activation it stops fails with `app_untrusted`."""

    def __init__(self, message: str) -> None:
        super().__init__(
            "install_tampered",
            message,
            hint="someone with write access to the database changed the app's record; "
            "install the app's bundle again from a source you trust",
        )


@dataclass(frozen=True)
class RecordedBundle:
    """An app version's bundle as the database records it, verified by this node with its
    own trust store: everything here comes from the signed bytes."""

    manifest_bytes: bytes
    digest: str
    key_id: str
    model: Manifest


@dataclass(frozen=True)
class InstalledApp:
    """An installed version as a worker starts it: its folder (never read from the
    database on PostgreSQL) and its manifest (the verified one there)."""

    scope: str
    version: str
    root: Path
    model: Manifest
    key_id: str

    @property
    def label(self) -> str:
        return f"{self.scope} {self.version}"

    def files(self) -> list[tuple[str, int, str]]:
        out = [(e.path, e.size, e.sha256) for e in self.model.files]
        surface = self.model.surface
        if surface is not None:  # the Surface document (SPEC 18.2), listed beside them
            out.append((surface.document, surface.size, surface.sha256))
        return out


def installed_row(store: Database, scope: str, version: str) -> dict[str, Any]:
    """The `app_versions` row of an installed version.

    Raises:
        LineupError: `install_tampered` when it is not installed.
    """
    row = store.facts.version_row(scope, version)
    if row is None:
        raise LineupError("install_tampered", f"{scope} {version} is not installed")
    return row


def verify_recorded(
    data: bytes | None,
    apps_dir: Path,
    trust: Any,
    row: Mapping[str, Any],
    scope: str,
    version: str,
    on_verified: Callable[[RecordedBundle], None] | None = None,
    limits: Limits | None = None,
) -> RecordedBundle:
    """Verify the bundle bytes the database records for `row` (`data`, from
    `Database.load_bundle`) exactly as `install` does (with this node's trust store and
    bundle limits, `Runtime.open(bundle_limits=)`; the defaults when None), check
    that the row agrees with them (`recorded_app`), and only then unpack them into
    `<apps_dir>/<manifest sha256>` when that folder does not exist (unpack-then-rename).
    Blocking: the runtime runs it off its event loop, once per process per manifest and
    trust store. `on_verified` hears the verified bundle before the row is compared (a
    row that disagrees does not make the next look verify the same bytes again).

    Raises:
        LineupError: the verification's code (`untrusted_key`, `key_revoked`,
            `signature_invalid`, ...); `UntrustedRecord` when no bundle is recorded or it
            is another build.
    """
    from lineup_build.reader import Limits as Defaults
    from lineup_build.verify import verify_bundle

    digest = str(row["manifest_sha256"])
    if data is None:
        raise UntrustedRecord(f"the database records no bundle for manifest {digest}")
    tmp = Path(tempfile.mkdtemp(prefix=".verify.", dir=apps_dir))
    try:
        path = tmp / "bundle.lineup"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        verified = verify_bundle(path, trust, limits=limits or Defaults())
        signed = hashlib.sha256(verified.manifest_bytes).hexdigest()
        if signed != digest:
            raise UntrustedRecord(f"the bundle recorded for manifest {digest} is another build")
        bundle = RecordedBundle(verified.manifest_bytes, signed, verified.key_id, verified.model)
        if on_verified is not None:
            on_verified(bundle)
        root = recorded_app(apps_dir, bundle, row, scope, version).root
        if not os.path.lexists(root):
            verified.extract_to(tmp / "files")
            try:
                os.rename(tmp / "files", root)
            except OSError:  # another runtime of this cache unpacked it meanwhile
                if not os.path.lexists(root):
                    raise
        return bundle
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def recorded_app(
    apps_dir: Path, bundle: RecordedBundle, row: Mapping[str, Any], scope: str, version: str
) -> InstalledApp:
    """The installed version a verified bundle makes, once the database's row agrees with
    it: the signed manifest's scope is `scope` and its version `version` (a dev build's:
    plus `+dev.<sha12>`), and the row's manifest, hash, key id and folder are the signed
    ones. The folder is `<apps_dir>/<manifest sha256>`, computed here.

    Raises:
        UntrustedRecord: the row disagrees with the signed bundle.
    """
    app = bundle.model.app
    label = f"{scope} {version}"
    if app.scope != scope:
        raise UntrustedRecord(f"{label}: the database points at a bundle of {app.scope}")
    if version not in (app.version, dev_version(app.version, bundle.digest)):
        raise UntrustedRecord(f"{label}: the signed manifest's version is {app.version}")
    for column, signed in (
        ("manifest_sha256", bundle.digest),
        ("manifest", bundle.manifest_bytes),
        ("key_id", bundle.key_id),
        ("dir", bundle.digest),
    ):
        value = row[column]
        if (bytes(value) if column == "manifest" else str(value)) != signed:
            raise UntrustedRecord(f"{label}: the database's {column} is not the signed one")
    return InstalledApp(scope, version, apps_dir / bundle.digest, bundle.model, bundle.key_id)


def local_app(store: Database, apps_dir: Path, scope: str, version: str) -> InstalledApp:
    """An installed version of a store that keeps no bundles (SQLite: the database file
    and the apps folder are the runtime user's own): manifest, key id and folder from its
    row; its files are checked against that manifest before use."""
    row = installed_row(store, scope, version)
    return InstalledApp(
        scope,
        version,
        install_folder(apps_dir, row),
        installed_model(store, scope, version),
        str(row["key_id"]),
    )


def check_trusted(app: InstalledApp, trust: Any) -> None:
    """The installed app's key is still trusted for its scope and its permissions.

    Raises:
        LineupError: `key_revoked`, `untrusted_key`, `scope_not_allowed`,
            `permission_not_allowed`.
    """
    trust.lookup(app.key_id).check_manifest(app.model)


def folder_name(scope: str, version: str) -> str:
    """An installed version's folder as the SQLite store records it: relative to the apps
    folder (SPEC 13.1), so a database and its apps folder can move together."""
    return f"{scope}/{version}"


def install_folder(apps_dir: Path, row: Any) -> Path:
    """Where an installed version's files are on SQLite, from its `app_versions` row (a
    row an older runtime wrote with an absolute folder still names that folder)."""
    return apps_dir / str(row["dir"])


def _between(apps_dir: Path, root: Path) -> list[Path]:
    """The folders strictly between the apps folder and an install folder inside it."""
    try:
        parts = root.relative_to(apps_dir).parts
    except ValueError:  # an older runtime's absolute folder: its own business
        return []
    return [apps_dir.joinpath(*parts[:i]) for i in range(1, len(parts))]


def check_folder(app: InstalledApp, apps_dir: Path, *, hashes: bool = True) -> None:
    """The install folder holds exactly the manifest's files (with `hashes`: their sizes
    and hashes too), every folder and file the runtime user's, none a link; folders others
    may write are tightened first (SPEC 16.1).

    Raises:
        LineupError: `install_tampered`.
    """
    from lineup_runtime_lite.drivers.appcache import check_own, check_tree

    for folder in _between(apps_dir, app.root):
        if not os.path.lexists(folder):
            break  # so is the install folder: `check_tree` says what that means
        check_own(folder, app.label)
    check_tree(app.label, app.root, app.files(), hashes=hashes)
