"""The loaders that decode a whole set of images at one size (a class folder, an IDX split, a
TFDS split) refuse, before the first image is decoded, a set the machine's memory cannot
hold: one line with the bytes, naming the arguments as the caller's user gave them. What
they do decode is what `load_image` gives image by image.

The machine's memory is a stand-in figure (10 MB); nothing large is decoded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zoo.training.image_files
import zoo.training.memory_bounds
from zoo.training import tfds_data
from zoo.training.errors import UserError
from zoo.training.idx_data import load_idx_split
from zoo.training.image_data import load_image_folder_numpy
from zoo.training.image_files import load_image, scan_image_folder

MEMORY = 10 * 10**6
FLAGS = {"image_size": "--image-size", "limit_per_class": "--limit-per-class"}


@pytest.fixture(autouse=True)
def stand_in_memory(monkeypatch):
    monkeypatch.setattr(zoo.training.memory_bounds, "physical_memory", lambda: MEMORY)


def _refuse_decoding(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an image was decoded")

    monkeypatch.setattr(zoo.training.image_files, "load_image", refuse)


def _folder(root: Path, side: int = 8, each: int = 2) -> Path:
    from PIL import Image

    for index in range(2):
        (root / f"c{index}").mkdir(parents=True)
        for item in range(each):
            Image.new("RGB", (side, side + 1), (index * 100, item * 50, 7)).save(
                root / f"c{index}" / f"{item}.png")
    return root


def _idx(root: Path) -> Path:
    root.mkdir()
    labels = np.repeat(np.arange(3, dtype=np.uint8), 4)  # 3 classes of 4
    images = np.arange(len(labels) * 28 * 28, dtype=np.uint8).reshape(len(labels), 28, 28)
    (root / "train-images-idx3-ubyte").write_bytes(
        bytes([0, 0, 8, 3]) + np.array(images.shape, ">u4").tobytes() + images.tobytes())
    (root / "train-labels-idx1-ubyte").write_bytes(
        bytes([0, 0, 8, 1]) + np.array([len(labels)], ">u4").tobytes() + labels.tobytes())
    return root


def _mb(count: int) -> str:
    return f"{count / 10**6:.1f} MB"


def _folder_at(root, size, names):
    return load_image_folder_numpy(_folder(root), size, names=names)


def _stored_size(root, size, names):  # 4 images 1200 wide, 1201 high: sizes from headers
    return load_image_folder_numpy(_folder(root, side=1200), None, names=names)


def _idx_at(root, size, names):
    return load_idx_split(_idx(root), "train", size, names=names)


def _idx_limited(root, size, names):
    return load_idx_split(_idx(root), "train", size, limit_per_class=2, names=names)


# (case, loader, size, the caller's names, the message's bytes, and what it names)
REFUSED = [
    ("a folder at 1024", _folder_at, 1024, None, 4 * 1024 * 1024 * 3,
     "the 4 images of {root} at image_size=1024 (1024 x 1024 x 3 bytes each)"),
    ("a folder at 1024, flags", _folder_at, 1024, FLAGS, 4 * 1024 * 1024 * 3,
     "the 4 images of {root} at --image-size 1024"),
    ("a folder at its stored size", _stored_size, None, None, 4 * 1201 * 1200 * 3,
     "the 4 images of {root} at their stored size (1201 x 1200 x 3 bytes each)"),
    ("an IDX split at 600", _idx_at, 600, FLAGS, 12 * 600 * 600 * 3,
     "the 12 images of {root} at --image-size 600"),
    ("an IDX split, 2 a class", _idx_limited, 1024, FLAGS, 6 * 1024 * 1024 * 3,
     "the 6 images of {root} (--limit-per-class 2) at --image-size 1024"),
]


@pytest.mark.parametrize("loader, size, names, total, most", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_a_set_the_memory_cannot_hold_is_refused_before_decoding(loader, size, names, total,
                                                                  most, tmp_path,
                                                                  monkeypatch):
    _refuse_decoding(monkeypatch)
    root = tmp_path / "data"
    with pytest.raises(UserError) as caught:
        loader(root, size, names)
    message = str(caught.value)
    assert "\n" not in message and f"would allocate {_mb(total)}, more than" in message
    assert f"; the most is {most.format(root=root)}" in message, message


# (case, loader, size): what the loaders decode, against `load_image` or PIL image by image.
DECODED = [("a folder at 5 x 6", _folder_at, (5, 6)), ("a folder as stored", _folder_at, None),
           ("an IDX split at 20", _idx_at, 20), ("an IDX split, 2 a class", _idx_limited, 9)]


@pytest.mark.parametrize("loader, size", [d[1:] for d in DECODED], ids=[d[0] for d in DECODED])
def test_what_fits_is_decoded_image_by_image(loader, size, tmp_path):
    from PIL import Image

    root = tmp_path / "data"
    images, labels = loader(root, size, None)[:2]
    if loader is _folder_at:
        paths = scan_image_folder(root)[0]
        expected = np.stack([load_image(path, size) for path in paths])
    else:
        stored = np.pad(np.arange(12 * 28 * 28, dtype=np.uint8).reshape(12, 28, 28),
                        ((0, 0), (2, 2), (2, 2)))
        rows = _kept_rows(labels)
        expected = np.stack([np.asarray(Image.fromarray(np.repeat(grey[..., None], 3, -1))
                                        .resize((size, size), Image.BICUBIC))
                             for grey in stored[rows]])
    assert images.dtype == np.uint8
    np.testing.assert_array_equal(images, expected)


def _kept_rows(labels: np.ndarray) -> np.ndarray:
    """The rows of the 12-image IDX split a run kept (all 12, or 2 of each class of 4)."""
    from zoo.training.image_data import rows_per_class

    all_labels = np.repeat(np.arange(3), 4)
    if len(labels) == 12:
        return np.arange(12)
    return rows_per_class(all_labels, 3, 2, 0)


class _Split:
    """A stand-in for `tfds_image_dataset`'s batches of 8 x 8 images: `examples` when TFDS
    knows the split's size, and how many batches were read."""

    def __init__(self, batches: int, known: bool) -> None:
        self.batches, self.read = batches, 0
        self.examples = 4 * batches if known else None

    def as_numpy_iterator(self):
        for _ in range(self.batches):
            self.read += 1
            yield np.zeros((4, 8, 8, 3), np.uint8), np.zeros(4, np.int32)


# (case, batches of 4 in the split, TFDS knows its size, the memory, batches read or None)
TFDS = [("known size, refused first", 1000, True, 10**5, 0),
        # Two copies of 4 x 66 images of 192 bytes pass 10**5 bytes; of 4 x 65 do not.
        ("unknown size, refused as read", 1000, False, 10**5, 66),
        ("fits", 3, False, 10**5, None)]


@pytest.mark.parametrize("batches, known, memory, read", [t[1:] for t in TFDS],
                         ids=[t[0] for t in TFDS])
def test_a_tfds_split_is_bounded_before_or_as_it_is_read(batches, known, memory, read,
                                                         monkeypatch):
    split = _Split(batches, known)
    monkeypatch.setattr(zoo.training.memory_bounds, "physical_memory", lambda: memory)
    monkeypatch.setattr(tfds_data, "tfds_builder", lambda name: None)
    monkeypatch.setattr(tfds_data, "class_label_names", lambda builder, spec: ["a", "b"])
    monkeypatch.setattr(tfds_data, "tfds_image_dataset", lambda *args, **kwargs: split)
    if read is None:
        images, labels, _ = tfds_data.tfds_image_arrays("tfds:x", 8, names=FLAGS)
        assert images.shape == (4 * batches, 8, 8, 3) and split.read == batches
        return
    with pytest.raises(UserError, match=r"^reading tfds:x:train would allocate .*; the most "
                                        r"is the [\d,]+ images of tfds:x:train at "
                                        r"--image-size 8 "):
        tfds_data.tfds_image_arrays("tfds:x", 8, names=FLAGS)
    assert split.read == read
