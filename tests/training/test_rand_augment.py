"""RandAugmentPolicy: each operation against PIL's ImageOps / ImageEnhance on real CIFAR images."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops
from PIL import Image, ImageEnhance, ImageOps

from tests.training.image_fixtures import cifar_subset
from zoo.training.augmentation import compiled_augmentation
from zoo.training.image_data import load_image_folder_numpy
from zoo.training.rand_augment import OPERATIONS, RandAugmentPolicy


@pytest.fixture(scope="session")
def cifar_images(tmp_path_factory, shared_data) -> np.ndarray:
    images, _, _ = load_image_folder_numpy(
        cifar_subset(tmp_path_factory, shared_data), limit_per_class=2
    )
    return images  # uint8 (20, 32, 32, 3)


def _apply(images, operation: str, magnitude: float, seed: int = 0) -> np.ndarray:
    layer = RandAugmentPolicy(num_ops=1, magnitude=magnitude, operations=[operation], seed=seed)
    return np.asarray(ops.convert_to_numpy(layer(images)))


def _pil(images, function) -> np.ndarray:
    return np.stack([np.asarray(function(Image.fromarray(x))) for x in images]).astype("float32")


@pytest.mark.parametrize(
    "operation, magnitude, reference, tolerance",
    [
        ("equalize", 0.5, ImageOps.equalize, 0.0),
        ("auto_contrast", 0.5, ImageOps.autocontrast, 1.0),  # PIL truncates its lookup table
        ("solarize", 0.5, lambda im: ImageOps.solarize(im, 128), 0.0),
        ("posterize", 0.5, lambda im: ImageOps.posterize(im, 6), 0.0),
        ("posterize", 1.0, lambda im: ImageOps.posterize(im, 4), 0.0),
    ],
)
def test_unsigned_operations_match_pil(cifar_images, operation, magnitude, reference, tolerance):
    got = _apply(cifar_images, operation, magnitude)
    np.testing.assert_allclose(got, _pil(cifar_images, reference), atol=tolerance)


@pytest.mark.parametrize(
    "operation, enhancer",
    [
        ("color", ImageEnhance.Color),
        ("contrast", ImageEnhance.Contrast),
        ("brightness", ImageEnhance.Brightness),
        ("sharpness", ImageEnhance.Sharpness),
    ],
)
def test_enhance_operations_match_pil_with_a_random_sign(cifar_images, operation, enhancer):
    magnitude = 0.5  # blend factor 1 +- 0.45
    got = _apply(cifar_images, operation, magnitude)
    stronger = _pil(cifar_images, lambda im: enhancer(im).enhance(1.45))
    weaker = _pil(cifar_images, lambda im: enhancer(im).enhance(0.55))
    signs = []
    for g, up, down in zip(got, stronger, weaker):
        errors = (np.abs(g - up).max(), np.abs(g - down).max())
        assert min(errors) <= 1.5, errors  # PIL rounds to uint8; contrast rounds its mean
        signs.append(int(np.argmin(errors)))
    assert 0 < sum(signs) < len(signs), "both directions should be drawn"


def test_rotation_matches_pil_in_the_interior(cifar_images):
    got = _apply(cifar_images, "rotate", 1.0)  # +-30 degrees
    for g, image in zip(got, cifar_images):
        errors = []
        for angle in (30, -30):
            rotated = Image.fromarray(image).rotate(
                angle, resample=Image.BILINEAR, fillcolor=(128, 128, 128)
            )
            errors.append(np.abs(g - np.asarray(rotated, "float32"))[4:-4, 4:-4].mean())
        assert min(errors) < 2.0 and max(errors) > 10.0, errors


def test_translation_is_an_exact_shift_with_gray_fill(cifar_images):
    magnitude = 5 / (0.45 * 32)  # a shift of exactly 5 pixels
    got = _apply(cifar_images, "translate_x", magnitude)
    for g, image in zip(got, cifar_images.astype("float32")):
        left = np.full_like(image, 128.0)
        left[:, :-5] = image[:, 5:]
        right = np.full_like(image, 128.0)
        right[:, 5:] = image[:, :-5]
        assert min(np.abs(g - left).max(), np.abs(g - right).max()) < 1e-3


def test_magnitude_zero_is_identity_for_every_operation_that_has_a_magnitude(cifar_images):
    scaled = [name for name in OPERATIONS if name not in ("auto_contrast", "equalize")]
    layer = RandAugmentPolicy(num_ops=3, magnitude=0.0, operations=scaled, seed=0)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(cifar_images)), cifar_images, atol=1e-3)


def test_operations_are_drawn_per_image(cifar_images):
    layer = RandAugmentPolicy(
        num_ops=1, magnitude=0.9, operations=["identity", "solarize"], seed=1
    )
    got = np.asarray(ops.convert_to_numpy(layer(cifar_images)))
    unchanged = [np.array_equal(g, x) for g, x in zip(got, cifar_images.astype("float32"))]
    assert 0 < sum(unchanged) < len(unchanged)


def test_full_policy_range_shape_and_compiled_run(cifar_images):
    layer = RandAugmentPolicy(num_ops=2, magnitude=0.9, seed=0)
    for run in (layer, compiled_augmentation(RandAugmentPolicy(num_ops=2, magnitude=0.9, seed=0))):
        out = np.asarray(ops.convert_to_numpy(run(cifar_images)))
        assert out.shape == cifar_images.shape and out.dtype == np.float32
        assert out.min() >= 0.0 and out.max() <= 255.0
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer(cifar_images, training=False)), cifar_images
    )
    config = layer.get_config()
    assert RandAugmentPolicy.from_config(config).get_config() == config


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="magnitude"):
        RandAugmentPolicy(magnitude=9)
    with pytest.raises(ValueError, match="num_ops"):
        RandAugmentPolicy(num_ops=-1)
    with pytest.raises(ValueError, match="invert"):
        RandAugmentPolicy(operations=["rotate", "invert"])
    with pytest.raises(ValueError, match="RGB"):
        RandAugmentPolicy(seed=0)(np.zeros((2, 8, 8, 1), "float32"))
