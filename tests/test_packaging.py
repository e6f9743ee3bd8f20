"""`pip install -e .` installs every package of the repository: pyproject.toml lists them
(setuptools refuses to guess in Django's flat layout), so a new top-level package must be added
there or an installed project would not find it."""

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests"}


def declared_patterns() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return pyproject["tool"]["setuptools"]["packages"]["find"]["include"]


def top_level_packages() -> set[str]:
    return {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if not path.parent.name.startswith(".")
    } - NOT_SHIPPED


def test_every_top_level_package_is_declared_for_installation():
    patterns = declared_patterns()
    undeclared = {
        package
        for package in top_level_packages()
        if not any(fnmatch.fnmatch(package, pattern) for pattern in patterns)
    }
    assert undeclared == set()


def test_the_declaration_names_only_packages_that_exist():
    """A pattern left over from a removed package would hide a typo in a new one."""
    packages = top_level_packages()
    stale = [
        pattern
        for pattern in declared_patterns()
        if not any(fnmatch.fnmatch(package, pattern) for package in packages)
    ]
    assert stale == []


def test_the_build_backend_is_pinned():
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    assert build["build-backend"] == "setuptools.build_meta"
    assert all("==" in requirement for requirement in build["requires"])
