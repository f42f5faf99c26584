"""The int8 route (`layers/int8_route.py`): where the products stay int8 x int8 (JAX only),
and that the float route against the widened weights gives Keras' int8 numbers to within the
input rounding. Run with KERAS_BACKEND=jax too."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.einsum_projection import project
from zoo.layers.int8_route import (RoutedInputQuantizer, int8_products_here, route_int8_layer)
from zoo.layers.token_embedding import TokenEmbedding

TENSORFLOW = keras.backend.backend() == "tensorflow"
only_tensorflow = pytest.mark.skipif(not TENSORFLOW, reason="XLA on or off is TensorFlow's")


def _inputs(rows: int = 6, width: int = 32) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(rows, width)).astype("float32") * 3


def _dense() -> keras.layers.Dense:
    keras.utils.set_random_seed(0)
    layer = keras.layers.Dense(24, bias_initializer="glorot_uniform")
    layer.build((None, 32))
    layer.quantize("int8")
    return layer


def _einsum() -> keras.layers.EinsumDense:
    keras.utils.set_random_seed(0)
    layer = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 4, 6), bias_axes="de")
    layer.build((None, 5, 32))
    layer.quantize("int8")
    return layer


def _graph(fn, jit_compile: bool):
    """`fn` traced as TensorFlow runs it: a graph with or without XLA; jax.jit on JAX."""
    if TENSORFLOW:
        import tensorflow as tf

        return tf.function(fn, jit_compile=jit_compile)
    import jax

    return jax.jit(fn)


def _rounding_bound(x: np.ndarray, widened_kernel: np.ndarray) -> np.ndarray:
    """How far quantizing each input row to int8 can move each output: every input moves by
    at most half a step, max|x_row| / 254, so an output by that times sum_k |w_kj|; plus
    float32 rounding."""
    half_step = np.abs(x).max(axis=-1, keepdims=True) / 254
    return half_step * np.abs(widened_kernel).sum(axis=0) + 1e-4


def _widened(layer: keras.layers.Layer) -> np.ndarray:
    """The int8 kernel divided by its per-channel scales, as a (fan_in, outputs) matrix."""
    kernel = ops.convert_to_numpy(layer._kernel).astype("float32")
    scale = ops.convert_to_numpy(layer.kernel_scale)
    return (kernel / scale.reshape((1,) * (kernel.ndim - scale.ndim) + scale.shape)).reshape(
        kernel.shape[0], -1)


def test_the_route_is_int8_on_jax_only_and_one_route_with_or_without_xla():
    """One route a backend: a TensorFlow graph widens the weights whether XLA compiles it or
    not, so that the Python model (searches under XLA) and its export (no XLA) agree."""
    traced = []
    _graph(lambda x: traced.append(int8_products_here()) or x, jit_compile=False)(
        np.ones(2, "float32"))
    if TENSORFLOW:
        _graph(lambda x: traced.append(int8_products_here()) or x, jit_compile=True)(
            np.ones(2, "float32"))
        assert [int8_products_here(), *traced] == [False, False, False]
    else:
        assert [int8_products_here(), *traced] == [True, True]


def test_int8_products_forces_the_int8_route_inside_the_block_only():
    from zoo.layers.int8_route import int8_products

    with int8_products():
        inside = int8_products_here()
    assert inside and int8_products_here() is not TENSORFLOW


def test_the_quantizer_is_truthy_exactly_where_the_route_is_int8():
    assert bool(RoutedInputQuantizer()) is int8_products_here()
    values, scale = RoutedInputQuantizer()(_inputs(), axis=-1)
    assert keras.backend.standardize_dtype(values.dtype) == "int8" and tuple(scale.shape) == (6, 1)


def test_only_int8_dense_and_einsum_dense_are_routed():
    float_dense = keras.layers.Dense(3)
    float_dense.build((None, 4))
    assert not route_int8_layer(float_dense)
    assert not route_int8_layer(keras.layers.LayerNormalization())
    dense = _dense()
    assert route_int8_layer(dense)
    assert isinstance(dense.inputs_quantizer, RoutedInputQuantizer)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("make", [_dense, _einsum], ids=["dense", "einsum_dense"])
def test_a_routed_layer_computes_each_route_s_numbers(make, jit_compile):
    keras_int8, routed = make(), make()
    route_int8_layer(routed)
    x = _inputs()[:, None, :].repeat(5, axis=1) if make is _einsum else _inputs()
    expected_int8 = ops.convert_to_numpy(_graph(keras_int8, jit_compile)(x))
    got = ops.convert_to_numpy(_graph(routed, jit_compile)(x))
    rows = x.reshape(-1, 32)
    bias = ops.convert_to_numpy(routed.bias).reshape(-1)
    widened = (rows @ _widened(routed) + bias).reshape(got.shape)
    if TENSORFLOW:  # float against the widened kernel, with XLA or without
        np.testing.assert_allclose(got, widened, rtol=1e-5, atol=1e-4)
        difference = np.abs(got - expected_int8).reshape(len(rows), -1)
        assert difference.max() > 1e-3  # the routes do differ: the inputs were not rounded
        assert np.all(difference <= _rounding_bound(rows, _widened(routed)))
    else:  # Keras' own int8 x int8 product, untouched
        np.testing.assert_allclose(got, expected_int8, rtol=1e-6, atol=1e-5)


def _output_einsum() -> keras.layers.EinsumDense:
    """The attention's output projection: two contracted axes (heads, head width)."""
    keras.utils.set_random_seed(1)
    layer = keras.layers.EinsumDense("abcd,cde->abe", output_shape=(None, 24), bias_axes="e")
    layer.build((None, 5, 4, 8))
    layer.quantize("int8")
    return layer


@only_tensorflow
@pytest.mark.parametrize("make, input_axes", [(_einsum, 1), (_output_einsum, 2)],
                         ids=["one_axis", "two_axes"])
def test_project_of_a_routed_einsum_dense_is_one_matmul_against_the_widened_kernel(
        make, input_axes):
    import tensorflow as tf

    layer = make()
    route_int8_layer(layer)
    x = np.random.default_rng(2).normal(size=(3, 5) + tuple(layer._kernel.shape[:input_axes]))
    x = x.astype("float32")
    traced = tf.function(lambda v: project(layer, v, input_axes=input_axes))
    ops_run = {op.type for op in traced.get_concrete_function(x).graph.get_operations()}
    assert "MatMul" in ops_run and "BatchMatMulV2" not in ops_run
    rows = x.reshape(15, -1)
    kernel = ops.convert_to_numpy(layer._kernel).astype("float32").reshape(len(rows[0]), -1)
    scale = ops.convert_to_numpy(layer.kernel_scale).reshape(1, -1)
    bias = ops.convert_to_numpy(layer.bias).reshape(-1)
    expected = (rows @ (kernel / scale) + bias).reshape(ops.convert_to_numpy(layer(x)).shape)
    np.testing.assert_allclose(ops.convert_to_numpy(traced(x)), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("routed", [False, True], ids=["keras_quantizer", "routed"])
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_project_of_an_int8_einsum_dense_keeps_the_layer_s_route(routed, jit_compile):
    """Where the layer quantizes its inputs (Keras' own quantizer everywhere, the zoo's on
    JAX), `project` is the layer's own int8 x int8 call."""
    layer = _einsum()
    if routed:
        route_int8_layer(layer)
    x = _inputs()[:, None, :].repeat(5, axis=1)
    got = ops.convert_to_numpy(_graph(lambda v: project(layer, v), jit_compile)(x))
    np.testing.assert_allclose(got, ops.convert_to_numpy(_graph(layer, jit_compile)(x)),
                               rtol=1e-6, atol=1e-5)
    if not routed or int8_products_here():  # inputs rounded to int8
        rows = x.reshape(-1, 32)
        bias = ops.convert_to_numpy(layer.bias).reshape(-1)
        widened = (rows @ _widened(layer) + bias).reshape(got.shape)
        assert np.abs(got - widened).max() > 1e-3


def _int8_logits_reference(table_q, scale, hidden, quantize_inputs: bool) -> np.ndarray:
    widened = table_q.astype("float32") / scale[:, None]
    if not quantize_inputs:
        return hidden @ widened.T
    hidden_scale = 127 / np.abs(hidden).max(axis=-1, keepdims=True)
    hidden_q = np.clip(np.round(hidden * hidden_scale), -127, 127)
    return (hidden_q @ table_q.T.astype("float32")) / (hidden_scale * scale)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_token_embedding_logits_take_the_route(jit_compile):
    keras.utils.set_random_seed(0)
    layer = TokenEmbedding(vocabulary_size=50, embedding_dim=32)
    layer.build()
    layer.quantize("int8")
    hidden = _inputs(4)
    got = ops.convert_to_numpy(_graph(lambda h: layer(h, reverse=True), jit_compile)(hidden))
    table_q = ops.convert_to_numpy(layer.embeddings)
    scale = ops.convert_to_numpy(layer.embeddings_scale)
    quantized = not TENSORFLOW
    np.testing.assert_allclose(got, _int8_logits_reference(table_q, scale, hidden, quantized),
                               rtol=1e-5, atol=1e-4)
    other = _int8_logits_reference(table_q, scale, hidden, not quantized)
    assert np.abs(got - other).max() > 1e-3
    assert np.all(np.abs(got - other) <= _rounding_bound(hidden, (table_q / scale[:, None]).T))
