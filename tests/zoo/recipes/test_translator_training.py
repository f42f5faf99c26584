"""The translator recipe end to end on real Multi30k pairs (slow: trains small models)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zoo.recipes.translator import TranslatorRecipe, load_pairs, train_translator

# A model just big enough to memorise 100 sentence pairs in a minute on a CPU: with a 50-step
# warm-up (9 batches an epoch) its loss is below 0.15 by epoch 25 and the pairs come back at
# BLEU 92 (60 epochs of a 100-step warm-up gave 92 as well, in twice the time).
TINY = dict(architecture="transformer-tiny", vocabulary_size=500, batch_size=16, warmup_steps=50,
            learning_rate=2e-3, label_smoothing=0.0, dropout=0.0, beam_size=1,
            evaluate_every=1000, max_length=48)


@pytest.mark.slow
def test_tiny_model_learns_100_real_pairs(shared_data, tmp_path, monkeypatch):
    recipe = TranslatorRecipe(output=str(tmp_path / "run"), multi30k=str(shared_data / "multi30k"),
                              limit=100, validation_limit=100, epochs=25, **TINY)
    train, _ = load_pairs(recipe)
    # Validate on the training pairs themselves: the test is that the model fits them.
    monkeypatch.setattr("zoo.recipes.translator.load_pairs", lambda r: (train, train))
    metrics = train_translator(recipe)
    assert metrics["validation"]["bleu"] > 85.0, metrics["validation"]
    assert (tmp_path / "run" / "model.keras").exists()
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["validation"]["bleu"] == pytest.approx(metrics["validation"]["bleu"])


@pytest.mark.slow
def test_killed_run_resumes_from_its_last_checkpoint(shared_data, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "zoo.cli", "train", "translator",
               "--multi30k", str(shared_data / "multi30k"), "--limit", "64",
               "--validation-limit", "8", "--epochs", "4", "--output", str(out),
               "--architecture", "transformer-tiny", "--vocabulary-size", "300",
               "--batch-size", "16", "--beam-size", "1", "--evaluate-every", "100"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 400
    while not (out / "checkpoints" / "epoch-0002").exists():
        assert first.poll() is None, first.stdout.read().decode()[-3000:]
        assert time.time() < deadline, "no checkpoint after 400 s"
        time.sleep(0.5)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not (out / "model.keras").exists()
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "resuming from the checkpoint of epoch" in second.stderr  # stdout: the metrics
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epochs_this_run"] < 4  # it did not start again from zero
    assert len(metrics["history"]["loss"]) == metrics["epochs_this_run"]
    assert Path(out / "model.keras").exists()


@pytest.mark.slow
@pytest.mark.parametrize("backend, precision", [("jax", "mixed_bfloat16"),
                                                ("tensorflow", "mixed_float16")])
def test_recipe_trains_on_each_backend_and_precision(shared_data, tmp_path, backend, precision):
    """`zoo train translator` runs on JAX (numpy batches, no tf.data) and TensorFlow, under
    mixed precision (float16 with loss scaling), and the loss goes down."""
    if backend == "jax":
        pytest.importorskip("jax")
    out = tmp_path / "run"
    # Of the 64 pairs, the 17 within 24 tokens make two batches of two shapes: every other
    # shape is one more compilation of the training step on JAX (at 64 tokens, eight shapes
    # were most of the test's time).
    command = [sys.executable, "-m", "zoo.cli", "train", "translator",
               "--multi30k", str(shared_data / "multi30k"), "--limit", "64",
               "--validation-limit", "4", "--epochs", "3", "--output", str(out),
               "--architecture", "transformer-tiny", "--vocabulary-size", "300",
               "--max-length", "24",
               "--batch-size", "16", "--beam-size", "1", "--evaluate-every", "100",
               "--warmup-steps", "10", "--learning-rate", "2e-3", "--precision", precision]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "KERAS_BACKEND": backend,
                                 "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # It says what it does (a line per long step in a log), and no Keras warning alarms.
    assert "zoo: training a 300-piece tokenizer on 128 sentences: done in " in result.stderr
    assert "shuffle=True" not in result.stderr and "UserWarning" not in result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["backend"] == backend
    losses = metrics["history"]["loss"]
    assert all(loss == loss for loss in losses), losses  # no NaN
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("averaged_bleu, kept", [(30.0, True), (10.0, False)])
def test_checkpoint_average_is_kept_only_when_validation_says_so(small_tokenizer, tmp_path,
                                                                 averaged_bleu, kept):
    import numpy as np

    from zoo.models.translator.model import Translator
    from zoo.recipes.translator import _average_if_better

    model = Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=16,
                                         intermediate_dim=32, num_heads=2)
    model.ensure_built()
    saved = []
    for epoch in (1, 2, 3):
        values = [np.full(w.shape, float(epoch), "float32") for w in model.get_weights()]
        model.set_weights(values)
        folder = tmp_path / f"epoch-{epoch:04d}"
        folder.mkdir()
        model.save_weights(str(folder / "model.weights.h5"))
        saved.append(values)
    last = model.get_weights()  # epoch 3's
    recipe = TranslatorRecipe(average_last=2)
    result = _average_if_better(model, recipe, tmp_path, {"bleu": 20.0},
                                lambda: {"bleu": averaged_bleu})
    expected = 2.5 if kept else 3.0  # the mean of epochs 2 and 3, or epoch 3 itself
    assert (result is not None) == kept
    for weight, before in zip(model.get_weights(), last):
        np.testing.assert_allclose(weight, np.full(before.shape, expected), rtol=1e-6)
