"""What a model or a data set would allocate, bounded by the machine's memory before it is made.

A size that is only a number in a config (`image_size: 1000000` in a hub config,
`num_classes=10**9` given to `with_new_head`, a training set placed on the device at 1024
pixels a side) passes every check of its type and then fails deep inside the backend, as a
`ResourceExhaustedError` traceback (or the machine swaps for minutes first). The zoo instead
adds up the bytes the sizes ask for, part by part, and refuses in one line a total above the
machine's physical memory, naming the largest part and the argument behind it:

    check_allocation({"the classifier head (num_classes=1000000000 x hidden_dim=768)":
                      4 * 768 * 10**9}, "VisionTransformer")

Why not the backend's own error: it comes after the work (a download, a conversion, the
images read) and names an op, not the argument; and on a CPU an allocation the memory cannot
hold may not fail at all until the machine runs out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

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
