"""A module shadowing the standard `json`: if it ever runs, it leaves a mark and breaks."""

import builtins

builtins.__lineup_shadow_json_ran__ = True  # type: ignore[attr-defined]
raise ImportError("the bundle's json.py ran instead of the standard library's")
