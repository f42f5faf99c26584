"""The position-wise feed-forward network, eq. (3) of "Attention Is All You Need"."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from .initializers import clone_initializer
from .validation import positive_int
from .xla_fusion import fused_chain


_SQRT_HALF = 0.7071067811865476
_INVERSE_SQRT_TWO_PI = 0.3989422804014327


def _plain_gelu(x: Any) -> Any:
    if keras.backend.standardize_dtype(x.dtype) == "bfloat16":
        return ops.cast(_plain_gelu(ops.cast(x, "float32")), "bfloat16")
    return 0.5 * x * (1.0 + ops.erf(x * _SQRT_HALF))


def _gelu_forward(x: Any) -> tuple:
    return (_plain_gelu(x),)


def _gelu_backward(upstream: Any, x: Any) -> tuple:
    import tensorflow as tf

    wide = tf.cast(x, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(wide * _SQRT_HALF))
    pdf = tf.exp(-0.5 * tf.square(wide)) * _INVERSE_SQRT_TWO_PI
    return (tf.cast(tf.cast(upstream, tf.float32) * (cdf + wide * pdf), x.dtype),)


_fused_gelu = fused_chain(_gelu_forward, _gelu_backward, _plain_gelu)


def exact_gelu(x: Any) -> Any:
    """The exact GELU, x * Phi(x), written `0.5 * x * (1 + erf(x / sqrt(2)))`.

    The same function as `keras.activations.gelu(x, approximate=False)` (to float rounding,
    and within 1e-6 of it where the two forms differ most, x far below zero), in the form
    PyTorch and JAX use. TensorFlow's `tf.nn.gelu` writes it with `erfc`, whose kernel is not
    vectorized on a CPU: the ViT-tiny train step ran faster with `erf` (docs/performance-log.md,
    2026-11-25, "... and GELU in its `erf` form").

    Example:
    >>> import numpy as np
    >>> np.round(np.asarray(exact_gelu(np.array([-1.0, 0.0, 2.0], "float32"))), 4)
    array([-0.1587,  0.    ,  1.9545], dtype=float32)

    A bfloat16 `x` is computed in float32 and the result rounded to bfloat16 once: TensorFlow's
    CPU kernels for bfloat16 arithmetic are slower than its float32 ones, and this function's
    forward and backward are about ten passes over the widest activation of a block (figures:
    docs/performance-log.md, 2026-11-29). In TensorFlow's train, predict and test steps its
    forward and its backward each run as one XLA-compiled loop, casts included
    (`zoo.layers.xla_fusion`); elsewhere, exports included, as plain ops.
    """
    return _fused_gelu(x)


@keras.saving.register_keras_serializable(package="zoo")
def quick_gelu(x: Any) -> Any:
    """OpenAI CLIP's GELU approximation, `x * sigmoid(1.702 x)`; `activation="quick_gelu"`.

    Example:
    >>> import numpy as np
    >>> np.round(np.asarray(quick_gelu(np.array([-1.0, 0.0, 2.0], "float32"))), 3)
    array([-0.154,  0.   ,  1.936], dtype=float32)
    """
    return x * ops.sigmoid(1.702 * x)


def get_activation(activation: Any) -> Any:
    """`keras.activations.get`, which also knows "quick_gelu" (not a Keras activation)."""
    return quick_gelu if activation == "quick_gelu" else keras.activations.get(activation)


def _erf_form(activation: Any) -> Any:
    """`exact_gelu` in place of Keras's exact GELU; any other activation as it is."""
    if activation is keras.activations.gelu:
        return exact_gelu
    return activation


@keras.saving.register_keras_serializable(package="zoo")
class FeedForward(keras.layers.Layer):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied to every position alike.

    Args:
        intermediate_dim: width of the hidden layer (d_ff, 2048 in the paper).
        activation: "relu" (the paper), "gelu" (ViT, BERT), "quick_gelu" (CLIP), or any
            Keras activation.
        dropout: dropout rate after the activation (ViT's MLP dropout; 0 in the paper).
        kernel_initializer: initializer for both kernels.
        bias_initializer: initializer for both biases.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        training: whether dropout is active.

    Returns:
        `(batch, length, d_model)`.

    Example:
    >>> import numpy as np
    >>> ffn = FeedForward(intermediate_dim=32, activation="gelu")
    >>> tuple(ffn(np.zeros((2, 5, 8), "float32")).shape)
    (2, 5, 8)
    """

    def __init__(self, intermediate_dim: int, activation: str = "relu", dropout: float = 0.0,
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.intermediate_dim = positive_int(intermediate_dim, "intermediate_dim")
        self.activation = get_activation(activation)
        self.dropout = float(dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, inputs_shape: tuple) -> None:
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim, activation=_erf_form(self.activation),
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy, name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            inputs_shape[-1],
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy, name="output",
        )
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.intermediate_dense.build(inputs_shape)
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        hidden = self.dropout_layer(self.intermediate_dense(inputs), training=training)
        return self.output_dense(hidden)

    def compute_output_shape(self, inputs_shape: tuple) -> tuple:
        return tuple(inputs_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "intermediate_dim": self.intermediate_dim,
            "activation": keras.activations.serialize(self.activation),
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        })
        return config

