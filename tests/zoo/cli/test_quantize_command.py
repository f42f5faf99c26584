"""`zoo quantize MODEL --output PATH`: an int8 file or model folder, and one-line errors."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

import zoo
from zoo.cli.main import main
from zoo.models.quantization import cpu_features, quantization_mode
from zoo.models.vit.model import VisionTransformer


@pytest.fixture()
def float_vit(tmp_path):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(image_size=16, patch_size=4, num_classes=3, hidden_dim=32,
                              num_layers=1, num_heads=2, intermediate_dim=64,
                              head_initializer="glorot_uniform")
    model(np.zeros((1, 16, 16, 3), "uint8"))
    path = tmp_path / "float.keras"
    model.save(path)
    return path


def test_quantize_writes_an_int8_file_that_loads(float_vit, tmp_path, capsys):
    out = tmp_path / "int8.keras"
    assert main(["quantize", str(float_vit), "--output", str(out)]) == 0
    captured = capsys.readouterr()
    # What it does, said first (it takes ~20 s), and whether int8 pays here, on stderr; the
    # file written is stdout's one line (its result, for a script to read).
    said, note = captured.err.splitlines()
    assert said.startswith(f"zoo: quantizing {float_vit}: loading it, storing its Dense, "
                           "EinsumDense and embedding weights as int8")
    assert captured.out == f"{out}\n"
    assert note.startswith("int8 buys size, not speed, on this CPU (") and "XLA" in note
    assert all(flag in note for flag in cpu_features())
    pixels = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3)).astype("uint8")
    model = zoo.load(str(out))
    assert quantization_mode(model) == "int8"
    assert np.asarray(model(pixels)).argmax(-1).shape == (2,)


def test_quantize_into_a_folder_writes_its_manifest(float_vit, tmp_path, capsys):
    folder = tmp_path / "vit-int8"
    assert main(["quantize", str(float_vit), "--output", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "vit" and manifest["quantization"] == "int8"
    assert manifest["preset"] == "vit-int8"  # the name it loads by, not an architecture
    assert quantization_mode(zoo.load(str(folder))) == "int8"


def test_an_existing_output_needs_force(float_vit, tmp_path, capsys):
    out = tmp_path / "int8.keras"
    out.write_bytes(b"mine")
    assert main(["quantize", str(float_vit), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists; --force replaces it" in err
    assert out.read_bytes() == b"mine"
    assert main(["quantize", str(float_vit), "--output", str(out), "--force"]) == 0


def test_quantizing_an_int8_model_again_is_one_line(float_vit, tmp_path, capsys):
    out = tmp_path / "int8.keras"
    assert main(["quantize", str(float_vit), "--output", str(out)]) == 0
    capsys.readouterr()
    assert main(["quantize", str(out), "--output", str(tmp_path / "again.keras")]) == 2
    said, error = capsys.readouterr().err.splitlines()  # what it set out to do, then why not
    assert said.startswith("zoo: quantizing ") and error.startswith("zoo: error: ")
    assert "already quantized (int8)" in error


def test_a_missing_model_is_one_line(tmp_path, capsys):
    assert main(["quantize", str(tmp_path / "nothing.keras"), "--output",
                 str(tmp_path / "out.keras")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing.keras" in err


def test_quantize_a_language_model_into_a_folder(tmp_path, capsys):
    from tests.zoo.text._byte_pair_files import saved_tiny_lm
    from zoo.models.quantization import quantize_model

    keras.utils.set_random_seed(0)
    lm, path = saved_tiny_lm(tmp_path, max_positions=16, sequence_length=8)
    tokenizer = lm.preprocessor.tokenizer
    folder = tmp_path / "lm-int8"
    assert main(["quantize", path, "--output", str(folder)]) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "causal-lm" and manifest["quantization"] == "int8"
    model = zoo.load(str(folder))
    assert quantization_mode(model) == "int8"
    assert model.preprocessor.tokenizer.encode(["The cat"]) == tokenizer.encode(["The cat"])
    ids = {"token_ids": np.array([[5, 6, 7]]), "padding_mask": np.ones((1, 3))}
    np.testing.assert_array_equal(np.asarray(model(ids)), np.asarray(quantize_model(lm)(ids)))
