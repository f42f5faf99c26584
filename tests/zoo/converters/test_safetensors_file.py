"""`read_safetensors` reads what the safetensors library wrote, tensor for tensor: every dtype
NumPy has, scalars, empty tensors and metadata, against `safetensors.numpy.load_file`; and
bfloat16 (which NumPy lacks) as PyTorch widens it to float32. Damaged files are
tests/zoo/hub/test_damaged_checkpoints.py's."""

from __future__ import annotations

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy")

from zoo.converters._safetensors_file import read_safetensors  # noqa: E402


def test_every_numpy_dtype_reads_as_the_safetensors_library_reads_it(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {f"t_{dtype}": (rng.standard_normal((3, 5)) * 50).astype(dtype)
               for dtype in ("float64", "float32", "float16", "int64", "int32", "int16",
                             "int8", "uint64", "uint32", "uint16", "uint8")}
    tensors["bool"] = rng.standard_normal((4, 2)) > 0
    tensors["scalar"] = np.array(3.5, "float32")
    tensors["empty"] = np.zeros((0, 7), "float32")
    path = tmp_path / "all.safetensors"
    safetensors_numpy.save_file(tensors, path, metadata={"format": "np"})
    expected = safetensors_numpy.load_file(path)
    ours = read_safetensors(path)
    assert sorted(ours) == sorted(expected)
    for name, value in expected.items():
        assert ours[name].dtype == value.dtype and ours[name].shape == value.shape, name
        np.testing.assert_array_equal(ours[name], value)


def test_bfloat16_reads_as_pytorch_widens_it(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    torch.manual_seed(0)
    weights = torch.randn(6, 4).to(torch.bfloat16)
    save_file({"w": weights, "b": torch.randn(4)}, tmp_path / "bf16.safetensors")
    ours = read_safetensors(tmp_path / "bf16.safetensors")
    assert ours["w"].dtype == np.float32
    np.testing.assert_array_equal(ours["w"], weights.float().numpy())
