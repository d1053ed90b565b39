"""Permissions and hints (SPEC 3, 8, 10): lineup.toml → manifest → trust `allow` → verify,
install and the Agent Inventory; both written only when set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup_build.build import build_project, check_project
from lineup_build.cli import main
from lineup_build.signing import SigningKey, b64encode
from lineup_build.trust import TrustedKey, TrustStore
from lineup_build.verify import check_bundle
from lineup_runtime_lite import Runtime, VirtualClock
from lineup_sdk.errors import LineupError
from tests.conftest import MakeApp

TOOL = """
@tools.tool("demo.ping", activation="app_ready")
async def ping(ctx: ToolContext) -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"
"""

HINTED = """
@tools.tool("demo.look", activation="app_ready", read_only=True, open_world=False)
async def look(ctx: ToolContext) -> str:
    \"\"\"Look, change nothing.\"\"\"
    return "seen"
"""


def _store(key: SigningKey, *, allow: tuple[str, ...] = ()) -> TrustStore:
    return TrustStore.from_keys([TrustedKey(key.key_id, key.public_raw, ("*",), None, allow)])


def _manifest(path: Path) -> dict[str, object]:
    report = check_bundle(path, None)
    assert report.manifest is not None
    return report.manifest


def test_permissions_reach_the_manifest_only_when_granted(
    make_app: MakeApp, signing_key: SigningKey
) -> None:
    plain = build_project(make_app(TOOL).root, signing_key=signing_key)
    off = build_project(
        make_app(TOOL, extra="[app.permissions]\nnetwork = false\n").root, signing_key=signing_key
    )
    net = build_project(
        make_app(TOOL, extra="[app.permissions]\nnetwork = true\n").root, signing_key=signing_key
    )
    assert plain.ok and off.ok and net.ok
    assert plain.manifest is not None and off.manifest is not None and net.manifest is not None
    assert "permissions" not in plain.manifest["app"]
    assert off.manifest == plain.manifest  # false grants nothing and writes nothing
    assert net.manifest["app"]["permissions"] == {"network": True}


@pytest.mark.parametrize(
    "extra",
    [
        "[app.permissions]\nfiles = true\n",
        '[app.permissions]\nnetwork = "yes"\n',
        "permissions = 1\n",
    ],
    ids=["unknown-permission", "not-a-bool", "not-a-table"],
)
def test_bad_permissions_are_config_invalid(make_app: MakeApp, extra: str) -> None:
    lineup_toml = (
        '[app]\nscope = "demo"\nname = "Demo"\nversion = "1.0.0"\n'
        'entry = "demo_app.tools"\ninclude = ["demo_app/**/*.py"]\n'
    )
    if extra.startswith("["):
        lineup_toml += extra
    else:
        lineup_toml = lineup_toml.replace("[app]\n", "[app]\n" + extra)
    result = check_project(make_app(TOOL, lineup_toml=lineup_toml).root)
    assert [d.code for d in result.diagnostics if d.severity == "error"] == ["config_invalid"]


def test_hints_reach_manifest_and_inventory_only_when_set(
    make_app: MakeApp, signing_key: SigningKey
) -> None:
    result = build_project(make_app(TOOL + HINTED).root, signing_key=signing_key)
    assert result.ok and result.manifest is not None and result.bundle is not None
    tools = {t["method"]: t for t in result.manifest["tools"]}
    assert tools["demo.look"]["hints"] == {"open_world": False, "read_only": True}
    assert "hints" not in tools["demo.ping"]
    with Runtime.open(":memory:", trust=_store(signing_key), clock=VirtualClock()) as rt:
        rt.install(result.bundle)
        inventory = {t["method"]: t for t in rt.inventory()}
    assert inventory["demo.look"]["hints"] == {"open_world": False, "read_only": True}
    assert "hints" not in inventory["demo.ping"]


def test_a_hint_that_is_not_a_boolean_is_config_invalid(make_app: MakeApp) -> None:
    body = HINTED.replace("read_only=True", 'read_only="yes"')
    result = check_project(make_app(body).root)
    assert [d.code for d in result.diagnostics if d.severity == "error"] == ["config_invalid"]


def test_a_permission_needs_the_keys_allow_at_verify_and_install(
    make_app: MakeApp, signing_key: SigningKey
) -> None:
    net = build_project(
        make_app(TOOL, extra="[app.permissions]\nnetwork = true\n").root, signing_key=signing_key
    )
    assert net.bundle is not None
    report = check_bundle(net.bundle, _store(signing_key))
    assert [p.code for p in report.problems] == ["permission_not_allowed"]
    assert "--allow network" in (report.problems[0].hint or "")
    assert check_bundle(net.bundle, _store(signing_key, allow=("network",))).ok
    with Runtime.open(":memory:", trust=_store(signing_key), clock=VirtualClock()) as rt:
        with pytest.raises(LineupError) as exc:
            rt.install(net.bundle)
        assert exc.value.code == "permission_not_allowed"
        assert rt.apps() == []
    granted = _store(signing_key, allow=("network",))
    with Runtime.open(":memory:", trust=granted, clock=VirtualClock()) as rt:
        assert rt.install(net.bundle).to_dict()["permissions"] == ["network"]
        assert rt.apps()[0]["permissions"] == ["network"]


def test_trust_allow_round_trips_and_is_checked() -> None:
    key = TrustedKey("0" * 32, b"", ("*",))
    assert key.allow == ()
    store = TrustStore()
    from lineup_build.signing import key_from_seed

    k = key_from_seed(bytes(range(5, 37)))
    store.add(k.public_raw, ["demo"], "ci", ["network"])
    again = TrustStore.parse(store.dumps())
    assert again.keys[k.key_id].allow == ("network",)
    text = store.dumps().replace('allow = ["network"]', 'allow = ["files"]')
    with pytest.raises(LineupError) as exc:
        TrustStore.parse(text)
    assert exc.value.code == "trust_store_invalid"
    with pytest.raises(LineupError) as exc:
        store.add(k.public_raw, ["demo"], None, ["everything"])
    assert exc.value.code == "trust_argument_invalid"


def test_trust_add_allow_and_list_on_the_cli(
    tmp_path: Path, signing_key: SigningKey, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "trust.toml"
    pub = b64encode(signing_key.public_raw)
    with pytest.raises(SystemExit) as exc:
        main(["trust", "add", pub, "--scope", "demo", "--allow", "network", "--store", str(store)])
    assert exc.value.code in (0, None)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["trust", "list", "--store", str(store), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["keys"][0]["allow"] == ["network"]
    assert TrustStore.load(store).keys[signing_key.key_id].allow == ("network",)


def test_inspect_shows_permissions_and_hints(
    make_app: MakeApp, signing_key: SigningKey, capsys: pytest.CaptureFixture[str]
) -> None:
    built = build_project(
        make_app(TOOL + HINTED, extra="[app.permissions]\nnetwork = true\n").root,
        signing_key=signing_key,
    )
    assert built.bundle is not None
    with pytest.raises(SystemExit):
        main(["inspect", str(built.bundle), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["app"]["permissions"] == {"network": True}
    assert {t["method"]: t.get("hints") for t in doc["tools"]}["demo.look"] == {
        "open_world": False,
        "read_only": True,
    }
    with pytest.raises(SystemExit):
        main(["inspect", str(built.bundle)])
    text = capsys.readouterr().out
    assert "network" in text and "read_only" in text


def test_a_bad_sandbox_mode_on_the_cli_is_a_usage_error(
    make_app: MakeApp, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", str(make_app(TOOL).root), "--sandbox", "bogus", "--json"])
    assert exc.value.code == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "usage_invalid"


def test_lineup_run_trusts_a_project_folder_with_what_it_asks(make_app: MakeApp) -> None:
    from lineup_build.cli.compose import open_simulation

    app = make_app(TOOL, extra="[app.permissions]\nnetwork = true\n")
    sim = open_simulation(app.root, db=None, trust=None, policy="auto", scenario=None)
    try:
        assert sim.runtime().apps()[0]["permissions"] == ["network"]
        assert sim.runtime().call("c1", "conv", "demo.ping", {})["stage"] == "accepted"
        sim.runtime().settle()
        assert any(m["id"] == "c1:result" for m in sim.runtime().outbox.all())
    finally:
        sim.close()
