"""Checkpoint averaging: the mean of the weights of the last few epoch checkpoints.

Vaswani et al. (2017, section 6.1) average the last 5 (base) or 20 (big) checkpoints; on a
small corpus the averaged model usually translates a little better than any one of them,
for the cost of a few weight loads.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np

from zoo.training.errors import UserError


def average_checkpoints(model: keras.Model, weight_files: list[str | os.PathLike]) -> None:
    """Sets `model`'s weights to the element-wise mean of several weight files.

    Every file is loaded into `model` in turn (so each must fit its architecture: Keras
    refuses the first that does not); the model ends with the mean of each weight over the
    files, in float64 before the cast back to the weight's dtype. Integer weights (counters)
    keep the last file's value.

    Args:
        model: A built model of the architecture that wrote the files.
        weight_files: `model.save_weights` files (`.weights.h5`), at least one.

    Raises:
        ValueError: If `weight_files` is empty or a file does not exist.

    Example (the last checkpoints of a run: `sorted(Path("run/checkpoints").glob(
    "epoch-*/model.weights.h5"))[-5:]`; here two files of a one-weight model):
        >>> import tempfile
        >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
        >>> run = tempfile.TemporaryDirectory()  # deleted with the object
        >>> folder = Path(run.name)
        >>> for i, value in enumerate([1.0, 3.0]):
        ...     model.set_weights([np.full((1, 1), value)])
        ...     model.save_weights(folder / f"{i}.weights.h5")
        >>> average_checkpoints(model, sorted(folder.glob("*.weights.h5")))
        >>> model.get_weights()[0].tolist()
        [[2.0]]
    """
    paths = [Path(path) for path in weight_files]
    if not paths:
        raise ValueError("average_checkpoints needs at least one weight file; got none")
    for path in paths:
        if not path.is_file():
            raise UserError(f"no weight file at {path}")
    weights = model.weights
    sums = [np.zeros(tuple(w.shape), "float64") for w in weights]
    for path in paths:
        model.load_weights(str(path))
        for total, weight in zip(sums, weights):
            total += np.asarray(keras.ops.convert_to_numpy(weight), "float64")
    for total, weight in zip(sums, weights):
        if np.issubdtype(np.dtype(weight.dtype), np.floating):
            weight.assign((total / len(paths)).astype(weight.dtype))
