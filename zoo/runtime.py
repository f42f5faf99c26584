"""TensorFlow's process-wide settings that count only if made before TensorFlow loads."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import typing


def use_onednn(environ: typing.MutableMapping[str, str] = os.environ,
               modules: typing.Mapping[str, object] = sys.modules) -> None:
    """Asks TensorFlow for its oneDNN kernels (`TF_ENABLE_ONEDNN_OPTS=1`) unless the
    environment already chooses (`0` keeps them off) or TensorFlow is in `modules` already
    (it reads the variable once, as it loads).

    TensorFlow turns them on by itself only on CPUs with AVX-512 VNNI, BF16 or AMX; elsewhere
    its matrix products run through kernels built for AVX without FMA. On a 2-core AVX2 host
    (a hypervisor that hides AVX-512) they about doubled the speed of `vit-cifar-small`'s
    float32 train step and of `zoo bench`'s ViT-tiny train step (docs/performance-log.md,
    2026-11-25, "The `zoo` command turns on TensorFlow's oneDNN kernels"). Results may differ
    in the last bits (a different order of summation).

    The `zoo` command, `zoo bench`'s workers and benchmarks/train_step_speed.py call it first;
    in a Python program of your own, call it (or set the variable) before importing
    TensorFlow or Keras.
    """
    if "tensorflow" not in modules:
        environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def keep_jax_out_of_tensorflow(environ: typing.Mapping[str, str] = os.environ) -> None:
    """Arranges for TensorFlow, when it is first imported, to load without JAX, where the
    Keras backend is TensorFlow; imports nothing itself, so that a command that fails before
    its model loads still loads no TensorFlow.

    `import tensorflow` loads TF Lite, which imports JAX wherever it is installed (an
    optional `from jax import jit` in `tensorflow/lite/python/util.py`); a TensorFlow run then
    carries JAX's runtime and its threads and callbacks, one of which once swallowed a Ctrl-C
    so that the training ran on with exit 0. While TensorFlow loads, `jax` is marked absent
    in `sys.modules`, which TF Lite takes as JAX not installed; afterwards the mark is gone,
    so a later `import jax` of the user's works. Nothing happens where TensorFlow or JAX is
    loaded already, or `KERAS_BACKEND` names another backend.
    """
    if environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    if "tensorflow" in sys.modules or "jax" in sys.modules:
        return
    if not any(isinstance(finder, _TensorFlowWithoutJax) for finder in sys.meta_path):
        sys.meta_path.insert(0, _TensorFlowWithoutJax())


class _TensorFlowWithoutJax(importlib.abc.MetaPathFinder):
    """A finder for the first `import tensorflow` and `import keras` alone (Keras 3.15's
    Orbax callback imports JAX as Keras loads, whatever the backend): it hands each on to the
    usual finders and runs the package's `__init__` with `jax` marked absent. It leaves
    `sys.meta_path` once both have been seen."""

    names = ("tensorflow", "keras")

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def find_spec(self, name: str, path: typing.Any = None, target: typing.Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name not in self.names or name in self.seen:
            return None
        self.seen.add(name)
        if self.seen == set(self.names):
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or "jax" in sys.modules:
            return spec
        spec.loader = _WithoutJax(spec.loader)
        return spec


class _WithoutJax(importlib.abc.Loader):
    """Runs a module's loader with `sys.modules["jax"]` set to None (`import jax` fails),
    until the outermost such module has loaded."""

    depth = 0

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> typing.Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: typing.Any) -> None:
        _WithoutJax.depth += 1
        sys.modules.setdefault("jax", None)  # type: ignore[arg-type]
        try:
            self.loader.exec_module(module)
        finally:
            _WithoutJax.depth -= 1
            if not _WithoutJax.depth and "jax" in sys.modules and sys.modules["jax"] is None:
                del sys.modules["jax"]
