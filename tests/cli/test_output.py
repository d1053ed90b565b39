"""Human output: text from projects and MiniApps is shown literally, never as markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineup_build.cli import main
from lineup_build.init import init_project


def test_check_output_keeps_brackets_literal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "demo"
    init_project(app, template="blank")
    tools = app / "demo_app" / "tools.py"
    tools.write_text(
        tools.read_text()
        + '\n\n@tools.tool("Bad.Name", activation="app_ready")\nasync def bad(ctx: ToolContext) -> None:\n'
        '    """[red]not markup[/red]"""\n'
    )
    with pytest.raises(SystemExit) as exc:
        main(["check", str(app)])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert "[a-z][a-z0-9_]*" in " ".join(err.split())
    assert "demo_app/tools.py:" in err and "invalid_method_name" in err
