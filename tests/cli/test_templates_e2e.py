"""Templates as products: init → build → trust → verify --source → run, via the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup_build.cli import main


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out + out.err


@pytest.mark.parametrize("template", ["blank", "todo", "pomodoro"])
def test_template_builds_verifies_and_installs(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / f"my-{template}"
    assert cli(["init", str(app), "--template", template], capsys)[0] == 0
    code, out = cli(["build", str(app), "--dev-key", "--json"], capsys)
    assert code == 0, out
    bundle = Path(json.loads(out)["bundle"])
    store = tmp_path / "trust.toml"
    scope = "pomodoro" if template == "pomodoro" else f"my_{template}"
    pub = app / ".lineup" / "dev-key.pub.pem"
    assert cli(["trust", "add", str(pub), "--scope", scope, "--store", str(store)], capsys)[0] == 0
    code, out = cli(
        ["verify", str(bundle), "--trust", str(store), "--source", str(app), "--json"], capsys
    )
    assert code == 0, out
    assert json.loads(out)["ok"] is True
    # the same bundle installs into a runtime and publishes its tools
    from lineup_runtime_lite import Runtime, VirtualClock

    with Runtime.open(":memory:", trust=store, clock=VirtualClock()) as rt:
        rt.install(bundle)
        assert {t["method"].split(".")[0] for t in rt.inventory()} == {scope}
