"""`zoo finetune lm` on a tiny GPT-2 with a byte-level BPE vocabulary trained here: the loss
falls, the fine-tuned model's greedy continuation follows the pattern every training line
has (and the model it started from does not), `zoo generate` writes it from a plain prompt,
the run folder loads with `zoo.load` and gives the trained model's logits; bad input is one
line naming the flag, and leaves no folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zoo
import zoo.recipes.causal_lm as recipe_module
from tests.zoo.text._byte_pair_files import saved_tiny_lm
from zoo.cli.main import main
from zoo.models.causal_lm.causal_lm import CausalLM

ANIMALS = ("cat", "dog", "fox", "owl")
PATTERN = "Once upon a time there was a little"
LINES = [f"{PATTERN} {animal}." for animal in ANIMALS] * 10


@pytest.fixture(scope="module")
def saved_lm(tmp_path_factory):
    """A tiny untrained `CausalLM` with a tokenizer, saved as .keras: (model, path)."""
    import keras

    keras.utils.set_random_seed(0)
    return saved_tiny_lm(tmp_path_factory.mktemp("lm"), max_positions=48, sequence_length=24,
                         dropout=0.0, attention_dropout=0.0)


def _logits(model, ids):
    return np.asarray(model({"token_ids": np.array([ids]),
                             "padding_mask": np.ones((1, len(ids)))}))


@pytest.mark.slow
def test_finetuning_learns_the_lines_pattern_and_saves_a_loadable_folder(
        saved_lm, tmp_path, monkeypatch, capsys):
    original, path = saved_lm
    data = tmp_path / "lines.txt"
    data.write_text("\n\n".join(LINES) + "\n   \n", encoding="utf-8")  # blank lines skipped
    trained = {}

    def keeping_the_model(out, model, *args, final_model=None, **kwargs):
        trained["model"] = final_model
        return real_finish_run(out, model, *args, final_model=final_model, **kwargs)

    real_finish_run = recipe_module.finish_run
    monkeypatch.setattr(recipe_module, "finish_run", keeping_the_model)
    out = tmp_path / "run"
    # 36 training lines in batches of 12: no smaller last batch to trace a second step for.
    assert main(["finetune", "lm", "--model", path, "--data", str(data), "--output", str(out),
                 "--epochs", "10", "--learning-rate", "1e-2", "--batch-size", "12",
                 "--checkpoint-every", "5"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["training_lines"] == 36 and metrics["validation_lines"] == 4
    assert metrics["validation"]["loss"] < 0.5 * metrics["validation_before"]["loss"]

    tuned = zoo.load(str(out))  # the folder, through its manifest
    assert isinstance(tuned, CausalLM)
    assert json.loads((out / "manifest.json").read_text())["kind"] == "causal-lm"
    # Each line trains after an end-of-text token (`CausalLMPreprocessor.pack`), and a
    # prompt is read after it (`prompt_ids`).
    tokenizer = tuned.preprocessor.tokenizer
    prompt = [tuned.end_id] + tokenizer.encode(["Once upon a time"])[0]
    pattern = [tuned.end_id] + tokenizer.encode([PATTERN])[0]
    assert pattern[:len(prompt)] == prompt
    logits = _logits(tuned, pattern)
    np.testing.assert_allclose(logits, _logits(trained["model"], pattern), atol=1e-5)
    # Greedy decoding of a causal model writes the pattern's words after the prompt exactly
    # when, at each of those positions, the pattern's next token is the most likely one:
    # one pass over the pattern checks every step of the search.
    steps = slice(len(prompt) - 1, len(pattern) - 1)
    assert logits[0, steps].argmax(-1).tolist() == pattern[len(prompt):]
    assert _logits(original, pattern)[0, steps].argmax(-1).tolist() != pattern[len(prompt):]
    # `zoo generate` reads a plain prompt after that token too: it writes the pattern.
    capsys.readouterr()
    assert main(["generate", "Once upon a time", "--model", str(out), "--max-new-tokens",
                 str(len(pattern) - len(prompt))]) == 0
    assert capsys.readouterr().out == PATTERN + "\n"


@pytest.fixture(scope="module")
def saved_vit(tmp_path_factory):
    from zoo.models.vit.model import VisionTransformer

    model = VisionTransformer(image_size=16, patch_size=8, num_classes=2, hidden_dim=16,
                              num_layers=1, num_heads=2, intermediate_dim=16)
    model(np.zeros((1, 16, 16, 3), "uint8"))
    path = tmp_path_factory.mktemp("vit") / "vit.keras"
    model.save(path)
    return str(path)


@pytest.mark.parametrize("content,message", [
    (None, "--data {data}: no such file"),
    (b"", "--data {data} holds no example: every line is blank"),
    (b"\n  \n\t\n", "--data {data} holds no example: every line is blank"),
    (b"good line\n\xff\xfe bad\n", "--data {data}: '{data}', line 2: not valid UTF-8"),
    (b"only one line\n", "--data holds 1 line(s)"),
    (b"a\nb\nc\n", "--validation-size 3 leaves no training line"),
    ("vit", "is a VisionTransformer, not a CausalLM"),
    ("no model", "zoo finetune lm needs --model"),
])
def test_bad_input_is_one_line_and_leaves_no_folder(saved_lm, saved_vit, tmp_path, capsys,
                                                   content, message):
    data, model = tmp_path / "lines.txt", saved_lm[1]
    if isinstance(content, bytes):
        data.write_bytes(content)
    elif content in ("vit", "no model"):
        data.write_text("\n".join(LINES), encoding="utf-8")
        model = saved_vit
    out = tmp_path / "runs" / "lm"
    flags = ["--validation-size", "3"] if content == b"a\nb\nc\n" else []
    flags += [] if content == "no model" else ["--model", model]
    assert main(["finetune", "lm", "--data", str(data), "--output", str(out), "--epochs", "1",
                 *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message.format(data=data) in err
    if content == "vit":
        assert f"--model {saved_vit}" in err
    assert not (tmp_path / "runs").exists()
