"""The symmetric contrastive loss against a NumPy reference written here from the paper's
pseudo-code (Radford et al. 2021, figure 3)."""

from __future__ import annotations

import keras
import numpy as np

from zoo.training.contrastive_loss import symmetric_contrastive_loss


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-log_probabilities[np.arange(len(labels)), labels].mean())


def reference(image_features: np.ndarray, text_features: np.ndarray, t: float) -> float:
    image = image_features / np.linalg.norm(image_features, axis=1, keepdims=True)
    text = text_features / np.linalg.norm(text_features, axis=1, keepdims=True)
    logits = image @ text.T * np.exp(t)
    labels = np.arange(len(image))
    return (_cross_entropy(logits, labels) + _cross_entropy(logits.T, labels)) / 2


def test_equals_the_reference_and_counts_both_directions():
    rng = np.random.default_rng(0)
    image, text = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    image_n = image / np.linalg.norm(image, axis=1, keepdims=True)
    text_n = text / np.linalg.norm(text, axis=1, keepdims=True)
    logits = (image_n @ text_n.T * np.exp(2.0)).astype("float32")
    loss = float(symmetric_contrastive_loss(logits))
    np.testing.assert_allclose(loss, reference(image, text, 2.0), rtol=1e-5)
    # Rows and columns both count: not the image-to-text half alone.
    assert abs(loss - _cross_entropy(logits, np.arange(6))) > 1e-3


def test_float16_logits_give_a_float32_loss():
    logits = np.array([[30.0, -30.0], [-30.0, 30.0]], "float16")
    loss = symmetric_contrastive_loss(logits)
    assert keras.backend.standardize_dtype(loss.dtype) == "float32" and float(loss) < 1e-6
