"""Fixtures of the hub-handle tests: an offline Hugging Face cache of our own, and real
CIFAR-10 images to classify. The checkpoints that go into the cache, and the constants they
share, are in `_hub_helpers.py`."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest


# ---------------------------------------------------------------------- a hub of our own
@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty `huggingface_hub` cache, offline mode, and an empty zoo cache."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "zoo"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


# ---------------------------------------------------------------------- CIFAR-10 images
@pytest.fixture(scope="module")
def cifar_images(shared_data) -> list:
    """The first eight real CIFAR-10 JPEGs, as PIL images."""
    from PIL import Image

    archive = shared_data / "cifar10" / "cifar10-train-jpg.tar.gz"
    if not archive.is_file():
        pytest.skip(f"the CIFAR-10 JPEGs are absent ({archive})")
    images = []
    with tarfile.open(archive, "r|gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".jpg"):
                images.append(Image.open(io.BytesIO(tar.extractfile(member).read()))
                              .convert("RGB"))
                if len(images) == 8:
                    break
    return images


# ---------------------------------------------------------------------- checkpoints to damage
@pytest.fixture(scope="session")
def good(tmp_path_factory) -> dict[str, Path]:
    """One intact checkpoint folder per kind, for the damaged-checkpoint tests to copy and
    damage (`_damaged_folders.write_good_folders`); built once for all their modules."""
    from tests.zoo.hub._damaged_folders import write_good_folders

    return write_good_folders(tmp_path_factory.mktemp("good"))
