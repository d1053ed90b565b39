"""The public API (floor 5): `AsyncRuntime` (`async_runtime`) and the faces it hands out
(`async_faces`), the sync `Runtime` over it (`runtime`), the clocks (`clock`), and what
they are built from: the options (`options`), the composition root (`assemble`), the engine
that composes the drivers and routes Agent calls (`engine`; a UI Action's half in
`ui_actions`), the installed apps as this node trusts them (`trusted_apps`), a call's
checks before the engine (`intake`, `input_checks`, `arguments`), the reads (`reads`), the
deadline timer (`deadlines`), the dev-build move (`dev_builds`) and the deprecated async
spellings (`deprecated`). Import the public names from `lineup_runtime_lite`."""
