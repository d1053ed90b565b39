"""Shadows a standard module the worker imports only when a handler asks for it."""

import builtins

builtins.__lineup_shadow_colorsys_ran__ = True  # type: ignore[attr-defined]
