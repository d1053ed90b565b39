"""The transactional shell's drivers: each reads facts, asks a pure transition, commits the
decision (group commit), then performs its effects.

- `commit.GroupCommit` — every decision ready in one loop turn, one transaction.
- `workers.WorkerPool` — worker processes per app version.
- `activation.ActivationDriver` — `starting` activations, Host events.
- `delivery.DeliveryDriver` — the per-session serial pump, sends, session data.
- `intents.HostRelay` — Host intents, ordered per instance.
- `subscriptions.SubscriptionHub` — session-data subscriptions (snapshot, then revisions).
- `install` — verified bundles unpacked into the runtime folder and registered.
- `timers.Timers` — deadlines, recovery and reconcile.
"""

from __future__ import annotations

__all__ = ["STEP_TRIES", "WORKER_START_TRIES"]

#: Tries of a worker start before the activation fails (`worker_failed`).
WORKER_START_TRIES = 3
#: Tries of a background step (a delivery-pump step, a Host intent) before it is left to
#: the next reconcile (a new call, a retry, a clock tick, or recovery on open).
STEP_TRIES = 5
