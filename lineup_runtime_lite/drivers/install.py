"""Install verified bundles: downgrade refusal, unpack-then-rename, Registry and Inventory."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineup_build.model import Manifest
from lineup_runtime_lite.core.rows import RegistryEntry
from lineup_runtime_lite.store.database import Database
from lineup_sdk import __version__ as RUNTIME_SDK_VERSION
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_build.verify import VerifiedBundle

__all__ = [
    "InstallResult",
    "compare_versions",
    "folder_name",
    "install_folder",
    "install_verified",
    "installed_model",
    "load_tools",
    "unpack_from_store",
]


def _semver_key(version: str) -> tuple[Any, ...]:
    core, _, pre = version.split("+", 1)[0].partition("-")
    nums = tuple(int(x) for x in core.split("."))
    if not pre:
        return (*nums, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (*nums, 0, ids)


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 by Semantic Versioning precedence."""
    ka, kb = _semver_key(a), _semver_key(b)
    return (ka > kb) - (ka < kb)


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
        version = f"{version}{'.' if '+' in version else '+'}dev.{digest[:12]}"
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
        target.parent.mkdir(parents=True, exist_ok=True)
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


def check_trusted(store: Database, trust: Any, scope: str, version: str) -> None:
    """The installed app's key is still trusted for its scope and its permissions.

    Raises:
        LineupError: `key_revoked`, `untrusted_key`, `scope_not_allowed`,
            `permission_not_allowed`, or `install_tampered` when it is not installed.
    """
    row = store.facts.version_row(scope, version)
    model = store.facts.manifest(scope, version)
    if row is None or model is None:
        raise LineupError("install_tampered", f"{scope} {version} is not installed")
    trust.lookup(row["key_id"]).check_manifest(model)


def _unlisted(root: Path, listed: set[str]) -> str | None:
    """The first file or folder under `root` that the manifest does not account for."""
    folders = {p.rsplit("/", 1)[0] for p in listed if "/" in p}
    folders |= {f.rsplit("/", i)[0] for f in folders for i in range(1, f.count("/") + 1)}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in sorted(dirnames):
            if prefix + name not in folders:
                return prefix + name + "/"
        for name in sorted(filenames):
            if prefix + name not in listed:
                return prefix + name
    return None


def folder_name(scope: str, version: str) -> str:
    """An installed version's folder as the database stores it: relative to the apps
    folder (SPEC 13.1), so a database and its apps folder can move together."""
    return f"{scope}/{version}"


def install_folder(apps_dir: Path, row: Any) -> Path:
    """Where an installed version's files are, from its `app_versions` row (a row an
    older runtime wrote with an absolute folder still names that folder)."""
    return apps_dir / str(row["dir"])


def unpack_from_store(
    store: Database, apps_dir: Path, trust: Any, scope: str, version: str
) -> None:
    """On a node whose cache lacks an installed version (a store that keeps bundles: a new
    machine, an emptied cache), unpack the bundle recorded at install: verified again with
    this node's trust store, its manifest the one installed, unpack-then-rename. Every file
    is then checked against the manifest before a worker starts (`check_installed`).

    Raises:
        LineupError: the verification's code (`untrusted_key`, `key_revoked`, ...) when this
            node's trust store refuses the app; `install_tampered` when the recorded bundle
            is missing or is not the installed manifest's.
    """
    row = store.facts.version_row(scope, version)
    if row is None or not store.keeps_bundles:
        return
    root = install_folder(apps_dir, row)
    if root.exists():
        return
    from lineup_build.verify import verify_bundle

    data = store.load_bundle(str(row["manifest_sha256"]))
    if data is None:
        raise LineupError(
            "install_tampered",
            f"{scope} {version}: its bundle is not in the database and not in {root}",
            hint="install the app's bundle again",
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        (tmp / "bundle.lineup").write_bytes(data)
        verified = verify_bundle(tmp / "bundle.lineup", trust)
        if hashlib.sha256(verified.manifest_bytes).hexdigest() != row["manifest_sha256"]:
            raise LineupError(
                "install_tampered", f"{scope} {version}: the recorded bundle is another build"
            )
        verified.extract_to(tmp / "files")
        if not root.exists():  # another runtime of this cache may have won
            (tmp / "files").rename(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_no_strays(store: Database, apps_dir: Path, scope: str, version: str) -> None:
    """The install folder holds nothing the manifest does not list (cheap: no hashing).

    Raises:
        LineupError: `install_tampered`.
    """
    row = store.facts.version_row(scope, version)
    if row is None:
        raise LineupError("install_tampered", f"{scope} {version} is not installed")
    listed = {e.path for e in installed_model(store, scope, version).files}
    stray = _unlisted(install_folder(apps_dir, row), listed)
    if stray is not None:
        raise LineupError(
            "install_tampered",
            f"{scope} {version}: {stray} is in the install folder but not in the manifest",
            hint="something planted a file or bytecode there; reinstall the app from its bundle",
        )


def check_installed(store: Database, apps_dir: Path, trust: Any, scope: str, version: str) -> None:
    """Before loading an installed app: its folder holds exactly the manifest's files, with
    their hashes, and its key is still trusted for it.

    Raises:
        LineupError: `install_tampered`, `key_revoked`, `untrusted_key`,
            `scope_not_allowed` or `permission_not_allowed`.
    """
    check_trusted(store, trust, scope, version)
    check_no_strays(store, apps_dir, scope, version)
    row = store.facts.version_row(scope, version)
    assert row is not None
    manifest = installed_model(store, scope, version)
    root = install_folder(apps_dir, row)
    for entry in manifest.files:
        path = root / entry.path
        try:
            if path.is_symlink():
                raise OSError("symlink")
            digest = hashlib.sha256()
            size = 0
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
        except OSError:
            raise LineupError(
                "install_tampered", f"{scope} {version}: {entry.path} is missing or unreadable"
            ) from None
        if size != entry.size or digest.hexdigest() != entry.sha256:
            raise LineupError(
                "install_tampered", f"{scope} {version}: {entry.path} changed since install"
            )
