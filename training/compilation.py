"""One way to compile a function of a Keras layer for the backend in use.

`compile_for_backend` serves the zoo's searches (`Translator.search`, `benchmarks/`) and the
augmentation layers (`zoo.training.augmentation.compiled_augmentation`) alike.
"""

from __future__ import annotations

from typing import Any, Callable

import keras


def compile_for_backend(fn: Callable[..., Any], layer: keras.layers.Layer,
                        jit_compile: bool = True) -> Callable[..., Any]:
    """Compiles `fn(*tensors)`, which reads (and may update) `layer`'s variables.

    TensorFlow: a `tf.function`, traced once per input shape, compiled by XLA with
    `jit_compile` (as JAX always is: a search's loop then updates its buffers in place and
    fuses its small ops, faster on a CPU than the plain graph: docs/performance-log.md,
    2026-11-23). JAX: `jax.jit` over the values of `layer`'s variables, passed in through a
    `keras.StatelessScope`; the values that `fn` assigns (a random generator's state, for
    instance) are written back to the variables after each call, so the next call sees them,
    as on TensorFlow, and weights changed by training are seen without recompiling. Other
    backends: `fn` as it is.

    `layer` must be built before the first call (its variables are read then).

    Args:
        fn: a function of tensors that calls `layer` (or its sub-layers).
        layer: the layer or model whose variables `fn` uses.
        jit_compile: TensorFlow only; False for functions with ops that XLA cannot compile
            (the image ops of the augmentation layers).

    Returns:
        A function with `fn`'s arguments and outputs.

    Example:
    >>> import numpy as np
    >>> dense = keras.layers.Dense(2)
    >>> dense.build((None, 3))
    >>> double = compile_for_backend(lambda x: 2 * dense(x), dense)
    >>> tuple(double(np.ones((4, 3), "float32")).shape)
    (4, 2)
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        # Without AutoGraph: the function is written for JAX's tracing as well, and rewriting
        # Keras' call stack with AutoGraph costs seconds a trace.
        return tf.function(fn, jit_compile=jit_compile, autograph=False)
    if backend != "jax":
        return fn

    import jax

    def stateless(values: list, *args: Any) -> tuple[Any, dict]:
        variables = layer.variables
        with keras.StatelessScope(state_mapping=list(zip(variables, values))) as scope:
            before = [scope.get_current_value(v) for v in variables]
            outputs = fn(*args)
            after = [scope.get_current_value(v) for v in variables]
        # Only the variables that `fn` assigned come back (their indices are static): the
        # weights are not copied out of every call.
        return outputs, {i: new for i, (old, new) in enumerate(zip(before, after))
                         if new is not old}

    jitted = jax.jit(stateless)

    def call(*args: Any) -> Any:
        variables = layer.variables
        outputs, assigned = jitted([v.value for v in variables], *args)
        for index, value in assigned.items():
            variables[index].assign(value)
        return outputs

    return call
