"""Layer normalization over the last axis, with its gradient written out."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from .xla_fusion import fused_forward


def _normalize_last_axis(x: Any, gamma: Any, beta: Any, epsilon: float) -> Any:
    """`(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last axis of `x`, with the
    closed-form gradient. All arguments in one float dtype."""

    @ops.custom_gradient
    def normalize(x: Any, gamma: Any, beta: Any) -> tuple:
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        inverse = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
        normalized = centered * inverse

        def grad(*args: Any, upstream: Any = None) -> tuple:
            if upstream is None:
                (upstream,) = args
            rows = tuple(range(len(upstream.shape) - 1))
            scaled = upstream * gamma
            # d/dx of (x - mean) * inverse, applied to `scaled`: the part along the mean and
            # the part along the normalized vector removed, then rescaled.
            d_x = inverse * (
                scaled - ops.mean(scaled, axis=-1, keepdims=True)
                - normalized * ops.mean(scaled * normalized, axis=-1, keepdims=True))
            return (d_x, ops.sum(upstream * normalized, axis=rows),
                    ops.sum(upstream, axis=rows))

        return normalized * gamma + beta, grad

    return normalize(x, gamma, beta)


def _in_dtype(x: Any, gamma: Any, beta: Any, epsilon: Any, dtype: str) -> Any:
    """`_normalize_last_axis` of `x` computed in `gamma`'s dtype, returned in `dtype`."""
    return ops.cast(_normalize_last_axis(ops.cast(x, gamma.dtype), gamma, beta, epsilon), dtype)


_normalize = fused_forward(_in_dtype)


@keras.saving.register_keras_serializable(package="zoo")
class LayerNormalization(keras.layers.LayerNormalization):
    """Keras's `LayerNormalization`, faster where it normalizes the last axis on TensorFlow.

    The same layer, weights and config as `keras.layers.LayerNormalization`. On the
    TensorFlow backend, with `axis=-1`, `center` and `scale` on and no `rms_scaling` (the
    Transformer's LayerNorm), it computes the same function in fewer passes over the tensor
    and gives TensorFlow the gradient in closed form instead of the differentiated chain of
    `moments`: faster, forward and backward, on a ViT-tiny train batch
    (`benchmarks/layer_norm.py`; docs/benchmarks.md, "LayerNorm"). Like Keras's, it computes
    in float32 under a mixed-precision policy and returns the compute dtype. In Keras' predict
    and test steps it runs as one XLA-compiled chain (`zoo.layers.xla_fusion.fused_forward`).
    Other backends (whose compilers fuse the chain) and other settings run Keras's call.

    Example:
    >>> import numpy as np
    >>> norm = LayerNormalization(epsilon=1e-6)
    >>> np.round(np.asarray(norm(np.array([[1.0, 2.0, 3.0]], "float32"))), 4)
    array([[-1.2247,  0.    ,  1.2247]], dtype=float32)
    """

    def build(self, input_shape: tuple) -> None:
        super().build(input_shape)
        self._closed_form = (
            keras.backend.backend() == "tensorflow" and self.center and self.scale
            and not self.rms_scaling and self.axis in ([-1], [len(input_shape) - 1]))

    def call(self, inputs: Any) -> Any:
        if not self._closed_form:
            return super().call(inputs)
        wide = keras.backend.result_type(inputs.dtype, "float32")
        return _normalize(inputs, ops.cast(self.gamma, wide), ops.cast(self.beta, wide),
                          ops.convert_to_tensor(self.epsilon, wide), self.compute_dtype)
