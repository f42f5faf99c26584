"""A job of several processes starts in bounded time or ends in one line from every process:
an address without a port or out of range, a process id without an address, a port in use
(checked before JAX runs), a coordinator that never comes up (the --startup-timeout
watchdog), and settings that differ between the processes (published by process 0 through
JAX's coordination service and compared by the others before any model is built)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.zoo.recipes.test_multiprocess_training import WORKER, _free_port
from zoo.training.distribution import JobSettings, check_job_settings
from zoo.training.errors import UserError

# (case, settings, the one line's words)
REFUSED = [
    ("no port", JobSettings("127.0.0.1", 2, 1), "must be HOST:PORT with a port from 1 to 65535"),
    ("port 0", JobSettings("127.0.0.1:0", 2, 1), "got '127.0.0.1:0'"),
    ("port out of range", JobSettings("127.0.0.1:70000", 2, 0), "got '127.0.0.1:70000'"),
    ("port not a number", JobSettings("host:http", 2, 1), "got 'host:http'"),
    ("id without address", JobSettings(None, 2, 1), "needs --coordinator-address HOST:PORT"),
    ("id outside the job", JobSettings("127.0.0.1:5000", 2, 2), "must lie in [0, 1]"),
]


@pytest.mark.parametrize("settings, said", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_settings_that_cannot_start_a_job_are_one_line(settings, said):
    with pytest.raises(UserError, match=None) as refused:
        check_job_settings(settings, backend="jax")
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_process_0_refuses_a_port_in_use_before_jax_runs():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(UserError, match=f"127.0.0.1:{port}: process 0 cannot listen"):
            check_job_settings(JobSettings(f"127.0.0.1:{port}", 2, 0), backend="jax")
        check_job_settings(JobSettings(f"127.0.0.1:{port}", 2, 1), backend="jax")  # a peer


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory):
    from PIL import Image
    import numpy as np

    root = tmp_path_factory.mktemp("images")
    for name in ("dark", "light"):
        (root / name).mkdir()
        for i in range(4):
            Image.fromarray(np.full((8, 8, 3), 50 + 100 * (name == "light"), "uint8")).save(
                root / name / f"{i}.png")
    return root


def _start(data, output, port, index, *extra):
    args = ["train", "vit", "--data", str(data), "--output", str(output), "--architecture",
            "vit-micro-test", "--image-size", "8", "--validation-size", "2", "--epochs", "1",
            "--no-augment", "--coordinator-address", f"127.0.0.1:{port}",
            "--num-processes", "2", "--process-id", str(index), *extra]
    return subprocess.Popen([sys.executable, "-c", WORKER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "KERAS_BACKEND": "jax"})


@pytest.mark.slow
def test_settings_that_differ_end_both_processes_in_one_line_before_training(tiny_images,
                                                                            tmp_path):
    port = _free_port()
    first = _start(tiny_images, tmp_path / "run", port, 0, "--batch-size", "4",
                   "--startup-timeout", "60")
    second = _start(tiny_images, tmp_path / "run", port, 1, "--batch-size", "2",
                    "--startup-timeout", "60")
    said = ("zoo: error: --batch-size differs between the processes of the job: process 0 has "
            "4, process 1 has 2; start every process with the same settings")
    for process in (first, second):
        _, err = process.communicate(timeout=120)
        assert process.returncode == 2, err[-2000:]
        assert err.strip().splitlines() == [said]
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing trained


@pytest.mark.slow
def test_a_coordinator_that_never_comes_up_is_one_line_after_the_startup_timeout(tiny_images,
                                                                                 tmp_path):
    started = time.monotonic()
    alone = _start(tiny_images, tmp_path / "run", _free_port(), 1, "--startup-timeout", "4")
    _, err = alone.communicate(timeout=120)
    assert alone.returncode == 1
    assert err.strip().splitlines() == [
        f"zoo: error: process 1 of 2 did not see the whole job at 127.0.0.1:"
        f"{alone.args[alone.args.index('--coordinator-address') + 1].split(':')[1]} within "
        "4 s (--startup-timeout); start every process of the job with the same "
        "--coordinator-address and --num-processes, each with its own --process-id"]
    assert time.monotonic() - started < 60
