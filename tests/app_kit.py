"""Import a MiniApp's package from a folder under a name of the test's own.

A rendered template's `tools.py` imports its siblings relatively (`from . import actions`),
so it is loaded as a submodule of its package, never as a loose file. The unique name keeps
two tests that load the same template in one process from sharing module state.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_app_module(package_dir: Path, name: str, module: str = "tools") -> ModuleType:
    """`<name>.<module>` from the package in `package_dir`, imported as `<name>`."""
    spec = importlib.util.spec_from_file_location(
        name, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.{module}")


def forget_app_modules(name: str) -> None:
    """Drop `<name>` and its submodules from `sys.modules`."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
