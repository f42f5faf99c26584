"""A run whose loss goes non-finite stops in one line (no NaN checkpoint, no NaN model), and
metrics.json is standard JSON: never NaN or Infinity."""

from __future__ import annotations

import json
import math

import keras
import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.training.run import StopOnNonFiniteLoss, finite_json, fit_resumably


@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_loss_that_is_not_finite_stops_the_run_before_its_checkpoint(tmp_path, poison):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 3), "float32")
    y = np.full((8, 1), poison, "float32")
    with pytest.raises(UserError, match=r"^the training loss became (nan|inf) in epoch 1;"):
        fit_resumably(model, x, tmp_path, epochs=2, initial_epoch=0, y=y, batch_size=4)
    assert not list((tmp_path / "checkpoints").glob("epoch-*"))


def test_a_finite_loss_passes():
    StopOnNonFiniteLoss("run").on_epoch_end(0, {"loss": 0.5})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_metrics_json_holds_null_where_a_number_is_not_finite(bad):
    metrics = {"history": {"loss": [1.0, bad]}, "validation": {"bleu": bad, "n": 3}}
    text = json.dumps(finite_json(metrics), allow_nan=False)
    assert json.loads(text) == {"history": {"loss": [1.0, None]},
                                "validation": {"bleu": None, "n": 3}}
