"""A small CIFAR-10 extract shared by the image tests (20 JPEGs per class, once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.training.files.archives import extract_archive

PER_CLASS = 20
CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]


def cifar_subset(tmp_path_factory, shared_data: Path) -> Path:
    """The `train/` folder of the first 20 images per class, extracted under pytest's base temp.

    Every test module asks for the same folder; the archive's marker file makes the second and
    later calls of a session return at once.
    """
    archive = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not archive.is_file():
        pytest.skip(f"CIFAR-10 archive {archive} is absent")
    destination = tmp_path_factory.getbasetemp() / f"cifar10-{PER_CLASS}-per-class"
    return extract_archive(archive, destination, limit_per_class=PER_CLASS) / "train"
