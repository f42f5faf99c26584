"""An `EinsumDense` layer applied as one 2-D matrix product.

On TensorFlow the layer's own call is a batched product with the kernel broadcast over the
batch, and its kernel gradient a batched product summed over the batch; `project` is one
`MatMul` each way, on the same weights (the ViT-tiny train step's four attention projections:
599 -> 357 thread-ms a step on a 2-core CPU).
"""

from __future__ import annotations

import math
from typing import Any

import keras
from keras import ops


def project(dense: keras.layers.EinsumDense, x: Any, input_axes: int = 1) -> Any:
    """`dense(x)` as one 2-D matrix product: x's last `input_axes` axes against the kernel's
    first ones, every leading axis of x folded into the rows.

    The same numbers as the `EinsumDense` call, to float rounding. A quantized layer
    (`model.quantize(...)`: an integer kernel and its scales) runs its own call, on the
    route its input quantizer picks (`layers/int8_route.py`).

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
    if dense.quantization_mode is not None:
        return dense(x)
    kernel = dense.kernel
    fan_in = math.prod(kernel.shape[:input_axes])
    out_shape = tuple(kernel.shape[input_axes:])
    leading = tuple(ops.shape(x)[:-input_axes])
    y = ops.matmul(ops.reshape(x, (-1, fan_in)), ops.reshape(kernel, (fan_in, -1)))
    if dense.bias is not None:
        y = y + ops.reshape(dense.bias, (-1,))
    return ops.reshape(y, leading + out_shape)
