"""The public API (floor 5): `AsyncRuntime` (`async_runtime`), the sync `Runtime` over it
(`runtime`), the clocks (`clock`) and the engine that composes the drivers and routes Agent
calls (`engine`). Import these from `lineup_runtime_lite`."""
