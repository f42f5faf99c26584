"""The recipes on TensorFlow Datasets by name (`--data tfds:NAME`, `--tfds NAME`), offline with
TFDS's mock data (random examples shaped by the dataset's features)."""

import json

import numpy as np
import pytest

from zoo.cli.main import main
from zoo.recipes.translator import TranslatorRecipe, load_pairs

tfds = pytest.importorskip("tensorflow_datasets")


@pytest.fixture(autouse=True)
def _mock_data_counts_as_prepared(monkeypatch):
    """TFDS's mock data is never in the data folder: `require_data` (which would probe the
    network for its download) stands aside; tests/training/test_tfds_offline.py tests it."""
    from zoo.training import tfds_data

    monkeypatch.setattr(tfds_data, "require_data", lambda builder, spec, **kwargs: None)


@pytest.mark.slow
def test_train_and_evaluate_vit_on_a_tfds_dataset(tmp_path, capsys, monkeypatch):
    from tests.zoo.recipes.test_vit_training import MICRO
    from zoo.models import architectures as presets

    monkeypatch.setitem(presets.ARCHITECTURES, "vit-cifar-micro",
                        presets.Architecture("vit-cifar-micro", "VisionTransformer", MICRO, ""))
    out = tmp_path / "run"
    with tfds.testing.mock_data(num_examples=40):
        assert main(["train", "vit", "--data", "tfds:mnist", "--validation-size", "10",
                     "--architecture", "vit-cifar-micro", "--epochs", "1", "--batch-size", "10",
                     "--warmup-epochs", "0", "--no-rand-augment", "--output", str(out)]) == 0
        capsys.readouterr()
        assert main(["evaluate", "vit", "--model", str(out), "--data", "tfds:mnist"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["training_images"], metrics["validation_images"]) == (30, 10)
    assert "images 40" in capsys.readouterr().out  # the test split (the default), whole
    import keras

    model = keras.saving.load_model(out / "model.keras")
    assert list(model.class_names) == [str(digit) for digit in range(10)]
    assert model.image_size == 32  # MNIST's 28 x 28 resized to the architecture's input


def test_an_unknown_tfds_name_is_one_line_before_the_run_starts(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "vit", "--data", "tfds:cifar11", "--output", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("zoo: error: tfds:cifar11") and "cifar10" in error
    assert "\n" not in error and not out.exists()


def test_translator_pairs_from_a_tfds_translation_set():
    recipe = TranslatorRecipe(tfds="ted_hrlr_translate/pt_to_en", source_lang="pt",
                              target_lang="en", validation_limit=None)
    with tfds.testing.mock_data(num_examples=7):
        train, valid = load_pairs(recipe)
        stored = list(tfds.as_numpy(tfds.load("ted_hrlr_translate/pt_to_en", split="validation",
                                              as_supervised=True, shuffle_files=False)))
    assert len(train) == 7
    assert valid == [(pt.decode().strip(), en.decode().strip()) for pt, en in stored]
    assert all(isinstance(side, str) and side for pair in train for side in pair)


def test_translator_tfds_with_the_default_languages_names_the_sets_languages(tmp_path, capsys):
    with tfds.testing.mock_data(num_examples=3):
        status = main(["train", "translator", "--tfds", "ted_hrlr_translate/pt_to_en",
                       "--output", str(tmp_path / "run")])
    error = capsys.readouterr().err.strip()
    assert status == 2 and "holds the languages en, pt" in error and "\n" not in error
