"""Reading image files: the class-folder layout and PIL decoding to RGB uint8.

The layout is the one `keras.utils.image_dataset_from_directory` reads: one subfolder per
class, the class index being the folder name's position in sorted order
(`train/airplane/0000.jpg`, `train/automobile/0000.jpg`, ...).

Colour handling agrees with `tf.io.decode_image(channels=3)`, which the serving graph uses:
grayscale and palette images are expanded to RGB; an alpha channel is dropped (not
composited), so a pixel's colour is what the file stores; 16-bit images are scaled to 8 bits;
EXIF orientation is not applied.

JPEG pixels agree exactly with `tf.io.decode_jpeg(data, channels=3,
dct_method="INTEGER_ACCURATE")` (libjpeg's accurate integer DCT, which PIL uses), not with
`tf.io.decode_image`'s default fast DCT: a serving graph decodes JPEGs that way so that a
model sees the pixels it was trained on (tests/training/test_jpeg_decoding.py).
"""

from __future__ import annotations

import os
import re
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from zoo.training.errors import UserError

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")

# Held while PIL reads a header with its decompression-bomb warning turned into an error
# (`warnings.catch_warnings` changes process-wide state; load_image runs in threads).
_HEADER_LOCK = threading.Lock()


def _is_image_file(path: Path) -> bool:
    suffix_ok = path.suffix.lower() in IMAGE_EXTENSIONS
    return suffix_ok and path.is_file() and not path.name.startswith(".")


def scan_image_folder(directory: str | os.PathLike) -> tuple[list[Path], np.ndarray, list[str]]:
    """Lists the images of a one-folder-per-class dataset.

    Class names are the subfolder names in sorted order (hidden folders skipped); images are
    the files with an extension in `IMAGE_EXTENSIONS`, searched recursively in each class
    folder, sorted by path. Files lying directly in `directory` beside class folders are ignored,
    as `keras.utils.image_dataset_from_directory` does.

    Args:
        directory: the dataset folder, e.g. `.../train`.

    Returns:
        `(paths, labels, class_names)`: the image paths, their int32 class indices, and the class
        names.

    Raises:
        FileNotFoundError: `directory` does not exist.
        NotADirectoryError: `directory` is a file.
        ValueError: no images, images without class subfolders, or a class folder without
            images.

    Example:
        >>> paths, labels, class_names = scan_image_folder("data/train")  # doctest: +SKIP
    """
    directory = Path(directory)
    if not directory.exists():
        raise FileNotFoundError(f"image folder {directory} does not exist")
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file; expected a folder of class subfolders")
    class_dirs = sorted(
        (p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.name,
    )
    if not class_dirs:
        loose = [p for p in directory.iterdir() if _is_image_file(p)]
        if loose:
            raise UserError(
                f"found {len(loose)} images directly in {directory} but no class subfolders; "
                f"expected one subfolder per class, e.g. {directory / 'cat' / loose[0].name}"
            )
        raise UserError(
            f"no images found in {directory}: expected one subfolder per class holding "
            f"{', '.join(IMAGE_EXTENSIONS)} files"
        )
    paths: list[Path] = []
    labels: list[int] = []
    for index, class_dir in enumerate(class_dirs):
        files = sorted(p for p in class_dir.rglob("*") if _is_image_file(p))
        if not files:
            raise UserError(
                f"class folder {class_dir} holds no images "
                f"(looked for {', '.join(IMAGE_EXTENSIONS)} files)"
            )
        paths.extend(files)
        labels.extend([index] * len(files))
    return paths, np.asarray(labels, dtype="int32"), [p.name for p in class_dirs]


def load_image(path: str | os.PathLike, image_size=None) -> np.ndarray:
    """Decodes one image file to an RGB uint8 array with PIL.

    Grayscale ("L", "1"), palette ("P"), CMYK and other modes become RGB; an alpha channel
    ("RGBA", "LA", "PA") is dropped rather than composited, matching
    `tf.io.decode_image(channels=3)`; 16-bit grayscale ("I;16", and "I" as PIL opens some 16-bit
    PNGs) is scaled to 8 bits by `round(v / 257)`; float ("F") images are clipped to 0..255.

    Args:
        path: the image file.
        image_size: `(height, width)` (or one int) to resize to with bilinear filtering; `None`
            keeps the stored size. PIL's bilinear filter antialiases when shrinking.

    Returns:
        uint8 array of shape `(height, width, 3)`.

    Raises:
        FileNotFoundError: the file does not exist.
        IsADirectoryError: `path` is a folder.
        ValueError: the file is not a decodable image (the message names the file); it has
            more pixels than PIL's `Image.MAX_IMAGE_PIXELS` (89,478,485 by default: PIL warns
            of a possible decompression bomb above that and refuses above twice that; this
            function refuses above it, naming the pixel count); or `image_size` is malformed.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    # Here, not at the top: zoo.layers imports Keras, and `zoo train vit` counts a folder's
    # images (scan_image_folder) before Keras and TensorFlow load.
    from zoo.layers.validation import image_size_pair

    size = None if image_size is None else image_size_pair(image_size)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not an image file")
    if not path.is_file():
        raise FileNotFoundError(f"image file {path} does not exist")
    bombs = (Image.DecompressionBombError, Image.DecompressionBombWarning)
    try:
        with _HEADER_LOCK, warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(path)  # reads the header only; the size check is here
        with image:
            image.load()
            array = _to_rgb_uint8(image)
    except bombs as error:
        raise UserError(_bomb_message(path, error)) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(f"cannot decode image file {path}: {reason}") from error
    if size is not None and array.shape[:2] != size:
        resized = Image.fromarray(array).resize((size[1], size[0]), Image.Resampling.BILINEAR)
        array = np.asarray(resized, dtype=np.uint8)
    return array


def stored_size(path: str | os.PathLike) -> tuple[int, int]:
    """`(height, width)` of an image file, from its header (nothing decoded).

    Raises:
        UserError: the file is not an image PIL can read.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.height, image.width
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(f"cannot decode image file {path}: {reason}") from error


def load_images(paths: Sequence[str | os.PathLike], image_size=None,
                num_threads: int | None = None, step: Any = None) -> np.ndarray:
    """Decodes image files (`load_image`) into one uint8 `(N, height, width, 3)` array, made
    before the first is decoded, on threads (PIL releases the GIL while decoding).

    The set takes its bytes once: there is no list of decoded images beside a stacked copy
    of them. Bound it first (`zoo.training.memory_bounds.check_decoded_images`).

    Args:
        paths: the files, in the order of the array's rows.
        image_size: `(height, width)` (or one int) every image is resized to; None keeps
            the stored size, which must then be the first image's for every image.
        num_threads: decoding threads; None: up to 8, limited by the CPU count.
        step: a `zoo.training.progress.Step` to `advance` per image, or None.

    Returns:
        The images, uint8 `(len(paths), height, width, 3)`.

    Raises:
        The errors of `load_image`; UserError when `image_size` is None and sizes differ.
    """
    if not paths:
        raise UserError("no image files to decode")
    first = None
    if image_size is None:
        first = load_image(paths[0])
        size = first.shape[:2]
    else:
        from zoo.layers.validation import image_size_pair

        size = image_size_pair(image_size)
    images = np.empty((len(paths), *size, 3), np.uint8)
    if first is not None:
        images[0] = first

    def decode(index: int) -> None:
        array = load_image(paths[index], image_size)
        if array.shape[:2] != tuple(size):
            raise UserError(f"images differ in size ({paths[0]} is {tuple(size)}, "
                            f"{paths[index]} is {array.shape[:2]}); pass image_size=(height, "
                            "width) to resize them")
        images[index] = array
        if step is not None:
            step.advance()

    threads = num_threads or max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(decode, range(int(first is not None), len(paths)), chunksize=64))
    if first is not None and step is not None:
        step.advance()
    return images


def _bomb_message(path: Path, error: Exception) -> str:
    """One line naming the file and its pixel count, for an image PIL refuses as too large."""
    from PIL import Image

    found = re.search(r"\((\d+) pixels\)", str(error))
    pixels = f"{int(found.group(1)):,} pixels" if found else "too many pixels"
    return (f"image file {path} has {pixels}, more than the {Image.MAX_IMAGE_PIXELS:,} "
            f"allowed (PIL's Image.MAX_IMAGE_PIXELS); refused as a possible decompression "
            f"bomb")


def _to_rgb_uint8(image) -> np.ndarray:
    mode = image.mode
    if mode.startswith("I;16") or mode == "I":
        values = np.asarray(image, dtype=np.float64)
        gray = np.clip(np.round(values / 257.0), 0, 255).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    if mode == "F":
        gray = np.clip(np.round(np.asarray(image, dtype=np.float64)), 0, 255).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    if mode in ("RGBA", "RGBa", "RGBX"):
        image = image.convert("RGBA")
        return np.array(image, dtype=np.uint8)[..., :3]
    if mode in ("LA", "La", "PA"):
        # Through RGBA so a palette keeps its colours; then drop alpha.
        return np.array(image.convert("RGBA"), dtype=np.uint8)[..., :3]
    if mode == "P":
        # A palette with transparency converts through RGBA; the colour is kept, alpha dropped.
        return np.array(image.convert("RGBA"), dtype=np.uint8)[..., :3]
    if mode != "RGB":
        image = image.convert("RGB")
    return np.array(image, dtype=np.uint8)


