"""Simulation and testing (floor 6): the scenario format v2 (`format`, its JSON Schema in
`scenario.schema.json`), its expectations (`expect`), the one replay driver (`simulation`)
that `lineup run`, `lineup test` and the conformance fixtures use, the suite runner
(`runner`) and the interactive prompt (`prompt`).

Users import the format from `lineup_runtime_lite.scenario` and the suite runner from
`lineup_runtime_lite.suite`, their stable paths."""
