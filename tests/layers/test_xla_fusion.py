"""`zoo.layers.xla_fusion`: the exact GELU compiled by XLA where a train, predict or test step
runs it on TensorFlow, and plain ops wherever an export could trace it."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from zoo.layers.feed_forward import exact_gelu
from zoo.layers.xla_fusion import fusing, keras_step

tensorflow_only = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                     reason="the fusion is TensorFlow's")


def _gelu_and_derivative(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 GELU x * Phi(x) and its derivative Phi(x) + x * phi(x), from math.erfc."""
    phi_cdf = np.vectorize(math.erfc)(-x / math.sqrt(2.0)) / 2.0
    density = np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    return x * phi_cdf, phi_cdf + x * density


def _xla_marked(function, *args) -> int:
    """How many calls in `function`'s traced graph XLA must compile."""
    graph = function.get_concrete_function(*args).graph.as_graph_def()
    return sum(1 for node in graph.node
               if "_XlaMustCompile" in node.attr and node.attr["_XlaMustCompile"].b)


@tensorflow_only
@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2.0**-7)])
def test_a_train_step_s_gelu_and_gradient_are_the_exact_ones(dtype, rtol):
    import tensorflow as tf

    grid = np.linspace(-7.0, 7.0, 3001)
    x = tf.cast(grid, dtype)
    exact, derivative = _gelu_and_derivative(np.asarray(tf.cast(x, "float64")))
    upstream = tf.cast(np.linspace(0.5, 1.5, grid.size), dtype)

    @tf.function(autograph=False)
    def step(values):
        with tf.GradientTape() as tape:
            tape.watch(values)
            assert fusing()
            y = exact_gelu(values)
        return y, tape.gradient(y, values, output_gradients=upstream)

    assert _xla_marked(step, x) == 2  # the forward and the backward, each one XLA call
    y, gradient = step(x)
    assert y.dtype == gradient.dtype == x.dtype
    np.testing.assert_allclose(np.asarray(tf.cast(y, "float64")), exact, rtol=rtol,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(tf.cast(gradient, "float64")),
                               derivative * np.asarray(tf.cast(upstream, "float64")),
                               rtol=rtol, atol=1e-6)


@tensorflow_only
def test_only_a_gradient_or_a_keras_step_fuses_never_a_plain_or_xla_trace():
    import tensorflow as tf

    x = tf.zeros((2, 3))

    @tf.function(autograph=False)
    def plain(values):  # as an export traces a model: no tape, no Keras step
        assert not fusing()
        return exact_gelu(values)

    @tf.function(autograph=False)
    def predicted(values):
        with keras_step():
            return exact_gelu(values)

    @tf.function(autograph=False, jit_compile=True)
    def compiled(values):  # XLA compiles the whole trace already: nothing nested
        with tf.GradientTape() as tape:
            tape.watch(values)
            y = exact_gelu(values)
        return tape.gradient(y, values)

    assert _xla_marked(plain, x) == 0
    assert _xla_marked(predicted, x) == 1
    assert _xla_marked(compiled, x) == 0
    assert not fusing()  # the step's mark ended with it


def test_off_tensorflow_nothing_fuses():
    if keras.backend.backend() == "tensorflow":
        pytest.skip("the other backends'")
    with keras_step():
        assert not fusing()
    exact, _ = _gelu_and_derivative(np.linspace(-3.0, 3.0, 61))
    np.testing.assert_allclose(np.asarray(exact_gelu(np.linspace(-3.0, 3.0, 61)
                                                     .astype("float32"))), exact, atol=1e-6)


def test_a_task_s_predict_and_evaluate_answer_as_its_call_on_either_backend():
    # The zoo's tasks enter `keras_step()` in Keras' predict and test steps, whose arguments
    # differ by backend: `(data)` on TensorFlow, `(state, data)` on JAX.
    from zoo.models.vit.model import VisionTransformer

    keras.utils.set_random_seed(0)
    model = VisionTransformer(image_size=16, patch_size=8, num_layers=1, hidden_dim=16,
                              num_heads=2, intermediate_dim=32, num_classes=3)
    images = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3)).astype("float32")
    called = np.asarray(model(images))
    np.testing.assert_allclose(model.predict_on_batch(images), called, rtol=1e-5, atol=1e-5)
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    labels = np.array([0, 1, 2, 0])
    expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, called)
    np.testing.assert_allclose(model.evaluate(images, labels, verbose=0), float(expected),
                               rtol=1e-5)


@tensorflow_only
@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2.0**-7)])
def test_a_predict_step_s_layer_norm_is_one_xla_call_a_train_step_s_is_not(dtype, rtol):
    import tensorflow as tf

    from zoo.layers.layer_normalization import LayerNormalization

    rng = np.random.default_rng(0)
    norm = LayerNormalization(epsilon=1e-5, gamma_initializer="glorot_uniform",
                              beta_initializer="glorot_uniform", dtype=keras.DTypePolicy(dtype))
    x = tf.cast(rng.normal(3.0, 2.0, size=(4, 7, 16)), dtype)
    norm.build(x.shape)
    wide = np.asarray(tf.cast(x, "float64"))
    centered = wide - wide.mean(-1, keepdims=True)
    expected = (centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5)
                * np.asarray(norm.gamma, "float64") + np.asarray(norm.beta, "float64"))

    @tf.function(autograph=False)
    def predicted(values):
        with keras_step():
            return norm(values)

    @tf.function(autograph=False)
    def trained(values):
        with keras_step(), tf.GradientTape() as tape:
            tape.watch(values)
            y = norm(values)
        return y, tape.gradient(y, values)

    assert _xla_marked(predicted, x) == 1
    assert _xla_marked(trained, x) == 0  # its XLA backward did not pay: the plain form
    for y in (predicted(x), trained(x)[0], norm(x)):
        assert keras.backend.standardize_dtype(y.dtype) == dtype
        np.testing.assert_allclose(np.asarray(tf.cast(y, "float64")), expected, rtol=rtol,
                                   atol=rtol)
