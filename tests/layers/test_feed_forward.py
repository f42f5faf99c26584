"""FeedForward against the paper's FFN(x) = act(x W_1 + b_1) W_2 + b_2 written in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from layers.feed_forward import FeedForward
from tests.layers.harness import run_layer_test


def test_harness():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(FeedForward, {"intermediate_dim": 16, "activation": "gelu", "dropout": 0.1},
                   x, expected_output_shape=(2, 5, 8), expected_num_trainable_weights=4)


@pytest.mark.parametrize("activation, numpy_activation", [
    ("relu", lambda h: np.maximum(h, 0.0)),
    ("tanh", np.tanh),
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
