"""A MiniApp whose Agent tools and UI Actions write one list (SPEC 17's queue tests)."""
