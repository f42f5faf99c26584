"""Precise batch norm: statistics recomputed for the weights of the moment, checked against
numpy's mean and variance of the data, and against the model's own training-mode output."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from zoo.training.batch_norm import (
    PreciseBatchNorm,
    batch_norm_layers,
    recompute_batch_norm_statistics,
)


def normalising_model(features: int = 3) -> keras.Model:
    """Batch norm straight on the inputs, so its statistics are the data's."""
    return keras.Sequential([keras.Input((features,)), keras.layers.BatchNormalization(),
                             keras.layers.Dense(2)])


def data(rows: int = 48, features: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(rows, features)) * [1.0, 3.0, 0.5] + [2.0, -4.0, 10.0]).astype(
        "float32")


def test_one_batch_of_everything_gives_the_datas_mean_and_variance():
    x = data()
    model = normalising_model()
    norm = model.layers[0]
    norm.moving_mean.assign(np.full(3, 100.0, "float32"))  # stale values are replaced
    kernel_before = np.array(model.layers[1].kernel)
    assert recompute_batch_norm_statistics(model, x, batch_size=len(x), batches=1) == 1
    np.testing.assert_allclose(np.array(norm.moving_mean), x.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(norm.moving_variance), x.var(0), rtol=1e-4)
    assert norm.momentum == 0.99  # Keras' default, restored
    np.testing.assert_array_equal(np.array(model.layers[1].kernel), kernel_before)


def test_several_batches_average_their_means():
    """Batches that split the data evenly average to the data's mean, whatever their order."""
    x = data(rows=48)
    model = normalising_model()
    recompute_batch_norm_statistics(model, x, batch_size=16, batches=3, seed=5)
    np.testing.assert_allclose(np.array(model.layers[0].moving_mean), x.mean(0), rtol=1e-5,
                               atol=1e-5)
    variance = np.array(model.layers[0].moving_variance)
    # The mean of the batch variances lies under the data's variance (by the variance of the
    # batch means), and near it.
    assert np.all(variance <= x.var(0) * (1 + 1e-5)) and np.all(variance > 0.7 * x.var(0))


def test_a_hybrid_vit_then_answers_in_inference_as_in_training():
    """The defect it mends: with moving averages that trail the weights, inference differs
    from the training-mode output the weights were trained for."""
    from zoo.models.vit.model import VisionTransformer

    model = VisionTransformer(image_size=16, patch_size=8, num_classes=4, hidden_dim=16,
                              num_layers=1, num_heads=2, intermediate_dim=16,
                              stem_filters=[4, [6, 6], 8], stem_style="vgg")
    rng = np.random.default_rng(1)
    images = rng.uniform(0, 255, (16, 16, 16, 3)).astype("float32")
    model(images[:1])
    model.head.kernel.assign(rng.normal(size=tuple(model.head.kernel.shape)))  # not zero
    training = np.array(model(images, training=True))
    assert len(batch_norm_layers(model)) == 4
    # Fresh moving averages (0 and 1) are far from these statistics.
    assert not np.allclose(np.array(model(images, training=False)), training, atol=1e-3)
    recompute_batch_norm_statistics(model, images, batch_size=16, batches=1)
    np.testing.assert_allclose(np.array(model(images, training=False)), training, atol=2e-4)


def test_a_model_without_batch_norm_is_left_alone():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    assert recompute_batch_norm_statistics(model, np.zeros((1, 3), "float32"), batches=5) == 0


def test_a_frozen_batch_norm_keeps_its_statistics():
    model = normalising_model()
    model.layers[0].trainable = False
    assert recompute_batch_norm_statistics(model, data(), batch_size=48, batches=1) == 0
    np.testing.assert_array_equal(np.array(model.layers[0].moving_mean), np.zeros(3))


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 16, "batches": 4}, "batches is 4, but 48 images make only 3 batches of 16"),
    ({"batch_size": 0}, "batch_size"),
    ({"batches": 1.5}, "batches"),
])
def test_bad_settings_are_one_line(options, message):
    with pytest.raises(ValueError, match=message) as error:
        recompute_batch_norm_statistics(normalising_model(), data(), **options)
    assert "\n" not in str(error.value)


def test_in_fit_the_final_statistics_are_those_of_the_final_weights():
    x = data(rows=64)
    y = (x[:, 0] > 2.0).astype("int32")

    def trained(callbacks):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8),
                                  keras.layers.BatchNormalization(), keras.layers.Dense(2)])
        model.compile(keras.optimizers.Adam(0.05),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0,
                  validation_data=(x, y), callbacks=callbacks(model))
        return model

    precise = trained(lambda m: [PreciseBatchNorm(m, x, batch_size=32, batches=2)])
    plain = trained(lambda m: [])
    norm = precise.layers[1]
    final = np.array(norm.moving_mean)
    # The weights are the same either way; only the statistics differ.
    np.testing.assert_allclose(np.array(precise.layers[0].kernel),
                               np.array(plain.layers[0].kernel), rtol=1e-5, atol=1e-6)
    assert not np.allclose(final, np.array(plain.layers[1].moving_mean), atol=1e-3)
    # Recomputing now changes nothing: they were computed for the weights fit ended with.
    recompute_batch_norm_statistics(precise, x, batch_size=32, batches=2)
    np.testing.assert_allclose(np.array(norm.moving_mean), final, rtol=1e-5, atol=1e-6)
    hidden = x @ np.array(precise.layers[0].kernel) + np.array(precise.layers[0].bias)
    np.testing.assert_allclose(final, hidden.mean(0), rtol=1e-4, atol=1e-4)
