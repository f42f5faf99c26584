"""TFDS by name (`zoo.training.tfds_data`), offline: TFDS's own mock data
(`tfds.testing.mock_data`, random examples shaped by the dataset's features) or a replaced
`tfds.load`."""

import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.training.tfds_data import (
    TfdsSpec,
    parse_tfds_spec,
    tfds_builder,
    tfds_image_arrays,
    tfds_image_dataset,
    tfds_translation_pairs,
)

tfds = pytest.importorskip("tensorflow_datasets")
pytest.importorskip("tensorflow")


@pytest.fixture(autouse=True)
def _mock_data_counts_as_prepared(monkeypatch):
    """TFDS's mock data is never in the data folder: `require_data` (which would probe the
    network for its download) stands aside; tests/training/test_tfds_offline.py tests it."""
    from zoo.training import tfds_data

    monkeypatch.setattr(tfds_data, "require_data", lambda builder, spec, **kwargs: None)


@pytest.mark.parametrize("spec, expected", [
    ("tfds:cifar10", ("cifar10", "train")),
    ("tfds:cifar100:test", ("cifar100", "test")),
    ("tfds:cifar10:3.0.2", ("cifar10:3.0.2", "train")),
    ("tfds:cifar10:3.*.*:train[:10%]+test", ("cifar10:3.*.*", "train[:10%]+test")),
    ("tfds:ted_hrlr_translate/pt_to_en:validation",
     ("ted_hrlr_translate/pt_to_en", "validation")),
])
def test_specs_name_the_dataset_and_the_split(spec, expected):
    assert parse_tfds_spec(spec) == TfdsSpec(*expected)


@pytest.mark.parametrize("spec", ["cifar10", "tfds:", "tfds::train", "tfds:cifar10:"])
def test_a_malformed_spec_is_one_line(spec):
    with pytest.raises(UserError, match="tfds:NAME") as error:
        parse_tfds_spec(spec)
    assert "\n" not in str(error.value)


def test_an_unknown_name_is_one_line_with_the_nearest_names():
    with pytest.raises(UserError) as error:
        tfds_builder("cifar11")
    message = str(error.value)
    assert "\n" not in message and "'cifar11'" in message and "cifar10" in message


def test_an_unknown_config_lists_the_datasets_configs():
    with pytest.raises(UserError, match="pt_to_en") as error:
        tfds_builder("ted_hrlr_translate/xx_to_yy")
    assert "\n" not in str(error.value) and "xx_to_yy" in str(error.value)


def test_image_arrays_of_a_grayscale_split_are_rgb_at_the_asked_size():
    with tfds.testing.mock_data(num_examples=30):
        images, labels, names = tfds_image_arrays("tfds:mnist:test", 20)
        stored = [image for image, _ in tfds.as_numpy(
            tfds.load("mnist", split="test", as_supervised=True, shuffle_files=False))]
    assert images.shape == (30, 20, 20, 3) and images.dtype == np.uint8
    assert labels.dtype == np.int32 and 0 <= labels.min() and labels.max() <= 9
    assert names == [str(digit) for digit in range(10)]  # MNIST's label names
    np.testing.assert_array_equal(images[..., 0], images[..., 2])  # gray copied to RGB
    # The first image, resized independently of the zoo (PIL, bilinear with antialiasing).
    from PIL import Image

    reference = np.asarray(Image.fromarray(stored[0][..., 0]).resize((20, 20), Image.BILINEAR))
    assert np.abs(images[0, ..., 0].astype(int) - reference.astype(int)).max() <= 2


def test_image_arrays_keep_at_most_limit_per_class():
    with tfds.testing.mock_data(num_examples=60):
        images, labels, _ = tfds_image_arrays("tfds:cifar10", 32, limit_per_class=2)
    assert np.bincount(labels, minlength=10).max() <= 2 and len(images) == len(labels) >= 10


def test_translation_pairs_follow_the_asked_direction():
    with tfds.testing.mock_data(num_examples=12):
        forward = tfds_translation_pairs("tfds:ted_hrlr_translate/pt_to_en:validation", "pt", "en")
        backward = tfds_translation_pairs("tfds:ted_hrlr_translate/pt_to_en:validation", "en", "pt")
        stored = list(tfds.as_numpy(tfds.load("ted_hrlr_translate/pt_to_en", split="validation",
                                              as_supervised=True, shuffle_files=False)))
    assert forward == [(pt.decode().strip(), en.decode().strip()) for pt, en in stored]
    assert backward == [(target, source) for source, target in forward]


def test_languages_the_set_lacks_are_one_line_naming_its_languages():
    with tfds.testing.mock_data(num_examples=3):
        with pytest.raises(UserError, match="holds the languages en, pt") as error:
            tfds_translation_pairs("tfds:ted_hrlr_translate/pt_to_en", "en", "de")
    assert "--target-lang de" in str(error.value)


def test_a_split_without_class_labels_is_refused():
    with tfds.testing.mock_data(num_examples=3):
        with pytest.raises(UserError, match="not a class label"):
            tfds_image_arrays("tfds:ted_hrlr_translate/pt_to_en", 32)


def test_tfds_image_dataset_validates_before_loading():
    for kwargs, message in (
        (dict(name="", split="train", image_size=32, batch_size=8), "name"),
        (dict(name="cifar10", split="", image_size=32, batch_size=8), "split"),
        (dict(name="cifar10", split="train", image_size=(32,), batch_size=8), "image_size"),
        (dict(name="cifar10", split="train", image_size=32, batch_size=-1), "batch_size"),
    ):
        with pytest.raises(ValueError, match=message):
            tfds_image_dataset(**kwargs)


def test_tfds_image_dataset_converts_a_grayscale_dataset(monkeypatch):
    """Offline: `tfds.load` is replaced by a small in-memory dataset of 28x28 gray digits."""
    tf = pytest.importorskip("tensorflow")
    tfds = pytest.importorskip("tensorflow_datasets")
    digits = np.random.default_rng(0).integers(0, 256, (6, 28, 28, 1), dtype="uint8")

    def fake_load(name, split, as_supervised, **kwargs):
        assert (name, split, as_supervised) == ("mnist", "train[:6]", True)
        return tf.data.Dataset.from_tensor_slices((digits, np.arange(6, dtype="int64")))

    monkeypatch.setattr(tfds, "load", fake_load)
    dataset = tfds_image_dataset("mnist", "train[:6]", (28, 28), batch_size=4, shuffle=False)
    images, labels = next(iter(dataset.as_numpy_iterator()))
    assert images.shape == (4, 28, 28, 3) and images.dtype == np.uint8
    assert labels.dtype == np.int32 and labels.tolist() == [0, 1, 2, 3]
    for channel in range(3):
        np.testing.assert_array_equal(images[..., channel], digits[:4, ..., 0])
    resized = tfds_image_dataset("mnist", "train[:6]", 32, batch_size=6, shuffle=False)
    assert next(iter(resized.as_numpy_iterator()))[0].shape == (6, 32, 32, 3)
