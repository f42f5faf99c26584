"""`layers` must import and run where TensorFlow is absent (the JAX GPU machine)."""

import os
import subprocess
import sys

import pytest


def test_importing_layers_does_not_import_tensorflow():
    code = (
        "import sys, numpy as np, layers\n"
        "from layers import MultiHeadAttention\n"
        "MultiHeadAttention(num_heads=2, key_dim=4)(np.zeros((1, 3, 8), 'float32'))\n"
        "bad = sorted(m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.'))\n"
        "assert not bad, bad[:5]\n"
        "print('ok')\n"
    )
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
