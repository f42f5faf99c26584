"""Model files saved before the backbone/task split (issue 60) load into the split classes.

Keras stores each weight under the attribute path of its layer: a classifier saved when its
layers were its own attributes holds `encoder_blocks/...`, `layers/patch_embedding/...`, where
the split classifier has `backbone/encoder_blocks/...`. The configs did not change, so such a
file builds the split model; its weights are read through a stand-in model that holds the
split model's layers under their old attribute names, set in the old constructor's order (the
order that names the members of Keras' `layers` list in the file). `zoo.load` does this for a
file without a `backbone` group; `zoo.load(old).save(new)` writes the split layout.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Sequence

import keras

WEIGHTS_FILE = "model.weights.h5"


class _PreSplitLayout(keras.Model):
    """A stand-in that holds another model's layers under the attribute names of a pre-split
    file, so that `load_weights` walks the file's paths into them."""

    def __init__(self, layers: Sequence[tuple[str, Any]]) -> None:
        super().__init__(name="pre_split_layout")
        for name, layer in layers:
            setattr(self, name, layer)
        self.built = True  # its layers are


def is_pre_split_file(path: str | Path) -> bool:
    """Whether the `.keras` file at `path` holds a task's weights in the pre-split layout (no
    `backbone` group at the top of its weights)."""
    import h5py

    with zipfile.ZipFile(path) as archive, archive.open(WEIGHTS_FILE) as weights:
        with h5py.File(weights, "r") as h5:
            return "backbone" not in h5 and "encoder_blocks" in h5


def load_pre_split_weights(model: Any, path: str | Path) -> None:
    """Loads the weights of the pre-split file at `path` into the split `model`, and the
    assets it held as its own (the translator's tokenizer).

    Args:
        model: a task whose `pre_split_layers()` lists its layers as the file has them.
        path: the `.keras` file.

    Raises:
        ValueError: a weight of the file does not fit (Keras names the layer).
    """
    _PreSplitLayout(model.pre_split_layers()).load_weights(str(path))
    if hasattr(model, "load_assets"):  # the task's own assets (the translator's tokenizer)
        _load_own_assets(model, path)


def _load_own_assets(model: Any, path: str | Path) -> None:
    """Hands the files at the top of the `.keras` file's `assets/` to `model.load_assets`."""
    import tempfile

    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory() as directory:
        for member in archive.namelist():
            name = member.removeprefix("assets/")
            if member.startswith("assets/") and name and "/" not in name:
                Path(directory, name).write_bytes(archive.read(member))
        model.load_assets(directory)
