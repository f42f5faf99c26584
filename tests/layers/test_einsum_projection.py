"""`zoo.layers.einsum_projection.project`: an `EinsumDense` as one 2-D product."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.layers.einsum_projection import project


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2.0**-6)])
def test_a_projection_with_bias_is_the_equation_in_either_precision(dtype, rtol):
    dense = keras.layers.EinsumDense("btd,dhk->bthk", output_shape=(None, 3, 4),
                                     bias_axes="hk", bias_initializer="glorot_uniform",
                                     dtype=keras.DTypePolicy(dtype))
    dense.build((2, 5, 8))
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    kernel, bias = (np.asarray(keras.ops.cast(v, "float64")) for v in (dense.kernel, dense.bias))
    x_rounded = np.asarray(keras.ops.cast(keras.ops.cast(x, dtype), "float64"))
    expected = np.einsum("btd,dhk->bthk", x_rounded, kernel) + bias
    got = project(dense, keras.ops.cast(x, dtype))
    assert keras.backend.standardize_dtype(got.dtype) == dtype
    np.testing.assert_allclose(np.asarray(keras.ops.cast(got, "float64")), expected,
                               rtol=rtol, atol=rtol)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's graph")
@pytest.mark.parametrize("dtype, bias_on_product", [("float32", True), ("bfloat16", False)])
def test_in_bfloat16_the_bias_is_not_added_to_the_product_itself(dtype, bias_on_product):
    # TensorFlow fuses a MatMul and the bias added to it into one oneDNN inner product, which
    # in bfloat16 leaves AMX for a generic kernel; the reshape between them keeps them apart.
    import tensorflow as tf

    dense = keras.layers.EinsumDense("btd,dhk->bthk", output_shape=(None, 3, 4),
                                     bias_axes="hk", dtype=keras.DTypePolicy(dtype))
    dense.build((2, 5, 8))
    graph = tf.function(lambda x: project(dense, x), autograph=False).get_concrete_function(
        tf.TensorSpec((2, 5, 8), dtype)).graph
    adds = [op for op in graph.get_operations() if op.type in ("AddV2", "BiasAdd", "Add")]
    assert len(adds) == 1
    assert (adds[0].inputs[0].op.type == "MatMul") == bias_on_product
