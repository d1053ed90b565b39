"""`lineup check` and `lineup build`: extract → check → manifest → sign → pack."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineup_build.bundle import BundleEntry, write_bundle
from lineup_build.checks import check_actions, check_tools, diagnostics_from_problems
from lineup_build.config import ProjectConfig, load_config
from lineup_build.diagnostics import Diagnostic, Where, has_errors
from lineup_build.files import IncludedFile, collect_files
from lineup_build.fsutil import check_out_dir, read_regular
from lineup_build.manifest import build_manifest, build_model, serialize_manifest
from lineup_build.manifest_checks import parse_manifest
from lineup_build.model import Manifest
from lineup_build.reader import Limits
from lineup_build.signing import (
    KEY_ENV,
    SigningKey,
    load_signing_key,
    sign_manifest,
    write_keypair,
)
from lineup_build.surface import SURFACE_DOCUMENT, build_surface_document
from lineup_sdk.errors import LineupError

__all__ = [
    "BuildResult",
    "CheckResult",
    "build_dev",
    "build_project",
    "bundle_name",
    "check_project",
    "dev_key_path",
    "resolve_signing_key",
    "source_manifest",
]

IMPORT_TIMEOUT_S = 120.0
#: The largest PEM signing key read.
MAX_KEY_BYTES = 64 * 1024
DEV_KEY_DIR = ".lineup"
DEV_KEY_NAME = "dev-key"


@dataclass
class CheckResult:
    """What `lineup check` found: the config, extracted tools, files and diagnostics."""

    root: Path
    config: ProjectConfig | None
    tools: list[dict[str, Any]] = field(default_factory=list)
    files: list[IncludedFile] = field(default_factory=list)
    #: The extracted UI Actions (SPEC 17), sorted by name.
    actions: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sandbox: dict[str, Any] | None = None  # what the extractor's sandbox enforced
    #: The bundle limits the project builds within (`ProjectConfig.bundle_limits`).
    limits: Limits = field(default_factory=Limits)
    #: The Surface as one document (SPEC 18.2); None without a Surface page.
    surface_document: bytes | None = None

    def ok(self, *, strict: bool = False) -> bool:
        return not has_errors(self.diagnostics, strict=strict)


@dataclass
class BuildResult:
    """What `lineup build` produced.

    Attributes:
        manifest: The signed manifest as JSON data (None when nothing was built).
        model: The same manifest as the typed `Manifest`.
    """

    ok: bool
    bundle: Path | None
    manifest_sha256: str | None
    manifest: dict[str, Any] | None
    key_id: str | None
    check: CheckResult
    model: Manifest | None = None

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.check.diagnostics

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "bundle": str(self.bundle) if self.bundle else None,
            "manifest_sha256": self.manifest_sha256,
            "key_id": self.key_id,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "sandbox": self.check.sandbox,
        }


def bundle_name(config: ProjectConfig) -> str:
    """`<scope>-<version>.lineup`."""
    return f"{config.scope}-{config.version}.lineup"


def _extract(
    config: ProjectConfig, files: list[IncludedFile], *, sandbox: str = "best_effort"
) -> dict[str, Any]:
    """Stage the included files and import the entry in a fresh, sandboxed subprocess.

    The subprocess sees the staged files, the Python installation and nothing of this
    process: no signing key, no environment beyond an allow-list, no network, no process
    of its own that outlives it (SPEC 8).
    """
    from lineup_sdk.sandbox import Sandbox, run_bounded

    with tempfile.TemporaryDirectory(prefix="lineup-stage-") as tmp:
        stage = Path(tmp) / "app"
        for f in files:
            target = stage / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.data)
        stage.mkdir(exist_ok=True)
        box = Sandbox(sandbox, stage)
        run = run_bounded(
            box,
            "lineup_sdk._extract",
            [str(stage), config.entry],
            cwd=stage,
            env={"LINEUP_SDK_COLLECT": "1"},
            timeout_s=IMPORT_TIMEOUT_S,
        )
        if run.timed_out:
            return _failure(
                f"importing {config.entry!r} did not finish in {IMPORT_TIMEOUT_S:.0f} s"
            )
        try:
            # first line: the sandbox report, written before the author's import
            first, _, rest = run.result.partition(b"\n")
            report = json.loads(first)
            data: dict[str, Any] = json.loads(rest)
            if not isinstance(report, dict) or not isinstance(data, dict):
                raise ValueError("not objects")
            data["sandbox"] = report
        except ValueError:
            tail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            return _failure(
                f"the import subprocess exited with status {run.returncode}: " + " | ".join(tail)
            )
        return data


def _failure(message: str) -> dict[str, Any]:
    return {
        "registry": None,
        "tools": [],
        "problems": [
            {"code": "entry_import_failed", "message": message, "location": None, "related": []}
        ],
    }


def check_project(
    root: Path,
    *,
    out_dir: Path | None = None,
    sandbox: str = "best_effort",
    limits: Mapping[str, int] | None = None,
) -> CheckResult:
    """Steps 1–3 of the build: load the config, import the entry (sandboxed as `sandbox`
    says: `best_effort`, `required` or `off`), report every problem. The bundle limits
    are the project's `[limits]`, raised by `limits` (the `--max-*` options)."""
    root = root.resolve()
    config, diags = load_config(root)
    result = CheckResult(root, config, diagnostics=diags)
    if config is None:
        return result
    result.limits = config.bundle_limits(limits)
    files, file_diags = collect_files(
        root,
        config.include,
        exclude_dirs=(out_dir,) if out_dir else (),
        where=config.where("include"),
        limits=result.limits,
    )
    result.files = files
    result.diagnostics.extend(file_diags)
    surface = build_surface_document(files)
    result.surface_document = surface.data
    result.diagnostics.extend(surface.diagnostics)
    if not any(f.path.endswith(".py") for f in files):
        result.diagnostics.append(
            Diagnostic(
                "config_invalid",
                "the include globs match no Python file, so the entry cannot be imported",
                where=config.where("include"),
                hint='include the entry package, e.g. include = ["my_app/**/*.py"]',
            )
        )
    extracted = _extract(config, files, sandbox=sandbox)
    result.sandbox = extracted.get("sandbox")
    for problem in extracted["problems"]:
        if problem["code"] == "entry_import_failed" and not problem.get("location"):
            # nothing in the app's own files to point at: blame the `entry` key
            problem["location"] = config.where("entry").to_dict()
    result.diagnostics.extend(diagnostics_from_problems(extracted["problems"]))
    for key, what in (("registry", "registry"), ("action_registry", "UI Action registry")):
        registry = extracted.get(key)
        if registry is not None and registry["app_scope"] != config.scope:
            loc = registry.get("location")
            result.diagnostics.append(
                Diagnostic(
                    "config_invalid",
                    f"the {what}'s app_scope {registry['app_scope']!r} differs from "
                    f"{config.source}'s scope {config.scope!r}",
                    where=Where(loc["file"], loc["line"]) if loc else None,
                    related=(config.where("scope"),),
                    hint="use the same scope in both places",
                )
            )
    result.tools = extracted["tools"]
    result.actions = extracted.get("actions", [])
    result.diagnostics.extend(check_tools(result.tools, config.scope))
    result.diagnostics.extend(check_actions(result.actions, config.scope))
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def source_manifest(
    root: Path, *, sandbox: str = "best_effort"
) -> tuple[dict[str, Any] | None, CheckResult]:
    """The manifest a build of `root` would sign (no key needed, nothing written).

    Returns None for the manifest when the project has errors; see the check's diagnostics.
    """
    check = check_project(root, sandbox=sandbox)
    if not check.ok() or check.config is None:
        return None, check
    manifest = build_manifest(
        check.config, check.tools, check.files, check.surface_document, actions=check.actions
    )
    return manifest, check


def dev_key_path(root: Path) -> Path:
    """The project's local development key, `.lineup/dev-key.pem`."""
    return root / DEV_KEY_DIR / f"{DEV_KEY_NAME}.pem"


def ensure_dev_key(root: Path) -> SigningKey:
    """Load the project's dev key, creating it (and a `.gitignore` for it) on first use."""
    path = dev_key_path(root)
    if not path.exists():
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".gitignore").write_text("# local signing keys never go into git\n*\n")
        write_keypair(folder, name=DEV_KEY_NAME)
    pem = read_regular(path, limit=MAX_KEY_BYTES, code="signing_key_invalid", what="signing key")
    return load_signing_key(pem, source=str(path))


def resolve_signing_key(root: Path, *, key_file: Path | None, dev_key: bool) -> SigningKey:
    """The signing key: `--key FILE`, else `LINEUP_SIGNING_KEY`, else `--dev-key`.

    Raises:
        LineupError: `signing_key_missing` or `signing_key_invalid`.
    """
    if key_file is not None:
        pem = read_regular(
            key_file, limit=MAX_KEY_BYTES, code="signing_key_invalid", what="signing key"
        )
        return load_signing_key(pem, source=str(key_file))
    env_pem = os.environ.get(KEY_ENV)
    if env_pem:
        return load_signing_key(env_pem.encode("utf-8"), source=KEY_ENV)
    if dev_key:
        return ensure_dev_key(root)
    raise LineupError(
        "signing_key_missing",
        "no signing key: pass --key FILE, set LINEUP_SIGNING_KEY, or use --dev-key",
    )


def build_project(
    root: Path,
    *,
    key_file: Path | None = None,
    dev_key: bool = False,
    signing_key: SigningKey | None = None,
    out_dir: Path | None = None,
    strict: bool = False,
    epoch: int | None = None,
    sandbox: str = "best_effort",
    limits: Mapping[str, int] | None = None,
) -> BuildResult:
    """Check the project and, when it is clean, write the signed bundle.

    A key problem is reported beside every other diagnostic; on any error nothing is
    written. The bundle stays within the project's `[limits]` raised by `limits` (the
    `--max-*` options): a bundle over them is refused here, as `verify` would refuse it.

    Raises:
        LineupError: `usage_invalid` for a limit in `limits` out of range.
    """
    root = root.resolve()
    out = (out_dir or root / "dist").resolve()
    check_out_dir(out)
    Limits().raised(dict(limits or {}))  # a bad option fails before any work
    check = check_project(root, out_dir=out, sandbox=sandbox, limits=limits)
    # the key is read only now, in this process, after the extractor has exited
    key = signing_key
    if key is None:
        try:
            key = resolve_signing_key(root, key_file=key_file, dev_key=dev_key)
        except LineupError as exc:
            check.diagnostics.append(Diagnostic(exc.code, exc.message, hint=exc.hint))
    if not check.ok(strict=strict) or key is None or check.config is None:
        return BuildResult(False, None, None, None, None, check)
    model = build_model(
        check.config, check.tools, check.files, check.surface_document, actions=check.actions
    )
    manifest = model.to_json()
    manifest_bytes = serialize_manifest(manifest)
    try:  # the limits `verify` enforces: never write a bundle its own verify refuses
        parse_manifest(manifest_bytes, check.limits)
    except LineupError as exc:
        check.diagnostics.append(Diagnostic(exc.code, exc.message, hint=exc.hint))
        return BuildResult(False, None, None, None, None, check)
    app_files = [(f.path, f.data) for f in check.files]
    if check.surface_document is not None:  # beside the files, in path order (SPEC 18.2)
        app_files = sorted([*app_files, (SURFACE_DOCUMENT, check.surface_document)])
    entries = [
        BundleEntry("manifest.json", manifest_bytes),
        BundleEntry("manifest.sig", sign_manifest(key, manifest_bytes)),
        *(BundleEntry(f"app/{path}", data) for path, data in app_files),
    ]
    target = out / bundle_name(check.config)
    write_bundle(target, entries, epoch=epoch)
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    return BuildResult(True, target, digest, manifest, key.key_id, check, model)


def build_dev(
    root: Path, *, out_dir: Path, sandbox: str = "best_effort"
) -> tuple[BuildResult, SigningKey]:
    """Build a project folder with its dev key, for `lineup run` / `test` / `serve`.

    Returns the successful build (bundle, manifest and model set) and the key.

    Raises:
        LineupError: the first error diagnostic's code, every diagnostic in `details`.
    """
    key = ensure_dev_key(root.resolve())
    result = build_project(root, signing_key=key, out_dir=out_dir, sandbox=sandbox)
    if not result.ok or result.bundle is None or result.model is None:
        first = next((d for d in result.diagnostics if d.severity == "error"), None)
        detail = f"{first.code}: {first.message}" if first else "the build failed"
        raise LineupError(
            first.code if first else "config_invalid",
            f"cannot build {root}: {detail}",
            hint="run `lineup check` for every problem",
            details=[d.to_dict() for d in result.diagnostics],
        )
    return result, key
