"""verify_bundle / check_bundle on real template builds: reports, extraction, staleness."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from lineup_build.build import build_project
from lineup_build.init import init_project
from lineup_build.model import Manifest
from lineup_build.staleness import manifest_diff
from lineup_build.trust import TrustStore
from lineup_build.verify import (
    Limits,
    VerifiedBundle,
    VerifyError,
    check_bundle,
    verify_bundle,
)
from lineup_sdk.errors import LineupError
from tests.build.bundle_kit import EPOCH, FILES, KEY, OTHER, canonical, entries, good_bundle, trust


@pytest.fixture(scope="module")
def todo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A `todo` template project, its bundle, and the build's manifest SHA-256."""
    root = tmp_path_factory.mktemp("src") / "todo"
    init_project(root, template="todo")
    result = build_project(root, signing_key=KEY, epoch=EPOCH)
    assert result.ok and result.bundle is not None and result.manifest_sha256
    return root, result.bundle, result.manifest_sha256


def test_a_fresh_build_verifies(todo: tuple[Path, Path, str]) -> None:
    root, bundle, sha = todo
    verified = verify_bundle(bundle, trust(scopes=("todo",)), source=root)
    assert isinstance(verified, VerifiedBundle)
    assert verified.key_id == KEY.key_id
    assert verified.manifest["app"]["scope"] == "todo"
    assert hashlib.sha256(verified.manifest_bytes).hexdigest() == sha


def test_check_bundle_report(todo: tuple[Path, Path, str]) -> None:
    _, bundle, sha = todo
    report = check_bundle(bundle, trust())
    assert report.ok and report.signature == "valid" and report.problems == []
    doc = report.to_dict()
    assert doc["ok"] is True and doc["manifest_sha256"] == sha
    assert doc["signer_label"] == "test"
    assert [t["method"] for t in doc["tools"]] == ["todo.add", "todo.complete", "todo.list"]
    assert {f["path"] for f in doc["files"]} >= {"todo_app/tools.py", "surface/index.html"}


def test_without_a_trust_store_the_signature_is_unchecked(todo: tuple[Path, Path, str]) -> None:
    _, bundle, _ = todo
    report = check_bundle(bundle, None)
    assert report.problems == []
    assert report.signature == "unchecked" and not report.ok
    assert report.key_id == KEY.key_id and report.manifest is not None


def test_extract_writes_exactly_the_listed_files(
    todo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    root, bundle, _ = todo
    verified = verify_bundle(bundle, trust())
    target = tmp_path / "out"
    verified.extract_to(target)
    written = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    # the listed files and the Surface document (SPEC 18.2), nothing else
    surface = verified.manifest["surface"]
    listed = [f["path"] for f in verified.manifest["files"]]
    assert written == sorted([*listed, surface["document"]])
    for rel in listed:
        assert (target / rel).read_bytes() == (root / rel).read_bytes()
    document = (target / surface["document"]).read_bytes()
    assert hashlib.sha256(document).hexdigest() == surface["sha256"]


def test_extract_detects_a_bundle_changed_after_verification(tmp_path: Path) -> None:
    path = tmp_path / "b.lineup"
    data = good_bundle()
    path.write_bytes(data)
    verified = verify_bundle(path, trust())
    offset = data.index(FILES["todo_app/tools.py"])
    path.write_bytes(data[:offset] + b"#" + data[offset + 1 :])
    target = tmp_path / "out"
    with pytest.raises(LineupError) as caught:
        verified.extract_to(target)
    assert caught.value.code == "file_hash_mismatch"
    assert not (target / "todo_app" / "tools.py").exists()
    assert not list((target / "todo_app").glob(".*.part"))
    assert set(tmp_path.iterdir()) == {path, target}


def test_extract_refuses_a_symlinked_folder_in_the_target(tmp_path: Path) -> None:
    path = tmp_path / "b.lineup"
    path.write_bytes(good_bundle())
    verified = verify_bundle(path, trust())
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "out"
    target.mkdir()
    (target / "todo_app").symlink_to(outside, target_is_directory=True)
    with pytest.raises(LineupError) as caught:
        verified.extract_to(target)
    assert caught.value.code == "unsafe_path"
    assert list(outside.iterdir()) == []


def test_every_further_problem_is_reported_after_the_first(tmp_path: Path) -> None:
    files = dict(FILES)
    files["todo_app/tools.py"] = b"tampered"
    files["todo_app/extra.py"] = b"unlisted"
    del files["surface/index.html"]
    from tests.build.bundle_kit import make_manifest

    path = tmp_path / "b.lineup"
    path.write_bytes(canonical(entries(files, manifest=make_manifest(FILES), key=OTHER)))
    with pytest.raises(VerifyError) as caught:
        verify_bundle(path, trust())
    codes = [p.code for p in caught.value.problems]
    assert codes == ["untrusted_key", "file_missing", "file_hash_mismatch", "file_unlisted"]
    assert caught.value.code == "untrusted_key"
    doc = caught.value.to_dict()
    assert [p["code"] for p in doc["problems"]] == codes


def test_scope_problem_is_checked_after_a_valid_signature(tmp_path: Path) -> None:
    path = tmp_path / "b.lineup"
    path.write_bytes(good_bundle())
    report = check_bundle(path, trust(scopes=("notes", "mail")))
    assert [p.code for p in report.problems] == ["scope_not_allowed"]
    assert report.signature == "valid"


def test_injected_limits_apply(tmp_path: Path) -> None:
    path = tmp_path / "b.lineup"
    path.write_bytes(good_bundle())
    with pytest.raises(VerifyError) as caught:
        verify_bundle(path, trust(), limits=Limits(max_manifest_bytes=100))
    assert caught.value.code == "limits_exceeded"
    with pytest.raises(VerifyError) as deep:
        verify_bundle(path, trust(), limits=Limits(max_depth=3))
    assert deep.value.code == "limits_exceeded"


def _copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "todo"
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns("dist", ".lineup"))
    return dest


def _stale(bundle: Path, source: Path) -> VerifyError:
    with pytest.raises(VerifyError) as caught:
        verify_bundle(bundle, trust(), source=source)
    assert caught.value.code == "stale_bundle"
    return caught.value


def test_stale_when_a_tool_changed(todo: tuple[Path, Path, str], tmp_path: Path) -> None:
    root, bundle, _ = todo
    src = _copy(root, tmp_path)
    tools = src / "todo_app" / "tools.py"
    tools.write_text(tools.read_text().replace("Add one item", "Append one item"))
    err = _stale(bundle, src)
    assert err.details["diff"]["tools_changed"] == ["todo.add: description"]
    assert err.details["diff"]["files_changed"] == ["todo_app/tools.py"]
    assert "tools changed: todo.add: description" in err.message


def test_stale_when_files_or_version_change(todo: tuple[Path, Path, str], tmp_path: Path) -> None:
    root, bundle, _ = todo
    src = _copy(root, tmp_path)
    (src / "surface" / "extra.css").write_text("p{}\n")
    toml = src / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.0.1"'))
    diff = _stale(bundle, src).details["diff"]
    assert diff["files_added"] == ["surface/extra.css"]
    assert diff["app"] == ["version"]


def test_stale_when_the_source_does_not_build(todo: tuple[Path, Path, str], tmp_path: Path) -> None:
    root, bundle, _ = todo
    src = _copy(root, tmp_path)
    (src / "todo_app" / "tools.py").write_text("raise RuntimeError('broken')\n")
    err = _stale(bundle, src)
    assert err.details["diagnostics"][0]["code"] == "entry_import_failed"
    assert not (src / "dist").exists()  # staleness never writes into the source


def test_manifest_diff_names_what_changed() -> None:
    from tests.build.bundle_kit import make_manifest, sdk_tool

    old = make_manifest(tools=[sdk_tool("todo.add"), sdk_tool("todo.gone")])
    new = make_manifest(
        files={**FILES, "todo_app/new.py": b""},
        tools=[sdk_tool("todo.add", timeout_s=5), sdk_tool("todo.new")],
    )
    new["files"][0]["sha256"] = "0" * 64
    assert manifest_diff(Manifest.from_json(old), Manifest.from_json(new)) == {
        "tools_added": ["todo.new"],
        "tools_removed": ["todo.gone"],
        "tools_changed": ["todo.add: timeout_s"],
        "files_added": ["todo_app/new.py"],
        "files_changed": ["surface/index.html"],
    }


def test_a_trust_store_file_drives_verification(
    todo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    _, bundle, _ = todo
    store = TrustStore()
    store.add(KEY.public_raw, ["todo"])
    store.save(tmp_path / "trust.toml")
    assert check_bundle(bundle, TrustStore.load(tmp_path / "trust.toml")).ok
