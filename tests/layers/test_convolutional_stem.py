"""ConvolutionalStem against stride-2 3 x 3 convolutions, batch norm and ReLU in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.layers.convolutional_stem import ConvolutionalStem
from tests.layers.harness import run_layer_test


def conv3x3_stride2_same(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """(batch, H, W, C) * (3, 3, C, F) with stride 2 and 'same' padding (TensorFlow's rule:
    for even sides the one padding row and column go after the image), numpy loops only."""
    batch, height, width, _ = x.shape
    padded = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))
    out = np.zeros((batch, height // 2, width // 2, kernel.shape[-1]))
    for i in range(height // 2):
        for j in range(width // 2):
            window = padded[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
            out[:, i, j] = np.einsum("bhwc,hwcf->bf", window, kernel)
    return out


def test_harness():
    images = np.random.default_rng(0).uniform(size=(2, 16, 8, 3)).astype("float32")
    run_layer_test(ConvolutionalStem, {"filters": [4, 6]}, images,
                   expected_output_shape=(2, 4, 2, 6), expected_num_trainable_weights=6,
                   expected_num_non_trainable_weights=4)


def test_equals_convolution_batch_norm_relu_in_inference():
    rng = np.random.default_rng(1)
    images = rng.normal(size=(2, 8, 12, 3)).astype("float32")
    stem = ConvolutionalStem(filters=[5, 4])
    stem.build(images.shape)
    expected = images.astype("float64")
    for convolution, norm in zip(stem.convolutions, stem.normalizations):
        kernel = rng.normal(size=tuple(convolution.kernel.shape)).astype("float32")
        stats = [rng.uniform(0.5, 1.5, size=tuple(w.shape)).astype("float32")
                 for w in norm.weights]  # gamma, beta, moving mean, moving variance
        convolution.kernel.assign(kernel)
        for weight, value in zip(norm.weights, stats):
            weight.assign(value)
        gamma, beta, mean, variance = stats
        y = conv3x3_stride2_same(expected, kernel.astype("float64"))
        y = (y - mean) / np.sqrt(variance + norm.epsilon) * gamma + beta
        expected = np.maximum(y, 0.0)
    got = np.asarray(stem(images, training=False))
    assert stem.stride == 4
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("filters", [[], (), "32", [3, 0], [2.5]])
def test_bad_filters_name_the_value(filters):
    with pytest.raises(ValueError, match="filters must be|positive int"):
        ConvolutionalStem(filters=filters)


def max_pool3x3_stride2_same(x: np.ndarray) -> np.ndarray:
    """3 x 3 max pooling of stride 2, 'same' padding (for even sides: one row and column of
    -inf after the map), numpy loops only."""
    batch, height, width, channels = x.shape
    padded = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)), constant_values=-np.inf)
    out = np.zeros((batch, height // 2, width // 2, channels))
    for i in range(height // 2):
        for j in range(width // 2):
            out[:, i, j] = padded[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :].max(axis=(1, 2))
    return out


def conv3x3_same(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """(batch, H, W, C) * (3, 3, C, F) with stride 1 and 'same' padding, numpy loops only."""
    batch, height, width, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((batch, height, width, kernel.shape[-1]))
    for i in range(height):
        for j in range(width):
            out[:, i, j] = np.einsum("bhwc,hwcf->bf", padded[:, i:i + 3, j:j + 3, :], kernel)
    return out


def test_pooled_style_is_convolution_relu_max_pooling_with_no_state():
    rng = np.random.default_rng(2)
    images = rng.normal(size=(2, 8, 12, 3)).astype("float32")
    stem = ConvolutionalStem(filters=[5, 4], style="pooled")
    stem.build(images.shape)
    assert not stem.non_trainable_weights  # no batch norm: training and inference agree
    expected = images.astype("float64")
    for convolution in stem.convolutions:
        kernel = rng.normal(size=tuple(convolution.kernel.shape)).astype("float32")
        convolution.kernel.assign(kernel)
        expected = max_pool3x3_stride2_same(
            np.maximum(conv3x3_same(expected, kernel.astype("float64")), 0.0))
    for training in (True, False):
        got = np.asarray(stem(images, training=training))
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert stem.compute_output_shape(images.shape) == (2, 2, 3, 4) == got.shape


def test_pooled_style_harness():
    images = np.random.default_rng(3).uniform(size=(2, 16, 8, 3)).astype("float32")
    run_layer_test(ConvolutionalStem, {"filters": [4, 6], "style": "pooled"}, images,
                   expected_output_shape=(2, 4, 2, 6), expected_num_trainable_weights=2,
                   expected_num_non_trainable_weights=0)


def test_bad_style_names_the_value():
    with pytest.raises(ValueError, match="style must be one of .*'maxpool'"):
        ConvolutionalStem(filters=[4], style="maxpool")


def max_pool2x2(x: np.ndarray) -> np.ndarray:
    """2 x 2 max pooling of stride 2 (even sides), numpy only."""
    batch, height, width, channels = x.shape
    return x.reshape(batch, height // 2, 2, width // 2, 2, channels).max(axis=(2, 4))


def test_vgg_style_is_convolutions_with_batch_norm_then_max_pooling_per_stage():
    rng = np.random.default_rng(4)
    images = rng.normal(size=(2, 8, 12, 3)).astype("float32")
    stem = ConvolutionalStem(filters=[5, [4, 6]], style="vgg")
    stem.build(images.shape)
    assert stem.filters == [5, [4, 6]] and stem.stride == 4
    assert len(stem.convolutions) == len(stem.normalizations) == 3
    expected = images.astype("float64")
    convolution_index = 0
    for stage in ([5], [4, 6]):
        for _ in stage:
            convolution = stem.convolutions[convolution_index]
            norm = stem.normalizations[convolution_index]
            convolution_index += 1
            kernel = rng.normal(size=tuple(convolution.kernel.shape)).astype("float32")
            stats = [rng.uniform(0.5, 1.5, size=tuple(w.shape)).astype("float32")
                     for w in norm.weights]
            convolution.kernel.assign(kernel)
            for weight, value in zip(norm.weights, stats):
                weight.assign(value)
            gamma, beta, mean, variance = stats
            y = conv3x3_same(expected, kernel.astype("float64"))
            expected = np.maximum((y - mean) / np.sqrt(variance + norm.epsilon) * gamma + beta,
                                  0.0)
        expected = max_pool2x2(expected)
    got = np.asarray(stem(images, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert stem.compute_output_shape(images.shape) == (2, 2, 3, 6) == got.shape


def test_vgg_style_harness():
    images = np.random.default_rng(5).uniform(size=(2, 16, 8, 3)).astype("float32")
    run_layer_test(ConvolutionalStem, {"filters": [4, [6, 5]], "style": "vgg"}, images,
                   expected_output_shape=(2, 4, 2, 5), expected_num_trainable_weights=9,
                   expected_num_non_trainable_weights=6)


@pytest.mark.parametrize("filters", [[4, []], [[4, 0]], [[2.5]]])
def test_bad_vgg_stages_name_the_value(filters):
    with pytest.raises(ValueError, match="at least one convolution|positive int"):
        ConvolutionalStem(filters=filters, style="vgg")


@pytest.mark.parametrize("style", ["strided", "pooled"])
def test_only_the_vgg_style_takes_stages_of_several_convolutions(style):
    with pytest.raises(ValueError, match="each of filters"):
        ConvolutionalStem(filters=[4, [6, 6]], style=style)
