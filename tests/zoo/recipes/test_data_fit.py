"""Defaults that fit a small folder: the validation split is a tenth of the data (at most
5,000), a batch larger than the training split is reduced, a run inside its warm-up says so,
`zoo train vit` refuses what the data cannot honour before TensorFlow loads, and a run
folder inside the data folder."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.recipes.data_fit import (check_output_outside_data, count_images,
                                  default_validation_size, fit_to_data)
from zoo.recipes.settings import ViTFinetuneRecipe, ViTRecipe

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("images, expected", [
    (2, 1), (10, 1), (48, 5), (1_000, 100), (49_999, 5_000), (50_000, 5_000),
    (1_000_000, 5_000)])
def test_the_default_split_is_a_tenth_capped_at_5000(images, expected):
    assert default_validation_size(images) == expected


def test_both_recipes_default_to_the_fitted_split():
    assert ViTRecipe().validation_size is None and ViTFinetuneRecipe().validation_size is None
    assert fit_to_data(ViTRecipe(data="d"), 48, say=lambda _: None).validation_size == 5


@pytest.fixture
def small_folder(tmp_path):
    for name, count in (("cat", 5), ("dog", 3), (".hidden", 4)):
        (tmp_path / "small" / name).mkdir(parents=True)
        for i in range(count):
            (tmp_path / "small" / name / f"{i}.png").write_bytes(b"not decoded when counted")
    (tmp_path / "small" / "cat" / "notes.txt").write_text("not an image")
    return tmp_path / "small"


def test_count_images_counts_what_the_run_reads(small_folder, tmp_path):
    assert count_images(str(small_folder)) == 8
    assert count_images(str(small_folder), limit_per_class=4) == 7
    idx = tmp_path / "idx"
    idx.mkdir()
    labels = bytes([0, 0, 8, 1]) + (6).to_bytes(4, "big") + bytes([0, 1, 1, 2, 2, 2])
    (idx / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))
    (idx / "train-images-idx3-ubyte.gz").write_bytes(b"")
    assert count_images(str(idx)) == 6 and count_images(str(idx), limit_per_class=2) == 5


@pytest.mark.parametrize("data", ["tfds:cifar10", "images.tar.gz", "no-such-folder", None])
def test_what_cannot_be_counted_cheaply_is_counted_after_loading(data):
    assert count_images(data) is None


@pytest.mark.parametrize("settings, images, message", [
    (dict(validation_size=48), 48, "--validation-size 48 leaves no training images: --data "
                                   "d holds 48; give at most 47, or leave it out (a tenth: 5)"),
    (dict(validation_size=5000), 4_999, "--validation-size 5000 leaves no training images"),
    (dict(), 1, "--data d holds 1 image(s); a training run needs at least two"),
])
def test_a_split_the_data_cannot_honour_is_one_line_naming_the_flag(settings, images,
                                                                     message):
    with pytest.raises(UserError) as error:
        fit_to_data(ViTRecipe(data="d", **settings), images)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_batch_larger_than_the_training_split_is_reduced_and_said():
    said = []
    fitted = fit_to_data(ViTRecipe(data="d", batch_size=128, epochs=10), 48, say=said.append)
    assert fitted.batch_size == 43 and fitted.validation_size == 5
    assert said == ["zoo: --batch-size 128 is more than the 43 training images; using "
                    "--batch-size 43"]


@pytest.mark.parametrize("epochs, warmup, noted", [(1, 5, True), (5, 5, True), (6, 5, False),
                                                   (1, 0, False)])
def test_a_run_inside_its_warm_up_says_it_learns_little(epochs, warmup, noted):
    said = []
    recipe = ViTRecipe(data="d", batch_size=8, epochs=epochs, warmup_epochs=warmup)
    assert fit_to_data(recipe, 1000, say=said.append).batch_size == 8
    assert bool(said) == noted
    if noted:
        assert said[0].startswith(f"zoo: note: --epochs {epochs} is not more than "
                                  f"--warmup-epochs {warmup}")


def _zoo_in_a_fresh_process(arguments: list[str], cwd: Path) -> tuple[str, str]:
    """`zoo ARGUMENTS` run by a fresh Python in `cwd`: the line it ends with (the exit status
    and which of TensorFlow and Keras were loaded, "2 []" for a usage error before either),
    and its stderr."""
    code = f"""
        import sys
        from zoo.cli.main import main
        try:
            status = main({arguments!r})
        except SystemExit as stop:
            status = stop.code
        print(status, sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                            capture_output=True, text=True, timeout=120, env=os.environ)
    return result.stdout.split("\n")[-2], result.stderr


def test_zoo_train_vit_refuses_a_small_folder_before_tensorflow_loads(small_folder):
    # Run beside the data folder: a run folder inside it is refused first.
    ended, stderr = _zoo_in_a_fresh_process(
        ["train", "vit", "--data", str(small_folder), "--validation-size", "8",
         "--output", "unused-run"], cwd=small_folder.parent)
    assert ended == "2 []"
    assert stderr == ("zoo: error: --validation-size 8 leaves no training images: "
                      f"--data {small_folder} holds 8; give at most 7, or leave it "
                      "out (a tenth: 1)\n")
    assert not (small_folder.parent / "unused-run").exists()


@pytest.mark.parametrize("data, output, where", [
    ("small", "small", "is"),
    ("small", "small/run", "lies inside"),
    ("small", "small/cat/deeper/run", "lies inside"),
    ("small/", "small/./run", "lies inside"),
    ("small", "elsewhere/../small/run", "lies inside"),
    ("linked", "small/run", "lies inside"),  # the data through a symbolic link
    ("small", "linked/run", "lies inside"),  # the run folder through one
    (".", "runs/vit", "lies inside"),  # `zoo train vit --data .` with the default --output
])
def test_a_run_folder_inside_the_data_folder_is_refused(small_folder, monkeypatch, data,
                                                        output, where):
    monkeypatch.chdir(small_folder.parent)
    (small_folder.parent / "linked").symlink_to(small_folder, target_is_directory=True)
    if data == ".":
        monkeypatch.chdir(small_folder)
    with pytest.raises(UserError) as error:
        check_output_outside_data(ViTRecipe(data=data, output=output))
    assert str(error.value).startswith(f"--output {output} {where} --data {data}: ")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("data, output", [
    ("small", "small-run"),  # shares a prefix of the name, not the folder
    ("small", "runs/vit"),
    ("small/cat", "small/run"),  # the data inside the run's parent: the run is not in it
    ("images.tar.gz", "images.tar.gz-run"),
    ("tfds:cifar10", "tfds:cifar10/run"),
    (None, "runs/vit"),
])
def test_a_run_folder_outside_the_data_folder_is_accepted(small_folder, monkeypatch, data,
                                                          output):
    monkeypatch.chdir(small_folder.parent)
    check_output_outside_data(ViTRecipe(data=data, output=output))


@pytest.mark.parametrize("command", ["train", "finetune"])
def test_zoo_train_vit_refuses_an_output_inside_data_before_tensorflow_loads(small_folder,
                                                                           command):
    """The run folder inside the data would be read as one more class by the next run: both
    commands refuse it at once, write nothing, and load no TensorFlow."""
    ended, stderr = _zoo_in_a_fresh_process([command, "vit", "--data", ".", "--output", "run"],
                                            cwd=small_folder)
    assert ended == "2 []"
    assert stderr.startswith("zoo: error: --output run lies inside --data .: ")
    assert len(stderr.splitlines()) == 1
    assert not (small_folder / "run").exists()


@pytest.mark.parametrize("images, batch", [(12, 8), (120, 8), (600, 64), (1_200, 128),
                                           (50_000, 128)])
def test_fine_tuning_chooses_its_batch_from_the_data(images, batch):
    """`zoo finetune vit` without `--batch-size`: an epoch of at least 8 optimizer steps
    (120 images were one step an epoch with the training recipe's 128 cut to them)."""
    said = []
    fitted = fit_to_data(ViTFinetuneRecipe(data="d"), images, say=said.append)
    training = images - fitted.validation_size
    assert fitted.batch_size == min(batch, training) and said == []
    assert -(-training // fitted.batch_size) >= min(8, training // 8 or 1)


def test_a_batch_given_for_fine_tuning_is_kept():
    fitted = fit_to_data(ViTFinetuneRecipe(data="d", batch_size=16), 120, say=lambda _: None)
    assert fitted.batch_size == 16
