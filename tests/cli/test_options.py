"""The options `lineup run`, `test`, `serve` and `dev` share are declared once, in
`lineup_build/cli/_options.py` (one `Annotated` alias each), and read the same in every
command's `--help` (issue 42: `--sandbox`, `--db`, `--isolation`, `--shared`, `--trust`
were declared again per command, and `lineup test --sandbox` said less than the others)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import typer

from lineup_build.cli._app import app

CLI = Path(__file__).resolve().parents[2] / "lineup_build" / "cli"
#: The commands that open a runtime, and so share its options.
COMMANDS = ("dev", "run", "serve", "test")
#: Flags these commands share that mean something different in each, declared by each:
#: `--json` (JSON lines, one document, or a start document), `--host` (`run` follows the
#: scenario's policy, `dev` asks the person at the Host panel by default), `--verbose` (the
#: level flag every command takes; `run`'s also shows the worker log).
OWN = frozenset({"--json", "--host", "--verbose"})
#: `--db` is one option from one factory; what the state holds, and its default, differ
#: between `serve` (a state kept between starts) and the commands with a private state.
WORDED_PER_COMMAND = frozenset({"--db"})


def _inline_flags(path: Path) -> dict[str, list[int]]:
    """The flags `path` declares itself (`typer.Option(...)` in a command's signature),
    by line; a declaration without a flag takes the parameter's name (`sandbox`)."""
    found: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.FunctionDef):
            continue
        for arg in node.args.args + node.args.kwonlyargs:
            if arg.annotation is None:
                continue
            for call in ast.walk(arg.annotation):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "typer.Option":
                    flags = [
                        c.value
                        for c in call.args
                        if isinstance(c, ast.Constant)
                        and isinstance(c.value, str)
                        and c.value.startswith("--")
                    ]
                    for flag in flags or ["--" + arg.arg.replace("_", "-")]:
                        found.setdefault(flag.split("/")[0], []).append(call.lineno)
    return found


def _declared_again(paths: list[Path]) -> list[str]:
    """A flag two of `paths` declare themselves (not through an alias), or one the shared
    module declares: `file:line: flag`."""
    shared = {
        c.value
        for c in ast.walk(ast.parse((CLI / "_options.py").read_text("utf-8")))
        if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith("--")
    }
    inline = {path: _inline_flags(path) for path in paths}
    found = []
    for path, flags in inline.items():
        for flag, lines in flags.items():
            elsewhere = [p for p in paths if p != path and flag in inline[p]]
            if flag not in OWN and (flag in shared or elsewhere):
                found += [f"{path.name}:{line}: {flag}" for line in lines]
    return sorted(found)


def test_each_shared_option_is_declared_once() -> None:
    assert _declared_again([CLI / f"{name}.py" for name in COMMANDS]) == []


def test_the_check_sees_an_option_declared_again(tmp_path: Path) -> None:
    run = tmp_path / "run.py"
    run.write_text(
        "def run(\n"
        '    sandbox: Annotated[str, typer.Option(help="Contain...")] = "x",\n'
        '    port: Annotated[int, typer.Option("--port")] = 0,\n'
        '    as_json: Annotated[bool, typer.Option("--json")] = False,\n'
        "    db: DbOpt = None,\n"
        ") -> None: ...\n"
    )
    dev = tmp_path / "dev.py"
    dev.write_text(
        'def dev(port: Annotated[int, typer.Option(help="p")] = 0, json: JsonOpt = 0) -> None:'
        " ...\n"
    )
    # --sandbox is in the shared module; --port is in two commands; --json means two things
    assert _declared_again([run, dev]) == [
        "dev.py:1: --port",
        "run.py:2: --sandbox",
        "run.py:3: --port",
    ]


def _options(name: str) -> dict[str, Any]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {
        opt: param
        for param in command.params
        if isinstance(param, typer.core.TyperOption)
        for opt in param.opts
        if opt.startswith("--")
    }


def test_a_shared_option_reads_the_same_in_every_command() -> None:
    options = {name: _options(name) for name in COMMANDS}
    flags = {flag for opts in options.values() for flag in opts}
    shared = {f for f in flags if sum(f in opts for opts in options.values()) > 1} - OWN
    assert {"--sandbox", "--db", "--isolation", "--shared", "--trust"} <= shared
    for flag in sorted(shared):
        params = [opts[flag] for opts in options.values() if flag in opts]
        assert len({(p.default, p.envvar, p.show_envvar) for p in params}) == 1, flag
        if flag not in WORDED_PER_COMMAND:
            assert len({p.help for p in params}) == 1, (flag, [p.help for p in params])
    helps = {name: options[name]["--db"].help for name in ("dev", "run", "test", "serve")}
    assert len(set(helps.values())) == 2  # run, test, dev: one text; serve: its default
    assert all(h.endswith("or the whole URL in LINEUP_DB.") for h in helps.values())
