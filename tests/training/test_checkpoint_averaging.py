"""Checkpoint averaging against the mean computed directly from known weight values."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.training.checkpoint_averaging import average_checkpoints


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2),
                              keras.layers.LayerNormalization()])
    return model


def test_average_is_the_mean_of_the_saved_weights(tmp_path):
    model = _model()
    rng = np.random.default_rng(0)
    saved = []
    for i in range(3):
        values = [rng.normal(size=tuple(w.shape)).astype("float32") for w in model.weights]
        model.set_weights(values)
        model.save_weights(str(tmp_path / f"{i}.weights.h5"))
        saved.append(values)
    fresh = _model()
    average_checkpoints(fresh, [tmp_path / f"{i}.weights.h5" for i in range(3)])
    for index, weight in enumerate(fresh.get_weights()):
        expected = (saved[0][index] + saved[1][index] + saved[2][index]) / 3
        np.testing.assert_allclose(weight, expected, rtol=1e-6, atol=1e-7)


def test_one_file_is_that_file(tmp_path):
    model = _model()
    model.save_weights(str(tmp_path / "a.weights.h5"))
    fresh = _model()
    average_checkpoints(fresh, [tmp_path / "a.weights.h5"])
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_bad_arguments_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints(_model(), [])
    with pytest.raises(ValueError, match="no weight file at .*missing"):
        average_checkpoints(_model(), [tmp_path / "missing.weights.h5"])
