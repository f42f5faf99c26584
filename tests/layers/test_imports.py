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


def test_the_ground_floor_loads_no_keras():
    # The checks and the package itself are cheap, so that a helper is imported, not copied;
    # a layer name loads its module (and Keras) on first use.
    loaded = modules_imported_by(
        "import zoo.layers, zoo.training\n"
        "from zoo.layers.validation import is_int, positive_int\n"
        "from zoo.training.files.file_store import file_sha256\n"
        "import zoo.generation.settings, zoo.recipes.settings\n"
        "assert 'MultiHeadAttention' in dir(zoo.layers)")
    assert not {"keras", "tensorflow", "jax", "numpy"} & loaded
