"""`lineup test`: play every scenario of a project as tests, each in a fresh embedded runtime
(imported lazily, inside the command); each project is built once with its dev key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from lineup_build.cli._common import envelope, find_project, write_json
from lineup_build.cli._common import output as level
from lineup_build.cli._options import (
    CodeSandboxOpt,
    DbOpt,
    IsolationOpt,
    SharedOpt,
    checked_isolation,
    db_target,
)
from lineup_sdk.errors import LineupError


def register(app: typer.Typer) -> None:
    """Add `lineup test` to the CLI."""

    @app.command("test")
    def test(
        paths: Annotated[
            list[Path] | None,
            typer.Argument(
                metavar="PATH",
                help="Project folders, scenario folders or files (default: the project "
                "containing the working folder).",
                show_default=False,
            ),
        ] = None,
        junit: Annotated[
            Path | None, typer.Option(help="Write JUnit XML here (one testcase per scenario).")
        ] = None,
        output: Annotated[
            str | None,
            typer.Option("--format", help="text, json or github (workflow annotations)."),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
        keyword: Annotated[
            str | None,
            typer.Option("-k", help="Only scenarios whose name contains this (or matches it)."),
        ] = None,
        sandbox: CodeSandboxOpt = "best_effort",
        isolation: IsolationOpt = None,
        db: DbOpt = None,
        shared: SharedOpt = False,
    ) -> None:
        """Play every scenario as a test, each in a fresh runtime on the virtual clock."""
        from lineup_build.cli.compose import run_suite
        from lineup_runtime_lite.suite import collect_cases, github_annotations, junit_xml
        from lineup_sdk.sandbox import check_mode

        if output not in (None, "text", "json", "github"):
            raise LineupError(
                "usage_invalid", f"--format {output!r} must be text, json or github", exit_code=2
            )
        if as_json and output not in (None, "json"):
            raise LineupError(
                "usage_invalid",
                f"--json and --format {output} contradict each other",
                hint="--json is --format json; pass one of them",
                exit_code=2,
            )
        output = "json" if as_json else output or "text"
        check_mode(sandbox)
        isolation = checked_isolation(isolation)
        cwd = Path.cwd()
        cases = collect_cases(list(paths or [find_project(cwd)]), cwd=cwd, pattern=keyword)
        if not cases:
            raise LineupError(
                "usage_invalid",
                "no scenarios to play" + (f" match -k {keyword!r}" if keyword else ""),
                hint="scenarios are TOML files under the project's scenarios/ folder",
                exit_code=2,
            )
        report = run_suite(
            cases, sandbox=sandbox, isolation=isolation, db=db_target(db, "test"), shared=shared
        )
        if junit is not None:
            junit.write_text(junit_xml(report, root=cwd), "utf-8")
        if output == "json":
            facts = report.to_dict()
            diagnostics = [
                r.error.to_dict()
                if r.error is not None
                else {"code": "expectation_failed", "message": r.message(), "where": r.case.name}
                for r in report.results
                if not r.ok
            ]
            write_json(envelope(facts.pop("ok"), diagnostics, **facts))
        else:
            for r in report.results:
                if level.quiet and r.ok:
                    continue
                verdict = "PASS" if r.ok else "FAIL"
                sys.stdout.write(f"{verdict} {r.case.name} ({r.seconds:.2f}s)\n")
                if r.error is not None:
                    sys.stdout.write(f"  {r.message()}\n")
                for step in (s for s in r.steps if not s.ok):  # every failing step
                    where = f"{r.case.name}:{step.line}" if step.line else r.case.name
                    sys.stdout.write(
                        f"  {where}: step {step.index} ({step.description}): {step.problem}\n"
                    )
            if output == "github":
                for annotation in github_annotations(report, root=cwd):
                    sys.stdout.write(annotation + "\n")
            failed = sum(1 for r in report.results if not r.ok)
            if not level.quiet:
                sys.stdout.write(
                    f"{len(report.results) - failed} passed, {failed} failed "
                    f"in {report.seconds:.2f}s\n"
                )
        raise typer.Exit(0 if report.ok else 1)
