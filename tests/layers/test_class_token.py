"""ClassToken: a learned token prepended to every sequence."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.class_token import ClassToken
from tests.layers.harness import run_layer_test


def test_harness():
    x = np.random.default_rng(0).normal(size=(3, 4, 6)).astype("float32")
    run_layer_test(ClassToken, {"initializer": "zeros"}, x, expected_output_shape=(3, 5, 6))


def test_harness_random_initializer():
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    run_layer_test(ClassToken, {"initializer": "random_normal"}, x,
                   expected_output_shape=(2, 4, 4))


def test_first_row_is_the_token_and_the_rest_is_unchanged():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 7, 5)).astype("float32")
    layer = ClassToken()
    layer(x)
    token = rng.normal(size=(1, 1, 5)).astype("float32")
    layer.set_weights([token])
    out = ops.convert_to_numpy(layer(x))
    assert out.shape == (4, 8, 5)
    for b in range(4):
        np.testing.assert_array_equal(out[b, 0], token[0, 0])
    np.testing.assert_array_equal(out[:, 1:], x)


def test_weight_name_and_zero_default():
    layer = ClassToken()
    layer(np.zeros((1, 2, 3), "float32"))
    assert [w.name for w in layer.weights] == ["class_token"]
    np.testing.assert_array_equal(ops.convert_to_numpy(layer.class_token), np.zeros((1, 1, 3)))


def test_padding_mask_gains_a_true_first_position():
    # A masked average downstream sees the token and the unpadded positions only.
    ids = np.array([[5, 6, 0], [7, 0, 0]])
    inputs = keras.Input((3,), dtype="int32")
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    layer = ClassToken(initializer="ones")
    pooled = keras.layers.GlobalAveragePooling1D()(layer(embedding(inputs)))
    model = keras.Model(inputs, pooled)
    table = ops.convert_to_numpy(embedding.embeddings)
    expected = [np.mean([np.ones(4), table[5], table[6]], axis=0),
                np.mean([np.ones(4), table[7]], axis=0)]
    np.testing.assert_allclose(ops.convert_to_numpy(model(ids)), expected, atol=1e-6)
    assert layer.compute_mask(np.zeros((1, 2, 4)), None) is None


def test_wrong_rank_is_refused():
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        ClassToken()(np.zeros((2, 3), "float32"))
