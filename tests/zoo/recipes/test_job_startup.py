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
from zoo.recipes.multiprocess import published_settings
from zoo.recipes.settings import TranslatorRecipe, ViTRecipe
from zoo.training.distribution import JobSettings, check_job_settings
from zoo.training.errors import UserError
from zoo.training.job_startup import first_difference

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


_SAID = "differs between the processes of the job: process 0 has "
# (case, process 0's flags and environment, process 1's, the line process 1 ends with or None)
NUM = "KERAS_DISTRIBUTION_NUM_PROCESSES"
COMPARED = [
    ("batch size", {"batch_size": 4}, {}, {"batch_size": 2}, {}, f"--batch-size {_SAID}4, "
     "process 1 has 2"),
    ("epochs", {"epochs": 3}, {}, {"epochs": 30}, {}, f"--epochs {_SAID}3, process 1 has 30"),
    ("architecture", {"architecture": "vit-tiny"}, {}, {"architecture": "vit-small"}, {},
     f"--architecture {_SAID}'vit-tiny', process 1 has 'vit-small'"),
    ("number of processes", {"num_processes": 2}, {}, {"num_processes": 3}, {},
     f"--num-processes {_SAID}2, process 1 has 3"),
    ("number of processes from the environment", {}, {NUM: "2"}, {}, {NUM: "3"},
     f"--num-processes {_SAID}2, process 1 has 3"),
    ("flag and environment alike", {"num_processes": 2}, {}, {}, {NUM: "2"}, None),
    ("each process's own", {"data": "/a", "output": "/a/run", "force": True,
                            "coordinator_address": "localhost:5000"}, {},
     {"data": "/b", "output": "/b/run", "process_id": 1,
      "coordinator_address": "10.0.0.1:5000"}, {}, None),
]


@pytest.mark.parametrize("flags0, env0, flags1, env1, said", [c[1:] for c in COMPARED],
                         ids=[c[0] for c in COMPARED])
def test_each_process_compares_the_settings_process_0_publishes(flags0, env0, flags1, env1,
                                                                said, monkeypatch):
    published = []
    for flags, env in ((flags0, env0), (flags1, env1)):
        monkeypatch.delenv(NUM, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        published.append(published_settings(ViTRecipe(**flags)))
    difference = first_difference(published[1], published[0], process_id=1)
    assert difference == (None if said is None else
                          f"{said}; start every process with the same settings")


def test_another_command_is_named_as_such_not_as_a_setting_of_none():
    difference = first_difference(published_settings(TranslatorRecipe()),
                                  published_settings(ViTRecipe()), process_id=1)
    assert difference == ("the processes of the job run different commands: only process 1 "
                          "has --alpha; start every process with the same command and "
                          "settings")


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
