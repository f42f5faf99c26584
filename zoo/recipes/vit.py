"""The ViT's training recipe: image folders, augmentation, AdamW + warm-up/cosine, resume.

`zoo train vit` runs `train_vit`. Images are decoded with PIL into numpy (the path that works
on every backend, and the only one on the JAX GPU machine, which has no TensorFlow);
augmentation runs on whole batches, compiled, before the model (never inside it): on the
host per step (`AugmentedBatches`), or with `data_placement="device"` inside the compiled
train step on a training set held on the device
(`zoo.training.device_resident.DeviceResidentTraining`). A run writes into its output folder
and continues from its last checkpoint when started again:

    out/checkpoints/   weights and optimizer state after every epoch
    out/logs/          TensorBoard
    out/model.keras    the final model (class names inside)
    out/metrics.json   settings, per-epoch accuracy, final validation top-1 and top-5
    out/data/          a `--data` archive, extracted (classes are read from its tree only)

The final `model.keras` and `metrics.json` are written atomically (a temporary file renamed
into place). A folder that holds a finished run, or files the run did not write, is refused
unless `force` is set (see `zoo.training.checkpointing.prepare_run_folder`).
"""

from __future__ import annotations

import gzip
import math
import os
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

import keras
import numpy as np

from zoo.training.files.archives import extract_archive
from zoo.training.augmentation import MixBatch, cifar_augmentation, compiled_augmentation
from zoo.training.device_resident import DeviceResidentTraining
from zoo.training.idx_data import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_DIR,
    is_idx_folder,
    load_idx_split,
)
from zoo.training.batch_norm import PreciseBatchNorm, batch_norm_layers
from zoo.training.image_data import load_image_folder_numpy, train_validation_split
from zoo.training.image_files import scan_image_folder
from zoo.training.tfds_data import (
    is_tfds_spec,
    parse_tfds_spec,
    tfds_builder,
    tfds_image_arrays,
)
from zoo.training.optimizers import adamw_no_decay_on_norms
from zoo.training.memory_bounds import check_decoded_images
from zoo.training.progress import Step
from zoo.training.run import finish_run, fit_resumably, resume, start_run
from zoo.training.schedules import WarmupCosine
from zoo.training.errors import UserError
from zoo.recipes.checks import check_fields, check_lora_settings
from zoo.recipes.settings import ViTRecipe
from zoo.recipes.data_fit import (IMAGE_FLAGS, VALIDATION_BATCH, check_output_outside_data,
                                  count_images, fit_to_data)
from zoo.recipes.finetune import layer_decay_multipliers
from zoo.recipes.multiprocess import check_recipe_job, run_recipe
from zoo.training.distribution import ProcessShard, predict_in_batches, process_count
from zoo.hub.loader import load
from zoo.models.quantization import refuse_quantized_training
from zoo.models.surgery import in_run_options
from zoo.models.vit.initialization import pytorch_initialization
from zoo.models.vit.model import VisionTransformer

# What a run writes at the top of its output folder.
RUN_FILES = ("checkpoints", "logs", "data", "model.keras", "metrics.json")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


def check_recipe(recipe: ViTRecipe) -> None:
    """Checks the settings before anything is read or written: one line naming a bad value
    (the ranges are the fields' `check` metadata, zoo/recipes/settings.py).

    Raises:
        ValueError: a setting out of its range, or a TFDS dataset TFDS does not know.
    """
    check_fields(recipe)
    check_lora_settings(recipe)
    check_output_outside_data(recipe)
    check_recipe_job(recipe, backend=keras.backend.backend())
    if is_tfds_spec(recipe.data):
        tfds_builder(parse_tfds_spec(recipe.data).name)


def load_images(recipe: ViTRecipe) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All images of the recipe's data as uint8 `(N, S, S, 3)`, int32 labels, class names."""
    if not recipe.data:
        raise UserError("no training data: give --data DIR (one folder per class), a "
                        ".tar.gz of such a folder, or tfds:NAME[:SPLIT]")
    if is_tfds_spec(recipe.data):
        with Step(f"reading {recipe.data} (TFDS downloads it the first time)"):
            return tfds_image_arrays(recipe.data, recipe.image_size,
                                     limit_per_class=recipe.limit_per_class, seed=recipe.seed,
                                     names=IMAGE_FLAGS)
    folder = Path(recipe.data)
    idx = folder.is_dir() and is_idx_folder(folder)
    if not idx:
        if folder.name.endswith(ARCHIVE_SUFFIXES):
            folder = extracted_class_folder(folder, Path(recipe.output) / "data")
        _require_two_classes(scan_image_folder(folder)[2], recipe.data)  # before decoding
    count = count_images(str(folder), recipe.limit_per_class)
    if count is not None:  # the run's images, bounded by memory before they are decoded
        fit_to_data(recipe, count, say=lambda line: None)
    if idx:
        images, labels = load_idx_split(folder, "train", recipe.image_size,
                                        recipe.limit_per_class, recipe.seed, IMAGE_FLAGS)
        names = (list(FASHION_MNIST_CLASSES) if folder.resolve() == FASHION_MNIST_DIR.resolve()
                 else [str(c) for c in range(int(labels.max()) + 1)])
        return images, labels, names
    return load_image_folder_numpy(folder, image_size=recipe.image_size,
                                   limit_per_class=recipe.limit_per_class, seed=recipe.seed,
                                   progress=True, names=IMAGE_FLAGS)


def _require_two_classes(class_names: list[str], data: str | None) -> None:
    if len(class_names) < 2:  # a classifier of one class scores 100% and learns nothing
        raise UserError(f"--data {data} holds {len(class_names)} class "
                        f"({', '.join(class_names)}); a classifier needs at least two")


def extracted_class_folder(archive: str | os.PathLike, data: str | os.PathLike) -> Path:
    """Extracts `archive` into `data` and returns the folder of its class folders.

    The class folders are the archive's own, found from its member list, never from a
    listing of `data`: its single top folder when it has one (e.g. `data/train/`), else its
    top level. Anything else under `data` is never read as a class; a folder inside the
    archive's class root that the archive does not hold (left by an earlier extraction of
    another archive, or put there by hand) is refused rather than read as a class.

    Raises:
        ValueError: the archive is unreadable or unsafe (see `extract_archive`), or the
            extracted tree holds folders the archive does not.
    """
    archive = Path(archive)
    try:
        with Step(f"extracting {archive.name}"):
            tree = Path(extract_archive(archive, data))
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise UserError(f"cannot read archive {archive}: it is truncated or damaged "
                        f"({error})") from error
    try:
        with tarfile.open(archive, "r:*") as opened:
            members = [PurePosixPath(m.name) for m in opened]
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise UserError(f"cannot read archive {archive}: {error}") from error
    parts = [tuple(p for p in m.parts if p not in ("", ".")) for m in members]
    parts = [p for p in parts if p]
    tops = {p[0] for p in parts}
    root, depth = tree, 0
    if len(tops) == 1 and any(len(p) > 1 for p in parts):
        root, depth = tree / next(iter(tops)), 1  # e.g. the archive's single train/ folder
    expected = {p[depth] for p in parts if len(p) > depth}
    found = {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
    stray = sorted(found - expected)
    if stray:
        raise UserError(
            f"{root} holds folders that archive {archive.name} does not ({', '.join(stray)}); "
            "remove them, or train into another --output")
    return root


class AugmentedBatches(keras.utils.PyDataset):
    """Shuffled batches of (augmented images, one-hot labels), freshly drawn every epoch."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, num_classes: int,
                 batch_size: int, augment: Any | None, mix: Any | None, seed: int) -> None:
        super().__init__()
        self.images, self.labels = images, labels
        self.num_classes, self.batch_size = num_classes, batch_size
        self.augment, self.mix = augment, mix
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(images))

    def __len__(self) -> int:
        return math.ceil(len(self.images) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        images = self.images[rows]
        labels = np.eye(self.num_classes, dtype="float32")[self.labels[rows]]
        if self.augment is not None:
            images = self.augment(images)
        if self.mix is not None:
            images, labels = self.mix(images, labels)
        return images, labels

    def on_epoch_end(self) -> None:
        self.order = self.rng.permutation(len(self.images))


def recipe_augmentation(recipe: ViTRecipe) -> keras.layers.Pipeline:
    """The run's crop and flip, RandAugment at the recipe's magnitude and number of
    operations where `rand_augment` is set, and random erasing at its rate
    (`zoo.training.augmentation.cifar_augmentation`)."""
    return cifar_augmentation(
        recipe.image_size, rand_augment=recipe.rand_augment,
        magnitude=recipe.rand_augment_magnitude, num_ops=recipe.rand_augment_ops,
        seed=recipe.seed, random_erasing=recipe.random_erasing)


def recipe_mix(recipe: ViTRecipe) -> MixBatch | None:
    """The run's MixUp or CutMix layer, or None."""
    return None if recipe.mix == "none" else MixBatch(recipe.mix, seed=recipe.seed)


def build_vit(recipe: ViTRecipe, class_names: list[str], steps_per_epoch: int
              ) -> VisionTransformer:
    """The recipe's model (`new_vit`), compiled by `compile_vit`."""
    model = new_vit(recipe, class_names)
    compile_vit(model, model, recipe, steps_per_epoch)
    return model


def new_vit(recipe: ViTRecipe, class_names: list[str]) -> VisionTransformer:
    """The recipe's model, not compiled.

    A new model of `recipe.architecture`, or `recipe.model` prepared for fine-tuning (a new head
    for other classes, interpolated position embeddings for another image size, frozen
    blocks or, with `recipe.lora_rank`, LoRA factors and the head alone trainable).
    """
    if recipe.model:
        model = _pretrained_vit(recipe, class_names)
    else:
        overrides: dict[str, Any] = {"image_size": recipe.image_size}
        if recipe.dropout is not None:
            overrides["dropout"] = recipe.dropout
        if recipe.query_key_norm:
            overrides["query_key_norm"] = True
        model = VisionTransformer.from_architecture(
            recipe.architecture, num_classes=len(class_names), class_names=class_names,
            **overrides)
        if recipe.initialization == "pytorch":
            pytorch_initialization(model, recipe.seed)
    if recipe.lora_rank:  # after the head is replaced: the new head trains too
        model.enable_lora(recipe.lora_rank, recipe.lora_alpha)
    else:
        model.freeze_blocks(recipe.freeze_blocks)
    return model


def compile_vit(trained: keras.Model, model: VisionTransformer, recipe: ViTRecipe,
                steps_per_epoch: int) -> None:
    """Compiles `trained` (the ViT `model` itself, or a `DeviceResidentTraining` around it)
    with AdamW (no decay on norms, biases, position embeddings, class token), warm-up then
    cosine over `recipe.epochs * steps_per_epoch` steps (the warm-up
    `recipe.warmup_epochs * steps_per_epoch`), and label smoothing; with
    `recipe.ema_momentum`, the optimizer keeps an exponential moving average of the weights
    (Keras' `use_ema`: after every step, average = m * average + (1 - m) * weights), and
    `recipe.layer_decay` < 1 gives lower blocks smaller learning rates."""
    multipliers = (layer_decay_multipliers(model, recipe.layer_decay)
                   if recipe.layer_decay != 1.0 else None)
    total = max(1, recipe.epochs * steps_per_epoch)
    schedule = WarmupCosine(recipe.learning_rate, total_steps=total,
                            warmup_steps=min(total - 1, recipe.warmup_epochs * steps_per_epoch))
    ema = ({} if recipe.ema_momentum is None
           else {"use_ema": True, "ema_momentum": recipe.ema_momentum})
    trained.compile(
        optimizer=adamw_no_decay_on_norms(schedule, weight_decay=recipe.weight_decay,
                                          clipnorm=recipe.clipnorm,
                                          learning_rate_multipliers=multipliers, **ema),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True,
                                                  label_smoothing=recipe.label_smoothing),
        # Top-5 only where it says something: among 5 classes or fewer it is always 1.
        metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")]
        + ([keras.metrics.TopKCategoricalAccuracy(5, name="top5")]
           if model.num_classes > 5 else []),
    )


def _pretrained_vit(recipe: ViTRecipe, class_names: list[str]) -> VisionTransformer:
    model = load(recipe.model, expect=VisionTransformer)
    refuse_quantized_training(model, recipe.model)
    if list(model.class_names or []) != list(class_names):
        model = model.with_new_head(len(class_names), class_names)
    if model.image_size != recipe.image_size:
        model = model.with_image_size(recipe.image_size)
    return in_run_options(model, recipe.dropout)


def train_vit(recipe: ViTRecipe) -> dict:
    """Trains (or resumes) a ViT; returns the metrics written to metrics.json. The run
    holds its output folder throughout: a second run into the folder meanwhile is refused in
    one line. With job settings it runs as one process of a multi-process job
    (`zoo.recipes.multiprocess.run_recipe`)."""
    return run_recipe(recipe, check_recipe, RUN_FILES, _train_vit)


def _train_vit(recipe: ViTRecipe) -> dict:
    """`train_vit` inside the held run folder."""
    out = start_run(recipe.output, RUN_FILES, recipe.force, recipe.seed, recipe.precision)
    images, labels, class_names = load_images(recipe)
    _require_two_classes(class_names, recipe.data)
    recipe = fit_to_data(recipe, len(images))  # the split, the batch, the warm-up
    # Stratified: the same number of validation images from every class.
    train_rows, valid_rows = train_validation_split(len(images), recipe.validation_size,
                                                    seed=recipe.seed, labels=labels)
    num_classes = len(class_names)
    augment = recipe_augmentation(recipe) if recipe.augment else None
    mix = recipe_mix(recipe)
    validation = (images[valid_rows], np.eye(num_classes, dtype="float32")[labels[valid_rows]])
    on_device = recipe.data_placement == "device"
    steps_per_epoch = (len(train_rows) // recipe.batch_size if on_device
                       else math.ceil(len(train_rows) / recipe.batch_size))

    model = new_vit(recipe, class_names)
    model(images[:1])  # build the variables before wrapping them or restoring a checkpoint
    # With an average of the weights, validation scores the average (swapped in for each
    # evaluation, the trained weights back for the next step and the checkpoints), and the
    # final model holds it: `fit` ends by writing the average into the weights.
    callbacks = [] if recipe.ema_momentum is None else [keras.callbacks.SwapEMAWeights()]
    # A batch-normalised stem: each validation and the final model use statistics recomputed
    # for the weights of the moment (after the average's swap), not the moving averages.
    callbacks += precise_batch_norm(model, images[train_rows], recipe)
    if on_device:
        trained = DeviceResidentTraining(model, images[train_rows], labels[train_rows],
                                         num_classes, recipe.batch_size, augment=augment,
                                         mix=mix, seed=recipe.seed)
        callbacks.append(trained.new_order_every_epoch())
        fit_data, fit_options = trained.step_numbers(), {"batch_size": 1, "shuffle": False}
    else:
        trained, fit_options = model, {}
        fit_data = AugmentedBatches(
            images[train_rows], labels[train_rows], num_classes, recipe.batch_size,
            None if augment is None else compiled_augmentation(augment),
            None if mix is None else compiled_augmentation(mix), recipe.seed)
        if process_count() > 1:  # each process feeds its rows of every global batch
            fit_data = ProcessShard(fit_data)
    compile_vit(trained, model, recipe, steps_per_epoch)
    # The two placements' checkpoints differ in layout (the classifier nested or not).
    facts = {"data_placement": recipe.data_placement}
    initial_epoch = resume(trained, out, facts)
    before = None
    if recipe.model and not initial_epoch:  # the baseline fine-tuning must beat
        before = evaluate_arrays(model, images[valid_rows], labels[valid_rows])
        print(f"before fine-tuning: validation top-1 {before['top1']:.4f}")
    history, seconds = fit_resumably(
        trained, fit_data, out, recipe.epochs, initial_epoch, callbacks=callbacks,
        checkpoint_every=recipe.checkpoint_every, facts=facts, validation_data=validation,
        validation_batch_size=VALIDATION_BATCH, validation_freq=validation_epochs(recipe),
        **fit_options)
    final = evaluate_arrays(model, images[valid_rows], labels[valid_rows])
    return finish_run(
        out, model, recipe, history, seconds, initial_epoch,
        {"top1": final["top1"], "top5": final["top5"]},
        None if before is None else {"top1": before["top1"], "top5": before["top5"]},
        final_model=model.merge_lora() if recipe.lora_rank else None,
        training_images=int(len(train_rows)), validation_images=int(len(valid_rows)),
        validation_epochs=[e for e in validation_epochs(recipe) if e > initial_epoch],
        images_per_second_this_run=round(
            (steps_per_epoch * recipe.batch_size if on_device else len(train_rows))
            * (recipe.epochs - initial_epoch) / max(seconds, 1e-9), 1))


def precise_batch_norm(model: VisionTransformer, train_images: np.ndarray,
                       recipe: ViTRecipe) -> list[PreciseBatchNorm]:
    """[`PreciseBatchNorm`] over up to 40 batches of the clean training images (of the
    recipe's batch size) for a model with trainable batch norm (a "strided" or "vgg" stem);
    [] for one without (or with its stem frozen)."""
    if not batch_norm_layers(model):
        return []
    batch_size = min(recipe.batch_size, len(train_images))
    return [PreciseBatchNorm(model, train_images, batch_size=batch_size,
                             batches=min(40, len(train_images) // batch_size), seed=recipe.seed)]


def validation_epochs(recipe: ViTRecipe) -> list[int]:
    """The epochs (from 1) after which a run scores its validation images: every
    `recipe.validate_every`-th and the last."""
    return sorted(set(range(recipe.validate_every, recipe.epochs + 1, recipe.validate_every))
                  | {recipe.epochs})


def evaluate_arrays(model: VisionTransformer, images: np.ndarray, labels: np.ndarray,
                    batch_size: int = VALIDATION_BATCH) -> dict:
    """Top-1, top-5 (None for 5 classes or fewer, where it is always 1) and the confusion
    matrix of `model` on uint8 images and int labels."""
    logits = predict_in_batches(model, images, batch_size=batch_size)
    ranked = np.argsort(-logits, axis=1)
    top1 = float(np.mean(ranked[:, 0] == labels))
    top5 = (float(np.mean(np.any(ranked[:, :5] == labels[:, None], axis=1)))
            if logits.shape[1] > 5 else None)
    matrix = np.zeros((logits.shape[1], logits.shape[1]), "int64")
    np.add.at(matrix, (labels, ranked[:, 0]), 1)
    return {"top1": top1, "top5": top5, "confusion_matrix": matrix, "images": len(labels)}


def evaluate_vit(model: VisionTransformer, data: str, confusion_matrix_path: str | None = None,
                 limit_per_class: int | None = None) -> dict:
    """Top-1 and top-5 accuracy on a folder of class folders, or a TFDS split
    (`tfds:NAME[:SPLIT]`, split `test` when absent), whose class names are the model's;
    optionally draws the confusion matrix."""
    names = list(model.class_names or [])
    size_named = {"image_size": "the model's image_size"}
    if is_tfds_spec(data):
        spec = parse_tfds_spec(data, default_split="test")
        with Step(f"reading {spec}"):
            images, labels, data_classes = tfds_image_arrays(
                spec, model.image_size, limit_per_class=limit_per_class, names=size_named)
        _check_known_classes(data_classes, names, data)
    else:
        _, _, data_classes = scan_image_folder(data)
        _check_known_classes(data_classes, names, data)  # before decoding anything
        count = count_images(data, limit_per_class) or 0
        batch = min(VALIDATION_BATCH, count)
        check_decoded_images(count, model.image_size, "evaluating",
                             f"the {count:,} images of --data {data}",
                             f"the model's image_size {model.image_size}",
                             {f"a float32 batch of {batch} of them at the model's image_size "
                              f"{model.image_size}": 4 * batch})
        images, labels, _ = load_image_folder_numpy(data, image_size=model.image_size,
                                                    limit_per_class=limit_per_class,
                                                    progress=True, names=size_named)
    labels = np.array([names.index(data_classes[i]) for i in labels], "int32")
    with Step(f"classifying {len(labels):,} images"):
        scores = evaluate_arrays(model, images, labels)
    if confusion_matrix_path:
        from zoo.recipes.plots import plot_confusion_matrix

        plot_confusion_matrix(scores["confusion_matrix"], names, confusion_matrix_path)
    return scores


def _check_known_classes(data_classes: list[str], names: list[str], data: str) -> None:
    unknown = [c for c in data_classes if c not in names]
    if unknown:
        raise UserError(f"classes {unknown} of {data} are not classes of the model ({names})")
