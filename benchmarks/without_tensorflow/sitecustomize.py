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
"""

import sys
from importlib.machinery import PathFinder

ABSENT = frozenset({"tensorflow", "tensorflow_text", "tensorflow_datasets"})


class PathFinderWithoutTensorFlow(PathFinder):
    """The standard path finder, blind to the packages of `ABSENT` and their modules."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in ABSENT:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [PathFinderWithoutTensorFlow if finder is PathFinder else finder
                    for finder in sys.meta_path]
