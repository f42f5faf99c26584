"""Data parallelism over two virtual CPU devices gives the same step as one device.

Each check runs in a subprocess: virtual devices must be configured before the backend
starts, and the distribution must not leak into the other tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

# Prints one JSON line: the device description, how many devices the distributed model's
# kernel lives on, and the weights after two SGD steps on one device and on two.
SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, os.environ["ZOO_REPO"])
    backend = os.environ["KERAS_BACKEND"]
    if backend == "tensorflow":
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    import keras
    import numpy as np
    from zoo.training.distribution import data_parallel_scope, describe_devices

    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 5)).astype("float32")
    y = rng.normal(size=(16, 3)).astype("float32")

    def train():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input((5,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)
        ])
        # Plain SGD: a gradient summed instead of averaged over devices would show.
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return model

    single = train()
    with data_parallel_scope() as distribution:
        parallel = train()
        kernel = parallel.layers[0].kernel.value
        if backend == "jax":
            kernel_devices = len(kernel.sharding.device_set)
            replicas = len(distribution.device_mesh.devices.flatten())
        else:
            kernel_devices = len(kernel.values)
            replicas = distribution.num_replicas_in_sync
    print(json.dumps({
        "describe": describe_devices(),
        "kernel_devices": kernel_devices,
        "replicas": replicas,
        "single": [np.asarray(w).tolist() for w in single.get_weights()],
        "parallel": [np.asarray(w).tolist() for w in parallel.get_weights()],
    }))
    """
)


def _run(backend: str, tmp_path: Path) -> dict:
    script = tmp_path / "data_parallel.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, KERAS_BACKEND=backend, ZOO_REPO=str(REPO))
    if backend == "jax":
        flags = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
        env["XLA_FLAGS"] = flags.strip()
        env["JAX_PLATFORMS"] = "cpu"
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _check(result: dict, backend: str) -> None:
    assert result["describe"].startswith(f"{backend}: 2 devices")
    assert result["replicas"] == 2
    assert result["kernel_devices"] == 2  # the weights really are replicated
    for single, parallel in zip(result["single"], result["parallel"]):
        np.testing.assert_allclose(parallel, single, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_two_devices_step_equals_one_device(tmp_path):
    _check(_run("jax", tmp_path), "jax")


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed"
)
def test_tensorflow_two_devices_step_equals_one_device(tmp_path):
    _check(_run("tensorflow", tmp_path), "tensorflow")
