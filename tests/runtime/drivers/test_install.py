"""Install (SPEC 4, 5.1): verify, downgrade refusal, no-op reinstall, upgrade, load checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_build.trust import TrustedKey, TrustStore
from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
from lineup_runtime_lite.internals import engine_of
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import APPS, build_app, message, ready


def versioned(tmp: Path, key: SigningKey, version: str, **switches: object) -> Path:
    src = tmp / f"src-{version}"
    shutil.copytree(APPS / "probe", src)
    toml = src / "lineup.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', f'version = "{version}"'))
    return build_app(src, tmp / f"probe-{version}", key, **switches)


def test_same_bundle_twice_is_a_no_op(probe: Runtime, probe_bundle: Path) -> None:
    assert probe.install(probe_bundle).action == "unchanged"
    assert [a["version"] for a in probe.apps()] == ["1.0.0"]


def test_downgrade_and_conflict(tmp_path: Path, rt_key: SigningKey, rt: Runtime) -> None:
    v2 = versioned(tmp_path, rt_key, "2.0.0")
    v1 = versioned(tmp_path, rt_key, "1.0.0")
    assert rt.install(v2).action == "installed"
    with pytest.raises(LineupError) as exc:
        rt.install(v1)
    assert exc.value.code == "downgrade_refused"
    src = tmp_path / "src-2.0.0"
    (src / "probe_app" / "extra.py").write_text("X = 1\n")
    (tmp_path / "again").mkdir()
    other = build_app(src, tmp_path / "again" / "p", rt_key)
    with pytest.raises(LineupError) as exc:
        rt.install(other)
    assert exc.value.code == "version_conflict"


def test_upgrade_keeps_session_data_and_pins_old_sessions(
    tmp_path: Path, rt_key: SigningKey, probe: Runtime
) -> None:
    ready(probe, "old")
    probe.call("a", "old", "probe.append", {"item": "kept"})
    v2 = versioned(tmp_path, rt_key, "1.1.0")
    assert probe.install(v2).action == "upgraded"
    assert probe.surface("old", "probe").get().data == {"items": ["kept"]}
    assert probe.call("b", "old", "probe.append", {"item": "more"})["result"] == 2
    sessions = {r[1]: r[3] for r in probe.store_dump()["app_sessions"]}
    assert sessions["old"] == "1.0.0"
    ready(probe, "new")
    sessions = {r[1]: r[3] for r in probe.store_dump()["app_sessions"]}
    assert sessions["new"] == "1.1.0"


def test_untrusted_bundle_is_refused(probe_bundle: Path) -> None:
    with Runtime.open(":memory:", trust=TrustStore(), clock=VirtualClock()) as rt:
        with pytest.raises(LineupError) as exc:
            rt.install(probe_bundle)
        assert exc.value.code == "untrusted_key"
        assert rt.inventory() == []


def test_tampered_install_is_refused_at_load(probe: Runtime) -> None:
    apps = engine_of(probe).apps_dir / "probe" / "1.0.0" / "probe_app" / "tools.py"
    apps.write_text(apps.read_text() + "\n# edited\n")
    probe.call("t", "conv", "probe.echo", {"text": "x"})
    probe.settle()
    err = message(probe, "t:error")
    assert err["error"]["details"] == {"reason": "worker_failed", "cause": "install_tampered"}
    with pytest.raises(LineupError) as exc:
        probe._run(probe._art._apps.check_app("probe", "1.0.0"))
    assert exc.value.code == "install_tampered"


def test_revoked_key_is_refused_at_load(rt_key: SigningKey, probe_bundle: Path) -> None:
    trust = TrustStore.from_keys([TrustedKey(rt_key.key_id, rt_key.public_raw, ("*",), None)])
    with Runtime.open(
        ":memory:", trust=trust, clock=VirtualClock(), host=HostSimulator("manual")
    ) as rt:
        rt.install(probe_bundle)
        trust.revoke(rt_key.key_id)
        rt.call("t", "conv", "probe.echo", {"text": "x"})
        rt.settle()
        assert message(rt, "t:error")["error"]["details"] == {
            "reason": "app_untrusted",
            "cause": "key_revoked",
        }
        with pytest.raises(LineupError) as exc:
            rt._run(rt._art._apps.check_app("probe", "1.0.0"))
        assert exc.value.code == "key_revoked"


def test_missing_dependency_is_refused(tmp_path: Path, rt_key: SigningKey, rt: Runtime) -> None:
    src = tmp_path / "src"
    shutil.copytree(APPS / "probe", src)
    toml = src / "lineup.toml"
    toml.write_text(toml.read_text() + 'dependencies = ["surely-not-installed-lineup-dep>=1"]\n')
    bundle = build_app(src, tmp_path / "p", rt_key)
    with pytest.raises(LineupError) as exc:
        rt.install(bundle)
    assert exc.value.code == "dependency_missing"


def test_sdk_major_mismatch_is_refused(
    tmp_path: Path, rt_key: SigningKey, probe_bundle: Path, rt: Runtime
) -> None:
    import json
    import zipfile

    from lineup_build.bundle import BundleEntry, write_bundle
    from lineup_build.manifest import serialize_manifest
    from lineup_build.signing import sign_manifest

    with zipfile.ZipFile(probe_bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        files = {n: z.read(n) for n in z.namelist() if n.startswith("app/")}
    manifest["sdk"]["version"] = "9.0.0"
    raw = serialize_manifest(manifest)
    entries = [
        BundleEntry("manifest.json", raw),
        BundleEntry("manifest.sig", sign_manifest(rt_key, raw)),
    ]
    entries += [BundleEntry(n, files[n]) for n in sorted(files)]
    out = tmp_path / "future.lineup"
    write_bundle(out, entries)
    with pytest.raises(LineupError) as exc:
        rt.install(out)
    assert exc.value.code == "sdk_incompatible"
