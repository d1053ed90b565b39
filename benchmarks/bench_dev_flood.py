"""Benchmark `lineup dev`'s memory under an unread flood on the Surface bridge (SPEC 16.3).

A `lineup dev` process (the real CLI) serves a MiniApp whose session holds `--size` bytes of
session data (default 800 KiB). A client opens Surface bridges with that session's Surface
token and sends `--gets` `get`s in all (default 3,000, spread over `--bridges` bridges),
never reading an answer. The process's resident memory is sampled every 20 ms until
`--settle` seconds after the last send: the figure is its peak growth over the memory
before the flood (after one answered `get`, so the first answer's buffers are counted
before). The goal is <= 64 MiB of growth (the bridge queues at most 64 frames or 16 MiB,
then closes the client with 1008 and drops its queue).

Run it from the checkout with the interpreter that has the toolchain and the `web` extra:

    python benchmarks/bench_dev_flood.py [--gets 3000] [--size 819200] [--bridges 1] [--json]

It is not part of the test suite.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.runtime.raw_ws import RawWebSocket

TOOLS = '''from __future__ import annotations

from lineup_sdk import ToolContext, define_agent_tools

tools = define_agent_tools(app_scope="flood")


@tools.tool("flood.fill", activation="app_ready")
async def fill(ctx: ToolContext, size: int) -> int:
    """Store `size` bytes of session data."""
    snap = await ctx.session_data.get()
    await ctx.session_data.replace({"blob": "x" * size}, expected_revision=snap.revision)
    return size
'''

TOML = """[app]
scope = "flood"
name = "Flood"
version = "1.0.0"
entry = "flood_app.tools"
include = ["flood_app/**/*.py"]
"""


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _project(root: Path) -> Path:
    project = root / "flood"
    (project / "flood_app").mkdir(parents=True)
    (project / "flood_app" / "__init__.py").write_text("")
    (project / "flood_app" / "tools.py").write_text(TOOLS)
    (project / "lineup.toml").write_text(TOML)
    return project


def _request(origin: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    hostport = origin.split("//", 1)[1]
    host, port = hostport.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token}", "Host": hostport}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def bench_flood(gets: int, size: int, bridges: int, settle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lineup-bench-flood-") as tmp:
        project = _project(Path(tmp))
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
                "--db",
                str(Path(tmp) / "dev.db"),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        found: dict[str, str] = {}
        lines: list[str] = []

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                for key, pattern in (
                    ("open", r"Host page: (\S+)"),
                    ("surface", r"Surfaces on (\S+?);"),
                ):
                    m = re.search(pattern, line)
                    if m:
                        found[key] = m.group(1)

        threading.Thread(target=read, daemon=True).start()
        sockets: list[RawWebSocket] = []
        try:
            deadline = time.monotonic() + 120
            while len(found) < 2:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("lineup dev did not start:\n" + "".join(lines))
                time.sleep(0.05)
            host_origin, token = found["open"].split("/?token=")
            status, answer = _request(
                host_origin,
                "POST",
                "/_lineup/api/call",
                token,
                {"conversation": "dev", "method": "flood.fill", "params": {"size": size}},
            )
            assert status == 200, answer
            instance = None
            while instance is None:
                _, state = _request(host_origin, "GET", "/_lineup/api/state", token)
                for c in state["conversations"]:
                    for i in c["instances"]:
                        if i.get("instance"):
                            instance = i["instance"]
                time.sleep(0.1)
            _, surface = _request(
                host_origin, "GET", f"/_lineup/api/surface?instance={instance}", token
            )
            surface_token = surface["url"].split("/s/", 1)[1].split("/", 1)[0]
            s_host, s_port = found["surface"].split("//", 1)[1].rsplit(":", 1)
            path = f"/_lineup/bridge?token={surface_token}"

            # one answered get first: the first answer's buffers count before the flood
            # (once the fill call committed: until then the data is empty)
            warm = RawWebSocket(s_host, int(s_port), path)
            for attempt in range(600):
                warm.send_text(json.dumps({"id": attempt, "op": "get"}))
                opcode, payload = warm.frame()
                if opcode == 1 and len(payload) > size:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError("the session data never arrived")
            warm.close()
            time.sleep(1.0)
            before_kb = _rss_kb(proc.pid)

            peak = [before_kb]
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    peak[0] = max(peak[0], _rss_kb(proc.pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started = time.monotonic()
            per_bridge = max(1, gets // bridges)
            sent = 0
            while sent < gets:
                ws = RawWebSocket(s_host, int(s_port), path)
                sockets.append(ws)
                ws.sock.settimeout(5)
                for _ in range(min(per_bridge, gets - sent)):
                    try:
                        ws.send_text(json.dumps({"id": sent + 1, "op": "get"}))
                    except OSError:
                        break  # the server stopped reading this one
                    sent += 1
            time.sleep(settle_s)
            sampling.set()
            sampler.join()
            after_kb = _rss_kb(proc.pid)
            return {
                "gets": sent,
                "size": size,
                "bridges": len(sockets),
                "rss_before_mb": round(before_kb / 1024, 1),
                "rss_peak_mb": round(peak[0] / 1024, 1),
                "rss_after_mb": round(after_kb / 1024, 1),
                "growth_peak_mb": round((peak[0] - before_kb) / 1024, 1),
                "seconds": round(time.monotonic() - started, 1),
            }
        finally:
            for ws in sockets:
                ws.close()
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gets", type=int, default=3000)
    parser.add_argument("--size", type=int, default=800 * 1024)
    parser.add_argument("--bridges", type=int, default=1)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, one round (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.gets, args.size, args.settle = 20, 4096, 0.5
    out = bench_flood(args.gets, args.size, args.bridges, args.settle)
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"unread flood  {out['gets']} gets of {out['size'] // 1024} KiB over "
        f"{out['bridges']} bridge(s): RSS {out['rss_before_mb']} MB before, peak "
        f"{out['rss_peak_mb']} MB (+{out['growth_peak_mb']} MB; goal <= 64), "
        f"{out['rss_after_mb']} MB after {out['seconds']} s"
    )


if __name__ == "__main__":
    main()
