"""A convolutional stem for the hybrid Vision Transformer.

The ViT paper's hybrid model (Dosovitskiy et al., 2021, section 3.1) cuts a CNN's feature map,
not the raw image, into patches. Xiao et al. (2021, "Early Convolutions Help Transformers See
Better") replace the ViT's patchify layer by a few stride-2 3 x 3 convolutions with batch norm
and ReLU, followed by a 1 x 1 projection (here: the `PatchEmbedding` that follows the stem),
and report steadier and better training at the same cost.

The "pooled" style is the tokenizer of the Compact Convolutional Transformer (Hassani et al.,
2021, section 3.3): each 3 x 3 convolution keeps the size (stride 1, no bias), then ReLU and a
3 x 3 max pooling of stride 2 halve it; no batch norm, so training and inference compute the
same function from the first step.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras

from .validation import positive_int

STYLES = ("strided", "pooled")


@keras.saving.register_keras_serializable(package="zoo")
class ConvolutionalStem(keras.layers.Layer):
    """3 x 3 convolutions that each halve the height and width.

    `style="strided"` (Xiao et al.): a stride-2 convolution, batch norm, ReLU.
    `style="pooled"` (CCT's tokenizer): a stride-1 convolution, ReLU, 3 x 3 max pooling of
    stride 2 ("same" padding). Either way `len(filters)` stages downsample by
    `2 ** len(filters)`.

    Args:
        filters: output channels of each convolution, first to last (at least one).
        style: "strided" or "pooled".
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

    def __init__(self, filters: Sequence[int], style: str = "strided", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}; got {style!r}")
        self.style = style
        pooled = style == "pooled"
        if isinstance(filters, (str, bytes)) or not isinstance(filters, (list, tuple)) or (
                not filters):
            raise ValueError(f"filters must be a non-empty list of positive ints; got "
                             f"{filters!r}")
        self.filters = [positive_int(f, "each of filters") for f in filters]
        self.convolutions = [
            keras.layers.Conv2D(f, 3, strides=1 if pooled else 2, padding="same",
                                use_bias=False, dtype=self.dtype_policy, name=f"convolution_{i}")
            for i, f in enumerate(self.filters)]
        # Strided: batch norm after each convolution; pooled: max pooling after its ReLU.
        self.normalizations = [] if pooled else [
            keras.layers.BatchNormalization(dtype=self.dtype_policy, name=f"batch_norm_{i}")
            for i in range(len(self.filters))]
        self.poolings = [
            keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=self.dtype_policy,
                                      name=f"max_pooling_{i}")
            for i in range(len(self.filters))] if pooled else []

    @property
    def stride(self) -> int:
        """How much the stem downsamples each side."""
        return 2 ** len(self.filters)

    def _stages(self) -> list[tuple[Any, Any]]:
        """(convolution, batch norm or max pooling) per stage."""
        return list(zip(self.convolutions, self.poolings or self.normalizations))

    def build(self, input_shape: tuple) -> None:
        shape = tuple(input_shape)
        for convolution, second in self._stages():
            convolution.build(shape)
            shape = tuple(convolution.compute_output_shape(shape))
            second.build(shape)
            shape = tuple(second.compute_output_shape(shape))
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        x = inputs
        for convolution, second in self._stages():
            if self.poolings:
                x = second(keras.activations.relu(convolution(x)))
            else:
                x = keras.activations.relu(second(convolution(x), training=training))
        return x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        shape = tuple(input_shape)
        for convolution, second in self._stages():
            shape = tuple(second.compute_output_shape(convolution.compute_output_shape(shape)))
        return shape

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"filters": list(self.filters), "style": self.style})
        return config
