"""Each command's stdout holds its result alone, so that it pipes into a parser: notes,
warnings and progress (a batch cut to the data, a run inside its warm-up, Keras' epoch lines,
what `zoo quantize` does) go to stderr. Each command's stdout goes through its own parser:
JSON for `zoo train`/`zoo finetune`, tab-separated fields for the rest, a path for the files
written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import keras
import pytest

from zoo.cli.main import main
from zoo.models.vit.model import VisionTransformer

ROOT = Path(__file__).resolve().parents[3]
IMAGES = ROOT / "docs" / "examples" / "images"


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory):
    keras.utils.set_random_seed(0)
    model = VisionTransformer(image_size=16, patch_size=8, num_classes=3, hidden_dim=16,
                              num_layers=1,
                              num_heads=2, intermediate_dim=16,
                              class_names=["cat", "dog", "ship"])
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model.save(path)
    return str(path)


def _run(argv, capsys):
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return captured.out, captured.err


def _tab_fields(out: str, count: int) -> list[list[str]]:
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows and all(len(row) == count for row in rows), out
    return rows


def test_models(capsys):
    out, _ = _run(["models"], capsys)
    _tab_fields(out, 3)


def test_classify(tiny_vit, capsys):
    image = str(IMAGES / "cat" / "0000.jpg")
    out, _ = _run(["classify", "--model", tiny_vit, "--top-k", "2", image], capsys)
    for path, label, probability in _tab_fields(out, 3):
        assert path == image and label in ("cat", "dog", "ship") and 0 <= float(probability) <= 1


def test_evaluate(tiny_vit, capsys):
    out, _ = _run(["evaluate", "vit", "--model", tiny_vit, "--data", str(IMAGES),
                   "--per-class"], capsys)
    (summary,), classes = _tab_fields(out.splitlines()[0], 2), out.splitlines()[1:]
    assert summary[0].startswith("top-1 ") and 0 <= float(summary[0].split()[1]) <= 1
    assert summary[1] == "images 12"
    assert [line.split("\t")[0] for line in classes] == ["cat", "dog", "ship"]


def test_finetune_prints_only_its_metrics(tiny_vit, tmp_path, capsys):
    # A batch larger than the data and a run inside its warm-up: both are said, on stderr.
    out, err = _run(["finetune", "vit", "--model", tiny_vit, "--data", str(IMAGES),
                     "--epochs", "1", "--warmup-epochs", "1", "--batch-size", "128",
                     "--output", str(tmp_path / "run")], capsys)
    metrics = json.loads(out)
    assert isinstance(metrics, dict) and metrics
    assert "--batch-size 128 is more than" in err and "still warming up" in err


def test_quantize_prints_only_the_file(tiny_vit, tmp_path, capsys):
    out, err = _run(["quantize", tiny_vit, "--output", str(tmp_path / "int8.keras")], capsys)
    (written,) = out.splitlines()
    assert os.path.isfile(written) and "quantizing" in err
