"""Training runs keep what the user owns: output folders, extracted archives, final files."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from zoo.models import architectures as presets
from zoo.recipes.settings import (TranslatorFinetuneRecipe, TranslatorRecipe, ViTFinetuneRecipe,
                                  ViTRecipe)
from zoo.recipes.translator import train_translator
from zoo.recipes.vit import load_images, train_vit


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, "uint8")).save(buffer, format="PNG")
    return buffer.getvalue()


def _archive(path: Path, classes: dict[str, int], top: str | None = "train",
             per_class: int = 4) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, value in classes.items():
            for i in range(per_class):
                data = _png(value + i)
                member = tarfile.TarInfo(f"{top}/{name}/{i}.png" if top else f"{name}/{i}.png")
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
    return path


def test_a_stray_folder_under_data_is_not_a_class(tmp_path):
    archive = _archive(tmp_path / "pets.tar.gz", {"cat": 10, "dog": 200})
    out = tmp_path / "run"
    stray = out / "data" / "stray" / "thing"
    stray.mkdir(parents=True)
    (stray / "0.png").write_bytes(_png(90))
    recipe = ViTRecipe(output=str(out), data=str(archive), image_size=8)
    images, labels, names = load_images(recipe)
    assert names == ["cat", "dog"] and len(images) == 8
    assert sorted(labels.tolist()) == [0] * 4 + [1] * 4


def test_a_folder_the_archive_does_not_hold_is_refused(tmp_path):
    archive = _archive(tmp_path / "pets.tar.gz", {"cat": 10, "dog": 200})
    out = tmp_path / "run"
    recipe = ViTRecipe(output=str(out), data=str(archive), image_size=8)
    assert load_images(recipe)[2] == ["cat", "dog"]
    extra = out / "data" / "train" / "bird"
    extra.mkdir()
    (extra / "0.png").write_bytes(_png(50))
    with pytest.raises(ValueError, match="does not \\(bird\\)"):
        load_images(recipe)


def test_an_archive_with_classes_at_its_top_level(tmp_path):
    archive = _archive(tmp_path / "flat.tgz", {"a": 10, "b": 100, "c": 200}, top=None,
                       per_class=2)
    recipe = ViTRecipe(output=str(tmp_path / "run"), data=str(archive), image_size=8)
    assert load_images(recipe)[2] == ["a", "b", "c"]


@pytest.mark.parametrize("recipe_class", [TranslatorRecipe, TranslatorFinetuneRecipe,
                                          ViTRecipe, ViTFinetuneRecipe])
def test_recipes_have_a_force_flag_off_by_default(recipe_class):
    assert recipe_class().force is False


def test_zoo_train_has_a_force_flag():
    from zoo.cli.parser import build_parser

    for task in ("translator", "vit"):
        args = build_parser().parse_args(["train", task, "--force"])
        assert args.force is True


@pytest.mark.parametrize("train, recipe_class", [(train_translator, TranslatorRecipe),
                                                 (train_vit, ViTRecipe)])
@pytest.mark.parametrize("existing, message", [("model.keras", "finished run"),
                                               ("metrics.json", "finished run"),
                                               ("thesis.tex", "does not write")])
def test_training_refuses_to_overwrite(tmp_path, train, recipe_class, existing, message):
    out = tmp_path / "run"
    out.mkdir()
    (out / existing).write_text("precious")
    # No data is given: the folder is checked before anything else happens.
    with pytest.raises(FileExistsError, match=message):
        train(recipe_class(output=str(out)))
    assert (out / existing).read_text() == "precious"
    with pytest.raises(ValueError, match="no training data"):  # --force gets past the check
        train(recipe_class(output=str(out), force=True))
    assert (out / existing).read_text() == "precious"


@pytest.mark.slow
def test_vit_run_refuses_a_finished_run_then_continues_it_with_force(tmp_path, monkeypatch):
    monkeypatch.setitem(presets.ARCHITECTURES, "vit-nano", presets.Architecture(
        "vit-nano", "VisionTransformer", dict(
            image_size=8, patch_size=4, num_classes=10, hidden_dim=16, num_layers=1,
            num_heads=2, intermediate_dim=32, dropout=0.0, attention_dropout=0.0), "test"))
    archive = _archive(tmp_path / "pets.tar.gz", {"cat": 10, "dog": 200})
    out = tmp_path / "run"
    settings = dict(output=str(out), data=str(archive), architecture="vit-nano", image_size=8,
                    validation_size=2, batch_size=4, warmup_epochs=0, augment=False)
    train_vit(ViTRecipe(epochs=1, **settings))
    first = (out / "model.keras").read_bytes()
    assert json.loads((out / "metrics.json").read_text())["epochs_this_run"] == 1
    with pytest.raises(FileExistsError, match="finished run"):
        train_vit(ViTRecipe(epochs=2, **settings))
    assert (out / "model.keras").read_bytes() == first
    metrics = train_vit(ViTRecipe(epochs=2, force=True, **settings))
    assert metrics["epochs_this_run"] == 1  # continued from the checkpoint of epoch 1
    assert (out / "model.keras").read_bytes() != first
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "data", "logs",
                                                     "metrics.json", "model.keras"]


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_truncated_archive_is_a_one_line_error(tmp_path, keep):
    whole = _archive(tmp_path / "whole.tar.gz", {"cat": 10, "dog": 200}, per_class=20)
    data = whole.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[:int(len(data) * keep)])
    recipe = ViTRecipe(output=str(tmp_path / "run"), data=str(cut), image_size=8)
    with pytest.raises(ValueError, match="cannot read archive") as error:
        load_images(recipe)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("recipe_class, settings, message", [
    (TranslatorRecipe, dict(beam_size=0), "beam_size"),
    (TranslatorRecipe, dict(epochs=0), "epochs"),
    (TranslatorRecipe, dict(max_length=100000), "max_length"),
    (TranslatorRecipe, dict(batch_size=-1), "batch_size"),
    (TranslatorRecipe, dict(label_smoothing=1.0), "label_smoothing"),
    (ViTRecipe, dict(epochs=0), "epochs"),
    (ViTRecipe, dict(validation_size=0), "validation_size"),
    (ViTRecipe, dict(layer_decay=0.0), "layer_decay"),
    (ViTRecipe, dict(mix="both"), "mix"),
])
def test_bad_recipe_settings_fail_before_anything_is_written(tmp_path, recipe_class,
                                                             settings, message):
    train = train_translator if recipe_class is TranslatorRecipe else train_vit
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=message) as error:
        train(recipe_class(output=str(out), **settings))
    assert "\n" not in str(error.value) and not out.exists()


@pytest.mark.parametrize("recipe_class", [TranslatorRecipe, ViTRecipe])
def test_every_checked_setting_is_refused_by_its_flag_at_parse_time(recipe_class, capsys):
    """Each setting with a range is checked as its flag is parsed (before Keras loads), and
    the message names the flag as typed; the Python API says the same with the field name."""
    import dataclasses

    from zoo.cli.parser import build_parser
    from zoo.recipes.checks import check_fields, field_metadata

    task = "translator" if recipe_class is TranslatorRecipe else "vit"
    checked = [f.name for f in dataclasses.fields(recipe_class)
               if "check" in field_metadata(recipe_class, f.name)]
    assert len(checked) >= 15
    for name in checked:
        flag = "--" + name.replace("_", "-")
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["train", task, flag, "-1"])
        assert exit_.value.code == 2
        assert f"argument {flag}: must " in capsys.readouterr().err, name
        with pytest.raises(ValueError, match=rf"^{name} must .*; got -1$"):
            check_fields(recipe_class(**{name: -1}))
        with pytest.raises(ValueError, match=rf"^{flag} must "):
            check_fields(recipe_class(**{name: -1}), flags=True)
        check_fields(recipe_class())  # the defaults pass
