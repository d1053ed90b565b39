"""Benchmark `lineup dev` (SPEC 14) in headless Chromium.

Figures:

* `edit`: an edit of `surface/index.html` until the reloaded Surface shows it (poll, rebuild,
  re-install, move the sessions, reload), over `--edits` edits: median and max; the goal is
  <= 2 s.
* `listener`: a committed session-data change (a `todo.add` call) until the Surface's
  `sdk.sessionData.subscribe` listener has it, over `--changes` changes: p50 and p99; the
  goals are <= 50 ms and <= 200 ms. Both ends are read on the host's wall clock: the page
  stamps `performance.timeOrigin + performance.now()`; the commit is stamped by a Python
  listener on the same runtime (it runs right after the COMMIT, so this is a slight
  underestimate), and, as an upper bound, by the time the call was sent.
* `memory`: the resident memory of a `lineup dev` process (the real CLI) idle with one open
  page, after `--idle` seconds (its worker processes counted apart).

Run it with the interpreter that has the toolchain, the `web` extra and Playwright, on a
machine with Chromium (`apt-get install -y chromium`; `$LINEUP_CHROMIUM` to name it):

    python benchmarks/bench_dev.py [--changes 200] [--edits 5] [--idle 3] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

LISTEN = """
async () => {
  const { sdk } = await import("/_lineup/sdk.js");
  window.__at = {};
  sdk.sessionData.subscribe((snap) => {
    window.__at[snap.revision] = performance.timeOrigin + performance.now();
  });
}
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_in_process(root: Path, changes: int, edits: int) -> dict[str, Any]:
    from lineup_build.init import init_project
    from lineup_runtime_lite.web.browser import dev_page

    project = root / "todo"
    init_project(project, template="todo")
    out: dict[str, Any] = {}
    with dev_page(project, db=root / "dev.db") as dev:
        rt = dev.server.rt
        dev.call("todo.add", {"title": "warm-up"})
        rt.settle()
        frame = dev.surface()
        frame.wait_for_selector('[data-testid="todo-item"]')
        frame.evaluate(LISTEN)
        committed: dict[int, float] = {}
        sent: dict[int, float] = {}
        rt.surface("dev", "todo").subscribe(
            lambda kind, snap: committed.setdefault(snap.revision, time.time() * 1000)
        )
        base = rt.surface("dev", "todo").get().revision
        for i in range(changes):
            sent[base + i + 1] = time.time() * 1000
            answer = dev.call("todo.add", {"title": f"item {i}"})
            assert answer["stage"] == "result", answer
        last = base + changes
        frame.wait_for_function("(n) => window.__at[n] !== undefined", arg=last, timeout=30_000)
        seen: dict[str, float] = frame.evaluate("window.__at")
        from_commit = [seen[str(r)] - committed[r] for r in range(base + 1, last + 1)]
        from_send = [seen[str(r)] - sent[r] for r in range(base + 1, last + 1)]
        out["listener"] = {
            "changes": changes,
            "p50_ms": round(_pct(from_commit, 0.5), 2),
            "p99_ms": round(_pct(from_commit, 0.99), 2),
            "max_ms": round(max(from_commit), 2),
            "from_send_p50_ms": round(_pct(from_send, 0.5), 2),
            "from_send_p99_ms": round(_pct(from_send, 0.99), 2),
        }
        index = project / "surface" / "index.html"
        times = []
        for n in range(edits):
            text = index.read_text()
            marker = f"Edited {n}"
            text = re.sub(r"<h1>[^<]*</h1>", f"<h1>{marker}</h1>", text, count=1)
            t0 = time.monotonic()
            index.write_text(text)
            dev.page.frame_locator('[data-testid="lineup-surface-frame"]').locator(
                "h1", has_text=marker
            ).wait_for(timeout=20_000)
            times.append(time.monotonic() - t0)
        out["edit"] = {
            "edits": edits,
            "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3),
        }
    return out


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        for child in map(int, text):
            out.extend([child, *_children(child)])
    return out


def bench_memory(root: Path, idle_s: float) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from lineup_build.init import init_project
    from lineup_runtime_lite.web.browser import find_chromium

    project = root / "mem"
    init_project(project, template="todo")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from lineup_build.cli import main; main()",
            "dev",
            str(project),
            "--port",
            "0",
            "--no-open",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stderr is not None
    url = None
    lines: list[str] = []

    def read() -> None:
        nonlocal url
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"Host page: (\S+)", line)
            if m:
                url = m.group(1)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while url is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("lineup dev did not start:\n" + "".join(lines))
            time.sleep(0.05)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(url)
                page.get_by_test_id("lineup-console-tool").wait_for()
                time.sleep(idle_s)  # idle: the page polls the state every 300 ms
                main_kb = _rss_kb(proc.pid)
                workers_kb = sum(_rss_kb(c) for c in _children(proc.pid))
            finally:
                browser.close()
        return {
            "idle_s": idle_s,
            "rss_mb": round(main_kb / 1024, 1),
            "workers_rss_mb": round(workers_kb / 1024, 1),
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.changes = 2
        args.edits = 1
        args.idle = 0.2
    from lineup_runtime_lite.web.browser import missing_browser

    why = missing_browser()
    if why is not None:
        sys.exit(f"bench_dev: {why}")
    with tempfile.TemporaryDirectory(prefix="bench-dev-") as tmp:
        root = Path(tmp)
        result = bench_in_process(root, args.changes, args.edits)
        result["memory"] = bench_memory(root, args.idle)
    if args.json:
        print(json.dumps(result))
        return
    lis, edit, mem = result["listener"], result["edit"], result["memory"]
    print(
        f"listener  {lis['changes']} changes: p50 {lis['p50_ms']} ms, p99 {lis['p99_ms']} ms "
        f"(max {lis['max_ms']} ms; goals 50 / 200 ms); from the call's send: p50 "
        f"{lis['from_send_p50_ms']} ms, p99 {lis['from_send_p99_ms']} ms"
    )
    print(
        f"edit      {edit['edits']} edits: median {edit['median_s']} s, max {edit['max_s']} s (goal 2 s)"
    )
    print(
        f"memory    lineup dev idle with one page: {mem['rss_mb']} MB RSS (workers {mem['workers_rss_mb']} MB)"
    )


if __name__ == "__main__":
    main()
