"""Every `>>>` example of the docstrings of `zoo` and `zoo.training` runs and prints what it
says (the layers' run on every backend: tests/layers/test_docstring_examples.py).

The modules are imported by their installed names (`zoo.training.schedules`, never the
checkout's `training.schedules`): pytest's `--doctest-modules` names a module by its file's
place in the checkout, which would load training/ a second time as a top-level package, with a
second copy of every class. Run on TensorFlow, the backend the examples' outputs are written for.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import keras
import pytest

PACKAGES = ("zoo", "zoo.training")
OTHERS = "zoo.layers."  # a wheel installs them inside zoo/


def modules_with_examples() -> list[str]:
    """The installed packages' modules whose source holds a `>>>`, by name, found from their
    folders (importing none of them)."""
    names = set()
    for package in PACKAGES:
        for folder in importlib.util.find_spec(package).submodule_search_locations:
            for file in Path(folder).rglob("*.py"):
                parts = file.relative_to(folder).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                if (parts and parts[-1] == "__main__"  # importing it runs the command
                        or ">>>" not in file.read_text(encoding="utf-8")):
                    continue
                names.add(".".join((package, *parts)))
    return sorted(name for name in names if not name.startswith(OTHERS))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the examples print what the TensorFlow backend computes")
@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run_as_written(name):
    module = importlib.import_module(name)
    tests = [test for test in doctest.DocTestFinder().find(module, name) if test.examples]
    if not tests:
        pytest.skip(f"{name} has no examples")
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
