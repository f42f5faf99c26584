"""Image input: archive extraction, class folders, PIL decoding, tf.data pipelines."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.training.image_fixtures import CIFAR10_CLASSES, PER_CLASS, cifar_subset
from zoo.training.files.archives import extract_archive
from zoo.training.image_data import (
    image_folder_tf_dataset,
    load_image_folder_numpy,
    train_validation_split,
)
from zoo.training.image_files import load_image, scan_image_folder


@pytest.fixture(scope="session")
def cifar_train(tmp_path_factory, shared_data) -> Path:
    return cifar_subset(tmp_path_factory, shared_data)


def _tar_with(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


# --- extract_archive ---------------------------------------------------------------------------


def test_extract_archive_limits_files_per_class_and_runs_once(cifar_train, tmp_path):
    counts = {d.name: len(list(d.iterdir())) for d in cifar_train.iterdir()}
    assert counts == {name: PER_CLASS for name in CIFAR10_CLASSES}

    members = [
        _file_member(f"train/{label}/{i:04d}.jpg", b"x" * (i + 1))
        for label in ("cat", "dog") for i in range(5)
    ]
    archive = _tar_with(tmp_path / "small.tar.gz", members)
    destination = extract_archive(archive, tmp_path / "out", limit_per_class=2)
    assert sorted(p.name for p in (destination / "train" / "dog").iterdir()) == [
        "0000.jpg", "0001.jpg"
    ]
    removed = destination / "train" / "cat" / "0000.jpg"
    removed.unlink()
    extract_archive(archive, tmp_path / "out", limit_per_class=2)
    assert not removed.exists(), "a second call with the same settings must not extract again"
    extract_archive(archive, tmp_path / "out")
    assert removed.read_bytes() == b"x" and len(list(removed.parent.iterdir())) == 5


@pytest.mark.parametrize(
    "name", ["../escape.txt", "/tmp/absolute-escape.txt", "a/../../escape.txt"]
)
def test_extract_archive_refuses_members_outside_the_destination(tmp_path, name):
    archive = _tar_with(tmp_path / "bad.tar.gz", [_file_member(name, b"owned")])
    with pytest.raises(ValueError, match="unsafe member"):
        extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_extract_archive_refuses_links(tmp_path):
    link = tarfile.TarInfo("train/cat/link.jpg")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    archive = _tar_with(tmp_path / "link.tar.gz", [(link, None)])
    with pytest.raises(ValueError, match="link or special file"):
        extract_archive(archive, tmp_path / "out")


def test_extract_archive_errors_name_the_archive(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.tar.gz"):
        extract_archive(tmp_path / "missing.tar.gz", tmp_path / "out")
    not_tar = tmp_path / "not.tar.gz"
    not_tar.write_bytes(b"plain text, not a tar archive")
    with pytest.raises(ValueError, match="not.tar.gz"):
        extract_archive(not_tar, tmp_path / "out")


# --- scan_image_folder -----------------------------------------------------------------------


def test_scan_image_folder_reads_cifar_classes_in_sorted_order(cifar_train):
    paths, labels, class_names = scan_image_folder(cifar_train)
    assert class_names == CIFAR10_CLASSES
    assert labels.dtype == np.int32 and len(paths) == len(labels) == 10 * PER_CLASS
    assert np.bincount(labels).tolist() == [PER_CLASS] * 10
    assert all(p.parent.name == class_names[label] for p, label in zip(paths, labels))


def test_scan_image_folder_agrees_with_keras_class_order(cifar_train):
    pytest.importorskip("tensorflow")
    import keras

    dataset = keras.utils.image_dataset_from_directory(
        cifar_train, image_size=(32, 32), batch_size=8, shuffle=False, verbose=False
    )
    assert scan_image_folder(cifar_train)[2] == dataset.class_names


def _save_gray(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros((4, 4), "uint8")).save(path)


def test_scan_image_folder_explains_bad_layouts(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "absent")):
        scan_image_folder(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no images found in"):
        scan_image_folder(tmp_path / "empty")
    _save_gray(tmp_path / "flat" / "0001.png")
    with pytest.raises(ValueError, match="expected one subfolder per class"):
        scan_image_folder(tmp_path / "flat")
    _save_gray(tmp_path / "classes" / "cat" / "0001.png")
    (tmp_path / "classes" / "dog").mkdir()
    (tmp_path / "classes" / "dog" / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match=r"class folder .*dog holds no images"):
        scan_image_folder(tmp_path / "classes")
    with pytest.raises(NotADirectoryError):
        scan_image_folder(tmp_path / "flat" / "0001.png")


# --- load_image ---------------------------------------------------------------------------------


def test_load_image_converts_modes_to_rgb_uint8(tmp_path):
    gray = np.arange(48, dtype="uint8").reshape(6, 8) * 5
    Image.fromarray(gray, "L").save(tmp_path / "gray.png")
    out = load_image(tmp_path / "gray.png")
    assert out.shape == (6, 8, 3) and out.dtype == np.uint8
    for channel in range(3):
        np.testing.assert_array_equal(out[..., channel], gray)

    rgba = np.random.default_rng(0).integers(0, 256, (6, 8, 4), dtype="uint8")
    rgba[..., 3] = 0  # fully transparent: the stored colour is kept, alpha dropped
    Image.fromarray(rgba, "RGBA").save(tmp_path / "rgba.png")
    np.testing.assert_array_equal(load_image(tmp_path / "rgba.png"), rgba[..., :3])

    Image.fromarray(np.stack([gray, gray], -1), "LA").save(tmp_path / "la.png")
    np.testing.assert_array_equal(load_image(tmp_path / "la.png")[..., 1], gray)

    palette = Image.fromarray(rgba[..., :3]).quantize(colors=16)
    palette.save(tmp_path / "palette.png", transparency=0)
    expected = np.asarray(palette.convert("RGB"))
    np.testing.assert_array_equal(load_image(tmp_path / "palette.png"), expected)


def test_load_image_scales_16_bit_png_to_8_bit(tmp_path):
    deep = np.array([[0, 257, 32896], [65535, 1000, 65000]], dtype="uint16")
    Image.fromarray(deep).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    out = load_image(tmp_path / "deep.png")
    assert out.dtype == np.uint8 and out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out[..., 0], [[0, 1, 128], [255, 4, 253]])


def test_load_image_rejects_non_images_naming_the_file(tmp_path, cifar_train):
    fake = tmp_path / "holiday.jpg"
    fake.write_text("this is a text file with a .jpg name")
    with pytest.raises(ValueError, match="holiday.jpg"):
        load_image(fake)
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes((cifar_train / "cat" / "0000.jpg").read_bytes()[:300])
    with pytest.raises(ValueError, match="truncated.jpg"):
        load_image(truncated)
    with pytest.raises(FileNotFoundError, match="nothing.png"):
        load_image(tmp_path / "nothing.png")


def test_load_image_resizes_bilinearly(tmp_path):
    Image.fromarray(np.full((40, 50, 3), 77, "uint8")).save(tmp_path / "flat.png")
    out = load_image(tmp_path / "flat.png", image_size=(16, 24))
    assert out.shape == (16, 24, 3)
    assert (out == 77).all()  # any interpolation keeps a constant image constant
    with pytest.raises(ValueError, match="image_size"):
        load_image(tmp_path / "flat.png", image_size=(16, 0))


def test_load_image_matches_tensorflow_decoding(tmp_path, cifar_train):
    """The serving graph decodes with tf.io.decode_image(channels=3): PNGs must agree exactly."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (5, 7), dtype="uint8"), "L").save(tmp_path / "l.png")
    Image.fromarray(rng.integers(0, 256, (5, 7, 4), dtype="uint8"), "RGBA").save(tmp_path / "a.png")
    Image.fromarray(rng.integers(0, 65536, (5, 7), dtype="uint16")).save(tmp_path / "d.png")
    for name, tolerance in (("l.png", 0), ("a.png", 0), ("d.png", 1)):
        data = tf.io.read_file(str(tmp_path / name))
        expected = tf.io.decode_image(data, channels=3, expand_animations=False).numpy()
        got = load_image(tmp_path / name).astype(int)
        assert np.abs(got - expected.astype(int)).max() <= tolerance, name
    # JPEG decoders differ slightly (IDCT, chroma upsampling): close, not identical.
    jpeg = cifar_train / "dog" / "0003.jpg"
    expected = tf.io.decode_jpeg(tf.io.read_file(str(jpeg)), channels=3).numpy().astype(int)
    difference = np.abs(load_image(jpeg).astype(int) - expected)
    assert difference.mean() < 2.0 and difference.max() <= 10


# --- in-memory and tf.data readers ---------------------------------------------------------------


def test_load_image_folder_numpy_on_cifar(cifar_train):
    images, labels, class_names = load_image_folder_numpy(cifar_train)
    assert images.shape == (10 * PER_CLASS, 32, 32, 3) and images.dtype == np.uint8
    assert labels.dtype == np.int32 and class_names == CIFAR10_CLASSES
    assert 60 < images.mean() < 200 and images.std() > 30  # real photographs, not blanks
    paths, _, _ = scan_image_folder(cifar_train)
    np.testing.assert_array_equal(images[37], load_image(paths[37]))

    small, small_labels, _ = load_image_folder_numpy(cifar_train, (16, 16), limit_per_class=3)
    again, _, _ = load_image_folder_numpy(cifar_train, (16, 16), limit_per_class=3)
    other, _, _ = load_image_folder_numpy(cifar_train, (16, 16), limit_per_class=3, seed=5)
    assert small.shape == (30, 16, 16, 3) and np.bincount(small_labels).tolist() == [3] * 10
    np.testing.assert_array_equal(small, again)
    assert not np.array_equal(small, other)


def test_train_validation_split_is_a_deterministic_partition():
    train, validation = train_validation_split(50_000, 5_000, seed=0)
    assert len(train) == 45_000 and len(validation) == 5_000
    assert np.array_equal(np.sort(np.concatenate([train, validation])), np.arange(50_000))
    again = train_validation_split(50_000, 5_000, seed=0)
    np.testing.assert_array_equal(validation, again[1])
    assert not np.array_equal(validation, train_validation_split(50_000, 5_000, seed=1)[1])
    assert len(train_validation_split(200, 0.25)[1]) == 50
    for bad in (0, 50_000, 1.0, -0.1, "10%", True):
        with pytest.raises(ValueError, match="validation_size"):
            train_validation_split(50_000, bad)


def test_train_validation_split_by_class_holds_out_each_class_in_proportion():
    labels = np.repeat(np.arange(10), 5_000)
    train, validation = train_validation_split(50_000, 5_000, seed=0, labels=labels)
    assert np.bincount(labels[validation]).tolist() == [500] * 10
    assert np.array_equal(np.sort(np.concatenate([train, validation])), np.arange(50_000))
    again = train_validation_split(50_000, 5_000, seed=0, labels=labels)[1]
    np.testing.assert_array_equal(validation, again)
    uneven = np.array([0] * 7 + [1] * 3)  # half of each: 3.5 and 1.5, remainders tie -> 4 + 1
    held = train_validation_split(10, 5, labels=uneven)[1]
    assert np.bincount(uneven[held]).tolist() == [4, 1]
    with pytest.raises(ValueError, match="labels"):
        train_validation_split(10, 5, labels=np.zeros(9))


def test_image_folder_tf_dataset_matches_the_numpy_reader(cifar_train):
    pytest.importorskip("tensorflow")
    images, labels, _ = load_image_folder_numpy(cifar_train)
    dataset = image_folder_tf_dataset(cifar_train, (32, 32), batch_size=64, shuffle=False)
    batches = list(dataset.as_numpy_iterator())
    assert [b[0].shape[0] for b in batches] == [64, 64, 64, 8]
    tf_images = np.concatenate([b[0] for b in batches])
    tf_labels = np.concatenate([b[1] for b in batches])
    assert tf_images.dtype == np.uint8 and tf_labels.dtype == np.int32
    np.testing.assert_array_equal(tf_labels, labels)
    assert np.abs(tf_images.astype(int) - images.astype(int)).mean() < 1.0  # JPEG decoders
    assert dataset.class_names == CIFAR10_CLASSES

    train, validation = image_folder_tf_dataset(
        cifar_train, 32, 16, validation_split=50, subset="both", seed=3
    )
    _, validation_index = train_validation_split(len(labels), 50, seed=3, labels=labels)
    validation_labels = np.concatenate([b[1] for b in validation.as_numpy_iterator()])
    np.testing.assert_array_equal(validation_labels, labels[validation_index])
    assert sum(b[1].shape[0] for b in train.as_numpy_iterator()) == len(labels) - 50


def test_image_folder_tf_dataset_argument_errors(cifar_train):
    with pytest.raises(ValueError, match="subset"):
        image_folder_tf_dataset(cifar_train, 32, 8, validation_split=0.1)
    with pytest.raises(ValueError, match="subset"):
        image_folder_tf_dataset(cifar_train, 32, 8, validation_split=0.1, subset="test")
    with pytest.raises(ValueError, match="batch_size"):
        image_folder_tf_dataset(cifar_train, 32, 0)
