"""Images handed to a model from Python: checked, given a batch axis, made float32.

The public entry points of the image models (`classify`, `attention_maps`, ...) accept one
image or a batch, uint8 or float, and answer anything else with an error that names the
shape, rather than with a stack trace from inside Keras.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zoo.training.errors import UserError


def as_image_batch(images: Any, num_channels: int = 3) -> np.ndarray:
    """Checks images and returns them as a float32 `(batch, height, width, channels)` array.

    Args:
        images: one image `(height, width, channels)` or a batch
            `(batch, height, width, channels)`, uint8 or float, values 0..255.
        num_channels: the number of channels expected.

    Returns:
        A float32 numpy array of rank 4.

    Raises:
        ValueError: for a non-numeric array, a rank other than 3 or 4, a channel count other
            than `num_channels`, an empty batch or image (the message names the shape), or
            NaN or infinite pixels (it names the first such image).
    """
    array = np.asarray(images)
    if array.dtype.kind not in "uif":
        raise UserError(
            f"images must be a numeric (uint8 or float) array; got dtype {array.dtype} "
            f"and shape {array.shape}")
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise UserError(
            "images must have shape (height, width, channels) or (batch, height, width, "
            f"channels); got shape {array.shape}")
    if array.shape[-1] != num_channels:
        raise UserError(
            f"images must have {num_channels} channels (last axis); got shape {array.shape}")
    if 0 in array.shape:
        raise UserError(f"images must not be empty; got shape {array.shape}")
    if array.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(array).reshape(len(array), -1).all(axis=1))
        if bad.size:  # the model would answer with a label of probability nan
            raise UserError(f"image {int(bad[0])} of the batch holds NaN or infinite pixel "
                            f"values ({bad.size} such images)")
    return array.astype("float32")
