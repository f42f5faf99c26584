"""Patch embedding of the Vision Transformer (Dosovitskiy et al., 2021, eq. 1).

The image is cut into non-overlapping `p x p` patches, each flattened to `p * p * C` values
and projected by a matrix `E` of shape `(p * p * C, D)`. A convolution whose kernel and
stride are both `p` computes exactly that product (its kernel, reshaped to
`(p * p * C, D)` in (row, col, channel) order, is `E`), in one fused op.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from .validation import positive_int



@keras.saving.register_keras_serializable(package="zoo")
class PatchEmbedding(keras.layers.Layer):
    """Cuts images into `patch_size` squares and projects each to `hidden_dim` features.

    Args:
        patch_size: the side of the square patches, in pixels.
        hidden_dim: the size `D` of each patch token.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: images `(batch, height, width, channels)`, channels last. Height and width
            must be multiples of `patch_size`. (Where they are unknown until run time, a
            remainder is dropped by the convolution rather than refused.)

    Returns:
        Patch tokens `(batch, (height / p) * (width / p), hidden_dim)` in row-major patch
        order: the patch at grid row `i`, column `j` is token `i * (width / p) + j`.

    Example:
    >>> import numpy as np
    >>> layer = PatchEmbedding(patch_size=4, hidden_dim=8)
    >>> tuple(layer(np.zeros((2, 32, 32, 3), "float32")).shape)
    (2, 64, 8)
    >>> layer.grid_size(32)
    (8, 8)
    """

    def __init__(self, patch_size: int, hidden_dim: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.patch_size = positive_int(patch_size, "patch_size")
        self.hidden_dim = positive_int(hidden_dim, "hidden_dim")

    def grid_size(self, image_size: int | tuple[int, int]) -> tuple[int, int]:
        """The `(rows, cols)` patch grid of an image of the given size.

        Args:
            image_size: `size` of a square image, or `(height, width)`.

        Returns:
            `(height // patch_size, width // patch_size)`.

        Raises:
            ValueError: if a side is not a positive multiple of `patch_size`.
        """
        if isinstance(image_size, int) and not isinstance(image_size, bool):
            image_size = (image_size, image_size)
        if not isinstance(image_size, (tuple, list)) or len(image_size) != 2:
            raise ValueError(
                f"image_size must be an int or a pair (height, width); got {image_size!r}"
            )
        height, width = image_size
        for side, what in ((height, "height"), (width, "width")):
            if isinstance(side, bool) or not isinstance(side, int) or side <= 0 or (
                side % self.patch_size
            ):
                raise ValueError(
                    f"image {what} {side!r} (image size {height}x{width}) is not a positive "
                    f"multiple of patch_size {self.patch_size}"
                )
        return height // self.patch_size, width // self.patch_size

    def _check_image_shape(self, shape: tuple) -> None:
        if len(shape) != 4:
            raise ValueError(
                "PatchEmbedding expects images of shape (batch, height, width, channels); "
                f"got shape {tuple(shape)}"
            )
        if shape[-1] is None:
            raise ValueError(f"the number of channels must be known; got shape {tuple(shape)}")
        height, width = shape[1], shape[2]
        if height is not None and width is not None:
            self.grid_size((int(height), int(width)))
        else:
            for side, what in ((height, "height"), (width, "width")):
                if side is not None and side % self.patch_size:
                    raise ValueError(
                        f"image {what} {side} is not a multiple of patch_size "
                        f"{self.patch_size}"
                    )

    def build(self, input_shape: tuple) -> None:
        self._check_image_shape(input_shape)
        self.projection = keras.layers.Conv2D(
            self.hidden_dim,
            kernel_size=self.patch_size,
            strides=self.patch_size,
            padding="valid",
            data_format="channels_last",
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build(input_shape)
        self.built = True

    def call(self, inputs: Any) -> Any:
        self._check_image_shape(inputs.shape)
        patches = self.projection(inputs)  # (batch, rows, cols, hidden_dim)
        shape = ops.shape(patches)
        return ops.reshape(patches, (shape[0], shape[1] * shape[2], self.hidden_dim))

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        height, width = input_shape[1], input_shape[2]
        if height is None or width is None:
            return (input_shape[0], None, self.hidden_dim)
        rows, cols = height // self.patch_size, width // self.patch_size
        return (input_shape[0], rows * cols, self.hidden_dim)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"patch_size": self.patch_size, "hidden_dim": self.hidden_dim})
        return config
