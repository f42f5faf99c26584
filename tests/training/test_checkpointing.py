"""Resumable training: a run killed after epoch 2 ends where an uninterrupted run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

from zoo.training.errors import UserError

from zoo.training.checkpointing import ResumableCheckpoint, latest_checkpoint, restore_latest

REPO = Path(__file__).resolve().parents[2]

# Trains a tiny regression model for EPOCHS epochs with checkpoints in DIRECTORY, resuming
# from the newest one. With PAUSE_AFTER_EPOCH=n it sleeps after epoch n's checkpoint, so that
# the test can kill it there.
TRAIN_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, os.environ["ZOO_REPO"])
    import keras
    import numpy as np
    from zoo.training.checkpointing import ResumableCheckpoint, restore_latest

    directory, epochs, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause_after = int(os.environ.get("PAUSE_AFTER_EPOCH", "0"))

    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(8, activation="tanh"),
        keras.layers.Dense(1),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = np.tanh(x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32"))

    initial_epoch = restore_latest(model, directory)

    class Pause(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 == pause_after:
                time.sleep(600)

    history = model.fit(
        x, y, batch_size=16, epochs=epochs, initial_epoch=initial_epoch, shuffle=False,
        verbose=0, callbacks=[ResumableCheckpoint(directory, keep=2), Pause()],
    )
    np.savez(output, *[np.asarray(v.numpy()) for v in model.weights])
    with open(output + ".json", "w") as f:
        json.dump({
            "initial_epoch": initial_epoch,
            "epochs": history.epoch,
            "loss": history.history["loss"],
            "iterations": int(np.asarray(model.optimizer.iterations.numpy())),
        }, f)
    """
)


def _start(script: Path, directory: Path, output: Path, pause_after: int = 0) -> subprocess.Popen:
    env = dict(os.environ, ZOO_REPO=str(REPO), PAUSE_AFTER_EPOCH=str(pause_after))
    env.setdefault("KERAS_BACKEND", keras.backend.backend())
    return subprocess.Popen(
        [sys.executable, str(script), str(directory), "5", str(output)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen) -> None:
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, out[-3000:]


def _weights(path: Path) -> list[np.ndarray]:
    with np.load(path) as stored:
        return [stored[key] for key in sorted(stored.files, key=lambda k: int(k.split("_")[1]))]


@pytest.mark.slow
def test_killed_run_resumes_and_matches_an_uninterrupted_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN_SCRIPT)
    # The reference runs alongside the interrupted run.
    reference = _start(script, tmp_path / "reference", tmp_path / "reference.npz")
    interrupted = _start(script, tmp_path / "run", tmp_path / "run.npz", pause_after=2)

    marker = tmp_path / "run" / "epoch-0002" / "state.json"
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert interrupted.poll() is None, interrupted.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "epoch 2's checkpoint never appeared"
        time.sleep(0.1)
    interrupted.send_signal(signal.SIGKILL)
    interrupted.communicate(timeout=60)
    assert interrupted.returncode == -signal.SIGKILL
    assert not (tmp_path / "run.npz").exists()
    assert json.loads(marker.read_text())["epoch"] == 2
    loss_before_kill = json.loads(marker.read_text())["logs"]["loss"]

    resumed = _start(script, tmp_path / "run", tmp_path / "run.npz")
    _finish(resumed)
    _finish(reference)

    run = json.loads((tmp_path / "run.npz.json").read_text())
    ref = json.loads((tmp_path / "reference.npz.json").read_text())
    assert run["initial_epoch"] == 2 and run["epochs"] == [2, 3, 4]
    assert ref["initial_epoch"] == 0 and ref["epochs"] == [0, 1, 2, 3, 4]
    # The step counter went on from the checkpoint: 5 epochs of 4 batches in all.
    assert run["iterations"] == ref["iterations"] == 20
    # Same epoch 2 before the kill, same epochs 3 to 5 after the resume, same final weights.
    np.testing.assert_allclose(loss_before_kill, ref["loss"][1], rtol=1e-6)
    np.testing.assert_allclose(run["loss"], ref["loss"][2:], rtol=1e-5)
    for got, want in zip(_weights(tmp_path / "run.npz"), _weights(tmp_path / "reference.npz")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # keep=2 leaves the two newest checkpoints and no temporary folders.
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["epoch-0004", "epoch-0005"]


def _compiled_model(loss_scaled: bool = False) -> keras.Model:
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.05)
    if loss_scaled:  # its loss scale and step counters are state too
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, dynamic_growth_steps=2)
    model.compile(optimizer=optimizer, loss="mse")
    return model


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 2)).astype("float32")


@pytest.mark.parametrize("loss_scaled", [False, True], ids=["adam", "loss_scaled_adam"])
def test_restore_latest_loads_weights_and_optimizer_state(tmp_path, loss_scaled):
    x, y = _data()
    model = _compiled_model(loss_scaled)
    model.fit(x, y, epochs=3, batch_size=4, verbose=0, callbacks=[ResumableCheckpoint(tmp_path)])
    assert latest_checkpoint(tmp_path).name == "epoch-0003"

    fresh = _compiled_model(loss_scaled)
    assert restore_latest(fresh, tmp_path) == 3
    for got, want in zip(fresh.weights, model.weights):
        np.testing.assert_array_equal(np.asarray(got.numpy()), np.asarray(want.numpy()))
    assert len(fresh.optimizer.variables) == len(model.optimizer.variables)
    for got, want in zip(fresh.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(got.numpy()), np.asarray(want.numpy()))
    assert int(np.asarray(fresh.optimizer.iterations.numpy())) == 6


def test_a_half_written_checkpoint_is_ignored(tmp_path):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0, callbacks=[ResumableCheckpoint(tmp_path)])
    # What a crash while writing epoch 2 leaves behind: a temporary folder.
    crashed = tmp_path / ".epoch-0002.tmp-99999"
    crashed.mkdir()
    (crashed / "model.weights.h5").write_bytes(b"truncated")
    assert restore_latest(_compiled_model(), tmp_path) == 1
    # The next checkpoint clears it away.
    model.fit(x, y, epochs=2, initial_epoch=1, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0001", "epoch-0002"]


def test_no_checkpoint_means_epoch_zero(tmp_path):
    model = _compiled_model()
    before = [np.asarray(v.numpy()) for v in model.weights]
    assert restore_latest(model, tmp_path / "missing") == 0
    for got, want in zip(model.weights, before):
        np.testing.assert_array_equal(np.asarray(got.numpy()), want)


def test_bad_use_raises_value_error(tmp_path):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[ResumableCheckpoint(tmp_path)])
    uncompiled = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="compile"):
        restore_latest(uncompiled, tmp_path)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    other.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.0), loss="mse")
    before = [np.asarray(v.numpy()) for v in other.weights]
    with pytest.raises(ValueError, match="optimizer"):
        restore_latest(other, tmp_path)
    for got, want in zip(other.weights, before):  # left untouched
        np.testing.assert_array_equal(np.asarray(got.numpy()), want)
    with pytest.raises(ValueError, match="keep"):
        ResumableCheckpoint(tmp_path, keep=0)


@pytest.mark.parametrize("damaged_file", ["model.weights.h5", "optimizer.npz", "state.json"])
def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, capfd,
                                                                    damaged_file):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path, keep=3)])
    after_one = [np.asarray(v.numpy()) for v in model.weights]
    model.fit(x, y, epochs=2, initial_epoch=1, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path, keep=3)])
    newest = tmp_path / "epoch-0002" / damaged_file
    with open(newest, "r+b") as f:  # what a full disk or an interrupted copy leaves
        f.truncate(newest.stat().st_size // 2)

    fresh = _compiled_model()
    assert restore_latest(fresh, tmp_path) == 1
    for got, want in zip(fresh.weights, after_one):
        np.testing.assert_array_equal(np.asarray(got.numpy()), want)
    err = capfd.readouterr().err
    assert "warning" in err and "epoch-0002" in err and "epoch-0001" in err
    # Training on rewrites the damaged epoch.
    fresh.fit(x, y, epochs=2, initial_epoch=1, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path, keep=3)])
    assert restore_latest(_compiled_model(), tmp_path) == 2


def test_no_intact_checkpoint_is_a_one_line_error(tmp_path):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0, callbacks=[ResumableCheckpoint(tmp_path)])
    (tmp_path / "epoch-0001" / "model.weights.h5").write_bytes(b"")
    with pytest.raises(ValueError, match="no intact checkpoint") as error:
        restore_latest(_compiled_model(), tmp_path)
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------------- final files of a run
def test_write_atomically_keeps_the_old_file_when_the_write_fails(tmp_path):
    from zoo.training.files.file_store import write_atomically

    target = tmp_path / "model.keras"
    target.write_bytes(b"the finished model")

    def crash(path):
        path.write_bytes(b"half")
        raise KeyboardInterrupt  # what a kill during the final save amounts to

    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, crash)
    assert target.read_bytes() == b"the finished model"
    assert [p.name for p in tmp_path.iterdir()] == ["model.keras"]
    written = write_atomically(target, lambda path: path.write_bytes(b"new"))
    assert written == target and target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["model.keras"]


def test_write_atomically_saves_a_keras_model(tmp_path):
    from zoo.training.files.file_store import write_atomically

    model = _compiled_model()
    write_atomically(tmp_path / "model.keras", model.save)
    loaded = keras.saving.load_model(tmp_path / "model.keras", compile=False)
    np.testing.assert_array_equal(loaded.weights[0].numpy(), model.weights[0].numpy())


RUN = ("checkpoints", "logs", "tokenizer.model", "model.keras", "metrics.json")


@pytest.mark.parametrize("present, message", [
    (["model.keras"], "finished run"),
    (["checkpoints/", "metrics.json"], "finished run"),
    (["notes.txt"], "does not write \\(notes.txt\\)"),
    (["data/"], "does not write \\(data\\)"),
])
def test_prepare_run_folder_refuses_finished_runs_and_foreign_files(tmp_path, present,
                                                                    message):
    from zoo.training.checkpointing import prepare_run_folder

    for name in present:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("x")
    with pytest.raises(FileExistsError, match=message) as error:
        prepare_run_folder(tmp_path, RUN)
    assert "\n" not in str(error.value) and str(tmp_path) in str(error.value)
    prepare_run_folder(tmp_path, RUN, force=True)  # allowed, and nothing is touched
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n.rstrip("/") for n in present)


def test_prepare_run_folder_lets_new_and_unfinished_runs_through(tmp_path):
    from zoo.training.checkpointing import prepare_run_folder

    prepare_run_folder(tmp_path / "new", RUN)
    prepare_run_folder(tmp_path, RUN)  # empty
    (tmp_path / "checkpoints" / "epoch-0001").mkdir(parents=True)
    (tmp_path / "tokenizer.model").write_text("x")
    (tmp_path / "logs").mkdir()
    (tmp_path / ".model.tmp-123.keras").write_text("left by a killed final save")
    prepare_run_folder(tmp_path, RUN)  # an interrupted run resumes without force
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="^--output .*file is a file, not a folder$"):
        prepare_run_folder(tmp_path / "file", RUN, force=True)


@pytest.mark.parametrize("tensorflow_installed", [True, False])
def test_fit_resumably_writes_tensorboard_logs_only_where_tensorflow_is(tmp_path, monkeypatch,
                                                                       tensorflow_installed):
    # The lent GPU machine has JAX and no TensorFlow: a run there trains without TensorBoard
    # logs (whose writer is TensorFlow's) instead of failing at its first epoch.
    import importlib.util

    from zoo.training.run import fit_resumably

    if tensorflow_installed and importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        None if name == "tensorflow" and not tensorflow_installed else real_find_spec(name, *a)))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, index):
            return np.ones((4, 3), "float32"), np.zeros((4, 1), "float32")

    history, _ = fit_resumably(model, Batches(), tmp_path, epochs=2, initial_epoch=0)
    assert len(history.history["loss"]) == 2
    assert latest_checkpoint(tmp_path / "checkpoints") is not None
    assert (tmp_path / "logs").exists() == tensorflow_installed


def _lora_model(lora: bool = True) -> keras.Model:
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.EinsumDense("ab,bc->ac", output_shape=2)])
    if lora:
        model.layers[0].enable_lora(2)
        model.layers[1].enable_lora(1, lora_alpha=3.0)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


def test_a_checkpoint_keeps_the_lora_factors_and_the_frozen_kernels(tmp_path):
    """Keras' `save_weights` writes an adapted kernel with its factors added and no factors,
    and `load_weights` zeroes the factors: a resumed run would start from factors of zero
    (where their gradients are zero too). The checkpoint restores them as they were."""
    x, y = _data()
    model = _lora_model()
    frozen = [np.asarray(layer.weights[0].numpy()) for layer in model.layers]  # the kernels
    model.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[ResumableCheckpoint(tmp_path)])
    assert all(np.abs(np.asarray(layer.lora_kernel_b.numpy())).max() > 0
               for layer in model.layers)

    keras_only = _lora_model()
    with warnings.catch_warnings():  # its optimizer is not built: Keras skips that state
        warnings.simplefilter("ignore")
        keras_only.load_weights(tmp_path / "epoch-0002" / "model.weights.h5")
    assert not np.asarray(keras_only.layers[0].lora_kernel_b.numpy()).any()

    fresh = _lora_model()
    assert restore_latest(fresh, tmp_path) == 2
    for got, want in zip(fresh.weights, model.weights):
        np.testing.assert_array_equal(np.asarray(got.numpy()), np.asarray(want.numpy()))
    for layer, kernel in zip(fresh.layers, frozen):  # the frozen kernels, bit for bit
        np.testing.assert_array_equal(np.asarray(layer.weights[0].numpy()), kernel)
    for got, want in zip(fresh.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(got.numpy()), np.asarray(want.numpy()))


def test_a_checkpoint_with_other_lora_settings_is_refused_in_one_line(tmp_path):
    x, y = _data()
    _lora_model().fit(x, y, epochs=1, batch_size=4, verbose=0,
                      callbacks=[ResumableCheckpoint(tmp_path)])
    plain = _lora_model(lora=False)
    before = [np.asarray(v.numpy()) for v in plain.weights]
    with pytest.raises(ValueError, match="holds LoRA factors of 2 layers but the model has "
                                         "no LoRA") as error:
        restore_latest(plain, tmp_path)
    assert "\n" not in str(error.value)
    for got, want in zip(plain.weights, before):  # left untouched
        np.testing.assert_array_equal(np.asarray(got.numpy()), want)
    other_rank = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                   keras.layers.EinsumDense("ab,bc->ac", output_shape=2)])
    other_rank.layers[0].enable_lora(3)
    other_rank.layers[1].enable_lora(1)
    other_rank.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    with pytest.raises(ValueError, match=r"lora_kernel_a of shape \(3, 2\) but the model's "
                                         r"has shape \(3, 3\)"):
        restore_latest(other_rank, tmp_path)


def test_every_n_epochs_writes_those_and_the_last(tmp_path):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=7, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path, keep=5, every=3)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0003", "epoch-0006",
                                                           "epoch-0007"]
    assert restore_latest(_compiled_model(), tmp_path) == 7
    with pytest.raises(ValueError, match="every must be at least 1; got 0"):
        ResumableCheckpoint(tmp_path, every=0)


def test_a_run_resumed_with_other_facts_is_one_line_naming_both(tmp_path):
    x, y = _data()
    model = _compiled_model()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0,
              callbacks=[ResumableCheckpoint(tmp_path, facts={"data_placement": "device"})])
    state = json.loads((tmp_path / "epoch-0001" / "state.json").read_text())
    assert state["facts"] == {"data_placement": "device"}
    with pytest.raises(ValueError) as error:
        restore_latest(_compiled_model(), tmp_path, facts={"data_placement": "host"})
    message = str(error.value)
    assert "'device'" in message and "'host'" in message and "\n" not in message
    assert restore_latest(_compiled_model(), tmp_path, facts={"data_placement": "device"}) == 1
    # A fact the checkpoint does not record (written before it was asked for) is not checked.
    assert restore_latest(_compiled_model(), tmp_path, facts={"seed": 3}) == 1
