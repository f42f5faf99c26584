"""A convolutional stem for the hybrid Vision Transformer.

The ViT paper's hybrid model (Dosovitskiy et al., 2021, section 3.1) cuts a CNN's feature map,
not the raw image, into patches. Xiao et al. (2021, "Early Convolutions Help Transformers See
Better") replace the ViT's patchify layer by a few stride-2 3 x 3 convolutions with batch norm
and ReLU, followed by a 1 x 1 projection (here: the `PatchEmbedding` that follows the stem),
and report steadier and better training at the same cost.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras

from .validation import positive_int


@keras.saving.register_keras_serializable(package="zoo")
class ConvolutionalStem(keras.layers.Layer):
    """Stride-2 3 x 3 convolutions, each followed by batch norm and ReLU.

    Every convolution halves the height and width, so `len(filters)` of them downsample by
    `2 ** len(filters)`.

    Args:
        filters: output channels of each convolution, first to last (at least one).
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: images or feature maps `(batch, height, width, channels)`, channels last;
            height and width multiples of `2 ** len(filters)`.
        training: whether batch norm uses the batch's statistics (and updates its moving
            averages).

    Returns:
        `(batch, height / 2**k, width / 2**k, filters[-1])`.

    Example:
    >>> import numpy as np
    >>> stem = ConvolutionalStem(filters=(16, 32))
    >>> tuple(stem(np.zeros((2, 32, 32, 3), "float32")).shape)
    (2, 8, 8, 32)
    """

    def __init__(self, filters: Sequence[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(filters, (str, bytes)) or not isinstance(filters, (list, tuple)) or (
                not filters):
            raise ValueError(f"filters must be a non-empty list of positive ints; got "
                             f"{filters!r}")
        self.filters = [positive_int(f, "each of filters") for f in filters]
        self.convolutions = [
            keras.layers.Conv2D(f, 3, strides=2, padding="same", use_bias=False,
                                dtype=self.dtype_policy, name=f"convolution_{i}")
            for i, f in enumerate(self.filters)]
        self.normalizations = [
            keras.layers.BatchNormalization(dtype=self.dtype_policy, name=f"batch_norm_{i}")
            for i in range(len(self.filters))]

    @property
    def stride(self) -> int:
        """How much the stem downsamples each side."""
        return 2 ** len(self.filters)

    def build(self, input_shape: tuple) -> None:
        shape = tuple(input_shape)
        for convolution, normalization in zip(self.convolutions, self.normalizations):
            convolution.build(shape)
            shape = tuple(convolution.compute_output_shape(shape))
            normalization.build(shape)
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        x = inputs
        for convolution, normalization in zip(self.convolutions, self.normalizations):
            x = keras.activations.relu(normalization(convolution(x), training=training))
        return x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        shape = tuple(input_shape)
        for convolution in self.convolutions:
            shape = tuple(convolution.compute_output_shape(shape))
        return shape

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"filters": list(self.filters)})
        return config
