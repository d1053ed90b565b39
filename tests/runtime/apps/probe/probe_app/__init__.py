"""A MiniApp whose handlers misbehave on purpose, for runtime tests."""
