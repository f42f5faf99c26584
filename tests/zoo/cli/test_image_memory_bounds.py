"""Images decoded at a size the machine's memory cannot hold are refused before the first is
decoded, in one line that names the flag as typed and the bytes: `zoo train vit` and
`zoo finetune vit` (`--image-size`, `--batch-size`, `--limit-per-class`,
`--data-placement device`), and `zoo classify`'s and `zoo caption`'s IMAGE arguments.

The machine's memory is a stand-in figure (100 MB), so that nothing depends on this machine's
and nothing large is decoded; the bytes expected are worked out here, image by image.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

import zoo.training.image_files
import zoo.training.memory_bounds
from zoo.cli.commands import image_arguments
from zoo.cli.main import main
from zoo.recipes.data_fit import fit_to_data
from zoo.recipes.settings import ViTRecipe
from zoo.training.errors import UserError

MEMORY = 100 * 10**6  # the stand-in machine's


@pytest.fixture(autouse=True)
def stand_in_memory(monkeypatch):
    monkeypatch.setattr(zoo.training.memory_bounds, "physical_memory", lambda: MEMORY)


@pytest.fixture
def nothing_decoded(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an image was decoded")

    monkeypatch.setattr(zoo.training.image_files, "load_image", refuse)


def _megabytes(count: int) -> str:
    return f"{count / 10**6:.1f} MB"


def _class_folders(folder: Path, classes: int = 2, each: int = 10) -> Path:
    from PIL import Image

    for index in range(classes):
        (folder / f"class{index}").mkdir(parents=True)
        for item in range(each):
            Image.new("RGB", (8, 8), (index * 90, item * 20, 0)).save(
                folder / f"class{index}" / f"{item}.png")
    return folder


def _idx_folder(folder: Path, per_class: int = 3, classes: int = 10) -> Path:
    """An MNIST-style training split: `per_class` 28 x 28 images of each class."""
    folder.mkdir()
    labels = np.repeat(np.arange(classes, dtype=np.uint8), per_class)
    images = np.zeros((len(labels), 28, 28), np.uint8)
    (folder / "train-images-idx3-ubyte").write_bytes(
        bytes([0, 0, 8, 3]) + np.array(images.shape, ">u4").tobytes() + images.tobytes())
    (folder / "train-labels-idx1-ubyte").write_bytes(
        bytes([0, 0, 8, 1]) + np.array([len(labels)], ">u4").tobytes() + labels.tobytes())
    return folder


# (case, flags after `zoo`, --image-size, how many images' bytes the run holds at once, the
# largest part as the message names it). 20 images: 2 held out (a tenth), 18 to train.
RUNS = [
    ("train at 1024", ["train", "vit", "--batch-size", "4"], 1024,
     20 + 20 + 4 * 4, "the 20 images of --data {data} at --image-size 1024"),
    ("finetune at 2048 (its batch: 8)", ["finetune", "vit", "--model", "vit-cifar10"], 2048,
     20 + 20 + 4 * 8, "a float32 batch of --batch-size 8"),
    ("on the device", ["train", "vit", "--batch-size", "4", "--data-placement", "device"],
     1024, 20 + 20 + 18 + 4 * 4, "the 20 images of --data {data} at --image-size 1024"),
    ("a float32 batch the largest", ["train", "vit", "--batch-size", "18"], 600,
     20 + 20 + 4 * 18, "a float32 batch of --batch-size 18"),
    ("IDX with --limit-per-class", ["train", "vit", "--limit-per-class", "2",
                                    "--batch-size", "4"], 1024,
     20 + 20 + 4 * 4, "the 20 images of --data {data} (--limit-per-class 2) at --image-size "
     "1024"),
]


@pytest.mark.parametrize("flags, size, units, most", [r[1:] for r in RUNS],
                         ids=[r[0] for r in RUNS])
def test_a_run_whose_images_the_memory_cannot_hold_is_one_line_before_decoding(
        flags, size, units, most, tmp_path, capsys, nothing_decoded):
    data = (_idx_folder(tmp_path / "idx") if "--limit-per-class" in flags
            else _class_folders(tmp_path / "data"))
    status = main([*flags, "--data", str(data), "--output", str(tmp_path / "run"),
                   "--image-size", str(size)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    total = units * size * size * 3
    assert err.startswith(f"zoo: error: this run would allocate {_megabytes(total)}, more than "
                          f"this machine's {_megabytes(MEMORY)} of memory; the most is "
                          f"{most.format(data=data)}"), err
    assert not (tmp_path / "run").exists()


# (case, data placement, --image-size, --batch-size, refused): the bound on either side.
EDGES = [
    ("host at 640 fits", "host", 640, 8, False),  # 20 + 20 + 4 x 8 images' bytes: 88.5 MB
    ("the device's copy does not", "device", 640, 8, True),  # 18 more: 110.6 MB
    ("host at 680 fits", "host", 680, 8, False),  # 99.9 MB
    ("host at 690 does not", "host", 690, 8, True),  # 102.8 MB
]


@pytest.mark.parametrize("placement, size, batch, refused", [e[1:] for e in EDGES],
                         ids=[e[0] for e in EDGES])
def test_the_run_bound_counts_every_copy(placement, size, batch, refused):
    recipe = ViTRecipe(data="data", image_size=size, batch_size=batch,
                       data_placement=placement)
    if not refused:
        assert fit_to_data(recipe, 20, say=lambda line: None).validation_size == 2
        return
    with pytest.raises(UserError, match="^this run would allocate "):
        fit_to_data(recipe, 20, say=lambda line: None)


# (case, command, IMAGE arguments, the model's image size, refused): every image and the
# float32 copy the model makes of them all, 5 bytes a value.
IMAGES = [
    ("classify, 7 at 1024", "classify", 7, 1024, True),  # 110.1 MB
    ("classify, 200 at 224", "classify", 200, 224, True),  # 150.5 MB
    ("caption, 4 at (2048, 1024)", "caption", 4, (2048, 1024), True),  # 125.8 MB
    ("classify, 4 at 32", "classify", 4, 32, False),
    ("caption, 3 at (16, 24)", "caption", 3, (16, 24), False),
]


@pytest.mark.parametrize("command, count, size, refused", [i[1:] for i in IMAGES],
                         ids=[i[0] for i in IMAGES])
def test_image_arguments_are_bounded_before_decoding(command, count, size, refused, tmp_path,
                                                     request):
    from PIL import Image

    paths = []
    for index in range(count):
        paths.append(str(tmp_path / f"{index}.png"))
        Image.new("RGB", (4, 4), (index, 0, 0)).save(paths[-1])
    args = argparse.Namespace(command=command, images=paths, model="m")
    height, width = (size, size) if isinstance(size, int) else size
    total = 5 * count * height * width * 3
    assert refused == (total > MEMORY)
    if not refused:
        images = image_arguments(args, size)
        assert images.shape == (count, height, width, 3) and images.dtype == np.uint8
        assert [int(image[0, 0, 0]) for image in images] == list(range(count))
        return
    request.getfixturevalue("nothing_decoded")
    with pytest.raises(UserError) as caught:
        image_arguments(args, size)
    assert str(caught.value) == (
        f"zoo {command} would allocate {_megabytes(total)}, more than this machine's "
        f"{_megabytes(MEMORY)} of memory; the most is the float32 copy of the {count:,} IMAGE "
        f"arguments for --model m: {_megabytes(4 * count * height * width * 3)}")


def test_evaluating_at_the_models_size_is_bounded_before_decoding(tmp_path, nothing_decoded):
    """`zoo evaluate vit`: the data at the model's image size, and a float32 batch of 256."""
    from types import SimpleNamespace

    from zoo.recipes.vit import evaluate_vit

    data = _class_folders(tmp_path / "data")
    model = SimpleNamespace(class_names=["class0", "class1"], image_size=1024)
    with pytest.raises(UserError) as caught:
        evaluate_vit(model, str(data))
    total = (20 + 4 * 20) * 1024 * 1024 * 3  # the batch: all 20 images
    assert str(caught.value) == (
        f"evaluating would allocate {_megabytes(total)}, more than this machine's "
        f"{_megabytes(MEMORY)} of memory; the most is a float32 batch of 20 of them at the "
        "model's image_size 1024: "
        f"{_megabytes(4 * 20 * 1024 * 1024 * 3)}")
