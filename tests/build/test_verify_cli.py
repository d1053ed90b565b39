"""`lineup verify`, `lineup inspect` and `lineup trust` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup_build.signing import b64encode, public_pem
from tests.build.bundle_kit import KEY, OTHER, good_bundle, make_manifest
from tests.cli_kit import run_cli


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    pub = tmp_path / "key.pub.pem"
    pub.write_bytes(public_pem(KEY))
    good = tmp_path / "good.lineup"
    good.write_bytes(good_bundle())
    other = tmp_path / "other.lineup"
    other.write_bytes(good_bundle(key=OTHER))
    hostile = tmp_path / "hostile.lineup"
    name = "[bold]x[/]\x1b[31m"
    hostile.write_bytes(
        good_bundle(manifest={**make_manifest(), "app": {**make_manifest()["app"], "name": name}})
    )
    return {
        "pub": pub,
        "good": good,
        "other": other,
        "hostile": hostile,
        "store": tmp_path / "t.toml",
    }


def _trust(files: dict[str, Path], capsys: pytest.CaptureFixture[str], scope: str = "todo") -> None:
    status, _, _ = run_cli(
        ["trust", "add", str(files["pub"]), "--scope", scope, "--store", str(files["store"])],
        capsys,
    )
    assert status == 0


def test_trust_add_list_revoke(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    store = str(files["store"])
    status, out, _ = run_cli(
        ["trust", "add", b64encode(KEY.public_raw), "--scope", "todo", "--scope", "notes",
         "--label", "ci", "--store", store, "--json"],
        capsys,
    )  # fmt: skip
    assert status == 0
    assert json.loads(out)["key_id"] == KEY.key_id
    status, out, _ = run_cli(["trust", "list", "--store", store, "--json"], capsys)
    doc = json.loads(out)
    assert [(k["key_id"], k["scopes"], k["status"]) for k in doc["keys"]] == [
        (KEY.key_id, ["todo", "notes"], "trusted")
    ]
    status, out, _ = run_cli(["trust", "revoke", KEY.key_id, "--store", store], capsys)
    assert status == 0 and "revoked" in out
    status, out, _ = run_cli(["trust", "list", "--store", store], capsys)
    assert status == 0 and "revoked" in out and KEY.key_id in out


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (["trust", "add", "not-a-key", "--scope", "todo"], "trust_argument_invalid", 2),
        (["trust", "add", b64encode(bytes(32)), "--scope", "todo"], "weak_key", 1),
        (
            ["trust", "add", b64encode(KEY.public_raw), "--scope", "To Do"],
            "trust_argument_invalid",
            2,
        ),
        (["trust", "revoke", "abc"], "trust_argument_invalid", 2),
        (["trust", "list"], "trust_store_invalid", 1),
    ],
    ids=["bad-key", "weak-key", "bad-scope", "bad-key-id", "missing-store"],
)
def test_trust_errors(
    args: list[str],
    code: str,
    status: int,
    files: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    got, out, _ = run_cli([*args, "--store", str(files["store"]), "--json"], capsys)
    assert got == status
    assert json.loads(out)["error"]["code"] == code
    assert not files["store"].exists()


def test_verify_passes_and_fails_with_codes(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _trust(files, capsys)
    store = str(files["store"])
    status, out, _ = run_cli(["verify", str(files["good"]), "--trust", store], capsys)
    assert status == 0 and "verified" in out
    status, out, _ = run_cli(["verify", str(files["good"]), "--trust", store, "--json"], capsys)
    assert status == 0 and json.loads(out)["ok"] is True
    status, out, err = run_cli(["verify", str(files["other"]), "--trust", store], capsys)
    assert status == 1 and "untrusted_key" in err and "rejected" in out
    status, out, _ = run_cli(["verify", str(files["other"]), "--trust", store, "--json"], capsys)
    doc = json.loads(out)
    assert status == 1 and doc["ok"] is False
    assert doc["diagnostics"][0]["code"] == "untrusted_key"


def test_verify_usage_and_store_errors(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, _ = run_cli(["verify", str(files["good"])], capsys)
    assert status == 2  # --trust is required
    files["store"].write_text("keys = [")
    status, out, _ = run_cli(
        ["verify", str(files["good"]), "--trust", str(files["store"]), "--json"], capsys
    )
    assert status == 1 and json.loads(out)["error"]["code"] == "trust_store_invalid"


def test_inspect_without_trust_shows_everything(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_cli(["inspect", str(files["good"])], capsys)
    assert status == 0
    for text in ("todo 1.0.0", KEY.key_id, "unchecked", "todo.add", "todo_app/tools.py"):
        assert text in out
    status, out, _ = run_cli(["inspect", str(files["good"]), "--json"], capsys)
    doc = json.loads(out)
    assert doc["signature"] == "unchecked" and doc["app"]["scope"] == "todo"
    assert {f["path"]: f["size"] for f in doc["files"]}["todo_app/__init__.py"] == 0


def test_inspect_with_trust_reports_signature_status(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _trust(files, capsys)
    status, out, _ = run_cli(
        ["inspect", str(files["good"]), "--trust", str(files["store"]), "--json"], capsys
    )
    assert status == 0 and json.loads(out)["signature"] == "valid"
    status, out, _ = run_cli(
        ["inspect", str(files["other"]), "--trust", str(files["store"]), "--json"], capsys
    )
    doc = json.loads(out)
    assert status == 1 and doc["signature"] == "untrusted"
    assert doc["app"]["scope"] == "todo"  # still shown, just not trusted


def test_inspect_renders_hostile_text_inertly(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_cli(["inspect", str(files["hostile"])], capsys)
    assert status == 0
    assert "\x1b[31m" not in out and "\\x1b" in out and "[bold]x" in out


def test_inspect_of_garbage_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.lineup"
    junk.write_bytes(b"not a zip")
    status, _, err = run_cli(["inspect", str(junk)], capsys)
    assert status == 1 and "bundle_unreadable" in err
