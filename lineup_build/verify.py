"""`lineup verify`: the one place that turns bundle bytes into a `VerifiedBundle`.

Checks run in SPEC 4 order without importing or running bundle code: safe archive read and
limits, canonical form, layout, signature over the raw manifest bytes, trust and
revocation, strict manifest parse and schema, the key's scopes, tool schemas, runtime tools
against the catalog, every file's size and hash, unlisted entries, and optionally
staleness against the source. The first fatal problem is reported first, followed by every
further problem that can still be checked safely.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lineup_build.canonical import MANIFEST_NAME, SIGNATURE_NAME, canonical_problems
from lineup_build.canonical import layout_problems as _layout_problems
from lineup_build.fsutil import open_regular
from lineup_build.manifest_checks import parse_manifest, schema_problems, tool_problems
from lineup_build.model import Manifest, Tool, UiAction
from lineup_build.reader import (
    CHUNK,
    Archive,
    ArchiveEntry,
    Limits,
    entry_name_problem,
    iter_entry_chunks,
    raise_hint,
    read_archive,
)
from lineup_build.signing import (
    is_weak_public_key,
    parse_signature,
    verify_manifest_signature,
)
from lineup_build.trust import TrustedKey, TrustStore
from lineup_build.verified import FileSlice, VerifiedBundle
from lineup_sdk.errors import LineupError

__all__ = [
    "Limits",
    "VerifiedBundle",
    "VerifyError",
    "VerifyReport",
    "check_bundle",
    "verify_bundle",
]

_MAX_SIG_BYTES = 4096


class VerifyError(LineupError):
    """Verification failed: `code`/`message` of the first fatal problem.

    Attributes:
        problems: Every problem found, the first fatal one first.
    """

    def __init__(self, problems: list[LineupError]) -> None:
        first = problems[0]
        super().__init__(first.code, first.message, hint=first.hint, details=first.details)
        self.problems = list(problems)

    def to_dict(self) -> dict[str, Any]:
        """The first problem's facts plus `problems`, every problem found."""
        out = super().to_dict()
        out["problems"] = [p.to_dict() for p in self.problems]
        return out


@dataclass
class VerifyReport:
    """Everything `check_bundle` found out about one bundle.

    Attributes:
        bundle: The bundle file.
        problems: Every problem, the first fatal one first (empty when it verified).
        manifest: The manifest when it parsed and matched the schema (trusted or not), as
            JSON data.
        model: The same manifest as the typed `Manifest`, with `manifest`.
        manifest_bytes: The raw manifest bytes, with `manifest`.
        key_id: The key id `manifest.sig` names, when it parsed.
        signature: `valid`, `invalid`, `missing`, `untrusted` or `unchecked` (no store).
        signer: The trust store's entry for the key, when it verified.
    """

    bundle: Path
    problems: list[LineupError] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    model: Manifest | None = None
    manifest_bytes: bytes | None = None
    key_id: str | None = None
    signature: str = "unchecked"
    signer: TrustedKey | None = None

    @property
    def ok(self) -> bool:
        """Verified: no problem at all and a valid signature by a trusted key."""
        return not self.problems and self.signature == "valid"

    def to_dict(self) -> dict[str, Any]:
        """The same facts as data (for `--json`)."""
        m = self.model
        return {
            "ok": self.ok,
            "bundle": str(self.bundle),
            "key_id": self.key_id,
            "signature": self.signature,
            "signer_label": self.signer.label if self.signer else None,
            "manifest_sha256": (
                hashlib.sha256(self.manifest_bytes).hexdigest() if self.manifest_bytes else None
            ),
            "app": m.app.to_json() if m else None,
            "tools": [_tool_summary(t) for t in m.tools] if m else [],
            "ui_actions": [_action_summary(a) for a in m.ui_actions] if m else [],
            "files": [{"path": f.path, "size": f.size} for f in m.files] if m else [],
            "surface": m.surface.to_json() if m and m.surface else None,
            "diagnostics": [p.to_dict() for p in self.problems],
        }


def _action_summary(action: UiAction) -> dict[str, Any]:
    return {
        "name": action.name,
        "description": action.description,
        "timeout_s": action.timeout_s,
    }


def _tool_summary(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "method": tool.method,
        "activation": tool.activation,
        "delivery": tool.delivery,
        "long_running": tool.long_running,
    }
    if tool.handler_key is not None:
        out["handler_key"] = tool.handler_key
    out["description"] = tool.description
    if tool.hints:
        out["hints"] = tool.hint_map
    return out


def _read_entry(fh: BinaryIO, entry: ArchiveEntry) -> bytes:
    fh.seek(entry.data_offset)
    return fh.read(entry.size)


def _sha256(fh: BinaryIO, entry: ArchiveEntry, buf: bytearray) -> str:
    digest = hashlib.sha256()
    for chunk in iter_entry_chunks(fh, entry.data_offset, entry.size, buf):
        digest.update(chunk)
    return digest.hexdigest()


def _check_signature(
    report: VerifyReport,
    fh: BinaryIO,
    archive: Archive,
    manifest_bytes: bytes,
    trust: TrustStore | None,
) -> None:
    entry = archive.by_name.get(SIGNATURE_NAME)
    if entry is None:
        report.signature = "missing"
        return
    report.signature = "invalid"
    try:
        if entry.size > _MAX_SIG_BYTES:
            raise LineupError("signature_invalid", f"manifest.sig is {entry.size} bytes")
        parsed = parse_signature(_read_entry(fh, entry))
    except LineupError as exc:
        report.problems.append(exc)
        return
    report.key_id = parsed.key_id
    if trust is None:
        report.signature = "unchecked"
        return
    try:
        signer = trust.lookup(parsed.key_id)
    except LineupError as exc:
        report.signature = "untrusted"
        report.problems.append(exc)
        return
    if is_weak_public_key(signer.public_raw):
        report.problems.append(LineupError("weak_key", f"key {signer.key_id} is weak"))
    elif verify_manifest_signature(signer.public_raw, parsed.signature, manifest_bytes):
        report.signature = "valid"
        report.signer = signer
    else:
        report.problems.append(
            LineupError(
                "signature_invalid",
                f"the signature does not verify with key {parsed.key_id}",
                details={"key_id": parsed.key_id},
            )
        )


def _check_files(
    report: VerifyReport, fh: BinaryIO, archive: Archive, manifest: Manifest, limits: Limits
) -> list[FileSlice]:
    files = manifest.files
    if len(files) > limits.max_files:
        report.problems.append(
            LineupError(
                "limits_exceeded",
                f"the manifest lists {len(files)} files, over the limit of {limits.max_files}",
                hint=raise_hint("max_files"),
            )
        )
        return []
    slices: list[FileSlice] = []
    listed: set[str] = set()
    buf = bytearray(CHUNK)
    for f in files:
        path, name = f.path, f"app/{f.path}"
        why = entry_name_problem(name)
        problem = None
        if why:
            problem = LineupError("unsafe_path", f"manifest lists {path!r}: {why}")
        elif path in listed:
            problem = LineupError("manifest_invalid", f"manifest lists {path!r} twice")
        listed.add(path)
        entry = archive.by_name.get(name)
        if problem is None and entry is None:
            problem = LineupError("file_missing", f"{path} is listed but not in the bundle")
        elif problem is None and entry is not None and entry.size != f.size:
            problem = LineupError(
                "file_hash_mismatch", f"{path} is {entry.size} bytes, the manifest says {f.size}"
            )
        elif problem is None and entry is not None and _sha256(fh, entry, buf) != f.sha256:
            problem = LineupError(
                "file_hash_mismatch", f"{path}: SHA-256 differs from the manifest"
            )
        if problem is not None:
            problem.details = {"path": path}
            report.problems.append(problem)
        elif entry is not None:
            slices.append(FileSlice(path, entry.data_offset, entry.size, f.sha256))
    surface = manifest.surface
    if surface is not None:  # the Surface document: listed and hashed (SPEC 18.2)
        name = f"app/{surface.document}"
        entry = archive.by_name.get(name)
        problem = None
        if surface.document in listed:
            problem = LineupError("manifest_invalid", f"manifest lists {surface.document!r} twice")
        elif entry is None:
            problem = LineupError(
                "file_missing", f"{surface.document} (the Surface document) is not in the bundle"
            )
        elif entry.size != surface.size or _sha256(fh, entry, buf) != surface.sha256:
            problem = LineupError(
                "file_hash_mismatch",
                f"{surface.document} (the Surface document): SHA-256 differs from the manifest",
            )
        listed.add(surface.document)
        if problem is not None:
            problem.details = {"path": surface.document}
            report.problems.append(problem)
        elif entry is not None:
            slices.append(
                FileSlice(surface.document, entry.data_offset, entry.size, surface.sha256)
            )
    for name in archive.by_name:
        if name.startswith("app/") and name[4:] not in listed:
            report.problems.append(
                LineupError(
                    "file_unlisted",
                    f"{name} is in the bundle but not in the manifest",
                    details={"entry": name},
                )
            )
    return slices


def _run(
    bundle: Path,
    trust: TrustStore | None,
    limits: Limits,
    source: Path | None,
    sandbox: str = "best_effort",
) -> tuple[VerifyReport, list[FileSlice]]:
    report = VerifyReport(bundle)
    try:  # a regular file within the limits, checked before any read (a FIFO never hangs)
        fh = open_regular(
            bundle, limit=limits.max_bundle_bytes, code="bundle_unreadable", what="bundle"
        )
    except LineupError as exc:
        report.problems.append(exc)
        return report, []
    with fh:
        slices = _checks(report, fh, trust, limits)
    if source is not None and report.model is not None and report.manifest_bytes:
        from lineup_build.staleness import staleness_problem

        stale = staleness_problem(report.model, report.manifest_bytes, source, sandbox=sandbox)
        if stale is not None:
            report.problems.append(stale)
    return report, slices


def _checks(
    report: VerifyReport, fh: BinaryIO, trust: TrustStore | None, limits: Limits
) -> list[FileSlice]:
    """Every check on one open file, in SPEC 4 order; stops where going on is unsafe."""
    archive, problems = read_archive(report.bundle, limits, fh)
    report.problems.extend(problems)
    if archive is None or any(p.code != "bundle_not_canonical" for p in problems):
        return []
    report.problems.extend(canonical_problems(archive))
    if not all(e.readable for e in archive.entries):
        return []
    layout, go_on = _layout_problems(archive)
    report.problems.extend(layout)
    if not go_on:
        return []
    manifest_bytes = _read_entry(fh, archive.by_name[MANIFEST_NAME])
    _check_signature(report, fh, archive, manifest_bytes, trust)
    try:
        doc = parse_manifest(manifest_bytes, limits)
    except LineupError as exc:
        report.problems.append(exc)
        return []
    schema = schema_problems(doc)
    if schema:
        report.problems.extend(schema)
        return []
    model = Manifest.from_json(doc)  # after the schema check: it only reads the fields
    report.manifest, report.model, report.manifest_bytes = doc, model, manifest_bytes
    if report.signer is not None:
        try:
            report.signer.check_manifest(model)
        except LineupError as exc:
            report.problems.append(exc)
    report.problems.extend(tool_problems(model))
    return _check_files(report, fh, archive, model, limits)


def check_bundle(
    bundle: Path,
    trust: TrustStore | None,
    *,
    limits: Limits = Limits(),
    source: Path | None = None,
    sandbox: str = "best_effort",
) -> VerifyReport:
    """Run every check and report; never raises for a problem with the bundle.

    With `trust=None` the signature is parsed but not checked (`signature="unchecked"`,
    `ok` False): that is `lineup inspect` without `--trust`. `sandbox` contains the import
    of `source` (`best_effort`, `required` or `off`).
    """
    try:
        return _run(bundle, trust, limits, source, sandbox)[0]
    except OSError as exc:  # the file vanished or became unreadable mid-way
        report = VerifyReport(bundle)
        report.problems.append(LineupError("bundle_unreadable", f"cannot read {bundle}: {exc}"))
        return report


def verify_bundle(
    bundle: Path,
    trust: TrustStore,
    *,
    limits: Limits = Limits(),
    source: Path | None = None,
) -> VerifiedBundle:
    """Verify `bundle` against `trust`; the only way to obtain a `VerifiedBundle`.

    Raises:
        VerifyError: with the first fatal problem's code and every problem found.
    """
    try:
        report, slices = _run(bundle, trust, limits, source)
    except OSError as exc:
        problem = LineupError("bundle_unreadable", f"cannot read {bundle}: {exc}")
        raise VerifyError([problem]) from None
    if (
        not report.ok
        or report.manifest is None
        or report.model is None
        or report.manifest_bytes is None
    ):
        raise VerifyError(
            report.problems or [LineupError("signature_invalid", "the bundle is not verified")]
        )
    assert report.key_id is not None
    return VerifiedBundle(
        bundle, report.manifest, report.manifest_bytes, report.key_id, report.model, tuple(slices)
    )
