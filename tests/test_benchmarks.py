"""The project's benchmarks run as shipped (issue 36): each has a smoke mode (`--smoke`: a
tiny size, one round) that this test runs end to end, so a benchmark cannot rot unseen
(two did: one read a private attribute its baseline lacks, one failed at its default size).

The smoke runs start together, two at a time, when the module starts; each test waits for
its own. They check that a benchmark runs and reports, never its figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.pg_kit import pg_bindir

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))
#: The benchmarks that start a PostgreSQL server of their own.
NEEDS_POSTGRES = {"bench_postgres", "bench_nodes", "bench_trust"}
#: Seconds one smoke run may take on a loaded 2-core machine.
TIMEOUT_S = 300


def _run(name: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--smoke"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def runs() -> dict[str, Future[subprocess.CompletedProcess[str]]]:
    pool = ThreadPoolExecutor(2, thread_name_prefix="bench-smoke")
    wanted = [n for n in BENCHMARKS if n not in NEEDS_POSTGRES or pg_bindir() is not None]
    out = {name: pool.submit(_run, name) for name in wanted}
    pool.shutdown(wait=False)
    return out


def test_every_benchmark_has_a_smoke_mode() -> None:
    assert len(BENCHMARKS) >= 15

    def smoke(name: str) -> bool:  # its own option, or the shared workload options'
        text = (ROOT / f"benchmarks/{name}.py").read_text()
        return '"--smoke"' in text or "args = workload_args(" in text

    assert [n for n in BENCHMARKS if not smoke(n)] == []


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_runs_as_shipped(
    name: str, runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    if name not in runs:
        if os.environ.get("CI"):
            pytest.fail(f"{name} needs PostgreSQL server binaries: CI must run it")
        pytest.skip(f"{name} needs PostgreSQL server binaries (pg_config --bindir)")
    proc = runs[name].result(timeout=TIMEOUT_S * len(runs))
    assert proc.returncode == 0, (
        f"{name} --smoke failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    assert proc.stdout.strip(), f"{name} --smoke printed nothing"
