"""The smaller things a user meets: `zoo evaluate vit --help` shows the ViT's flags only,
top-5 appears only where there are more than 5 classes, and `zoo.export(model)` names the
folder after the model."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import zoo
from zoo.cli.main import main
from zoo.models.vit.model import VisionTransformer
from zoo.recipes.vit import evaluate_arrays

SMALL = {"num_layers": 1, "hidden_dim": 16, "num_heads": 2, "intermediate_dim": 16}
TRANSLATOR_FLAGS = ("--source", "--reference", "--beam-size")
VIT_FLAGS = ("--data", "--confusion-matrix", "--per-class")


def _help(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("task, own, other", [("vit", VIT_FLAGS, TRANSLATOR_FLAGS),
                                              ("translator", TRANSLATOR_FLAGS, VIT_FLAGS)])
def test_evaluate_help_lists_only_its_task_flags(task, own, other, capsys):
    text = _help(["evaluate", task, "--help"], capsys)
    assert all(flag in text for flag in own + ("--model",)), text
    assert not any(flag in text for flag in other), text


def _vit(num_classes):
    return VisionTransformer.from_architecture(
        "vit-cifar-tiny", **SMALL, class_names=[f"c{i}" for i in range(num_classes)])


@pytest.mark.parametrize("num_classes, has_top5", [(3, False), (5, False), (6, True)])
def test_top5_only_above_five_classes(num_classes, has_top5):
    images = np.zeros((num_classes, 32, 32, 3), "uint8")
    scores = evaluate_arrays(_vit(num_classes), images, np.arange(num_classes))
    assert (scores["top5"] is not None) == has_top5


def test_zoo_evaluate_vit_prints_no_top5_for_three_classes(tmp_path, capsys):
    for name in ("c0", "c1", "c2"):
        (tmp_path / "data" / name).mkdir(parents=True)
        Image.new("RGB", (32, 32)).save(tmp_path / "data" / name / "a.png")
    _vit(3).save(tmp_path / "three.keras")
    assert main(["evaluate", "vit", "--model", str(tmp_path / "three.keras"),
                 "--data", str(tmp_path / "data")]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("top-1 ") and line.endswith("\timages 3") and "top-5" not in line


@pytest.mark.parametrize("how, expected", [
    ("loaded", "my-classifier"), ("built", "vit-cifar-tiny"), ("named", "served-as")])
def test_export_names_the_folder_after_the_model(tmp_path, how, expected):
    pytest.importorskip("tensorflow")
    if how == "built":
        model = _vit(3)
    else:
        (tmp_path / "my-classifier").mkdir()
        _vit(3).save(tmp_path / "my-classifier" / "model.keras")
        model = zoo.load(str(tmp_path / "my-classifier"))
    taken = tmp_path / "repository" / expected / "1"
    taken.mkdir(parents=True)  # an export that would land there stops before any tracing
    with pytest.raises(FileExistsError, match=f"{expected}/1 exists"):
        zoo.export(model, tmp_path / "repository",
                   **({"name": "served-as"} if how == "named" else {}))


@pytest.mark.parametrize("how", ["loaded", "re-headed"])
def test_a_re_headed_model_exports_under_its_own_name(tmp_path, how):
    """`zoo.load(NAME, class_names=...)` or `.with_new_head(...)` is another classifier than
    NAME: its export does not land beside NAME's versions (serving/NAME/2)."""
    pytest.importorskip("tensorflow")
    (tmp_path / "my-classifier").mkdir()
    _vit(2).save(tmp_path / "my-classifier" / "model.keras")
    if how == "loaded":
        model = zoo.load(str(tmp_path / "my-classifier"), class_names=["a", "b", "c"])
    else:
        model = zoo.load(str(tmp_path / "my-classifier")).with_new_head(3)
    taken = tmp_path / "repository" / "my-classifier-3-classes" / "1"
    taken.mkdir(parents=True)  # an export that would land there stops before any tracing
    with pytest.raises(FileExistsError, match="my-classifier-3-classes/1 exists"):
        zoo.export(model, tmp_path / "repository")
