"""A MiniApp with a costly input schema, for the hostile-input tests."""
