"""Which product an int8 layer computes: int8 x int8, or float against its widened weights.

Keras' int8 `Dense` and `EinsumDense` quantize each input row on the fly and multiply int8
by int8 with int32 sums. That is the fast route on JAX, but TensorFlow's own int8 `MatMul`
kernel, which a TensorFlow graph without XLA runs (eager calls, Keras' `predict` on a CPU,
an exported SavedModel as the model server runs it), is slower than its float32 one, and
the served int8 translator was slower with int8 products than with its weights widened
(`benchmarks/int8_routes.py`, `benchmarks/serving_latency.py`; the figures: docs/benchmarks.md,
"int8 weights" and "int8 exports served"). So on TensorFlow the int8 weights are widened to
float32 at call time instead (`x @ float(q)`, then divided by the per-channel scale: Keras'
own weight-only int8 product): the weights stay int8 in the variables and the file, and only
the compute is float.

One route a backend, whatever the batch and whether XLA compiles the graph: an input's
answer must not depend on what shares its request (issue 52), and the Python translator
(whose searches XLA compiles) must give the served export's translations. Under XLA the
int8 products were faster than float32 (docs/benchmarks.md, "int8 weights"), but a search
that rounds its inputs to int8 picks other tokens than the served one on about one sentence
in five.

`int8_products_here` makes that choice, in one place; `RoutedInputQuantizer` hands it to
Keras' layers (`route_int8_layer`), and the zoo's `TokenEmbedding` asks it for its logits.
The two routes differ by the rounding of the inputs to int8 only: at most
`sum_k |x_k| / 254 * |w_k|` per output, since each input is off by at most half a step of
`max|x| / 127`. Each is batch-invariant in itself: the inputs are quantized row by row.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import keras

from .keras_internals import set_inputs_quantizer

# The layers whose `_int8_call` reads an `inputs_quantizer` (Keras 3.15).
ROUTED_LAYERS = (keras.layers.Dense, keras.layers.EinsumDense)

_forced = threading.local()


def int8_products_here() -> bool:
    """Whether an int8 layer should quantize its inputs and multiply int8 by int8 in the
    computation being traced or run now.

    True on JAX (its int8 dot is the faster one: docs/benchmarks.md, "int8 weights") and
    inside `int8_products()`; False on TensorFlow, with XLA or without, so that the Python
    model and its export compute the same numbers.

    Example:
    >>> isinstance(int8_products_here(), bool)
    True
    """
    return keras.backend.backend() != "tensorflow" or getattr(_forced, "int8", False)


@contextlib.contextmanager
def int8_products() -> Iterator[None]:
    """Within the block, every int8 layer traced or run multiplies int8 by int8, wherever it
    runs: for timing that route (`benchmarks/serving_latency.py --variant int8-products`)
    and for tests.

    Example:
    >>> with int8_products():
    ...     int8_products_here()
    True
    """
    before = getattr(_forced, "int8", False)
    _forced.int8 = True
    try:
        yield
    finally:
        _forced.int8 = before


class RoutedInputQuantizer(keras.quantizers.AbsMaxQuantizer):
    """Keras' per-row abs-max input quantizer, present only where `int8_products_here()`.

    Keras' int8 `Dense` and `EinsumDense` quantize their inputs only when their
    `inputs_quantizer` is truthy (`if self.inputs_quantizer:`, read as the call is
    traced); otherwise they multiply the inputs by the int8 kernel widened to the compute
    dtype and divide by its scale. This quantizer is truthy only where int8 products are
    the fast route, so one traced function picks its route when it is traced.
    """

    def __bool__(self) -> bool:
        return int8_products_here()


def route_int8_layer(layer: keras.layers.Layer) -> bool:
    """Lets an int8 `Dense` or `EinsumDense` choose its product by `int8_products_here`.

    Args:
        layer: any layer; only an int8 `Dense` or `EinsumDense` is changed.

    Returns:
        Whether `layer` was routed.
    """
    if not isinstance(layer, ROUTED_LAYERS) or layer.quantization_mode != "int8":
        return False
    set_inputs_quantizer(layer, RoutedInputQuantizer())
    return True
