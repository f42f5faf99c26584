"""TensorFlow's process-wide settings that count only if made before TensorFlow loads."""

from __future__ import annotations

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
    (a hypervisor that hides AVX-512): `vit-cifar-small`'s float32 train step 36.5 and 38.4
    images/s with them against 18.7 and 18.0 without; `zoo bench`'s ViT-tiny train step 126
    against 54. Results may differ in the last bits (a different order of summation).

    The `zoo` command, `zoo bench`'s workers and benchmarks/train_step_speed.py call it first;
    in a Python program of your own, call it (or set the variable) before importing
    TensorFlow or Keras.
    """
    if "tensorflow" not in modules:
        environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def import_tensorflow_without_jax(environ: typing.Mapping[str, str] = os.environ) -> None:
    """Imports TensorFlow with JAX kept out, where the Keras backend is TensorFlow.

    `import tensorflow` loads TF Lite, which imports JAX wherever it is installed (an
    optional `from jax import jit` in `tensorflow/lite/python/util.py`); a TensorFlow run then
    carries JAX's runtime and its threads and callbacks, one of which once swallowed a Ctrl-C
    so that the training ran on with exit 0. While TensorFlow loads, `jax` is marked absent
    in `sys.modules`, which TF Lite takes as JAX not installed; afterwards the mark is gone,
    so a later `import jax` of the user's works. Nothing happens where TensorFlow or JAX is
    loaded already, TensorFlow is not installed, or `KERAS_BACKEND` names another backend.
    """
    if environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    if "tensorflow" in sys.modules or "jax" in sys.modules:
        return
    if importlib.util.find_spec("tensorflow") is None:
        return
    sys.modules["jax"] = None  # type: ignore[assignment]  # `import jax` -> ImportError
    try:
        import tensorflow  # noqa: F401
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]
