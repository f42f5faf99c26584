"""Which product an int8 layer computes: int8 x int8, or float against its widened weights.

Keras' int8 `Dense` and `EinsumDense` quantize each input row on the fly and multiply int8
by int8 with int32 sums. That is the fast route under XLA and on JAX, but TensorFlow's own
int8 `MatMul` kernel, which a TensorFlow graph without XLA runs (eager calls, Keras' `predict`
on a CPU, an exported SavedModel as the model server runs it), is slower than its float32
one: a 1024-wide product of 256 rows took 20.4 ms in that kernel against 8.7 ms in float32,
and quantizing the inputs 1.2 ms more (`benchmarks/int8_routes.py`, 2 contended cores).
There the int8 weights are widened to float32 at call time instead (`x @ float(q)`, then
divided by the per-channel scale: Keras' own weight-only int8 product), 9.4 ms: the weights
stay int8 in the variables and the file, and only the compute is float.

`int8_products_here` makes that choice, in one place; `RoutedInputQuantizer` hands it to
Keras' layers (`route_int8_layer`), and the zoo's `TokenEmbedding` asks it for its logits.
The two routes differ by the rounding of the inputs to int8 only: at most
`sum_k |x_k| / 254 * |w_k|` per output, since each input is off by at most half a step of
`max|x| / 127`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import keras

from .keras_internals import in_xla_compiled_graph, set_inputs_quantizer

# The layers whose `_int8_call` reads an `inputs_quantizer` (Keras 3.15).
ROUTED_LAYERS = (keras.layers.Dense, keras.layers.EinsumDense)

_forced = threading.local()


def int8_products_here() -> bool:
    """Whether an int8 layer should quantize its inputs and multiply int8 by int8 in the
    computation being traced or run now.

    True on JAX (its int8 dot is the faster one: 1.1 ms against 1.9 ms float32 for 32
    rows of a 1024-wide product) and inside a TensorFlow function that XLA compiles (the
    translator's searches: 1.4 ms against 3.1 ms); False on TensorFlow without XLA (eager,
    `predict` on a CPU, an exported SavedModel), where the widened weights are faster.

    Example:
    >>> isinstance(int8_products_here(), bool)
    True
    """
    if keras.backend.backend() != "tensorflow" or getattr(_forced, "int8", False):
        return True
    return in_xla_compiled_graph()


@contextlib.contextmanager
def int8_products() -> Iterator[None]:
    """Within the block, every int8 layer traced or run multiplies int8 by int8, wherever it
    runs: for a graph that knows its products are small. A TensorFlow graph without XLA that
    reads its weights more than it multiplies them (a served translator's decoding steps for
    one or a few sentences) is faster reading them as int8 than widening them every step.

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
