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

The "vgg" style is the stage of VGG (Simonyan & Zisserman, 2015) as the fast CIFAR-10 networks
use it (Page's ResNet-9, 2018; Jordan's airbench, 2024): one or more stride-1 3 x 3
convolutions, each with batch norm and ReLU, then a 2 x 2 max pooling of stride 2. It gives
the hybrid a deeper, batch-normalised feature map at a cost a CPU can train.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras

from .validation import positive_int

STYLES = ("strided", "pooled", "vgg")


@keras.saving.register_keras_serializable(package="zoo")
class ConvolutionalStem(keras.layers.Layer):
    """3 x 3 convolutions that each halve the height and width.

    `style="strided"` (Xiao et al.): a stride-2 convolution, batch norm, ReLU.
    `style="pooled"` (CCT's tokenizer): a stride-1 convolution, ReLU, 3 x 3 max pooling of
    stride 2 ("same" padding).
    `style="vgg"`: stride-1 convolutions, each with batch norm and ReLU, then a 2 x 2 max
    pooling of stride 2; a stage may hold several convolutions (`filters=[64, [128, 128]]`).
    Either way `len(filters)` stages downsample by `2 ** len(filters)`.

    Args:
        filters: output channels of each stage's convolution, first to last (at least one);
            with `style="vgg"` a stage may instead be a list of its convolutions' channels.
        style: "strided", "pooled" or "vgg".
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: images or feature maps `(batch, height, width, channels)`, channels last;
            height and width multiples of `2 ** len(filters)`.
        training: whether batch norm uses the batch's statistics (and updates its moving
            averages).

    Returns:
        `(batch, height / 2**k, width / 2**k, c)`, `c` the last convolution's channels.

    Example:
    >>> import numpy as np
    >>> stem = ConvolutionalStem(filters=(16, 32))
    >>> tuple(stem(np.zeros((2, 32, 32, 3), "float32")).shape)
    (2, 8, 8, 32)
    """

    def __init__(self, filters: Sequence[int | Sequence[int]], style: str = "strided",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}; got {style!r}")
        self.style = style
        self.filters = _checked_filters(filters, stages_of_several=style == "vgg")
        # One list per stage of its convolutions' channels.
        stages = [f if isinstance(f, list) else [f] for f in self.filters]
        channels = [f for stage in stages for f in stage]
        self._per_stage = [len(stage) for stage in stages]
        pooled = style == "pooled"
        self.convolutions = [
            keras.layers.Conv2D(f, 3, strides=2 if style == "strided" else 1, padding="same",
                                use_bias=False, dtype=self.dtype_policy, name=f"convolution_{i}")
            for i, f in enumerate(channels)]
        # Strided and vgg: batch norm after each convolution; pooled: none.
        self.normalizations = [] if pooled else [
            keras.layers.BatchNormalization(dtype=self.dtype_policy, name=f"batch_norm_{i}")
            for i in range(len(channels))]
        self.poolings = [] if style == "strided" else [
            keras.layers.MaxPooling2D(3 if pooled else 2, strides=2, padding="same",
                                      dtype=self.dtype_policy, name=f"max_pooling_{i}")
            for i in range(len(stages))]

    @property
    def stride(self) -> int:
        """How much the stem downsamples each side."""
        return 2 ** len(self.filters)

    def _steps(self) -> list[tuple[Any, Any, Any]]:
        """(convolution, its batch norm or None, the stage's max pooling or None) in order; the
        pooling is given with the last convolution of its stage."""
        steps, index = [], 0
        for stage, count in enumerate(self._per_stage):
            for last in [False] * (count - 1) + [True]:
                steps.append((self.convolutions[index],
                              self.normalizations[index] if self.normalizations else None,
                              self.poolings[stage] if self.poolings and last else None))
                index += 1
        return steps

    def build(self, input_shape: tuple) -> None:
        shape = tuple(input_shape)
        for step in self._steps():
            for layer in step:
                if layer is not None:
                    layer.build(shape)
                    shape = tuple(layer.compute_output_shape(shape))
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        x = inputs
        for convolution, normalization, pooling in self._steps():
            x = convolution(x)
            if normalization is not None:
                x = normalization(x, training=training)
            x = keras.activations.relu(x)
            if pooling is not None:
                x = pooling(x)
        return x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        shape = tuple(input_shape)
        for step in self._steps():
            for layer in step:
                if layer is not None:
                    shape = tuple(layer.compute_output_shape(shape))
        return shape

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"filters": list(self.filters), "style": self.style})
        return config


def _checked_filters(filters: Any, stages_of_several: bool) -> list:
    """`filters` as a list of positive ints (where stages may hold several convolutions, some
    may be non-empty lists of them); a one-line ValueError naming the value otherwise."""
    def is_list(value: Any) -> bool:
        return isinstance(value, (list, tuple))

    if not is_list(filters) or not filters:
        raise ValueError(f"filters must be a non-empty list of positive ints; got {filters!r}")
    if not stages_of_several:
        return [positive_int(f, "each of filters") for f in filters]
    if any(is_list(f) and not f for f in filters):
        raise ValueError(f"each stage of filters must hold at least one convolution; got "
                         f"{filters!r}")
    return [[positive_int(f, "each of filters") for f in stage] if is_list(stage)
            else positive_int(stage, "each of filters") for stage in filters]
