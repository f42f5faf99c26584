"""The real inputs that the serving benchmarks send: the first sentences of Multi30k's
test_2016_flickr and the first CIFAR-10 training JPEGs, read from the shared data folder
(`zoo.bench.workers.DATA`; ZOO_SHARED_DATA overrides it). One reader for every script, so
that their figures are over the same items, sent as one request array (`as_request`).
"""

from __future__ import annotations

import gzip
import tarfile
from typing import Sequence

import numpy as np

from zoo.bench.workers import DATA

SENTENCES = DATA / "multi30k" / "test_2016_flickr.en.gz"
JPEGS = DATA / "cifar10" / "cifar10-train-jpg.tar.gz"


def _check(count: int) -> None:
    if count < 1:
        raise ValueError(f"count must be at least 1; got {count!r}")


def multi30k_sentences(count: int) -> list[str]:
    """The first `count` English sentences of test_2016_flickr (1,000 in all), stripped."""
    _check(count)
    with gzip.open(SENTENCES, "rt", encoding="utf-8") as lines:
        found = [line.strip() for _, line in zip(range(count), lines)]
    if len(found) < count:
        raise ValueError(f"{SENTENCES} holds {len(found)} sentences; got count {count}")
    return found


def cifar10_jpegs(count: int) -> list[bytes]:
    """The encoded bytes of the first `count` JPEGs of the CIFAR-10 training archive."""
    _check(count)
    found = []
    with tarfile.open(JPEGS) as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".jpg"):
                found.append(archive.extractfile(member).read())
                if len(found) == count:
                    return found
    raise ValueError(f"{JPEGS} holds {len(found)} JPEGs; got count {count}")


def items_of(kind: str, count: int) -> list:
    """`count` items of a served input: `"sentences"` (str) or `"images"` (JPEG bytes)."""
    if kind == "sentences":
        return multi30k_sentences(count)
    if kind == "images":
        return cifar10_jpegs(count)
    raise ValueError(f"kind must be 'sentences' or 'images'; got {kind!r}")


def as_request(items: Sequence[str | bytes]) -> np.ndarray:
    """A served export's input of `items`: sentences as UTF-8 bytes, encoded images as they are.

    Args:
        items: the items of one request (`items_of`'s, or some of them).

    Returns:
        A 1-D array of `len(items)` bytes objects (dtype object), what a string input of
        `serving_default` takes.

    Example:
        model(sentences=as_request(items_of("sentences", 4)))
    """
    return np.array([v.encode() if isinstance(v, str) else v for v in items], dtype=object)
