"""Fitting one model after another (the README's fine-tuning) draws no warning of "excessive
retracing": each model traced its own Keras step once. A function of the user's own that
retraces is still warned of."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest

from zoo.training.step_retracing import keras_steps_unflagged

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="the warning is TensorFlow's")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture()
def tensorflow_log():
    records = _Records()
    logging.getLogger("tensorflow").addHandler(records)
    yield records.messages
    logging.getLogger("tensorflow").removeHandler(records)


def test_fitting_zoo_models_one_after_another_draws_no_retracing_warning(tensorflow_log):
    from zoo.models.vit.model import VisionTransformer

    images = np.random.default_rng(0).integers(0, 256, (3, 16, 16, 3)).astype("uint8")
    labels = np.array([0, 1, 2])
    for _ in range(4):  # new models, as a session that tries a few makes them
        model = VisionTransformer(image_size=16, patch_size=8, num_classes=3, hidden_dim=8,
                                  num_layers=1, num_heads=2, intermediate_dim=8)
        model.evaluate(images, labels, verbose=0)
    # The fifth step traced in five calls: TensorFlow's threshold.
    model = model.with_training_options(dropout=0.1)
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images, labels, epochs=1, verbose=0)
    assert not [m for m in tensorflow_log if "retracing" in m]


def test_the_users_own_retracing_is_still_warned_of(tensorflow_log):
    def square(x):
        return x * x

    with keras_steps_unflagged():
        for n in range(1, 8):  # a new shape every call: a retrace every call
            tf.function(square)(tf.zeros([n]))
    assert [m for m in tensorflow_log if "retracing" in m]
