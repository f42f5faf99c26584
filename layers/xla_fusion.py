"""Elementwise chains that XLA fuses into one loop inside TensorFlow's step graphs.

TensorFlow runs a graph op by op: the exact GELU's forward and backward are about ten passes
over the widest activation of a block, a LayerNorm's about a dozen, each a kernel that reads
and writes the whole tensor, and under `mixed_bfloat16` each also casts. On a CPU those
passes kept a bfloat16 step from gaining what its matrix products gained
(docs/performance-log.md, 2026-11-29). XLA compiles such a chain
into one loop; compiling the whole step would also compile its matrix products, which XLA's
CPU backend widens from bfloat16 to float32 (docs/benchmarks.md, "bfloat16 on CPUs").

So `fused_chain` compiles only the chain, forward and backward each one XLA function
(`tf.function(jit_compile=True)`), called from the graph whose products stay oneDNN's. It
does so only on TensorFlow, outside a trace XLA compiles already, and only in graphs that no
export writes: while a gradient tape records (a train step, Keras' or your own) or inside
`keras_step()` (the zoo's tasks enter it in Keras' predict and test steps). Everywhere else,
an exported SavedModel above all (the stock model server runs it without XLA), and on JAX,
whose compiler fuses the chain itself, the chain runs as plain ops. `fused_forward` compiles
a forward alone, where no gradient is taken (the LayerNorm's: XLA's code for its backward
was slower than TensorFlow's kernels).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator

import keras

from .keras_internals import gradient_recording, in_xla_compiled_graph


_steps = threading.local()


@contextlib.contextmanager
def keras_step() -> Iterator[None]:
    """Marks the computation traced inside as one of Keras' compiled steps (`predict_step`,
    `test_step`), which no export traces: `fused_chain` and `fused_forward` fuse there too."""
    _steps.depth = getattr(_steps, "depth", 0) + 1
    try:
        yield
    finally:
        _steps.depth -= 1


def fusing() -> bool:
    """Whether `fused_chain` compiles its chain now: on TensorFlow, in a train step (a
    gradient tape records) or inside `keras_step()`, and not already inside an XLA-compiled
    trace."""
    return (keras.backend.backend() == "tensorflow"
            and (gradient_recording() or getattr(_steps, "depth", 0) > 0)
            and not in_xla_compiled_graph())


def xla_compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` as one XLA-compiled TensorFlow function (`tf.function(jit_compile=True)`,
    without AutoGraph), made at its first call: the form `fused_chain` and `fused_forward`
    call while `fusing()`."""

    @functools.cache
    def compiled() -> Callable[..., Any]:
        import tensorflow as tf

        return tf.function(function, jit_compile=True, autograph=False)

    return lambda *inputs: compiled()(*inputs)


def fused_chain(forward: Callable[..., tuple], backward: Callable[..., tuple],
                plain: Callable[..., Any]) -> Callable[..., Any]:
    """A function of tensors that runs `plain(*inputs)`, or, while `fusing()`, the same
    function as two XLA-compiled chains.

    Args:
        forward: `forward(*inputs) -> (output, *saved)`: the function's output and what its
            gradient needs beside the inputs (best small tensors, such as row statistics),
            in TensorFlow ops.
        backward: `backward(upstream, *inputs, *saved) -> (gradient of each input,)`, the
            gradients in the inputs' dtypes.
        plain: the same function as `forward`'s output, in `keras.ops` (or any form that runs
            on every backend and exports without XLA).

    Returns:
        The function; it takes the inputs positionally, tensors all.
    """

    forward_xla, backward_xla = xla_compiled(forward), xla_compiled(backward)

    def call(*inputs: Any) -> Any:
        if not fusing():
            return plain(*inputs)
        import tensorflow as tf

        @tf.custom_gradient
        def chain(*args: Any) -> tuple:
            output, *saved = forward_xla(*args)

            def grad(upstream: Any) -> tuple:
                return tuple(backward_xla(upstream, *args, *saved))

            return output, grad

        return chain(*inputs)

    return call


def fused_forward(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (of tensors, with its own gradient, in ops that run on every backend), run
    as one XLA-compiled chain while `fusing()` and no gradient is taken (the predict and test
    steps), and as it is elsewhere: for a chain whose compiled backward does not pay (a
    LayerNorm's, whose column sums XLA's CPU code runs slower than TensorFlow's kernels)."""

    compiled = xla_compiled(function)

    def call(*inputs: Any) -> Any:
        if fusing() and not gradient_recording():
            return compiled(*inputs)
        return function(*inputs)

    return call
