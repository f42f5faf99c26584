"""Two real processes of one JAX job on 127.0.0.1 (gloo collectives on the CPU), through the
`zoo train vit` command: the weights of one process trained on the same global batches,
one writer, a lost process ending the job in one line, and a resumed job. Slow: every
process starts Keras and compiles its train step."""

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

# Each process runs `zoo` with a micro architecture registered first.
WORKER = """
import sys
from zoo.models import architectures
micro = dict(image_size=8, patch_size=4, num_classes=2, hidden_dim=8, num_layers=1,
             num_heads=2, intermediate_dim=16, dropout=0.0, attention_dropout=0.0)
architectures.ARCHITECTURES["vit-micro-test"] = architectures.Architecture(
    "vit-micro-test", "VisionTransformer", micro, "")
from zoo.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    """Two classes of 12 random 8x8 images each (class 1 brighter)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for label, name in enumerate(["dark", "light"]):
        (root / name).mkdir()
        for i in range(12):
            pixels = rng.integers(0, 128, (8, 8, 3)) + 100 * label
            Image.fromarray(pixels.astype("uint8")).save(root / name / f"{i}.png")
    return root


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _command(data, output, epochs, job=None):
    """`zoo train vit` on the micro model: 20 training images, global batches of 8 (the last
    one 4), no augmentation; `job` = (port, num_processes, process_id)."""
    args = ["train", "vit", "--data", str(data), "--output", str(output),
            "--architecture", "vit-micro-test", "--image-size", "8", "--validation-size", "4",
            "--epochs", str(epochs), "--batch-size", "8", "--no-augment",
            "--warmup-epochs", "0", "--learning-rate", "0.01", "--heartbeat-timeout", "5"]
    if job is not None:
        port, count, index = job
        args += ["--coordinator-address", f"127.0.0.1:{port}", "--num-processes", str(count),
                 "--process-id", str(index)]
    return [sys.executable, "-c", WORKER, *args]


def _train(data, output, epochs, job=None):
    """Starts `_command` on the JAX backend."""
    return subprocess.Popen(_command(data, output, epochs, job), text=True,
                            env={**os.environ, "KERAS_BACKEND": "jax"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _job(data, output, epochs):
    port = _free_port()
    return [_train(data, output, epochs, job=(port, 2, k)) for k in range(2)]


def _finish(process, timeout=600):
    """Waits for a run; returns its stderr (progress and notes; stdout holds the metrics)."""
    stdout, stderr = process.communicate(timeout=timeout)
    assert process.returncode == 0, stderr[-3000:]
    return stderr


def _weights(path):
    import zoo

    return [np.asarray(w) for w in zoo.load(str(path)).weights]


@pytest.mark.slow
def test_two_processes_train_the_weights_of_one_and_one_writes(image_folder, tmp_path):
    single = _train(image_folder, tmp_path / "single", epochs=2)
    job = _job(image_folder, tmp_path / "job", epochs=2)
    for process in [single, *job]:
        _finish(process)
    # The same global batches: the same weights (the gradient sums differ only in order).
    for ours, reference in zip(_weights(tmp_path / "job" / "model.keras"),
                               _weights(tmp_path / "single" / "model.keras"), strict=True):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)
    # One writer: one checkpoint per epoch, no other process's folders or files.
    assert sorted(p.name for p in (tmp_path / "job" / "checkpoints").iterdir()) == [
        "epoch-0001", "epoch-0002"]
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == sorted(
        p.name for p in (tmp_path / "single").iterdir())


def _complete_checkpoints(folder):
    return sorted(p.name for p in folder.glob("epoch-*") if (p / "state.json").exists())


@pytest.mark.slow
def test_a_killed_process_ends_the_job_in_one_line_and_the_job_resumes(image_folder,
                                                                      tmp_path):
    out = tmp_path / "run"
    survivor, victim = _job(image_folder, out, epochs=500)
    deadline = time.time() + 600
    while not _complete_checkpoints(out / "checkpoints") and time.time() < deadline:
        assert survivor.poll() is None, survivor.communicate()[1][-3000:]
        time.sleep(0.5)
    victim.send_signal(signal.SIGKILL)
    killed = time.time()
    victim.communicate()
    _, stderr = survivor.communicate(timeout=120)  # no hang: a bounded time
    assert time.time() - killed < 60
    assert survivor.returncode == 1
    lines = [line for line in stderr.splitlines() if line.startswith("zoo: error")]
    assert len(lines) == 1 and "lost another process of the job" in lines[0], stderr[-3000:]
    assert "Traceback" not in stderr
    kept = _complete_checkpoints(out / "checkpoints")
    assert kept and not (out / "model.keras").exists()

    # Started again, both processes restore the same last checkpoint and train on.
    last = int(kept[-1].split("-")[1])
    outputs = [_finish(p) for p in _job(image_folder, out, epochs=last + 1)]
    for stderr in outputs:
        assert f"resuming from the checkpoint of epoch {last} " in stderr
    assert (out / "model.keras").exists()
    assert _complete_checkpoints(out / "checkpoints")[-1] == f"epoch-{last + 1:04d}"


@pytest.mark.slow
def test_the_tensorflow_backend_refuses_a_job_in_one_line(image_folder, tmp_path):
    command = _command(image_folder, tmp_path / "run", epochs=1, job=(_free_port(), 2, 0))
    result = subprocess.run(command, env={**os.environ, "KERAS_BACKEND": "tensorflow"},
                            text=True, capture_output=True, timeout=300)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("zoo: error")]
    assert len(lines) == 1 and lines[0].startswith(
        "zoo: error: multi-process training runs on the JAX backend"), result.stderr[-3000:]
    assert not (tmp_path / "run").exists()



# One process of a job that trains a one-weight model for ever, as a recipe does
# (`fit_resumably` inside `ending_with_the_job`), on the JAX backend: what a signal does to a
# job, without the cost of a ViT. argv: port, process id, run folder.
FOR_EVER = """
import sys
from pathlib import Path
import keras, numpy as np
import zoo.training.run as run
from zoo.recipes.multiprocess import ending_with_the_job
from zoo.training.distribution import job_settings, join_job
from zoo.training.interrupts import note_interrupts

port, index, out = sys.argv[1:]
note_interrupts()  # as `zoo` does
join_job(job_settings(f"127.0.0.1:{port}", 2, int(index)), heartbeat_timeout_seconds=5,
         initialization_timeout_seconds=60)
run.tensorflow_installed = lambda: False  # no TensorBoard: TensorFlow's import is slow
keras.utils.set_random_seed(0)  # the same weights in every process
model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
with ending_with_the_job():
    run.fit_resumably(model, np.ones((4, 1)), Path(out), epochs=10**6, initial_epoch=0,
                      y=np.ones((4, 1)), batch_size=1)
"""


def _ended(job, timeout):
    """Each process's stderr once all have ended (killed after `timeout` seconds)."""
    try:
        return [process.communicate(timeout=timeout)[1] for process in job]
    finally:
        for process in job:
            if process.poll() is None:
                process.kill()
                process.communicate()


@pytest.mark.slow
def test_sigterm_to_one_process_stops_every_process_in_one_line(tmp_path):
    """(Ctrl-C is sent on as this SIGTERM: tests/zoo/cli/test_interrupts.py.)"""
    out, port = tmp_path / "run", _free_port()
    out.mkdir()
    job = [subprocess.Popen([sys.executable, "-c", FOR_EVER, str(port), str(k), str(out)],
                            env={**os.environ, "KERAS_BACKEND": "jax"}, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
           for k in range(2)]
    deadline = time.time() + 300
    while not _complete_checkpoints(out / "checkpoints") and time.time() < deadline:
        assert all(p.poll() is None for p in job), _ended(job, 1)
        time.sleep(0.1)
    job[1].send_signal(signal.SIGTERM)
    sent = time.monotonic()
    errors = _ended(job, timeout=60)
    assert time.monotonic() - sent < 5  # within the heartbeat (5 s)
    for index, (process, stderr) in enumerate(zip(job, errors)):
        assert process.returncode == 143, stderr[-3000:]  # 128 + SIGTERM, as a shell says
        # (No `zoo` command's filter here: JAX's native log lines stay.)
        [line] = [line for line in stderr.splitlines() if line.startswith("zoo:")]
        assert line.startswith(f"zoo: error: process {index} of 2 stopped with the job after "
                               "step "), stderr[-3000:]
        assert "Traceback" not in stderr
    # Stopped between steps: complete checkpoints only, none half written.
    checkpoints = out / "checkpoints"
    assert _complete_checkpoints(checkpoints) == sorted(p.name for p in checkpoints.iterdir())
