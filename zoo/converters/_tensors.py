"""What the converters share: reading a checkpoint's tensors, checking their shapes, and
writing them into Keras layers.

A checkpoint is read into a `Checkpoint`, which hands out tensors by name (`take`) after
checking their shape in the checkpoint's own layout, remembers which were used, and finally
refuses tensors that no weight of the zoo model took (`check_all_used`): a tensor left over
means an architecture variant the converter does not know, whose outputs would silently
differ.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from zoo.errors import UserError

SAFETENSORS_NAMES = ("model.safetensors",)
SAFETENSORS_INDEX = "model.safetensors.index.json"


def as_numpy(value: Any) -> np.ndarray:
    """A NumPy array from a NumPy array, a PyTorch tensor (without importing torch) or a
    Keras/TF/JAX tensor; low-precision floats become float32."""
    if hasattr(value, "detach"):  # a torch.Tensor
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind == "f" and array.dtype != np.float64:
        array = array.astype("float32")
    return array


def _load_safetensors(path: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(path)


def load_tensors(source: Any) -> dict[str, np.ndarray]:
    """The named tensors of a checkpoint as NumPy arrays.

    Args:
        source: a mapping of names to arrays (a PyTorch `state_dict()` works too), a
            `.safetensors` file, or a directory holding `model.safetensors` (or the shards
            listed by `model.safetensors.index.json`).

    Raises:
        ValueError: for a pickled PyTorch file (`.bin`, `.pt`, `.pth`; load it with
            `torch.load(..., weights_only=True)` and pass the dict) or a path with no
            safetensors file.
    """
    if isinstance(source, Mapping):
        return {str(name): as_numpy(value) for name, value in source.items()}
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a dict of tensors or a path; got {type(source).__name__}")
    path = os.fspath(source)
    if os.path.isdir(path):
        index = os.path.join(path, SAFETENSORS_INDEX)
        if os.path.exists(index):
            with open(index, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            tensors: dict[str, np.ndarray] = {}
            for shard in shards:
                tensors.update(_load_safetensors(os.path.join(path, shard)))
            return tensors
        for name in SAFETENSORS_NAMES:
            if os.path.exists(os.path.join(path, name)):
                return _load_safetensors(os.path.join(path, name))
        raise UserError(f"{path} holds no model.safetensors (or {SAFETENSORS_INDEX})")
    if path.endswith((".bin", ".pt", ".pth", ".ckpt")):
        raise UserError(
            f"{path} is a pickled PyTorch checkpoint, which is not read here; load it with "
            "torch.load(path, map_location='cpu', weights_only=True) and pass the dict, or "
            "use the checkpoint's .safetensors file")
    if not os.path.exists(path):
        raise UserError(f"no such checkpoint file or directory: {path}")
    return _load_safetensors(path)


def load_config(config: Any, source: Any) -> Any:
    """`config` as given, or the `config.json` beside a checkpoint path when it is None."""
    if config is not None:
        return config
    if isinstance(source, (str, os.PathLike)):
        folder = os.fspath(source)
        if not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        path = os.path.join(folder, "config.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    raise UserError("pass the checkpoint's config (a transformers config, or the dict of its "
                    "config.json); none was found beside the checkpoint")


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """`config[key]` for a dict (a parsed config.json), `config.key` for a config object."""
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


class Checkpoint:
    """A checkpoint's tensors, handed out by name once their shapes are checked."""

    def __init__(self, tensors: Mapping[str, np.ndarray], what: str) -> None:
        self.tensors = dict(tensors)
        self.what = what
        self.used: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self) -> list[str]:
        return sorted(self.tensors)

    def take(self, name: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """The tensor `name` (float32), after checking that it has `shape`."""
        if name not in self.tensors:
            raise UserError(f"the {self.what} checkpoint has no tensor {name!r}")
        value = self.tensors[name]
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise UserError(
                f"checkpoint tensor {name!r} has shape {tuple(value.shape)}, but the "
                f"{self.what} configuration expects {tuple(shape)}")
        self.used.add(name)
        return np.asarray(value, dtype="float32")

    def take_any(self, names: Iterable[str], shape: Sequence[int] | None = None) -> np.ndarray:
        """The first of `names` that the checkpoint holds (for renamed layouts)."""
        names = list(names)
        for name in names:
            if name in self.tensors:
                return self.take(name, shape)
        raise UserError(f"the {self.what} checkpoint has none of the tensors {names}")

    def check_all_used(self) -> None:
        """Raises if a tensor of the checkpoint was not mapped onto the model."""
        unused = sorted(set(self.tensors) - self.used)
        if unused:
            shown = ", ".join(unused[:20]) + (f", ... ({len(unused)} in all)"
                                              if len(unused) > 20 else "")
            raise UserError(
                f"{len(unused)} tensor(s) of the {self.what} checkpoint are not used by the "
                f"conversion (an architecture variant it does not support?): {shown}")


# ---------------------------------------------------------------------- writing weights
@contextlib.contextmanager
def all_or_nothing(model: Any) -> Iterator[None]:
    """Restores `model`'s weights when the block raises: a refused checkpoint changes nothing."""
    saved = [np.array(variable.numpy()) for variable in model.weights]
    try:
        yield
    except Exception:
        for variable, value in zip(model.weights, saved):
            variable.assign(value)
        raise


def assign(variable: Any, value: np.ndarray, name: str) -> None:
    """Writes `value` into a Keras variable, checking the shape once more."""
    if tuple(variable.shape) != tuple(value.shape):
        raise UserError(
            f"checkpoint tensor {name!r} converts to shape {tuple(value.shape)}, but the zoo "
            f"weight {variable.path} has shape {tuple(variable.shape)}")
    variable.assign(value.astype(variable.dtype))


def set_linear(dense: Any, weight: np.ndarray, bias: np.ndarray | None, name: str) -> None:
    """A PyTorch `Linear` (weight `(out, in)`) into a Keras `Dense` (kernel `(in, out)`)."""
    assign(dense.kernel, weight.T, f"{name}.weight")
    if bias is not None:
        assign(dense.bias, bias, f"{name}.bias")


def set_layer_norm(norm: Any, weight: np.ndarray, bias: np.ndarray, name: str) -> None:
    assign(norm.gamma, weight, f"{name}.weight")
    assign(norm.beta, bias, f"{name}.bias")


def set_attention(attention: Any, projections: Mapping[str, tuple[np.ndarray, Any]],
                  name: str) -> None:
    """PyTorch-layout `(out, in)` projections into our `MultiHeadAttention`.

    `projections` maps "query", "key", "value", "output" to `(weight, bias)`; a bias of
    None writes zeros (a checkpoint without projection biases). Heads are the outer factor
    of each projection's output features (`(heads, head_dim)`), as in every PyTorch port.
    """
    heads, head_dim = attention.num_heads, attention.key_dim
    for role, dense in (("query", attention.query_dense), ("key", attention.key_dense),
                        ("value", attention.value_dense)):
        weight, bias = projections[role]
        d_in = weight.shape[1]
        assign(dense.kernel, weight.T.reshape(d_in, heads, head_dim),
               f"{name}.{role}.weight")
        if bias is None:
            bias = np.zeros((heads * head_dim,), "float32")
        assign(dense.bias, bias.reshape(heads, head_dim), f"{name}.{role}.bias")
    weight, bias = projections["output"]
    d_out = weight.shape[0]
    assign(attention.output_dense.kernel, weight.T.reshape(heads, head_dim, d_out),
           f"{name}.output.weight")
    if bias is None:
        bias = np.zeros((d_out,), "float32")
    assign(attention.output_dense.bias, bias, f"{name}.output.bias")


def keras_activation(name: str, what: str) -> str:
    """The Keras activation of a Hugging Face `hidden_act` / `activation_function`."""
    known = {"gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}
    if name not in known:
        raise UserError(f"{what} activation {name!r} is not supported; supported are "
                        f"{sorted(known)}")
    return known[name]
