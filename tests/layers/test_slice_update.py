"""`update_slice` writes as NumPy indexing does, and with an op the model server can run."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.layers.keras_internals import in_xla_compiled_graph
from zoo.layers.slice_update import update_slice

tensorflow_only = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                     reason="the op choice concerns TensorFlow graphs")


def expected(buffer: np.ndarray, start: list[int], updates: np.ndarray) -> np.ndarray:
    out = buffer.copy()
    out[tuple(slice(s, s + n) for s, n in zip(start, updates.shape))] = updates
    return out


@pytest.mark.parametrize("start", [[0, 0, 0, 0], [1, 2, 5, 0], [0, 1, 3, 2]])
def test_eager_write_equals_numpy(start):
    rng = np.random.default_rng(0)
    buffer = rng.normal(size=(2, 3, 6, 4)).astype("float32")
    updates = rng.normal(size=(1, 1, 1, 2)).astype("float32")
    out = update_slice(keras.ops.convert_to_tensor(buffer), start, updates)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(out),
                                  expected(buffer, start, updates))


@tensorflow_only
@pytest.mark.parametrize("jit_compile", [False, True])
def test_in_a_loop_with_a_changing_index(jit_compile):
    """A search's write: inside a `while_loop`, at the loop's index, with and without XLA;
    without XLA the graph holds no `Xla*` op, with XLA it compiles (a strided-slice write at
    a non-constant start would not)."""
    import tensorflow as tf

    steps = 5

    def run(buffer):
        def body(i, buffer):
            column = tf.fill([2, 1], i + 10)
            return i + 1, update_slice(buffer, [0, i], column)

        return tf.while_loop(lambda i, _: i < steps, body, (tf.constant(0), buffer))[1]

    function = tf.function(run, jit_compile=jit_compile)
    buffer = tf.zeros([2, steps], tf.int32)
    np.testing.assert_array_equal(function(buffer).numpy(),
                                  np.tile(np.arange(10, 10 + steps), (2, 1)))
    graph = function.get_concrete_function(buffer).graph.as_graph_def()
    types = {node.op for node in graph.node}
    for function_def in graph.library.function:
        types.update(node.op for node in function_def.node_def)
    assert ("XlaDynamicUpdateSlice" in types) == jit_compile
    assert ("TensorStridedSliceUpdate" in types) == (not jit_compile)


@tensorflow_only
def test_in_xla_compiled_graph_tells_the_two_traces_apart():
    import tensorflow as tf

    seen = {}

    def probe(name):
        def fn(x):
            seen[name] = in_xla_compiled_graph()
            return x + 1
        return fn

    tf.function(probe("plain"))(tf.constant(1))
    tf.function(probe("xla"), jit_compile=True)(tf.constant(1))
    probe("eager")(tf.constant(1))
    assert seen == {"plain": False, "xla": True, "eager": False}
