"""A small board MiniApp with Agent tools and UI Actions (SPEC 17), for the SDK's tests."""
