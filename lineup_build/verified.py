"""`VerifiedBundle`: the result of a passed verification, and its safe extraction.

Only `lineup_build.verify.verify_bundle` creates one. Extraction re-reads each file's
bytes at the offsets verification checked, re-hashes them while streaming, and never
writes outside its target folder.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lineup_build.model import Manifest
from lineup_build.reader import CHUNK, entry_name_problem, iter_entry_chunks
from lineup_sdk.errors import LineupError

__all__ = ["FileSlice", "VerifiedBundle"]


@dataclass(frozen=True)
class FileSlice:
    """Where one verified file's bytes sit in the bundle, and their hash."""

    path: str
    offset: int
    size: int
    sha256: str


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed every check; only `verify_bundle` makes one.

    Attributes:
        path: The bundle file.
        manifest: The parsed, schema-valid manifest, as JSON data.
        manifest_bytes: The exact signed manifest bytes.
        key_id: The trusted key that signed them.
        model: The same manifest as the typed `Manifest` (what install reads).
    """

    path: Path
    manifest: dict[str, Any]
    manifest_bytes: bytes
    key_id: str
    model: Manifest
    _files: tuple[FileSlice, ...] = field(default=(), repr=False, compare=False)

    def extract_to(self, target: Path) -> None:
        """Write each listed file to `target/<path>`, re-hashing while streaming.

        Files appear under their real names only once their hash matched. Nothing is
        written outside `target`; a symlinked folder inside it is refused.

        Raises:
            LineupError: `file_hash_mismatch` if the archive changed since verification,
                `unsafe_path` if `target` holds a symlink where a folder should be.
        """
        if not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.mkdir(mode=0o700)
            target.chmod(0o700)
        root = target.resolve()
        buf = bytearray(CHUNK)
        with open(self.path, "rb", buffering=0) as fh:
            for f in self._files:
                _extract_one(fh, root, f, buf)


def _folder_for(root: Path, path: str) -> Path:
    folder = root
    for part in path.split("/")[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise LineupError("unsafe_path", f"{folder} is a symlink; refusing to extract")
        if not folder.is_dir():  # 0700 whatever the umask (SPEC 16.1)
            folder.mkdir(mode=0o700)
            folder.chmod(0o700)
    return folder


def _extract_one(fh: BinaryIO, root: Path, f: FileSlice, buf: bytearray) -> None:
    if entry_name_problem(f.path):  # verified already; cheap insurance for the write path
        raise LineupError("unsafe_path", f"refusing to extract {f.path!r}")
    folder = _folder_for(root, f.path)
    name = f.path.rsplit("/", 1)[-1]
    part = folder / f".{name}.part"
    digest = hashlib.sha256()
    written = 0
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.fchmod(fd, 0o644)  # the umask aside (SPEC 16.1)
        with os.fdopen(fd, "wb") as out:
            for chunk in iter_entry_chunks(fh, f.offset, f.size, buf):
                digest.update(chunk)
                out.write(chunk)
                written += len(chunk)
        if written != f.size or digest.hexdigest() != f.sha256:
            raise LineupError(
                "file_hash_mismatch", f"{f.path} changed in the bundle since it was verified"
            )
        os.replace(part, folder / name)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
