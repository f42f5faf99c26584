"""Damaged and hostile weights in hub checkpoints: non-finite values, and a
`pytorch_model.bin` that is hostile (a pickle that would run code) or foreign, each refused in
one line naming the file, through `zoo.load("hf://...")` and `zoo convert`
(`_damaged_folders.py`), without running the pickle.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from tests.zoo.hub._damaged_folders import (  # noqa: E402
    ST,
    cases,
    damaged_copy,
    poison,
    refusal_test,
    refused_by_convert,
    refused_by_load,
)

# id, kind, damaged file, damage, what the message says, surfaces.
NON_FINITE = [
    # Weights that are all NaN answered nan probabilities with exit 0.
    ("vit-nan-weights", "vit", ST, lambda folder: poison(folder / ST, np.nan),
     "NaN or infinite values; the weights are damaged", ("load", "convert")),
    ("marian-infinite-weights", "marian", ST, lambda folder: poison(folder / ST, np.inf),
     "NaN or infinite values; the weights are damaged", ("load", "convert")),
]


test_a_damaged_checkpoint_is_one_line_naming_the_file = refusal_test(NON_FINITE)


# ---------------------------------------------------------------------- pytorch_model.bin
class RunsACommand:
    """What a hostile pickle holds: unpickling it runs a shell command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _bin_with_code(marker: Path, legacy: bool) -> Callable[[Path, dict], None]:
    def write(path: Path, state: dict) -> None:
        torch.save({**state, "payload": RunsACommand(f"touch {marker}")}, path,
                   _use_new_zipfile_serialization=not legacy)
    return write


PICKLES = [
    ("code-in-the-pickle", lambda marker: _bin_with_code(marker, legacy=False),
     "holds Python objects (posix.system) that a safe load refuses", ("load", "convert")),
    ("code-in-a-legacy-pickle", lambda marker: _bin_with_code(marker, legacy=True),
     "holds Python objects (posix.system) that a safe load refuses", ("load",)),
    ("random-bytes", lambda marker: lambda path, state: path.write_bytes(
        np.random.default_rng(3).bytes(5000)), "is not a PyTorch checkpoint", ("load",)),
    ("truncated", lambda marker: lambda path, state: (
        torch.save(state, path), path.write_bytes(path.read_bytes()[:2000])),
     "is not a readable PyTorch checkpoint (truncated or damaged?)", ("load",)),
    ("a-list", lambda marker: lambda path, state: torch.save(list(state.values()), path),
     "holds a list, not a state dict of tensors", ("load",)),
    ("a-training-checkpoint", lambda marker: lambda path, state: torch.save(
        {"model": state, "epoch": 3}, path), "holds 'model' (dict), not only tensors",
     ("load",)),
]


@pytest.mark.parametrize("case, writer, expected, surface", cases(PICKLES))
def test_a_hostile_or_foreign_pytorch_bin_is_one_line(good, hub_cache, tmp_path, capsys, case,
                                                      writer, expected, surface):
    """A repository with only pytorch_model.bin: a pickle that would run code is refused
    without running it and without advice to turn the safety off; `zoo convert` reads
    safetensors only, so it never unpickles the file either."""
    from safetensors.numpy import load_file

    marker = tmp_path / "pwned"
    state = {k: torch.from_numpy(v) for k, v in load_file(good["vit"] / ST).items()}

    def damage(folder: Path) -> None:
        (folder / ST).unlink()
        writer(marker)(folder / "pytorch_model.bin", state)

    folder = damaged_copy(good, "vit", tmp_path, damage)
    if surface == "load":
        message = refused_by_load(hub_cache, folder, "pytorch_model.bin", f"org/bin-{case}")
        assert expected in message
    else:
        message = refused_by_convert("vit", folder, "", tmp_path / "out", capsys)
        assert "holds no model.safetensors" in message
    assert not marker.exists()
    assert "weights_only=False" not in message
    if "Python objects" in message:
        assert "safetensors" in message
