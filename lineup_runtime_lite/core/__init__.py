"""The functional core (floor 0): the typed rows the core reads (`rows`), the decisions it
returns (`decisions`), the `Facts` port it reads through (`port`), the pure transitions by
job (`calls`, `actions`, `activations`, `deliveries`; the Pomodoro's own in `pomodoro`),
the catalog handlers (`handlers`), and the AgentMessage shapes (`messages`, `timestamps`).

Nothing here does IO, reads a clock or draws randomness, through its whole import closure
(`tests/runtime/test_runtime_shape.py`).
"""
