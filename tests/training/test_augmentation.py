"""Batch augmentation: crop with padding, flip, the CIFAR pipeline, MixUp and CutMix."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from tests.training.image_fixtures import cifar_subset
from zoo.training.augmentation import (
    MixBatch,
    RandomCropWithPadding,
    RandomErasing,
    cifar_augmentation,
    compiled_augmentation,
)
from zoo.training.image_data import load_image_folder_numpy


@pytest.fixture(scope="session")
def cifar_batch(tmp_path_factory, shared_data) -> np.ndarray:
    """32 real CIFAR-10 images, uint8 (32, 32, 32, 3), several of each class."""
    images, _, _ = load_image_folder_numpy(cifar_subset(tmp_path_factory, shared_data))
    return images[np.random.default_rng(0).permutation(len(images))[:32]]


def _np(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def _arange_images(batch: int, size: int = 8, channels: int = 3) -> np.ndarray:
    return np.arange(batch * size * size * channels, dtype="float32").reshape(
        batch, size, size, channels
    )


# --- identity at inference -----------------------------------------------------------------------


def test_everything_is_identity_when_not_training(cifar_batch):
    labels = np.eye(10, dtype="float32")[np.arange(32) % 10]
    for layer in (RandomCropWithPadding(seed=0), cifar_augmentation(seed=0)):
        np.testing.assert_array_equal(_np(layer(cifar_batch, training=False)), cifar_batch)
    for kind in ("mixup", "cutmix"):
        images, mixed = MixBatch(kind, seed=0)(cifar_batch, labels, training=False)
        np.testing.assert_array_equal(_np(images), cifar_batch)
        np.testing.assert_array_equal(_np(mixed), labels)


# --- crop with padding ---------------------------------------------------------------------------


@pytest.mark.parametrize("fill_mode", ["reflect", "constant"])
def test_crop_outputs_are_windows_of_the_padded_input(fill_mode):
    images = _arange_images(48)
    out = _np(RandomCropWithPadding(padding=2, fill_mode=fill_mode, seed=1)(images))
    assert out.shape == images.shape
    padded = np.pad(images, [(0, 0), (2, 2), (2, 2), (0, 0)], mode=fill_mode)  # numpy reference
    offsets = []
    for i in range(len(images)):
        found = [
            (dy, dx) for dy in range(5) for dx in range(5)
            if np.array_equal(out[i], padded[i, dy : dy + 8, dx : dx + 8])
        ]
        assert found, f"image {i} is not a window of its padded input"
        offsets.append(found[0])
    assert len(set(offsets)) > 5, "each image should get its own offset"


def test_crop_of_a_single_image_and_bad_arguments():
    image = _arange_images(1)[0]
    assert tuple(RandomCropWithPadding(padding=1, seed=0)(image).shape) == image.shape
    with pytest.raises(ValueError, match="padding"):
        RandomCropWithPadding(padding=-1)
    with pytest.raises(ValueError, match="fill_mode"):
        RandomCropWithPadding(fill_mode="wrap")
    with pytest.raises(ValueError, match="reflect padding"):
        RandomCropWithPadding(padding=8)(_arange_images(2, size=8))


# --- flip ----------------------------------------------------------------------------------------


def test_pipeline_flip_mirrors_some_images_left_to_right():
    flip = cifar_augmentation(image_size=8, rand_augment=False, seed=0).layers[1]
    images = _arange_images(32)
    out = _np(flip(images))
    mirrored = [np.array_equal(o, x[:, ::-1]) for o, x in zip(out, images)]
    kept = [np.array_equal(o, x) for o, x in zip(out, images)]
    assert all(m or k for m, k in zip(mirrored, kept))
    assert 0 < sum(mirrored) < len(images)


# --- the CIFAR pipeline on real images -----------------------------------------------------------


@pytest.mark.parametrize(
    "compiled",
    # Eager JAX compiles each of a few hundred small ops on first use: ~10 s, once.
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=["compiled", "eager"],
)
def test_cifar_augmentation_on_a_real_batch(cifar_batch, compiled):
    augment = cifar_augmentation(seed=0)
    if compiled:
        augment = compiled_augmentation(augment)
    out = _np(augment(cifar_batch))
    assert out.shape == cifar_batch.shape and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 255.0 and out.max() > 200.0
    changed = np.abs(out - cifar_batch).mean(axis=(1, 2, 3)) > 1.0
    assert changed.mean() > 0.5, "most images should be altered"


def test_compiled_augmentation_draws_fresh_randomness_each_call(cifar_batch):
    augment = compiled_augmentation(cifar_augmentation(rand_augment=False, seed=0))
    first, second = _np(augment(cifar_batch)), _np(augment(cifar_batch))
    assert not np.array_equal(first, second)


def test_cifar_augmentation_maps_over_tf_data(cifar_batch):
    if keras.backend.backend() != "tensorflow":
        pytest.skip("tf.data mapping of keras.ops layers needs the TensorFlow backend")
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(cifar_batch).batch(8)
    dataset = dataset.map(cifar_augmentation(seed=0))
    shapes = [tuple(batch.shape) for batch in dataset]
    assert shapes == [(8, 32, 32, 3)] * 4
    # The random state advances inside tf.data: the same batch twice is augmented differently.
    repeated = tf.data.Dataset.from_tensors(cifar_batch[:8]).repeat(2)
    first, second = [b.numpy() for b in repeated.map(cifar_augmentation(seed=0))]
    assert not np.array_equal(first, second)


def test_layers_config_round_trip():
    for layer in (
        RandomCropWithPadding(padding=3, fill_mode="constant", seed=7),
        MixBatch("cutmix", alpha=0.5, seed=2),
    ):
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config
    pipeline = cifar_augmentation(seed=0)
    restored = keras.layers.Pipeline.from_config(pipeline.get_config())
    assert [type(x).__name__ for x in restored.layers] == [
        "RandomCropWithPadding", "RandomFlip", "RandAugmentPolicy"
    ]


# --- MixUp and CutMix ----------------------------------------------------------------------------


def _one_hot_batch(batch: int = 16):
    """Image i is constant with value 10 * i + 5 and has class i: partners are recoverable."""
    images = np.broadcast_to(
        (10.0 * np.arange(batch) + 5.0)[:, None, None, None], (batch, 12, 10, 3)
    ).astype("float32")
    return images, np.eye(batch, dtype="float32")


def test_mixup_images_are_the_convex_combination_of_the_labels():
    images, labels = _one_hot_batch()
    out, mixed = (_np(x) for x in MixBatch("mixup", alpha=1.0, seed=3)(images, labels))
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-6)
    assert (mixed >= 0).all()
    # Rebuild each image from its label weights alone.
    expected = np.einsum("bk,khwc->bhwc", mixed, images)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-3)
    assert (mixed.max(axis=1) < 0.999).sum() > 4, "most images should actually be mixed"


def test_cutmix_label_weight_equals_the_pasted_area():
    images, labels = _one_hot_batch()
    out, mixed = (_np(x) for x in MixBatch("cutmix", alpha=1.0, seed=4)(images, labels))
    np.testing.assert_allclose(mixed.sum(axis=1), 1.0, atol=1e-6)
    pasted_somewhere = 0
    for i in range(len(images)):
        own = np.isclose(out[i, ..., 0], images[i, 0, 0, 0])
        np.testing.assert_allclose(mixed[i, i], own.mean(), atol=1e-6)
        if not own.all():
            pasted_somewhere += 1
            rows, cols = np.nonzero(~own)
            box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
            assert box == (~own).sum(), "the pasted region must be one rectangle"
            partner_value = out[i, rows[0], cols[0], 0]
            partner = int(round((partner_value - 5) / 10))
            np.testing.assert_allclose(mixed[i, partner], 1 - own.mean(), atol=1e-6)
    assert pasted_somewhere > 4


def test_mix_batch_arguments_and_compiled_use():
    with pytest.raises(ValueError, match="kind"):
        MixBatch("blend")
    with pytest.raises(ValueError, match="alpha"):
        MixBatch("mixup", alpha=0)
    images, labels = _one_hot_batch(8)
    with pytest.raises(ValueError, match="one-hot labels"):
        MixBatch("mixup")(images, np.arange(8))
    out, mixed = compiled_augmentation(MixBatch("cutmix", seed=0))(images, labels)
    assert tuple(out.shape) == images.shape and tuple(mixed.shape) == labels.shape


def test_random_erasing_paints_one_box_of_noise_within_its_area_range():
    images = np.full((300, 32, 32, 3), 7, "uint8")
    erased = np.asarray(RandomErasing(rate=0.999, seed=0)(images))
    changed = (erased != 7).any(axis=-1)  # (300, 32, 32)
    shares = []
    for mask in changed:
        rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
        assert len(rows) > 0
        box = mask[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
        # One axis-aligned rectangle (a noise pixel that happened to draw 7 in all three
        # channels would leave a hole: a chance of 6e-8 per pixel).
        assert box.all() and box.sum() == mask.sum()
        shares.append(mask.sum() / mask.size)
    # Area 2% to 1/3 of the image, sides rounded and clipped to the image.
    assert 0.008 < min(shares) and max(shares) < 0.36, (min(shares), max(shares))
    noise = erased[changed[..., None].repeat(3, -1)]
    assert noise.min() >= 0 and noise.max() <= 255 and np.all(noise == np.round(noise))
    assert noise.std() > 60  # uniform over 0..255: 74


def test_random_erasing_erases_its_rate_of_images_and_nothing_outside_training():
    images = np.random.default_rng(0).integers(0, 256, (2000, 8, 8, 3)).astype("uint8")
    layer = RandomErasing(rate=0.3, seed=4)
    erased = np.asarray(layer(images))
    share = np.mean((erased != images).any(axis=(1, 2, 3)))
    assert abs(share - 0.3) < 0.04, share
    np.testing.assert_array_equal(np.asarray(layer(images, training=False)), images)
    np.testing.assert_array_equal(np.asarray(RandomErasing(rate=0.0)(images)), images)
    with pytest.raises(ValueError, match="1.5"):
        RandomErasing(rate=1.5)
    with pytest.raises(ValueError, match="area"):
        RandomErasing(area=(0.5, 0.1))
    restored = RandomErasing.from_config(RandomErasing(rate=0.2, area=(0.1, 0.2)).get_config())
    assert (restored.rate, restored.area) == (0.2, (0.1, 0.2))


def test_cifar_augmentation_ends_with_random_erasing_at_its_rate():
    layers = cifar_augmentation(rand_augment=False, random_erasing=0.25).layers
    assert isinstance(layers[-1], RandomErasing) and layers[-1].rate == 0.25
    assert not any(isinstance(layer, RandomErasing) for layer in cifar_augmentation().layers)
