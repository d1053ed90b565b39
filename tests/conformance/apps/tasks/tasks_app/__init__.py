"""A task list an Agent and a Surface both write (SPEC 17's conformance fixtures)."""
