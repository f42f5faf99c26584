"""PatchEmbedding against the ViT paper's linear projection of flattened patches (eq. 1)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from zoo.layers.patch_embedding import PatchEmbedding
from tests.layers.harness import run_layer_test


def flattened_patches(images: np.ndarray, p: int) -> np.ndarray:
    """(batch, H, W, C) -> (batch, N, p*p*C): patches in row-major order, each flattened in
    (row, col, channel) order, written with numpy loops only."""
    batch, height, width, channels = images.shape
    rows = []
    for i in range(height // p):
        for j in range(width // p):
            patch = images[:, i * p:(i + 1) * p, j * p:(j + 1) * p, :]
            rows.append(patch.reshape(batch, p * p * channels))
    return np.stack(rows, axis=1)


def test_harness():
    images = np.random.default_rng(0).uniform(size=(2, 8, 12, 3)).astype("float32")
    run_layer_test(PatchEmbedding, {"patch_size": 4, "hidden_dim": 6}, images,
                   expected_output_shape=(2, 6, 6), expected_num_trainable_weights=2)


@pytest.mark.parametrize("image_shape, p", [((16, 16, 3), 4), ((6, 10, 2), 2)])
def test_equals_the_linear_projection_of_flattened_patches(image_shape, p):
    rng = np.random.default_rng(1)
    images = rng.normal(size=(2, *image_shape)).astype("float32")
    layer = PatchEmbedding(patch_size=p, hidden_dim=5)
    layer(images)
    kernel = ops.convert_to_numpy(layer.projection.kernel)
    channels = image_shape[-1]
    assert kernel.shape == (p, p, channels, 5)
    layer.projection.set_weights([kernel, rng.normal(size=5).astype("float32")])
    out = ops.convert_to_numpy(layer(images))
    bias = ops.convert_to_numpy(layer.projection.bias)
    projection = kernel.reshape(p * p * channels, 5)  # the paper's E, (P^2 C, D)
    expected = flattened_patches(images, p) @ projection + bias
    assert out.shape == (2, (image_shape[0] // p) * (image_shape[1] // p), 5)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_grid_size():
    layer = PatchEmbedding(patch_size=16, hidden_dim=8)
    assert layer.grid_size(224) == (14, 14)
    assert layer.grid_size((64, 32)) == (4, 2)
    with pytest.raises(ValueError, match=r"width 40 \(image size 32x40\).*patch_size 16"):
        layer.grid_size((32, 40))
    with pytest.raises(ValueError, match="image_size"):
        layer.grid_size("224")


def test_indivisible_images_are_refused_naming_the_sizes():
    layer = PatchEmbedding(patch_size=4, hidden_dim=8)
    with pytest.raises(ValueError, match=r"height 30 \(image size 30x32\).*patch_size 4"):
        layer(np.zeros((1, 30, 32, 3), "float32"))
    layer(np.zeros((1, 32, 32, 3), "float32"))
    with pytest.raises(ValueError, match=r"width 33.*patch_size 4"):
        layer(np.zeros((1, 32, 33, 3), "float32"))
    with pytest.raises(ValueError, match=r"height 10.*patch_size 4"):
        PatchEmbedding(4, 8)(keras.Input((10, None, 3)))


def test_unknown_image_size_in_a_functional_model():
    images = keras.Input((None, None, 3))
    layer = PatchEmbedding(patch_size=2, hidden_dim=4)
    model = keras.Model(images, layer(images))
    x = np.random.default_rng(2).normal(size=(2, 6, 4, 3)).astype("float32")
    out = np.asarray(ops.convert_to_numpy(model(x)))
    assert out.shape == (2, 6, 4)
    kernel = ops.convert_to_numpy(layer.projection.kernel).reshape(2 * 2 * 3, 4)
    expected = flattened_patches(x, 2) @ kernel + ops.convert_to_numpy(layer.projection.bias)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{"patch_size": 0, "hidden_dim": 4},
                                    {"patch_size": 4, "hidden_dim": -1}])
def test_bad_constructor_arguments(kwargs):
    with pytest.raises(ValueError, match="must be a positive int"):
        PatchEmbedding(**kwargs)
