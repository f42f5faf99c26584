"""An `EinsumDense` layer applied as one 2-D matrix product.

On TensorFlow the layer's own call is a batched product with the kernel broadcast over the
batch, and its kernel gradient a batched product summed over the batch; `project` is one
`MatMul` each way, on the same weights, and faster (the ViT-tiny train step's four attention
projections: docs/performance-log.md, 2026-11-25, "Attention's projections as 2-D
products"). An int8 layer whose route widens its weights (`layers/int8_route.py`: TensorFlow
without XLA) takes the same single product against its widened kernel: Keras' int8 call
would run the batched product, which made the exported int8 `vit-cifar10` slower than
float32 at batch 32 (docs/performance-log.md, 2026-11-26, "An int8 layer's widened kernel in
one product").
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops

from .keras_internals import int8_inputs_quantized


def project(dense: keras.layers.EinsumDense, x: Any, input_axes: int = 1) -> Any:
    """`dense(x)` as one 2-D matrix product: x's last `input_axes` axes against the kernel's
    first ones, every leading axis of x folded into the rows.

    The same numbers as the `EinsumDense` call, to float rounding. An int8 layer whose input
    quantizer is off here (the zoo's route on TensorFlow without XLA,
    `layers/int8_route.py`) multiplies by its kernel widened to float and divided by its
    per-channel scales, Keras' own weight-only int8 numbers; any other quantized layer (int8
    products, LoRA on an int8 kernel, other modes) runs its own call.

    Args:
        dense: a built `EinsumDense` whose equation contracts x's last `input_axes` axes
            with the kernel's first ones and keeps the kernel's other axes, in order.
        x: the input.
        input_axes: how many trailing axes of x the kernel contracts.

    Returns:
        `dense(x)`: x's leading axes, then the kernel's remaining ones.

    Example:
    >>> import numpy as np
    >>> dense = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 3))
    >>> dense.build((1, 4, 5))
    >>> x = np.random.default_rng(0).normal(size=(1, 4, 5)).astype("float32")
    >>> bool(np.allclose(project(dense, x), dense(x), atol=1e-6))
    True
    """
    if dense.quantization_mode is None:
        # In the layer's compute dtype also outside its call (a cache computed by the search,
        # where no autocast scope casts the float32 variables of a mixed-precision policy):
        # a bfloat16 input against a float32 kernel would be promoted to a float32 product.
        kernel, scale = ops.cast(dense.kernel, dense.compute_dtype), None
    elif _widens_int8_weights(dense):
        kernel = ops.cast(dense._kernel, dense.compute_dtype)
        scale = _output_scale(dense, math.prod(kernel.shape[input_axes:]))
    else:
        return dense(x)
    fan_in = math.prod(kernel.shape[:input_axes])
    out_shape = tuple(kernel.shape[input_axes:])
    leading = tuple(ops.shape(x)[:-input_axes])
    y = ops.matmul(ops.reshape(x, (-1, fan_in)), ops.reshape(kernel, (fan_in, -1)))
    if scale is not None:
        y = y / scale
    if dense.bias is None:
        return ops.reshape(y, leading + out_shape)
    bias = ops.cast(dense.bias, y.dtype)
    if _bias_apart(y):
        return ops.reshape(y, leading + out_shape) + ops.reshape(bias, out_shape)
    return ops.reshape(y + ops.reshape(bias, (-1,)), leading + out_shape)


def _bias_apart(y: Any) -> bool:
    """Whether `project` adds the bias after the reshape, apart from the product: bfloat16 on
    TensorFlow. TensorFlow fuses a 2-D product and the bias added to it into one oneDNN inner
    product, whose bfloat16 kernel is a generic one where the plain product runs on AMX
    (`python -m zoo.bench.kernels`); the reshape between them keeps the two apart. In float32
    the fused product is as fast, and XLA (JAX) fuses either form."""
    return (keras.backend.backend() == "tensorflow"
            and keras.backend.standardize_dtype(y.dtype) == "bfloat16")


def _widens_int8_weights(dense: keras.layers.EinsumDense) -> bool:
    """Whether `dense` is int8 and, in the computation traced now, multiplies float inputs by
    its widened kernel instead of quantizing them."""
    return (dense.quantization_mode == "int8" and not dense.lora_enabled
            and not int8_inputs_quantized(dense))


def _output_scale(dense: keras.layers.EinsumDense, outputs: int) -> Any:
    """The int8 kernel's scales as one row, an entry per output column of the 2-D product.
    Keras keeps one scale per output (shaped to broadcast against the layer's output), in
    the order of the kernel's kept axes. The outputs are divided by it, not the kernel: a
    decoding step has far fewer rows than the kernel has."""
    if math.prod(dense.kernel_scale.shape) != outputs:
        raise ValueError(f"{dense.name}: {tuple(dense.kernel_scale.shape)} int8 scales for "
                         f"{outputs} outputs; expected one scale per output")
    return ops.cast(ops.reshape(dense.kernel_scale, (outputs,)), dense.compute_dtype)
