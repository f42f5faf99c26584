"""Dependencies as used: what the installed code imports is declared, what only the tests use
sits in the test extra, and nothing is declared that nothing uses.

Read from pyproject.toml and from every import statement of the installed packages (zoo/,
layers/, training/) and of tests/. Import names map to distributions through the installed
metadata (`packages_distributions`), so `PIL` is pillow and `google.protobuf` is protobuf."""
from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = ("zoo", "layers", "training")
OWN = {"zoo", "layers", "training", "tests", "benchmarks", "__future__"}
# Declared and used, but never by an import statement of ours.
LOADED_BY_NAME = {
    "tensorboard": "Keras's TensorBoard callback writes the run's logs through it",
}
# Imported only to see whether it loads, with a stand-in where it does not: not a requirement.
PROBED = {
    "torchvision": "timm imports it; the bench stands a stub in where no wheel fits the torch",
}
# Sub-packages that only an extra's users import: their modules may import that extra's packages
# when they load.
EXTRA_PACKAGES = {"zoo/pipelines/": "pipeline"}
# Optional packages that are not installed here: their import name is their distribution.
NOT_INSTALLED = {"ctranslate2": "ctranslate2", "apache_beam": "apache-beam"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normal(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    extras = {name: {_requirement_name(r) for r in reqs}
              for name, reqs in project["optional-dependencies"].items()}
    return core, extras


def _imports(folders: tuple[str, ...]) -> dict[str, dict[str, bool]]:
    """Third-party import name -> {file: imported at module level}."""
    found: dict[str, dict[str, bool]] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            top_level = {id(node) for node in tree.body}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in OWN or top in sys.stdlib_module_names:
                        continue
                    files = found.setdefault(top, {})
                    where = str(path.relative_to(ROOT))
                    files[where] = files.get(where, False) or id(node) in top_level
    return found


def _distributions(import_name: str) -> set[str]:
    names = packages_distributions().get(import_name) or [NOT_INSTALLED.get(import_name)]
    assert names != [None], f"no distribution provides the import {import_name!r}"
    return {_normal(name) for name in names}


def test_what_the_installed_code_imports_is_declared():
    core, extras = _declared()
    optional = set().union(*(reqs for name, reqs in extras.items() if name != "test"))
    for module, files in _imports(INSTALLED).items():
        if module in PROBED:
            continue
        provided_by = _distributions(module)
        at_top = sorted(f for f, top in files.items() if top)
        for path in at_top:
            # Imported when its module loads: the package (or its extra's sub-package) cannot
            # work without it.
            extra = next((extras[name] for folder, name in EXTRA_PACKAGES.items()
                          if path.startswith(folder)), set())
            assert provided_by & (core | extra), f"{module} ({path}) is not a dependency"
        if at_top:
            continue
        assert provided_by & (core | optional), (
            f"{module} ({sorted(files)}) is neither a dependency nor in an extra")


def test_every_dependency_is_used_by_the_installed_code():
    core, _ = _declared()
    used = set().union(*(_distributions(m) for m in _imports(INSTALLED) if m not in PROBED))
    unused = core - used - set(LOADED_BY_NAME)
    assert not unused, f"declared but never imported by zoo/, layers/ or training/: {unused}"


def test_what_only_the_tests_import_is_in_the_test_extra():
    core, extras = _declared()
    installed = _imports(INSTALLED)
    for module in set(_imports(("tests",))) - set(installed):
        provided_by = _distributions(module)
        assert provided_by & extras["test"], f"the tests import {module}; add it to [test]"
        assert not provided_by & core, f"only the tests import {module}; it is a dependency"
