"""FeedForward against the paper's FFN(x) = act(x W_1 + b_1) W_2 + b_2 written in numpy."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from zoo.layers.feed_forward import FeedForward, exact_gelu
from tests.layers.harness import run_layer_test


def test_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(FeedForward, {"intermediate_dim": 16, "activation": "gelu", "dropout": 0.1},
                   x, expected_output_shape=(2, 5, 8), expected_num_trainable_weights=4)


@pytest.mark.parametrize("activation, numpy_activation", [
    ("relu", lambda h: np.maximum(h, 0.0)),
    ("tanh", np.tanh),
    ("gelu", lambda h: h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0))) / 2.0),
])
def test_equals_the_position_wise_equation(activation, numpy_activation):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4, 6)).astype("float32")
    layer = FeedForward(intermediate_dim=10, activation=activation,
                        bias_initializer="glorot_uniform")
    layer.build(x.shape)
    w1, b1 = (np.asarray(v) for v in layer.intermediate_dense.weights)
    w2, b2 = (np.asarray(v) for v in layer.output_dense.weights)
    expected = numpy_activation(x.astype("float64") @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(np.asarray(layer(x)), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_intermediate_dim_names_the_value(bad):
    with pytest.raises(ValueError, match="intermediate_dim must be a positive int; got"):
        FeedForward(intermediate_dim=bad)


def test_exact_gelu_is_x_times_the_normal_cdf():
    # Phi from math.erfc in float64, accurate in the far negative tail too; the erf form
    # rounds 1 + erf(x) there, an absolute error under 1e-6.
    x = np.linspace(-12.0, 12.0, 4001)
    phi = np.vectorize(math.erfc)(-x / math.sqrt(2.0)) / 2.0
    np.testing.assert_allclose(np.asarray(exact_gelu(x.astype("float32"))), x * phi,
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(exact_gelu(x.astype("float32"))),
        np.asarray(keras.activations.gelu(x.astype("float32"), approximate=False)),
        rtol=1e-6, atol=1e-6)


def test_exact_gelu_of_bfloat16_is_float32_gelu_rounded_once():
    # bfloat16 in, bfloat16 out, computed in float32: the float64 GELU of the bfloat16 inputs,
    # rounded to bfloat16 once, within one bfloat16 step (2^-8 relative) everywhere; and a
    # gradient in bfloat16 that equals float32's (to bfloat16 rounding).
    x = keras.ops.cast(np.linspace(-6.0, 6.0, 2001).astype("float32"), "bfloat16")
    exact = np.asarray(keras.ops.cast(x, "float64"))
    exact = exact * np.vectorize(math.erfc)(-exact / math.sqrt(2.0)) / 2.0
    got = exact_gelu(x)
    assert keras.backend.standardize_dtype(got.dtype) == "bfloat16"
    got = np.asarray(keras.ops.cast(got, "float64"))
    np.testing.assert_allclose(got, exact, rtol=2.0**-8, atol=1e-6)

    def gradient(values):
        if keras.backend.backend() == "jax":
            import jax

            return jax.grad(lambda v: exact_gelu(v).astype("float32").sum())(values)
        import tensorflow as tf

        values = tf.convert_to_tensor(values)
        with tf.GradientTape() as tape:
            tape.watch(values)
            total = tf.reduce_sum(tf.cast(exact_gelu(values), "float32"))
        return tape.gradient(total, values)

    d_bf16, d_f32 = gradient(x), gradient(keras.ops.cast(x, "float32"))
    assert keras.backend.standardize_dtype(d_bf16.dtype) == "bfloat16"
    np.testing.assert_allclose(np.asarray(keras.ops.cast(d_bf16, "float32")),
                               np.asarray(d_f32), rtol=2.0**-8, atol=1e-6)


def test_gelu_layer_keeps_its_config_name():
    layer = FeedForward(intermediate_dim=4, activation="gelu")
    assert layer.get_config()["activation"] == "gelu"
    clone = FeedForward.from_config(layer.get_config())
    assert clone.activation is keras.activations.gelu
