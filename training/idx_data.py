"""MNIST-style IDX files (Fashion-MNIST, MNIST): read into NumPy, shaped for a ViT.

Debian's `dataset-fashion-mnist` package puts Fashion-MNIST under
`/usr/share/datasets/fashion-mnist/` as `train-images-idx3-ubyte.gz`,
`train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz` and `t10k-labels-idx1-ubyte.gz`.
The IDX format is a big-endian header (two zero bytes, a type code, the number of
dimensions, one uint32 per dimension) followed by the raw array.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from zoo.training.errors import UserError
from zoo.training.memory_bounds import as_given, check_decoded_images

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")
_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_SPLITS = {"train": "train", "test": "t10k"}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """The array stored in an IDX file (gzipped when the name ends with `.gz`).

    Raises:
        ValueError: the file is not IDX (bad magic number or type code) or is truncated.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _TYPES:
        raise UserError(f"{path} is not an IDX file (header {data[:4]!r})")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    dtype = np.dtype(_TYPES[data[2]])
    offset = 4 + 4 * dims
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - offset != expected:
        raise UserError(f"{path}: the header promises shape {shape} ({expected} bytes) but "
                        f"{len(data) - offset} bytes follow")
    return np.frombuffer(data, dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def is_idx_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds MNIST-style `train-images-idx3-ubyte(.gz)` files."""
    return any((Path(folder) / f"train-images-idx3-ubyte{ext}").exists() for ext in ("", ".gz"))


def load_idx_split(folder: str | os.PathLike = FASHION_MNIST_DIR, split: str = "train",
                   image_size: int = 32, limit_per_class: int | None = None, seed: int = 0,
                   names: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One split of an MNIST-style folder as RGB uint8 `(N, S, S, 3)` images and labels.

    The 28 x 28 grey images are padded with black to 32 x 32 (the CIFAR size, so that a
    CIFAR-10 ViT fine-tunes at the resolution it was trained at), repeated on three
    channels, and resized when `image_size` is not 32: the images kept are bounded by the
    machine's memory first (`zoo.training.memory_bounds.check_decoded_images`).

    Args:
        folder: the folder of IDX files (Fashion-MNIST's Debian location by default).
        split: "train" or "test".
        image_size: side of the returned images.
        limit_per_class: keep a random subset of at most this many images per class (chosen
            as `zoo.training.image_data.rows_per_class` does), before resizing.
        seed: seed of that subset.
        names: how the caller's user gives `image_size` and `limit_per_class`, for the
            memory bound's message (`{"image_size": "--image-size"}`); by default as these
            arguments.

    Raises:
        ValueError: an unknown split, or images that would not fit in memory;
            FileNotFoundError: missing files (the message says how to install
            Fashion-MNIST).
    """
    if split not in _SPLITS:
        raise UserError(f"split must be one of {sorted(_SPLITS)}; got {split!r}")
    prefix = Path(folder) / _SPLITS[split]
    paths = []
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        candidates = [Path(f"{prefix}-{kind}{ext}") for ext in (".gz", "")]
        found = next((p for p in candidates if p.exists()), None)
        if found is None:
            raise FileNotFoundError(
                f"no {candidates[0]} (for Fashion-MNIST: apt-get install dataset-fashion-mnist)")
        paths.append(found)
    images, labels = read_idx(paths[0]), read_idx(paths[1]).astype("int32")
    if images.ndim != 3 or len(images) != len(labels):
        raise UserError(f"{paths[0]} holds {images.shape}, {paths[1]} {labels.shape}: not "
                        "a split of grey images and their labels")
    if limit_per_class:
        from zoo.training.image_data import rows_per_class

        rows = rows_per_class(labels, int(labels.max()) + 1, limit_per_class, seed)
        images, labels = images[rows], labels[rows]
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    if image_size == images.shape[1]:
        return np.repeat(images[..., None], 3, axis=-1), labels
    limited = (f" ({as_given('limit_per_class', limit_per_class, names)})"
               if limit_per_class else "")
    check_decoded_images(len(images), image_size, f"resizing {paths[0]}",
                         f"the {len(images):,} images of {folder}{limited}",
                         as_given("image_size", image_size, names))
    from PIL import Image

    resized = np.empty((len(images), image_size, image_size, 3), np.uint8)
    for index, image in enumerate(images):
        grey = Image.fromarray(image).resize((image_size, image_size), Image.BICUBIC)
        resized[index] = np.asarray(grey)[..., None]
    return resized, labels
