"""The conformance MiniApp: notes kept in session data."""
