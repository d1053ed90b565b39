"""Checking values against schemas (floor 2): call params (`params`), handler results and
session data (`checks`), plain schemas on the calling thread and expensive ones in a
killable validator process with a budget (`pool`, whose child runs `child`)."""
