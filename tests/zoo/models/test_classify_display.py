"""`classify` in Python shows its probabilities as `zoo classify` prints them (four decimals),
and keeps their full value for arithmetic."""

from __future__ import annotations

import re

import numpy as np
from keras import ops

from zoo.models.vit.model import VisionTransformer


def test_probabilities_show_four_decimals_and_keep_their_value():
    model = VisionTransformer(image_size=16, patch_size=8, num_classes=3, hidden_dim=16,
                              num_layers=1, num_heads=2, intermediate_dim=16,
                              class_names=["cat", "dog", "ship"],
                              head_initializer="glorot_uniform")
    images = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3)).astype("uint8")
    result = model.classify(images, top_k=3)
    shown = repr(result)
    numbers = re.findall(r"\d+\.\d+", shown)
    assert numbers and all(len(n.split(".")[1]) == 4 for n in numbers), shown
    expected = np.asarray(ops.softmax(model(images), axis=-1), "float64")
    for row, probabilities in zip(result, expected):
        for name, probability in row:
            assert isinstance(probability, float)
            # The value is the softmax's, not the rounded one shown.
            assert abs(probability - probabilities[["cat", "dog", "ship"].index(name)]) < 1e-6
        assert abs(sum(p for _, p in row) - 1) < 1e-6
        assert f"{row[0][1]:.4f}" in shown
