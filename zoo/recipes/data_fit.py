"""Settings that fit the data: a ViT run's validation split, batch and warm-up, checked
against the number of images.

`zoo train vit` and `zoo finetune vit` count a folder of class folders or an IDX folder
before TensorFlow loads (`count_images`), so that a setting the data cannot honour is refused
in a second, not after the imports; `zoo.recipes.vit.train_vit` applies `fit_to_data` again to
the images it loaded (archives and TFDS sets are counted only then). A run folder inside the
data folder is refused first (`check_output_outside_data`). Messages name the flags as typed,
since the recipe's fields are the flags.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

from zoo.training.errors import UserError

# The validation split when --validation-size is not given: a tenth of the images, at most
# 5,000 (CIFAR-10's usual hold-out of its 50,000 training images).
VALIDATION_SHARE = 0.1
MAX_DEFAULT_VALIDATION = 5000


def default_validation_size(num_images: int) -> int:
    """A tenth of `num_images`, at least 1 and at most 5,000."""
    return min(MAX_DEFAULT_VALIDATION, max(1, round(VALIDATION_SHARE * num_images)))


def count_images(data: str | None, limit_per_class: int | None = None) -> int | None:
    """How many images a run on `data` reads, counted without decoding or TensorFlow: a
    folder of class folders (as `scan_image_folder` lists it) or an MNIST-style IDX folder;
    None for what cannot be counted so cheaply (an archive, a TFDS name, a missing path)."""
    from zoo.training.idx_data import is_idx_folder, read_idx
    from zoo.training.image_files import scan_image_folder

    if not data or data.startswith("tfds:") or not os.path.isdir(data):
        return None
    if is_idx_folder(data):
        found = [Path(data) / f"train-labels-idx1-ubyte{ext}" for ext in ("", ".gz")]
        labels = [read_idx(p) for p in found if p.exists()]
        if not labels:
            return None
        per_class = [int((labels[0] == c).sum()) for c in set(labels[0].tolist())]
    else:
        _, labels, names = scan_image_folder(data)
        per_class = [int((labels == c).sum()) for c in range(len(names))]
    if limit_per_class:
        per_class = [min(n, limit_per_class) for n in per_class]
    return sum(per_class)


def check_output_outside_data(recipe: Any) -> None:
    """Refuses a run folder (`output`) that is, or lies inside, the `data` folder.

    A run inside the data folder would write into the user's dataset, and the next run (or
    `keras.utils.image_dataset_from_directory`) would read the run folder as one more class.
    Refusing is chosen over skipping such folders when scanning: a scan that skipped them would
    read the folder differently from every other tool, and the run would still write files
    into a folder the user keeps as data. Symbolic links and `..` are resolved, so that every
    spelling of a path inside the data is caught; a sibling that only shares a prefix of the
    name (`imgs` and `imgs-run`) is not inside.

    Args:
        recipe: a recipe with `output` and `data` (a ViT recipe).

    Raises:
        UserError: `output` is `data` or lies inside it, in one line naming both flags as
            typed.
    """
    data, output = getattr(recipe, "data", None), recipe.output
    if not data or not output or data.startswith("tfds:"):
        return
    data_path, output_path = os.path.realpath(data), os.path.realpath(output)
    if os.path.commonpath([data_path, output_path]) != data_path:
        return
    where = "is" if output_path == data_path else "lies inside"
    raise UserError(f"--output {output} {where} --data {data}: the run would write into the "
                    "data, and the next run would read its folder as one more class; give "
                    "an --output outside --data")


def finetune_batch_size(num_training: int) -> int:
    """Fine-tuning's batch where `--batch-size` is not given: the largest power of two from 8
    to 128 that leaves an epoch at least 8 optimizer steps, and never more than the training
    images. (The training recipe's 128, cut to a small folder's size, gave 120 images one
    step an epoch: five steps in all, and answers still near uniform.)

    Example:
        >>> [finetune_batch_size(n) for n in (5, 108, 1_000, 45_000)]
        [5, 8, 64, 128]
    """
    batch = 128
    while batch > 8 and batch * 8 > num_training:
        batch //= 2
    return min(batch, num_training)


def fit_to_data(recipe: Any, num_images: int, say: Callable[[str], None] = print) -> Any:
    """The ViT recipe with its validation split resolved and its batch fitted to the data.

    - `validation_size` None becomes `default_validation_size(num_images)`; a split that
      leaves no training image is refused.
    - A `batch_size` of None (fine-tuning's default) becomes `finetune_batch_size`; one
      larger than the training split is reduced to it, said through `say`.
    - The images the run holds at once are bounded by the machine's memory
      (`check_run_memory`).
    - A run whose epochs all fall in the warm-up (`epochs <= warmup_epochs`: the rate never
      reaches its peak and decays from it) is said to learn little, on stdout.

    Args:
        recipe: a `ViTRecipe` (or `ViTFinetuneRecipe`).
        num_images: the images the run reads.
        say: where the notes go (`print`: stdout).

    Returns:
        A new recipe (`dataclasses.replace`); the given one is unchanged.

    Raises:
        UserError: fewer than two images, a `--validation-size` that leaves none to train,
            or images that would not fit in memory (`check_run_memory`).
    """
    if num_images < 2:
        raise UserError(f"--data {recipe.data} holds {num_images} image(s); a training run "
                        "needs at least two (one to train on, one to validate)")
    validation = recipe.validation_size or default_validation_size(num_images)
    if validation >= num_images:
        raise UserError(
            f"--validation-size {validation} leaves no training images: --data {recipe.data} "
            f"holds {num_images}; give at most {num_images - 1}, or leave it out (a tenth: "
            f"{default_validation_size(num_images)})")
    training = num_images - validation
    changes: dict[str, Any] = {"validation_size": validation}
    if recipe.batch_size is None:  # fine-tuning: from the data
        changes["batch_size"] = finetune_batch_size(training)
    elif recipe.batch_size > training:
        say(f"zoo: --batch-size {recipe.batch_size} is more than the {training} training "
            f"images; using --batch-size {training}")
        changes["batch_size"] = training
    check_run_memory(dataclasses.replace(recipe, **changes), num_images)
    if recipe.epochs <= recipe.warmup_epochs:
        say(f"zoo: note: --epochs {recipe.epochs} is not more than --warmup-epochs "
            f"{recipe.warmup_epochs}: the learning rate is still warming up when the run "
            "ends, so it learns little; give --warmup-epochs 0 or more --epochs")
    return dataclasses.replace(recipe, **changes)


# Where a recipe's fields come from on the command line: its flags.
IMAGE_FLAGS = {"image_size": "--image-size", "limit_per_class": "--limit-per-class"}
# Images a validation batch holds (`fit`'s validation_batch_size, `evaluate_arrays`).
VALIDATION_BATCH = 256


def check_run_memory(recipe: Any, num_images: int) -> int:
    """Refuses, in one line naming the flags, a ViT run whose images would not fit in this
    machine's memory, before they are decoded: `num_images` decoded at `--image-size`, their
    training and validation copies, the training images on the device with
    `--data-placement device`, and a float32 batch (`--batch-size`, or a validation batch
    where that is larger).

    Args:
        recipe: a `ViTRecipe` with its split and batch resolved (`fit_to_data`).
        num_images: the images the run reads.

    Returns:
        The bytes counted.

    Raises:
        UserError: more than the machine's memory
            (`zoo.training.memory_bounds.check_decoded_images`).
    """
    from zoo.training.memory_bounds import check_decoded_images

    validation = recipe.validation_size
    limited = f" (--limit-per-class {recipe.limit_per_class})" if recipe.limit_per_class else ""
    beside = {f"their training and validation copies (--validation-size {validation})":
              num_images}
    if recipe.data_placement == "device":
        beside["the training images on the device (--data-placement device)"] = (
            num_images - validation)
    batch = min(VALIDATION_BATCH, validation)
    if recipe.batch_size >= batch:
        beside[f"a float32 batch of --batch-size {recipe.batch_size}"] = 4 * recipe.batch_size
    else:
        beside[f"a float32 validation batch of {batch}"] = 4 * batch
    return check_decoded_images(
        num_images, recipe.image_size, "this run",
        f"the {num_images:,} images of --data {recipe.data}{limited}",
        f"--image-size {recipe.image_size}", beside)
