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
import os
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from zoo.converters._safetensors_file import read_safetensors
from zoo.training.errors import UserError
from zoo.training.files.json_files import read_json_file

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


def load_tensors(source: Any) -> dict[str, np.ndarray]:
    """The named tensors of a checkpoint as NumPy arrays.

    Args:
        source: a mapping of names to arrays (a PyTorch `state_dict()` works too), a
            `.safetensors` file, or a directory holding `model.safetensors` (or the shards
            listed by `model.safetensors.index.json`).

    Raises:
        ValueError: for a pickled PyTorch file (`.bin`, `.pt`, `.pth`; load it with
            `torch.load(..., weights_only=True)` and pass the dict), a path with no
            safetensors file, or a damaged one (truncated, not safetensors, a bad header:
            `zoo.converters._safetensors_file.read_safetensors`).
    """
    if isinstance(source, Mapping):
        return _finite({str(name): as_numpy(value) for name, value in source.items()},
                       "the state dict")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a dict of tensors or a path; got {type(source).__name__}")
    path = os.fspath(source)
    if os.path.isdir(path):
        index = os.path.join(path, SAFETENSORS_INDEX)
        if os.path.exists(index):
            tensors: dict[str, np.ndarray] = {}
            for shard in _shards(index):
                tensors.update(_read_finite(os.path.join(path, shard)))
            return tensors
        for name in SAFETENSORS_NAMES:
            if os.path.exists(os.path.join(path, name)):
                return _read_finite(os.path.join(path, name))
        raise UserError(f"{path} holds no model.safetensors (or {SAFETENSORS_INDEX})")
    if path.endswith((".bin", ".pt", ".pth", ".ckpt")):
        raise UserError(
            f"{path} is a pickled PyTorch checkpoint, which is not read here; load it with "
            "torch.load(path, map_location='cpu', weights_only=True) and pass the dict, or "
            "use the checkpoint's .safetensors file")
    if not os.path.exists(path):
        raise UserError(f"no such checkpoint file or directory: {path}")
    return _read_finite(path)


def _read_finite(path: str) -> dict[str, np.ndarray]:
    return _finite(read_safetensors(path), path)


def _finite(tensors: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """`tensors`, after `refuse_non_finite`."""
    refuse_non_finite(tensors.items(), where)
    return tensors


def refuse_non_finite(tensors: Iterable[tuple[str, Any]], where: str,
                      what: str = "tensor") -> None:
    """Checks that no float tensor holds NaN or infinity: a model of such weights answers
    `nan` for every input, with exit status 0. The one check of a checkpoint's tensors (the
    converters and hub handles) and of a `.keras` file's weights (`zoo.hub.loader`).

    Args:
        tensors: `(name, array)` pairs, read one at a time (a generator keeps one copy of one
            weight in memory); arrays of integers or booleans are not checked.
        where: the file, for the message.
        what: what a name names ("tensor", "weight").

    Raises:
        UserError: naming `where`, the first such tensor and how many values, in one line.
    """
    for name, value in tensors:
        value = np.asarray(value)  # no copy of a NumPy array
        if value.dtype.kind == "f":
            bad = np.size(value) - int(np.count_nonzero(np.isfinite(value)))
            if bad:
                raise UserError(f"{where}: {what} {name!r} holds {bad:,} NaN or infinite "
                                "values; the weights are damaged")


def _shards(index: str) -> list[str]:
    """The shard files `model.safetensors.index.json` names: plain file names in its folder.

    Raises:
        UserError: the index is not JSON, has no `weight_map` of names to files, or names a
            file elsewhere (a path); the message names the index.
    """
    weight_map = read_json_file(index, expect=dict).get("weight_map")
    if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"{index} has no weight_map of tensor names to shard files")
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if os.path.basename(shard) != shard or shard in ("", ".", ".."):
            raise UserError(f"{index} names the shard {shard!r}, which is not a file name in "
                            "its folder")
    return shards


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

    def check_sizes(self, config_label: str, widths: Mapping[str, int],
                    counts: Mapping[str, int]) -> None:
        """Checks a configuration's sizes against the tensors before any model is built:
        a config whose widths of 10^9 or 10^6 layers belong to no weights would otherwise
        build until memory runs out.

        Args:
            config_label: how messages name the config (its file).
            widths: config key -> a width that must be a dimension of some tensor (every
                width of a model is the side of one of its weights).
            counts: config key -> a count of layers: at most the number of tensors (each
                layer holds several).

        Raises:
            UserError: the first size that the tensors contradict, naming the key.
        """
        dims = {int(d) for value in self.tensors.values() for d in np.shape(value)}
        for key, width in widths.items():
            if width not in dims:
                raise UserError(f"{config_label}: {key} {width} is the size of no tensor of "
                                f"the {self.what} checkpoint (largest: {max(dims, default=0)});"
                                " the config does not belong to these weights")
        for key, count in counts.items():
            if count > len(self.tensors):
                raise UserError(f"{config_label}: {key} {count} is more layers than the "
                                f"{self.what} checkpoint has tensors ({len(self.tensors)}); "
                                "the config does not belong to these weights")

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
    if not isinstance(name, str) or name not in known:
        raise UserError(f"{what} activation {name!r} is not supported; supported are "
                        f"{sorted(known)}")
    return known[name]
