"""Makes TensorFlow absent from every Python process that has this folder on PYTHONPATH, as it
is on the lent GPU machine (../shared/gpu/README.md: JAX, no TensorFlow):

    PYTHONPATH=benchmarks/without_tensorflow DRY_RUN=1 OUT=/tmp/slot DATA=../shared/data \\
        bash benchmarks/gpu_slot.sh

Python imports `sitecustomize` at start-up, so the subprocesses of a command (the bench's
workers, the trainings) are covered too. The standard path finder is replaced by one that does
not see `tensorflow`, `tensorflow_text` and `tensorflow_datasets`: `import tensorflow` raises
ModuleNotFoundError and `importlib.util.find_spec("tensorflow")` returns None, both as where
the package is not installed. (A finder that raises for the name instead is no stand-in:
`find_spec` then raises too, which no uninstalled package does, and torch's compiler, which
timm imports, asks `find_spec("tensorflow")` at import.)

Nor is the zoo installed there: the lent machine reads the checkout (benchmarks/package_view.sh).
An installed `zoo` is hidden too, an editable install's finder and a copy in site-packages
alike, so that `zoo` comes only from PYTHONPATH, as there.
"""

import sys
from importlib.machinery import PathFinder

ABSENT = frozenset({"tensorflow", "tensorflow_text", "tensorflow_datasets"})
INSTALLED = ("site-packages", "dist-packages")


class PathFinderWithoutTensorFlow(PathFinder):
    """The standard path finder, blind to the packages of `ABSENT` and their modules, and to
    a `zoo` installed in site-packages."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in ABSENT:
            return None
        if fullname == "zoo" and path is None:
            path = [entry for entry in sys.path if not any(
                part in entry for part in INSTALLED)]
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [PathFinderWithoutTensorFlow if finder is PathFinder else finder
                    for finder in sys.meta_path
                    if not getattr(finder, "__module__", "").startswith("__editable__")]
