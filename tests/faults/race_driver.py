"""A node for the two-process races (`test_races.py`): reads one JSON command a line on
stdin, answers one JSON line on stdout.

  {"op": "open", "url", "trust", "node", "apps"}  -> {"ready": true}
  {"op": "install", "bundle"}                      -> {"action": ...} | {"code": ...}
  {"op": "register", "url", "node", "lease"}       -> {"registered": epoch} | {"code": ...}
  {"op": "close"}                                  -> {"closed": true}

A raw exception is answered {"raw": "<type>: <text>"}: the finding the races look for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main() -> None:
    from lineup_build.trust import TrustStore
    from lineup_runtime_lite import HostSimulator, Runtime, VirtualClock
    from lineup_runtime_lite.store.postgres import PostgresStore
    from lineup_sdk.errors import LineupError

    held: list[Any] = []

    def close() -> None:
        while held:
            held.pop().close()

    for line in sys.stdin:
        cmd = json.loads(line)
        out: dict[str, Any]
        try:
            if cmd["op"] == "open":
                held.append(
                    Runtime.open(
                        cmd["url"],
                        trust=TrustStore.load(Path(cmd["trust"])),
                        clock=VirtualClock(),
                        host=HostSimulator("manual"),
                        apps_dir=cmd["apps"],
                        node_id=cmd["node"],
                        node_lease_s=1.0,
                    )
                )
                out = {"ready": True}
            elif cmd["op"] == "install":
                out = {"action": held[-1].install(cmd["bundle"]).action}
            elif cmd["op"] == "register":
                store = PostgresStore(cmd["url"], node_id=cmd["node"], lease_s=cmd["lease"])
                held.append(store)
                store.coordination.start()  # the heartbeat keeps the lease, as a runtime's does
                out = {"registered": store.coordination.epoch}
            else:
                close()
                out = {"closed": True}
        except LineupError as exc:
            out = {"code": exc.code, "message": exc.message}
        except Exception as exc:  # the finding
            out = {"raw": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)
    close()


if __name__ == "__main__":
    main()
