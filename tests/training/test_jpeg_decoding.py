"""One JPEG decoder for training and serving: PIL (training) and TensorFlow's accurate integer
DCT (the serving graph) give the same pixels on real CIFAR-10 JPEGs; TensorFlow's default
(fast) DCT does not."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from zoo.training.image_files import load_image

PER_CLASS = 3


@pytest.fixture(scope="module")
def cifar_jpegs(shared_data, tmp_path_factory) -> list:
    archive = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not archive.is_file():
        pytest.skip(f"CIFAR-10 archive {archive} is absent")
    folder = tmp_path_factory.mktemp("jpegs")
    counts: dict[str, int] = {}
    paths = []
    with tarfile.open(archive) as tar:
        for member in tar:
            label = member.name.split("/")[-2] if member.name.endswith(".jpg") else None
            if label is None or counts.get(label, 0) >= PER_CLASS:
                continue
            counts[label] = counts.get(label, 0) + 1
            path = folder / f"{label}-{counts[label]}.jpg"
            path.write_bytes(tar.extractfile(member).read())
            paths.append(path)
    return paths


def test_pil_equals_tensorflow_integer_accurate_dct(cifar_jpegs):
    tf = pytest.importorskip("tensorflow")

    assert len(cifar_jpegs) == 10 * PER_CLASS
    fast_differs = 0
    for path in cifar_jpegs:
        data = path.read_bytes()
        pil = load_image(path)  # what training sees
        accurate = tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE").numpy()
        np.testing.assert_array_equal(pil, accurate, err_msg=str(path))
        # The serving form: JPEGs through decode_jpeg, other formats through decode_image.
        served = tf.cond(
            tf.io.is_jpeg(data),
            lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
            lambda: tf.io.decode_image(data, channels=3, dtype=tf.uint8,
                                       expand_animations=False)).numpy()
        np.testing.assert_array_equal(pil, served, err_msg=str(path))
        default = tf.io.decode_image(data, channels=3, expand_animations=False).numpy()
        fast_differs += not np.array_equal(pil, default)
    # Why the serving graph must not use decode_image's default for JPEGs.
    assert fast_differs > 0
