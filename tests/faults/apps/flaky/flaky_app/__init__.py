"""A MiniApp whose worker fails in every way a bridge can, for the fault suite."""
