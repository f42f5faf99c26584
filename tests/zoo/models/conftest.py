"""Helpers of the Vision Transformer tests (`test_vit_*.py`): a tiny model, random uint8
images, a one-step fit, and the copies that tests compare a changed model against."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from zoo.models.vit.model import VisionTransformer

TINY = dict(image_size=16, patch_size=4, num_classes=5, hidden_dim=16, num_layers=2,
            num_heads=4, intermediate_dim=32, head_initializer="glorot_uniform")


def tiny(**overrides) -> VisionTransformer:
    """A 16 px model (4x4 grid, 17 tokens) whose head is not zero, so logits say something."""
    return VisionTransformer(**{**TINY, **overrides})


def images(n: int = 2, size: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3)).astype("uint8")


def numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def copy_of(model: VisionTransformer, **config) -> VisionTransformer:
    clone = VisionTransformer.from_config({**model.get_config(), **config})
    clone.set_weights(model.get_weights())
    return clone


def fit_one_step(model: VisionTransformer, x: np.ndarray, num_classes: int,
                 optimizer: keras.optimizers.Optimizer | None = None) -> float:
    model.compile(optimizer=optimizer or keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    y = np.arange(len(x)) % num_classes
    history = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)
    return float(history.history["loss"][0])


def zero_output_rows(model: VisionTransformer, heads: dict) -> VisionTransformer:
    """A copy of the unpruned model whose pruned heads contribute nothing."""
    reference = copy_of(model)
    for block, dropped in heads.items():
        dense = reference.encoder_blocks[block].self_attention.output_dense
        kernel, bias = dense.get_weights()  # kernel (heads, head_dim, hidden)
        kernel[dropped] = 0.0
        dense.set_weights([kernel, bias])
    return reference
