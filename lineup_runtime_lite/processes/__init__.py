"""Sandboxed child processes (floor 2): one worker subprocess per App session or app
(`worker`: sandbox, private pipe, heartbeat, log pipe) and the process tree they are kept
in (`proctree`)."""
