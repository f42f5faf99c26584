"""Learned absolute position embeddings, and their interpolation to a new length or grid.

A learned table has one row per position, so a model trained on sequences of length `L` (or
images cut into an `h x w` grid of patches) has no rows for longer inputs. The ViT paper
(Dosovitskiy et al., 2021, section 3.2, "Fine-tuning and higher resolution") fine-tunes at a
higher resolution by "2D interpolation of the pre-trained position embeddings, according to
their location in the original image": `interpolate_position_embedding_2d` does that,
keeping the class token's row as it is; `interpolate_position_embedding` is the 1-D case.
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from .validation import is_int, non_negative_int, positive_int

_RESIZE_METHODS = ("nearest", "bilinear", "bicubic", "lanczos3", "lanczos5")



def _check_grid(grid: Any, what: str) -> tuple[int, int]:
    if not isinstance(grid, (tuple, list)) or len(grid) != 2 or not all(
        is_int(g) and g > 0 for g in grid
    ):
        raise ValueError(f"{what} must be a pair of positive ints (rows, cols); got {grid!r}")
    return int(grid[0]), int(grid[1])


def _as_table(table: Any) -> tuple[Any, bool]:
    """The `(length, dim)` table, and whether it came as `(1, length, dim)`."""
    table = ops.convert_to_tensor(table)
    if len(table.shape) == 3 and table.shape[0] == 1:
        return table[0], True
    if len(table.shape) != 2:
        raise ValueError(
            "a position embedding table must have shape (length, dim) or (1, length, dim); "
            f"got shape {tuple(table.shape)}"
        )
    return table, False


def interpolate_position_embedding(table: Any, new_length: int) -> Any:
    """Linearly interpolates a `(length, dim)` table to `(new_length, dim)`.

    Rows are treated as samples at the centres of `length` equal cells of `[0, 1]` (the
    "half-pixel" convention of image resizing), so resizing to the same length returns the
    same table, and the first and last rows keep their values when stretching.

    Args:
        table: a `(length, dim)` (or `(1, length, dim)`) array.
        new_length: the number of rows wanted.

    Returns:
        The `(new_length, dim)` table (same rank as `table`), in `table`'s dtype; the
        interpolation runs in float32.

    Raises:
        ValueError: if `new_length` is not a positive int or `table` has the wrong rank.

    Example:
    >>> import numpy as np
    >>> table = np.array([[0.0], [1.0]], "float32")
    >>> [round(float(v), 2) for v in interpolate_position_embedding(table, 4)[:, 0]]
    [0.0, 0.25, 0.75, 1.0]
    """
    new_length = positive_int(new_length, "new_length")
    table, batched = _as_table(table)
    dim = table.shape[-1]
    # A (1, length, 1, dim) image resized along its height only.
    image = ops.reshape(ops.cast(table, "float32"), (1, -1, 1, dim))
    resized = ops.image.resize(image, (new_length, 1), interpolation="bilinear",
                               antialias=False, data_format="channels_last")
    out = ops.cast(ops.reshape(resized, (new_length, dim)), table.dtype)
    return ops.expand_dims(out, 0) if batched else out


def interpolate_position_embedding_2d(
    table: Any,
    old_grid: tuple[int, int],
    new_grid: tuple[int, int],
    num_prefix_tokens: int = 1,
    method: str = "bicubic",
) -> Any:
    """Resizes the patch-grid rows of a ViT position table to a new grid.

    The table's first `num_prefix_tokens` rows (the class token's) are kept as they are; the
    remaining `rows * cols` rows, in row-major order, are reshaped to a `(rows, cols, dim)`
    image, resized with `keras.ops.image.resize(..., antialias=False)` and flattened back.

    Args:
        table: `(num_prefix_tokens + rows * cols, dim)` (or with a leading axis of 1).
        old_grid: `(rows, cols)` of the patch grid the table was trained for.
        new_grid: `(rows, cols)` of the patch grid wanted.
        num_prefix_tokens: rows before the grid that are not positions in the image.
        method: the `keras.ops.image.resize` interpolation ("bicubic" as in timm and
            big_vision; "bilinear", "nearest", ... also work).

    Returns:
        The `(num_prefix_tokens + new_rows * new_cols, dim)` table (same rank as `table`),
        in `table`'s dtype; the interpolation runs in float32.

    Raises:
        ValueError: for a grid that is not a pair of positive ints, a table whose length is
            not `num_prefix_tokens + rows * cols`, or an unknown `method`.

    Example:
    >>> import numpy as np
    >>> table = np.zeros((1 + 4 * 4, 8), "float32")   # class token + 4x4 patches
    >>> tuple(interpolate_position_embedding_2d(table, (4, 4), (6, 6)).shape)
    (37, 8)
    """
    old_rows, old_cols = _check_grid(old_grid, "old_grid")
    new_rows, new_cols = _check_grid(new_grid, "new_grid")
    num_prefix_tokens = non_negative_int(num_prefix_tokens, "num_prefix_tokens")
    if method not in _RESIZE_METHODS:
        raise ValueError(f"method must be one of {_RESIZE_METHODS}; got {method!r}")
    table, batched = _as_table(table)
    length, dim = table.shape
    if length != num_prefix_tokens + old_rows * old_cols:
        raise ValueError(
            f"a table of {length} rows does not hold {num_prefix_tokens} prefix token(s) and "
            f"an old_grid of {old_rows}x{old_cols} = {old_rows * old_cols} patches"
        )
    prefix = table[:num_prefix_tokens]
    # (rows * cols, dim) -> (1, rows, cols, dim): row-major, as patches are flattened.
    grid = ops.reshape(ops.cast(table[num_prefix_tokens:], "float32"),
                       (1, old_rows, old_cols, dim))
    resized = ops.image.resize(grid, (new_rows, new_cols), interpolation=method,
                               antialias=False, data_format="channels_last")
    resized = ops.cast(ops.reshape(resized, (new_rows * new_cols, dim)), table.dtype)
    out = ops.concatenate([prefix, resized], axis=0)
    return ops.expand_dims(out, 0) if batched else out


@keras.saving.register_keras_serializable(package="zoo")
class PositionEmbedding(keras.layers.Layer):
    """A learned `(sequence_length, dim)` table of absolute position embeddings.

    The feature dimension is taken from the inputs when the layer builds. The weight is named
    "position_embeddings" (optimizers may exclude it from weight decay by that name).

    Args:
        sequence_length: the largest number of positions the layer serves.
        initializer: the table's initializer; a truncated normal with standard deviation
            0.02 (as in BERT and ViT) when None.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a tensor `(batch, length, dim)` (or `(length, dim)`), usually the token or
            patch embeddings the result is added to; only its shape is used.
        start_index: the position of the first element of `inputs`: a Python int or a scalar
            integer tensor (for one-token-at-a-time decoding). A tensor cannot be checked:
            past the end of the table JAX clamps the slice, TensorFlow raises at run time.

    Returns:
        Rows `start_index .. start_index + length - 1` of the table, broadcast to the shape
        of `inputs`, in the layer's compute dtype.

    Example:
    >>> import numpy as np
    >>> layer = PositionEmbedding(sequence_length=16)
    >>> tuple(layer(np.zeros((2, 10, 4), "float32")).shape)
    (2, 10, 4)
    """

    def __init__(
        self,
        sequence_length: int,
        initializer: str | keras.initializers.Initializer | dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sequence_length = positive_int(sequence_length, "sequence_length")
        if initializer is None:
            initializer = keras.initializers.TruncatedNormal(stddev=0.02)
        self.initializer = keras.initializers.get(initializer)
        # A padding mask on the embeddings applies unchanged to their positions.
        self.supports_masking = True

    def _check_length(self, length: Any, start_index: Any = 0) -> None:
        if length is None or not isinstance(start_index, int):
            return
        if start_index < 0 or start_index + length > self.sequence_length:
            raise ValueError(
                f"inputs of length {length} starting at position {start_index} do not fit "
                f"a position embedding of sequence_length {self.sequence_length}"
            )

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(
                "PositionEmbedding expects inputs of shape (batch, length, dim) with a known "
                f"dim; got shape {tuple(input_shape)}"
            )
        self._check_length(input_shape[-2])
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def call(self, inputs: Any, start_index: Any = 0) -> Any:
        self._check_length(inputs.shape[-2], start_index)
        shape = ops.shape(inputs)
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        rows = ops.slice(table, (ops.cast(start_index, "int32"), 0), (shape[-2], shape[-1]))
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)

    def resized(
        self,
        sequence_length: int | None = None,
        *,
        old_grid: tuple[int, int] | None = None,
        new_grid: tuple[int, int] | None = None,
        num_prefix_tokens: int = 1,
        method: str = "bicubic",
    ) -> "PositionEmbedding":
        """A new, built layer whose table is this one interpolated to a new length or grid.

        Without `new_grid`, the whole table is linearly interpolated to `sequence_length`
        rows (`interpolate_position_embedding`). With `new_grid`, it is treated as a ViT
        table of `num_prefix_tokens` rows then an `old_grid` of patches
        (`interpolate_position_embedding_2d`); `old_grid` defaults to the square grid that
        fills the table, and `sequence_length`, if given, must equal the new table's length.

        Args:
            sequence_length: the new length (1-D case), or a check of it (2-D case).
            old_grid: `(rows, cols)` of the current patch grid.
            new_grid: `(rows, cols)` of the patch grid wanted.
            num_prefix_tokens: leading rows kept unchanged (the class token).
            method: interpolation of the 2-D case (`keras.ops.image.resize` names).

        Returns:
            A `PositionEmbedding` with the same config but the new `sequence_length`.

        Raises:
            ValueError: if this layer is not built yet, or the sizes do not fit.

        Example:
        >>> import numpy as np
        >>> layer = PositionEmbedding(sequence_length=1 + 8 * 8)
        >>> _ = layer(np.zeros((1, 65, 16), "float32"))          # built at 32 px, patch 4
        >>> bigger = layer.resized(new_grid=(16, 16))            # for 64 px images
        >>> bigger.sequence_length
        257
        """
        if not self.built:
            raise ValueError("PositionEmbedding.resized needs a built layer (call it once)")
        table = ops.convert_to_tensor(self.position_embeddings)
        if new_grid is None:
            if old_grid is not None:
                raise ValueError(f"old_grid={old_grid!r} was given without a new_grid")
            if sequence_length is None:
                raise ValueError("give the new sequence_length or a new_grid")
            new_table = interpolate_position_embedding(table, sequence_length)
        else:
            if old_grid is None:
                side = math.isqrt(max(self.sequence_length - num_prefix_tokens, 0))
                if side * side + num_prefix_tokens != self.sequence_length:
                    raise ValueError(
                        f"sequence_length {self.sequence_length} minus {num_prefix_tokens} "
                        "prefix token(s) is not a square grid; pass old_grid=(rows, cols)"
                    )
                old_grid = (side, side)
            new_table = interpolate_position_embedding_2d(
                table, old_grid, new_grid, num_prefix_tokens=num_prefix_tokens, method=method
            )
            if sequence_length is not None and sequence_length != new_table.shape[0]:
                raise ValueError(
                    f"sequence_length {sequence_length} does not match new_grid {new_grid!r} "
                    f"with {num_prefix_tokens} prefix token(s) ({new_table.shape[0]} rows)"
                )
        new_length, dim = new_table.shape
        layer = type(self).from_config({**self.get_config(), "sequence_length": new_length})
        layer.build((None, new_length, dim))
        layer.position_embeddings.assign(ops.cast(new_table, layer.variable_dtype))
        return layer

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        })
        return config
