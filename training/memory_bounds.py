"""What a model or a data set would allocate, bounded by the machine's memory before it is made.

A size that is only a number in a config (`image_size: 1000000` in a hub config,
`num_classes=10**9` given to `with_new_head`, a training set placed on the device at 1024
pixels a side) passes every check of its type and then fails deep inside the backend, as a
`ResourceExhaustedError` traceback (or the machine swaps for minutes first). The zoo instead
adds up the bytes the sizes ask for, part by part, and refuses in one line a total above the
machine's physical memory, naming the largest part and the argument behind it:

    check_allocation({"the classifier head (num_classes=1000000000 x hidden_dim=768)":
                      4 * 768 * 10**9}, "VisionTransformer")

A set of images decoded at one size (a training set at `--image-size 1024`, `zoo classify`'s
files, a TFDS split) is bounded the same way before its first image is decoded
(`check_decoded_images`): its count times height x width x channels bytes, and what is held
beside it (a float32 copy, a batch), each named by the flag or argument behind it.

Why not the backend's own error: it comes after the work (a download, a conversion, the
images read) and names an op, not the argument; and on a CPU an allocation the memory cannot
hold may not fail at all until the machine runs out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from zoo.training.errors import UserError


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def readable_bytes(count: int) -> str:
    """`count` bytes as a short figure: `3.2 GB`, `512 MB`, `1.5 TB`.

    Example:
        >>> readable_bytes(3 * 10**9)
        '3.0 GB'
    """
    for unit, size in (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def check_allocation(parts: Mapping[str, int], what: str, limit: int | None = None) -> int:
    """Refuses, in one line, parts whose bytes add up to more than `limit`.

    Args:
        parts: a description of each part (naming the sizes behind it, as the user gave
            them) and the bytes it would take.
        what: what would allocate them (a model's class, a flag), for the message.
        limit: the most bytes; the machine's physical memory when None (no bound where the
            system does not say).

    Returns:
        The total bytes.

    Raises:
        zoo.UserError: the total is above the limit; the message names the largest part.

    Example:
        >>> check_allocation({"weights": 1000}, "a model", limit=4096)
        1000
    """
    total = sum(int(n) for n in parts.values())
    limit = physical_memory() if limit is None else limit
    if limit is not None and total > limit:
        largest = max(parts, key=lambda name: parts[name])
        raise UserError(f"{what} would allocate {readable_bytes(total)}, more than this "
                        f"machine's {readable_bytes(limit)} of memory; the most is "
                        f"{largest}: {readable_bytes(int(parts[largest]))}")
    return total


def check_decoded_images(count: int, image_size: int | tuple[int, int], what: str,
                         images: str, size: str, beside: Mapping[str, int] | None = None,
                         channels: int = 3, limit: int | None = None) -> int:
    """Refuses, in one line and before the first of them is decoded, `count` uint8 images
    decoded at `image_size` that would not fit in memory with what is held beside them
    (`check_allocation`).

    Args:
        count: the images decoded and held at once.
        image_size: their side, or `(height, width)`.
        what: what decodes them, for the message (`zoo classify`, `this run`).
        images: which images, as the user gave them (`the 3 IMAGE arguments`, `the 600
            images of --data DIR`).
        size: where their size comes from, as the user gave it (`--image-size 1024`).
        beside: what is held with them at once, each as the number of decoded images its
            bytes come to (a float32 copy of them all: `4 * count`; a float32 batch of 128:
            `4 * 128`), by a description that names the argument behind it.
        channels: values per pixel.
        limit: as `check_allocation`'s (the machine's memory when None).

    Returns:
        The total bytes.

    Raises:
        zoo.UserError: the total is above the limit; the message names the largest part.

    Example:
        >>> check_decoded_images(1000, 32, "zoo classify", "the 1,000 IMAGE arguments",
        ...                      "image_size 32", {"their float32 copy": 4000}, limit=10**9)
        15360000
    """
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    each = int(height) * int(width) * int(channels)
    parts = {f"{images} at {size} ({height} x {width} x {channels} bytes each)":
             int(count) * each}
    parts.update({name: int(n) * each for name, n in (beside or {}).items()})
    return check_allocation(parts, what, limit)


def as_given(argument: str, value: Any, names: Mapping[str, str] | None = None) -> str:
    """An argument and its value as the user gave them, for a message: `--image-size 1024`
    where `names` says how the user writes `argument` (`{"image_size": "--image-size"}`),
    else as a Python argument, `image_size=1024`."""
    if names and argument in names:
        return f"{names[argument]} {value}"
    return f"{argument}={value!r}"
