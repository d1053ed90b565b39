"""`dependencies` at install: PEP 508 specifiers and environment markers (`packaging`); an
unmet version is `dependency_missing` naming installed vs required."""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from lineup_build.signing import SigningKey
from lineup_runtime_lite import Runtime
from lineup_runtime_lite.internals import check_dependencies
from lineup_sdk.errors import LineupError
from tests.runtime.conftest import APPS, build_app


@pytest.fixture()
def rt(store_rt: Runtime) -> Runtime:
    """This module's runtimes (`rt`, `probe`, `pomo`) run on the chosen store engine."""
    return store_rt


PYDANTIC = importlib.metadata.version("pydantic")


def _manifest(*deps: str) -> tuple[str, ...]:
    """What install checks: the manifest's `app.dependencies`."""
    return deps


@pytest.mark.parametrize(
    "dep",
    [
        "pydantic>=2,<3",
        "pydantic",
        "PyDantic[email]>=2.0",  # names are normalized, extras accepted
        f"pydantic=={PYDANTIC}",
        'surely-not-installed-lineup-dep>=1; python_version < "3"',  # not for this Python
        'surely-not-installed-lineup-dep; sys_platform == "no-such-platform"',
    ],
    ids=["range", "bare", "extras", "exact", "marker-python", "marker-platform"],
)
def test_satisfied_or_not_needed_here(dep: str) -> None:
    check_dependencies(_manifest(dep))


@pytest.mark.parametrize(
    ("dep", "says"),
    [
        ("pydantic>=99", f"needs pydantic>=99; the runtime's environment has pydantic {PYDANTIC}"),
        ("pydantic<2", "needs pydantic<2"),
        ("pydantic!=" + PYDANTIC, f"has pydantic {PYDANTIC}"),
        ('pydantic>=99; python_version >= "3"', "needs pydantic>=99"),
        ("surely-not-installed-lineup-dep>=1", "not installed"),
        ("not a requirement ((", "cannot be read"),
    ],
    ids=["too-old", "too-new", "excluded", "marker-applies", "absent", "unreadable"],
)
def test_unmet_is_dependency_missing(dep: str, says: str) -> None:
    with pytest.raises(LineupError) as exc:
        check_dependencies(_manifest("pydantic>=2", dep))
    assert exc.value.code == "dependency_missing"
    assert says in exc.value.message


def test_unmet_version_names_installed_and_required() -> None:
    with pytest.raises(LineupError) as exc:
        check_dependencies(_manifest("pydantic>=99"))
    assert exc.value.details == {"package": "pydantic", "required": ">=99", "installed": PYDANTIC}


@pytest.mark.store
@pytest.mark.parametrize(
    ("deps", "installs"),
    [
        (["pydantic>=99"], False),
        (['tomli-surely-absent>=2; python_version < "3.0"', "pydantic>=2"], True),
    ],
    ids=["pydantic-99-refused", "marker-skipped"],
)
def test_install_checks_the_bundle_dependencies(
    tmp_path: Path, rt_key: SigningKey, rt: Runtime, deps: list[str], installs: bool
) -> None:
    src = tmp_path / "src"
    shutil.copytree(APPS / "probe", src)
    toml = src / "lineup.toml"
    listed = ", ".join(repr(d) for d in deps)
    toml.write_text(toml.read_text() + f"dependencies = [{listed}]\n")
    bundle = build_app(src, tmp_path / "p", rt_key)
    if installs:
        assert rt.install(bundle).action == "installed"
        return
    with pytest.raises(LineupError) as exc:
        rt.install(bundle)
    assert exc.value.code == "dependency_missing"
    assert rt.apps() == []
