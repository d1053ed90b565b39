"""`lineup run`: simulate a MiniApp in an embedded runtime (imported lazily), composed by
`compose.open_simulation`; a scenario's timeline, or an interactive prompt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lineup_build.cli._common import (
    envelope,
    output,
    trust_store_path,
    write_json,
)
from lineup_build.cli._options import (
    BundleTrustOpt,
    CodeSandboxOpt,
    DbOpt,
    IsolationOpt,
    SharedOpt,
    checked_isolation,
    db_target,
)
from lineup_sdk.errors import LineupError

if TYPE_CHECKING:
    from lineup_runtime_lite.sim import Simulation, StepReport


def _interactive(sim: Simulation, as_json: bool) -> None:
    from lineup_build.cli import _render
    from lineup_runtime_lite.sim import help_text, read_line

    _render.line(
        "lineup run: {} on a virtual clock (Host policy {}); type `help`", sim.scope, sim.policy
    )
    opening = sim.opening_report()
    if opening is not None:
        _show(opening, as_json)
    n = 0
    while True:
        try:
            line = input("lineup> ")
        except EOFError:
            return
        if line.strip().lower() in ("quit", "exit"):
            return
        if line.strip().lower() == "help":
            sys.stdout.write(help_text() + "\n")
            continue
        try:
            step = read_line(line)
            if step is None:
                continue
            n += 1
            report = sim.act_report(n, step)
        except LineupError as exc:
            _render.prompt_error(exc)
            continue
        _show(report, as_json)


def _show(report: StepReport, as_json: bool) -> None:
    from lineup_build.cli import _render

    if as_json:
        from lineup_build.cli._common import write_json

        write_json(report.to_dict())
        return
    _render.timeline([report])


def register(app: typer.Typer) -> None:
    """Add `lineup run` to the CLI."""

    @app.command()
    def run(
        target: Annotated[
            Path, typer.Argument(help="A MiniApp folder (built with its dev key) or a bundle.")
        ],
        scenarios: Annotated[
            list[Path] | None,
            typer.Option(
                "--scenario", help="Scenario TOML to play (one; `lineup test` plays many)."
            ),
        ] = None,
        db: DbOpt = None,
        shared: SharedOpt = False,
        trust: BundleTrustOpt = None,
        host: Annotated[str | None, typer.Option(help="Host policy: auto or manual.")] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="JSON lines instead of a table.")
        ] = False,
        verbose: Annotated[
            bool,
            typer.Option("--verbose", "-v", help="Show the worker log (as `lineup -v run`)."),
        ] = False,
        sandbox: CodeSandboxOpt = "best_effort",
        isolation: IsolationOpt = None,
    ) -> None:
        """Simulate a MiniApp: install it into an embedded runtime and play a scenario."""
        from lineup_build.cli import _render
        from lineup_build.cli.compose import open_simulation
        from lineup_runtime_lite.scenario import load_scenario

        if scenarios is not None and len(scenarios) > 1:
            raise LineupError(
                "usage_invalid",
                f"--scenario given {len(scenarios)} times; `lineup run` plays one scenario",
                hint="use `lineup test FILE...` to play several",
                exit_code=2,
            )
        scenario = scenarios[0] if scenarios else None
        if host not in (None, "auto", "manual"):
            raise LineupError(
                "usage_invalid",
                f"--host {host!r} must be auto or manual",
                hint="pass --host auto or --host manual",
                exit_code=2,
            )
        if scenario is None and not sys.stdin.isatty():
            raise LineupError(
                "usage_invalid",
                "no --scenario and no terminal for the interactive prompt",
                hint="pass --scenario FILE (see the scenario format reference)",
                exit_code=2,
            )
        from lineup_sdk.sandbox import check_mode, describe, summary

        check_mode(sandbox)
        isolation = checked_isolation(isolation)
        verbose = verbose or output.verbose
        if not target.exists():  # before asking for a trust store it would not need
            raise LineupError(
                "usage_invalid",
                f"{target} does not exist: pass a MiniApp folder or a .lineup bundle",
                hint="check the path",
                exit_code=2,
            )
        if not target.is_dir():  # a folder is built with its dev key and trusts only that
            trust = trust_store_path(trust, required=True, why="run a bundle with")
        plan = load_scenario(scenario) if scenario is not None else None
        sim = open_simulation(
            target,
            db=db_target(db, "run"),
            shared=shared,
            trust=trust,
            policy=host,
            scenario=plan,
            sandbox=sandbox,
            isolation=isolation,
        )
        try:
            rt = sim.runtime()
            said = describe(rt.sandbox) if verbose else summary(rt.sandbox)
            if said is not None:  # quiet unless asked or something is off (SPEC 8)
                sys.stderr.write(said + "\n")
            perms = sorted({p for a in rt.apps() for p in a.get("permissions", [])})
            sys.stderr.write(f"permissions granted: {', '.join(perms) or 'none'}\n")
            if plan is None:
                _interactive(sim, as_json)
                return
            reports = sim.play(plan, on_step=(lambda r: _show(r, True)) if as_json else None)
            if not as_json:
                _render.timeline(reports)
            failed = [r for r in reports if not r.ok]
            if verbose:
                for log in sorted((sim.runtime().logs_dir).glob("*.log")):
                    _render.line("[dim]--- {}[/]", log.name)
                    _render.literal_block(log.read_text("utf-8", "replace"))
            if as_json and not failed:
                write_json(envelope(True, steps=len(reports), failed=[]))
            if failed:
                first = failed[0]
                raise LineupError(
                    "expectation_failed",
                    f"step {first.index} ({first.description}): {first.problem}",
                    details=[r.to_dict() for r in failed],
                )
            if not as_json:
                _render.line("[green]ok[/]: {} steps, every expectation held", len(reports))
        finally:
            sim.close()
