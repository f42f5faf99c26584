"""Reading a hub repository's `pytorch_model.bin` safely, for repositories without safetensors.

The file is a pickle (inside a zip archive since PyTorch 1.6). It is read with
`torch.load(..., weights_only=True)`, whose unpickler builds tensors and plain containers only
and refuses anything else, such as a call of `os.system` that a hostile pickle asks for. What it
refuses, and a file that is not a PyTorch checkpoint at all, is one `UserError` line naming the
file. The zoo never loads such a file with the safety off, and its messages never suggest it:
PyTorch's own message advises `weights_only=False`, which would run the pickle's code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from zoo.converters._tensors import as_numpy
from zoo.training.errors import UserError

# The first bytes of a zip archive (PyTorch's format) and of a pickle of protocol 2 or later
# (its legacy format).
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_MAGIC = b"\x80"
_SAFER = ("convert the checkpoint to model.safetensors with a tool you trust, or use a "
          "repository that has one")


def read_pytorch_bin(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a `pytorch_model.bin` (a state dict) as NumPy arrays.

    Raises:
        ModuleNotFoundError: PyTorch is not installed.
        UserError: the file is not a PyTorch checkpoint, is damaged, holds Python objects
            that a safe load refuses, or holds something other than a dict of tensors; one
            line naming the file.
    """
    try:
        import torch
    except ImportError:
        raise ModuleNotFoundError(f"{path.parent} has only pytorch_model.bin, which needs "
                                  "PyTorch to read (pip install torch)", name="torch") from None
    import pickle

    with open(path, "rb") as file:
        head = file.read(len(_ZIP_MAGIC))
    if not (head.startswith(_ZIP_MAGIC) or head.startswith(_PICKLE_MAGIC)):
        raise UserError(f"{path} is not a PyTorch checkpoint (neither a zip archive nor a "
                        "pickle)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(_refused(path, error)) from None
    except (RuntimeError, EOFError, ValueError, KeyError, OSError) as error:
        raise UserError(f"{path} is not a readable PyTorch checkpoint (truncated or "
                        f"damaged?): {_first_sentence(str(error))}") from None
    return _state_dict(path, state)


def _refused(path: Path, error: BaseException) -> str:
    """The one line for a pickle that the safe unpickler refused: Python objects (a
    GLOBAL it does not allow, named), or instructions it does not take (a damaged file)."""
    reason = str(error.__context__ or "")
    found = re.search(r"GLOBAL (\S+)", reason)
    if found or "allowlisted" in reason:
        what = f" ({found.group(1)})" if found else ""
        return (f"{path} holds Python objects{what} that a safe load refuses to create: "
                f"loading it could run code, so the zoo does not; {_SAFER}")
    detail = _first_sentence(reason) if reason and "weights_only" not in reason else (
        "the safe unpickler refused it")
    return (f"{path} is not a readable PyTorch checkpoint (damaged, or not a state dict): "
            f"{detail}; {_SAFER}")


def _state_dict(path: Path, state: Any) -> dict[str, np.ndarray]:
    """`state` as tensors by name, or a UserError saying what else the file holds."""
    if not isinstance(state, Mapping):
        raise UserError(f"{path} holds a {type(state).__name__}, not a state dict of tensors")
    others = [(k, v) for k, v in state.items() if not hasattr(v, "detach")]
    if others:
        key, value = others[0]
        raise UserError(f"{path} holds {key!r} ({type(value).__name__}), not only tensors: "
                        "is it a training checkpoint rather than a state dict?")
    return {str(name): as_numpy(value) for name, value in state.items()}


def _first_sentence(text: str) -> str:
    """The first line of an error's text, up to its first full stop."""
    line = text.strip().splitlines()[0] if text.strip() else "no detail"
    return line.split(". ", 1)[0].rstrip(".")
