"""The fixed sinusoidal position encoding of "Attention Is All You Need", section 3.5.

    PE(pos, 2i)     = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

Sines and cosines are interleaved as in the paper by default (`layout="interleaved"`): even
feature indices hold sines, odd ones cosines. Some libraries (tensor2tensor, Marian and the
Hugging Face port of its OPUS-MT models) concatenate all sines before all cosines instead:
`layout="concatenated"` gives that table, `[sin(pos * w_0 .. w_{d/2-1}), cos(pos * w_0 ..)]`
with the same wavelengths, so that such checkpoints compute as they were trained.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

LAYOUTS = ("interleaved", "concatenated")


def _check_layout(layout: Any) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    return layout


def _check_d_model(d_model: Any) -> None:
    if d_model is None:
        raise ValueError(
            "the sinusoidal position encoding needs a known feature dimension (d_model); "
            "got None"
        )
    if int(d_model) <= 0 or int(d_model) % 2:
        raise ValueError(
            "the sinusoidal position encoding needs an even, positive feature dimension "
            f"(d_model) to interleave sines and cosines; got d_model={d_model}"
        )


def sinusoidal_position_encoding(
    length: Any,
    d_model: int,
    start_index: Any = 0,
    max_wavelength: float = 10000.0,
    layout: str = "interleaved",
) -> Any:
    """The `(length, d_model)` sinusoidal encoding of positions `start_index, ...`.

    Args:
        length: the number of positions (an int, or a scalar tensor inside a graph).
        d_model: the feature dimension; must be even.
        start_index: the position of the first row (an int or a scalar integer tensor), as
            when a decoder encodes one new token at a time.
        max_wavelength: the base of the geometric progression of wavelengths (10000 in the
            paper).
        layout: "interleaved" (sin at 2i, cos at 2i + 1; the paper) or "concatenated" (all
            sines, then all cosines; Marian / OPUS-MT).

    Returns:
        A float32 tensor of shape `(length, d_model)` whose row `r` encodes position
        `start_index + r`.

    Raises:
        ValueError: if `d_model` is odd or not positive, `max_wavelength` is not positive or
            `layout` is unknown.

    Example:
    >>> table = sinusoidal_position_encoding(4, 8)
    >>> round(float(table[1, 0]), 6), round(float(table[1, 1]), 6)  # sin(1), cos(1)
    (0.841471, 0.540302)
    """
    _check_d_model(d_model)
    _check_layout(layout)
    if max_wavelength <= 0:
        raise ValueError(f"max_wavelength must be positive; got {max_wavelength}")
    d_model = int(d_model)
    # Positions and angles in float32 whatever the compute dtype: in float16 a position
    # above 2048 is no longer exact, and sin(pos * w) of a rounded angle is noise.
    positions = ops.cast(ops.arange(length), "float32") + ops.cast(start_index, "float32")
    two_i = ops.arange(0, d_model, 2, dtype="float32")
    inverse_wavelengths = ops.power(
        ops.convert_to_tensor(float(max_wavelength), "float32"), -two_i / float(d_model)
    )
    angles = ops.expand_dims(positions, -1) * ops.expand_dims(inverse_wavelengths, 0)
    if layout == "concatenated":
        # (length, d_model): sines at 0 .. d/2 - 1, cosines at d/2 .. d - 1.
        return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
    # (length, d_model / 2, 2) -> (length, d_model): sin at 2i, cos at 2i + 1.
    interleaved = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)
    return ops.reshape(interleaved, (-1, d_model))


@keras.saving.register_keras_serializable(package="zoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Returns the fixed sinusoidal position encoding for a sequence of embeddings.

    The layer has no weights. It returns the encoding, not the sum, so that the caller
    decides how to combine it (`x + encoding(x)`, usually after scaling `x`).

    Args:
        max_wavelength: the base of the wavelengths' geometric progression (10000 in the
            paper).
        layout: "interleaved" (the paper; the default) or "concatenated" (all sines, then
            all cosines, as in Marian / OPUS-MT).
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a float tensor `(batch, sequence_length, d_model)` (or `(sequence_length,
            d_model)`); only its shape and dtype are used.
        start_index: the position of the first element of `inputs`: a Python int or a scalar
            integer tensor (for a decoder that feeds one token at a time inside a compiled
            loop).

    Returns:
        The encoding of positions `start_index .. start_index + sequence_length - 1`,
        broadcast to the shape of `inputs` and in its dtype (computed in float32).

    Example:
    >>> import numpy as np
    >>> x = np.zeros((2, 5, 16), "float32")
    >>> tuple(SinusoidalPositionEncoding()(x).shape)
    (2, 5, 16)
    """

    def __init__(self, max_wavelength: float = 10000.0, layout: str = "interleaved",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_wavelength <= 0:
            raise ValueError(f"max_wavelength must be positive; got {max_wavelength}")
        self.max_wavelength = max_wavelength
        self.layout = _check_layout(layout)
        # A padding mask on the embeddings applies unchanged to their encoding.
        self.supports_masking = True

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) < 2:
            raise ValueError(
                "SinusoidalPositionEncoding expects inputs of shape (batch, sequence_length, "
                f"d_model); got shape {tuple(input_shape)}"
            )
        _check_d_model(input_shape[-1])
        self.built = True

    def call(self, inputs: Any, start_index: Any = 0) -> Any:
        shape = ops.shape(inputs)
        encoding = sinusoidal_position_encoding(
            shape[-2], inputs.shape[-1], start_index=start_index,
            max_wavelength=self.max_wavelength, layout=self.layout,
        )
        return ops.broadcast_to(ops.cast(encoding, inputs.dtype), shape)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "layout": self.layout})
        return config
