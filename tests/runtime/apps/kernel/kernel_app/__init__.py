"""A MiniApp that tries what round 3 of the sandbox refuses (SPEC 13.3)."""
