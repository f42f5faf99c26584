"""The `>>>` examples in the layers' docstrings run and print what they say they print, on
every backend this suite runs on."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

from zoo import layers


def _docstring_examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder()
    found = []
    for module_info in pkgutil.iter_modules(layers.__path__):
        module = importlib.import_module(f"zoo.layers.{module_info.name}")
        found += [test for test in finder.find(module) if test.examples]
    return sorted(found, key=lambda test: test.name)


EXAMPLES = _docstring_examples()


@pytest.mark.parametrize("example", EXAMPLES, ids=[test.name for test in EXAMPLES])
def test_docstring_example(example):
    report: list[str] = []
    result = doctest.DocTestRunner().run(example, out=report.append)
    assert result.failed == 0, "".join(report)


def test_every_exported_name_has_an_example():
    documented = {test.name.split(".")[-1] for test in EXAMPLES}
    missing = sorted(set(layers.__all__) - documented)
    assert not missing, f"exported without a docstring example: {missing}"
