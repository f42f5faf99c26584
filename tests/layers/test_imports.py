"""`layers` must import and run where TensorFlow is absent (the JAX GPU machine)."""


import pytest

from tests.conftest import modules_imported_by


def test_importing_layers_does_not_import_tensorflow():
    pytest.importorskip("jax")
    loaded = modules_imported_by(
        "import numpy as np, layers\n"
        "from zoo.layers import MultiHeadAttention\n"
        "MultiHeadAttention(num_heads=2, key_dim=4)(np.zeros((1, 3, 8), 'float32'))")
    assert "keras" in loaded and "tensorflow" not in loaded
