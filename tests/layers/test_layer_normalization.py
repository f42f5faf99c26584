"""The zoo's LayerNormalization against the normalization written in numpy, and its value and
gradient against Keras's LayerNormalization (Keras's `moments` chain, differentiated by the
backend)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.layers.layer_normalization import LayerNormalization
from tests.layers.harness import run_layer_test


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _inputs(shape=(3, 5, 16), seed=0):
    # An offset and a scale far from 0 and 1, so that the centering and scaling matter.
    return (np.random.default_rng(seed).normal(size=shape) * 4.0 + 3.0).astype("float32")


def _pair(**kwargs):
    """The zoo's layer and Keras's, built, with the same random gamma and beta."""
    x = _inputs()
    ours, theirs = LayerNormalization(**kwargs), keras.layers.LayerNormalization(**kwargs)
    ours.build(x.shape)
    theirs.build(x.shape)
    rng = np.random.default_rng(2)
    weights = [rng.normal(size=w.shape).astype("float32") for w in theirs.weights]
    theirs.set_weights(weights)
    ours.set_weights(weights)
    return ours, theirs, x


def _gradients(layer, x, upstream):
    """d sum(layer(x) * upstream) / d(x, gamma, beta) on the current backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function  # traced with autograph, as Keras's train step is
        def gradients(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x) * upstream)
            return tape.gradient(loss, [x, layer.gamma.value, layer.beta.value])

        return gradients(tf.constant(x))
    if backend == "jax":
        import jax

        def loss(x, gamma, beta):
            values, _ = layer.stateless_call([gamma, beta], [], x)
            return (values * upstream).sum()

        return jax.grad(loss, argnums=(0, 1, 2))(x, layer.gamma.value, layer.beta.value)
    pytest.skip(f"no gradient helper for the {backend} backend")


def test_harness():
    run_layer_test(LayerNormalization, {"epsilon": 1e-6}, _inputs(),
                   expected_output_shape=(3, 5, 16), expected_num_trainable_weights=2)


def test_closed_form_is_taken_on_tensorflow_only():
    ours, _, _ = _pair(epsilon=1e-5)
    assert ours._closed_form == (keras.backend.backend() == "tensorflow")


def test_equals_the_numpy_normalization():
    ours, _, x = _pair(epsilon=1e-5)
    gamma, beta = (_numpy(w) for w in (ours.gamma, ours.beta))
    x64 = x.astype("float64")
    mean = x64.mean(-1, keepdims=True)
    expected = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(_numpy(ours(x)), expected * gamma + beta, atol=2e-5)


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 1e-6},
    {"epsilon": 1e-3, "axis": 2},
    {"epsilon": 1e-5, "axis": 1},
    {"epsilon": 1e-5, "center": False},
])
def test_value_and_gradients_equal_keras(kwargs):
    ours, theirs, x = _pair(**kwargs)
    np.testing.assert_allclose(_numpy(ours(x)), _numpy(theirs(x)), atol=2e-5)
    upstream = np.random.default_rng(3).normal(size=x.shape).astype("float32")
    if not theirs.center:
        pytest.skip("no beta to differentiate")
    for got, want in zip(_gradients(ours, x, upstream), _gradients(theirs, x, upstream)):
        np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=1e-4, atol=1e-4)


def test_gradient_of_x_is_orthogonal_to_the_mean_and_the_normalized_vector():
    # The normalization is invariant to shifting and scaling x, so the gradient of any loss
    # with respect to x sums to zero over the axis and is orthogonal to (x - mean).
    ours, _, x = _pair(epsilon=1e-12)
    upstream = np.random.default_rng(4).normal(size=x.shape).astype("float32")
    d_x = _numpy(_gradients(ours, x, upstream)[0]).astype("float64")
    centered = x - x.mean(-1, keepdims=True)
    np.testing.assert_allclose(d_x.sum(-1), 0.0, atol=1e-4)
    np.testing.assert_allclose((d_x * centered).sum(-1), 0.0, atol=1e-3)


def test_mixed_precision_computes_in_float32():
    # bfloat16 inputs, as the layer before hands them over under the policy. Far from zero:
    # bfloat16 has 8 bits of mantissa, so the mean would swamp the rest in its arithmetic.
    x = keras.ops.cast(_inputs() + 200.0, "bfloat16")
    ours = LayerNormalization(epsilon=1e-5, dtype="mixed_bfloat16")
    theirs = keras.layers.LayerNormalization(epsilon=1e-5, dtype="mixed_bfloat16")
    got, want = ours(x), theirs(x)
    assert keras.backend.standardize_dtype(got.dtype) == "bfloat16"
    # Within bfloat16's rounding of the outputs (|y| < 16): computed in bfloat16, the sums of
    # x near 200 would lose all but the leading bits and the outputs be off by tenths.
    np.testing.assert_allclose(_numpy(keras.ops.cast(got, "float32")),
                               _numpy(keras.ops.cast(want, "float32")), rtol=1e-2, atol=1e-2)


def test_loads_the_weights_of_keras_layer_normalization(tmp_path):
    _, theirs, x = _pair(epsilon=1e-6)
    model = keras.Sequential([keras.Input(x.shape[1:]), theirs])
    path = tmp_path / "keras_norm.weights.h5"
    model.save_weights(path)
    ours = LayerNormalization(epsilon=1e-6, name=theirs.name)
    keras.Sequential([keras.Input(x.shape[1:]), ours]).load_weights(path)
    np.testing.assert_allclose(_numpy(ours(x)), _numpy(theirs(x)), atol=2e-5)


def test_config_round_trip():
    layer = LayerNormalization(epsilon=1e-6, name="norm")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is LayerNormalization
    assert restored.get_config() == layer.get_config()
