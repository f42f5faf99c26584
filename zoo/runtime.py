"""TensorFlow's process-wide settings that count only if made before TensorFlow loads."""

from __future__ import annotations

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

    The `zoo` command, `zoo bench`'s workers and benchmarks/train_precision.py call it first;
    in a Python program of your own, call it (or set the variable) before importing
    TensorFlow or Keras.
    """
    if "tensorflow" not in modules:
        environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
