"""Masked, label-smoothed cross-entropy and masked accuracy against references."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.training.losses import MaskedAccuracy, MaskedSparseCrossEntropy, masked_accuracy

VOCAB = 11


def _batch(seed: int = 0, batch: int = 3, length: int = 7):
    """Labels with trailing padding (id 0) of different lengths, and random logits."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(1, VOCAB, size=(batch, length)).astype("int32")
    for row, n_pad in enumerate([0, 2, 5][:batch]):
        if n_pad:
            labels[row, -n_pad:] = 0
    logits = rng.normal(scale=3.0, size=(batch, length, VOCAB)).astype("float32")
    return labels, logits


def _np(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_without_smoothing_equals_keras_sparse_cross_entropy_on_non_pad_tokens():
    labels, logits = _batch()
    ours = float(_np(MaskedSparseCrossEntropy(label_smoothing=0.0)(labels, logits)))
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    per_token = _np(keras_loss(labels, logits))
    np.testing.assert_allclose(ours, per_token[labels != 0].mean(), rtol=1e-5)


def test_smoothing_matches_the_numpy_reference():
    labels, logits = _batch(seed=1)
    e = 0.1
    log_p = _log_softmax(logits.astype("float64"))
    ce = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    per_token = (1 - e) * ce + e * (-log_p.mean(-1))
    expected = per_token[labels != 0].mean()
    ours = float(_np(MaskedSparseCrossEntropy(label_smoothing=e)(labels, logits)))
    np.testing.assert_allclose(ours, expected, rtol=1e-5)


def test_smoothing_matches_keras_categorical_cross_entropy_with_smoothing():
    # Keras smooths one-hot targets as (1 - e) * onehot + e / V: the paper's distribution.
    labels, logits = _batch(seed=2)
    keras_loss = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=0.2, reduction=None
    )
    per_token = _np(keras_loss(np.eye(VOCAB, dtype="float32")[labels], logits))
    ours = float(_np(MaskedSparseCrossEntropy(label_smoothing=0.2)(labels, logits)))
    np.testing.assert_allclose(ours, per_token[labels != 0].mean(), rtol=1e-5)


def test_pad_tokens_do_not_change_the_loss():
    labels, logits = _batch(seed=3)
    loss = MaskedSparseCrossEntropy()
    reference = float(_np(loss(labels, logits)))
    # Different logits at pad positions.
    noisy = logits.copy()
    n_pad = int((labels == 0).sum())
    noisy[labels == 0] = np.random.default_rng(9).normal(scale=10.0, size=(n_pad, VOCAB))
    np.testing.assert_allclose(float(_np(loss(labels, noisy))), reference, rtol=1e-6)
    # Extra padding appended to every sequence.
    padded_labels = np.concatenate([labels, np.zeros((3, 4), "int32")], axis=1)
    extra = np.random.default_rng(4).normal(size=(3, 4, VOCAB)).astype("float32")
    padded_logits = np.concatenate([logits, extra], axis=1)
    np.testing.assert_allclose(float(_np(loss(padded_labels, padded_logits))), reference, rtol=1e-6)


def test_mean_is_over_tokens_not_sequences():
    labels, logits = _batch(seed=5)
    per_token = _np(MaskedSparseCrossEntropy(reduction=None)(labels, logits))
    assert per_token.shape == labels.shape
    assert np.all(per_token[labels == 0] == 0)
    mean = float(_np(MaskedSparseCrossEntropy()(labels, logits)))
    np.testing.assert_allclose(mean, per_token.sum() / (labels != 0).sum(), rtol=1e-6)


def test_pad_id_none_counts_every_position_and_other_pad_ids_work():
    labels, logits = _batch(seed=6)
    unmasked = MaskedSparseCrossEntropy(label_smoothing=0.0, pad_id=None)
    all_tokens = float(_np(unmasked(labels, logits)))
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    keras_mean = float(_np(keras_loss(labels, logits)))
    np.testing.assert_allclose(all_tokens, keras_mean, rtol=1e-5)
    # Padding marked -1 (outside the vocabulary) gives the same loss as padding marked 0.
    shifted = np.where(labels == 0, -1, labels)
    np.testing.assert_allclose(
        float(_np(MaskedSparseCrossEntropy(pad_id=-1)(shifted, logits))),
        float(_np(MaskedSparseCrossEntropy(pad_id=0)(labels, logits))),
        rtol=1e-6,
    )


def test_probabilities_input_matches_logits_input():
    labels, logits = _batch(seed=7)
    probs = np.exp(_log_softmax(logits)).astype("float32")
    from_probs = float(_np(MaskedSparseCrossEntropy(from_logits=False)(labels, probs)))
    from_logits = float(_np(MaskedSparseCrossEntropy(from_logits=True)(labels, logits)))
    np.testing.assert_allclose(from_probs, from_logits, rtol=1e-4)


def test_half_precision_logits_are_computed_in_float32():
    labels, logits = _batch(seed=8)
    loss = MaskedSparseCrossEntropy()
    half = ops.cast(logits, "float16")
    value = loss(labels, half)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    # Same as the float32 loss on the float16-rounded logits.
    rounded = _np(half).astype("float32")
    np.testing.assert_allclose(float(_np(value)), float(_np(loss(labels, rounded))), rtol=1e-6)


def test_sample_weight_per_sequence():
    labels, logits = _batch(seed=10)
    per_token = _np(MaskedSparseCrossEntropy(reduction=None)(labels, logits))
    weights = np.array([1.0, 0.0, 2.0], "float32")
    token_weights = (labels != 0) * weights[:, None]
    expected = (per_token * token_weights).sum() / token_weights.sum()
    ours = float(_np(MaskedSparseCrossEntropy()(labels, logits, sample_weight=weights)))
    np.testing.assert_allclose(ours, expected, rtol=1e-5)


def test_compiled_model_reports_the_same_loss_and_accuracy():
    labels, logits = _batch(seed=11, batch=3)
    model = keras.Sequential([keras.Input((7, VOCAB)), keras.layers.Identity()])
    loss = MaskedSparseCrossEntropy()
    model.compile(loss=loss, metrics=[masked_accuracy, MaskedAccuracy(name="token_accuracy")])
    results = model.evaluate(logits, labels, batch_size=3, verbose=0, return_dict=True)
    np.testing.assert_allclose(results["loss"], float(_np(loss(labels, logits))), rtol=1e-5)
    correct = (logits.argmax(-1) == labels)[labels != 0]
    np.testing.assert_allclose(results["masked_accuracy"], correct.mean(), rtol=1e-6)
    np.testing.assert_allclose(results["token_accuracy"], correct.mean(), rtol=1e-6)


def test_masked_accuracy_ignores_padding():
    labels = np.array([[3, 4, 0, 0], [5, 0, 0, 0]], "int32")
    predicted = np.array([[3, 1, 0, 0], [5, 0, 0, 0]])  # right at 2 of 3 real tokens
    logits = np.eye(VOCAB, dtype="float32")[predicted]
    logits[labels == 0] = np.eye(VOCAB, dtype="float32")[7]  # wrong at every pad position
    np.testing.assert_allclose(float(_np(masked_accuracy(labels, logits))), 2 / 3, rtol=1e-6)

    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    metric.update_state(labels[:1], logits[:1])  # 1 of 2 more: 3 of 5 tokens in all
    np.testing.assert_allclose(float(_np(metric.result())), 3 / 5, rtol=1e-6)
    metric.reset_state()
    assert float(_np(metric.result())) == 0.0


def test_config_round_trip():
    loss = MaskedSparseCrossEntropy(label_smoothing=0.2, pad_id=3, from_logits=False, name="x")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(restored, MaskedSparseCrossEntropy)
    assert restored.get_config() == loss.get_config()
    metric = MaskedAccuracy(pad_id=2)
    assert MaskedAccuracy.from_config(metric.get_config()).pad_id == 2


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCrossEntropy(label_smoothing=1.0)
    labels, logits = _batch()
    with pytest.raises(ValueError, match="shape"):
        MaskedSparseCrossEntropy()(labels[..., None], logits)
