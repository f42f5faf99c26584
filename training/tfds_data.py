"""TensorFlow Datasets by name: `tfds:NAME[:SPLIT]` specs, image arrays and sentence pairs.

The recipes take a TFDS dataset wherever they take data, as `tfds:NAME[:SPLIT]`:
`tfds:cifar10`, `tfds:cifar100:train`, `tfds:oxford_flowers102:train+validation`,
`tfds:ted_hrlr_translate/pt_to_en`. NAME may carry a config (`NAME/CONFIG`) and a version
(`NAME:1.2.3`). Data is read and downloaded by TFDS's own rules: its data folder is
`$TFDS_DATA_DIR` (default `~/tensorflow_datasets`), and a dataset that is not there yet is
downloaded and prepared on first use. Before that download everything is checked from TFDS's
registered builder (no download): the name, the kind (class labels, or the languages) and,
where TFDS knows the splits, the split. A dataset that is not there is refused in one line,
at once, where offline mode is on (`ZOO_OFFLINE=1`, or `TFDS_OFFLINE`, `HF_DATASETS_OFFLINE`,
`HF_HUB_OFFLINE`), and within seconds where the network cannot be reached (TFDS itself would
retry for minutes and end in a `requests` traceback). TensorFlow and `tensorflow_datasets` are imported inside
the functions, so parsing a spec costs nothing.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import socket
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from zoo.training.errors import UserError
from zoo.training.memory_bounds import as_given, check_decoded_images
from zoo.layers.validation import image_size_pair, positive_int

PREFIX = "tfds:"
OFFLINE_VARIABLES = ("ZOO_OFFLINE", "TFDS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
# TFDS's mirror of prepared datasets: reachable within seconds wherever TFDS can download.
_PROBE = ("storage.googleapis.com", 443)
PROBE_SECONDS = 5.0
_VERSION = re.compile(r"^(\d+|\*)\.(\d+|\*)\.(\d+|\*)$")


class TfdsSpec(NamedTuple):
    """A parsed `tfds:NAME[:SPLIT]`: the TFDS name (with config and version) and the split."""

    name: str
    split: str

    def __str__(self) -> str:
        return f"{PREFIX}{self.name}:{self.split}"


def is_tfds_spec(value: object) -> bool:
    """Whether `value` names a TFDS dataset (a string starting `tfds:`)."""
    return isinstance(value, str) and value.startswith(PREFIX)


def parse_tfds_spec(spec: str, default_split: str = "train") -> TfdsSpec:
    """Splits `tfds:NAME[:SPLIT]` into the name and the split (`default_split` when absent).

    A version (`tfds:cifar10:3.0.2`) stays part of the name.

    Example:
        >>> parse_tfds_spec("tfds:cifar10")
        TfdsSpec(name='cifar10', split='train')
        >>> parse_tfds_spec("tfds:cifar10:3.0.2:test[:50%]")
        TfdsSpec(name='cifar10:3.0.2', split='test[:50%]')

    Raises:
        UserError: the spec does not start with `tfds:`, or its name or split is empty.
    """
    if not is_tfds_spec(spec):
        raise UserError(f"a TFDS dataset is given as tfds:NAME[:SPLIT]; got {spec!r}")
    parts = spec[len(PREFIX):].split(":")
    name, rest = parts[0], parts[1:]
    if rest and _VERSION.match(rest[0]):
        name, rest = f"{name}:{rest[0]}", rest[1:]
    split = ":".join(rest) if rest else default_split
    if not parts[0].strip() or not split.strip():
        raise UserError(f"{spec!r} names no dataset or no split: expected tfds:NAME[:SPLIT], "
                        "e.g. tfds:cifar10 or tfds:cifar10:test")
    return TfdsSpec(name, split)


def _tfds() -> Any:
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise UserError("tfds: datasets need tensorflow-datasets; pip install "
                        "tensorflow-datasets") from error
    return tfds


@functools.lru_cache(maxsize=16)
def tfds_builder(name: str) -> Any:
    """TFDS's builder of `name` (nothing is downloaded), or one line when TFDS has no such
    dataset, with the nearest names it has.

    Raises:
        UserError: TFDS does not know `name` (or its config or version).
    """
    tfds = _tfds()
    known = tfds.list_builders(with_community_datasets=False)
    base = name.split(":")[0].split("/")[0]
    if base not in known:  # said here: TFDS itself would first look for it online
        close = difflib.get_close_matches(base, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else " (see tfds.list_builders())"
        raise UserError(f"{PREFIX}{name}: TensorFlow Datasets has no dataset {base!r}{hint}")
    try:
        return tfds.builder(name)
    # TFDS raises an AssertionError for an unknown version, a ValueError for a config.
    except (tfds.core.registered.DatasetNotFoundError, ValueError, AssertionError) as error:
        reason = str(error).strip().splitlines()[0].split(" Here are ")[0]
        configs = [c.name for c in getattr(tfds.builder_cls(base), "BUILDER_CONFIGS", [])]
        known_configs = f" (its configs: {', '.join(configs[:12])})" if configs else ""
        raise UserError(f"{PREFIX}{name}: {reason}{known_configs}") from None


def offline_variable(environ: Any = os.environ) -> str | None:
    """The first of `OFFLINE_VARIABLES` set to a true value (1, true, yes, on), else None."""
    for name in OFFLINE_VARIABLES:
        if environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return None


def require_data(builder: Any, spec: TfdsSpec, probe: tuple[str, int] = _PROBE,
                 seconds: float = PROBE_SECONDS) -> None:
    """Checks, before TFDS downloads anything, that the split exists (where TFDS knows the
    splits) and that the data is in TFDS's data folder or can be downloaded.

    Raises:
        UserError: a split TFDS cannot parse (`train[:200%]`), said as such even where the
            data is not there; an unknown split; or the dataset is not prepared and offline
            mode is on, or the network does not answer within `seconds`; one line naming
            the spec.
    """
    check_split_format(spec)
    known = dict(getattr(builder.info, "splits", {}) or {})
    base_splits = {part.split("[")[0].strip() for part in spec.split.split("+")}
    unknown = sorted(base_splits - set(known)) if known else []
    if unknown:
        raise UserError(f"{spec}: no split {unknown[0]!r}; it has {', '.join(sorted(known))}")
    if builder.is_prepared():
        return
    where = f"{spec} is not in TFDS's data folder ({builder.data_dir})"
    variable = offline_variable()
    if variable:
        raise UserError(f"{where}, and {variable} forbids downloading it; prepare it where "
                        "there is a network and point TFDS_DATA_DIR at a copy")
    try:
        socket.create_connection(probe, timeout=seconds).close()
    except OSError as error:
        raise UserError(f"{where}, and it cannot be downloaded: the network does not answer "
                        f"({error.strerror or error}); prepare it where there is one, or set "
                        "TFDS_DATA_DIR to a copy") from None


def check_split_format(spec: TfdsSpec) -> None:
    """Refuses a split that TFDS's own parser refuses (`ReadInstruction.from_spec`): checked
    first, because a dataset that is not prepared has no split names to check yet.

    Raises:
        UserError: one line naming the split and TFDS's reason.
    """
    try:
        _tfds().core.ReadInstruction.from_spec(spec.split)
    except ValueError as error:
        reason = (str(error).strip().splitlines() or ["unrecognized"])[-1]
        reason = reason.split(". See format at")[0].rstrip(".")
        raise UserError(f"{spec}: invalid split {spec.split!r} ({reason}); a split is NAME or "
                        "NAME[FROM:TO] (counts, or percentages with %), several joined by "
                        "+") from None


def _load(spec: TfdsSpec, **kwargs: Any) -> Any:
    """`tfds.load` of the spec after `require_data`, with a bad split said in one line."""
    tfds = _tfds()
    require_data(tfds_builder(spec.name), spec)
    try:
        return tfds.load(spec.name, split=spec.split, **kwargs)
    except ValueError as error:
        if "split" not in str(error).lower():
            raise
        first = str(error).strip().splitlines()[0]
        raise UserError(f"{spec}: {first}") from None


def class_label_names(builder: Any, spec: TfdsSpec) -> list[str]:
    """The class names of a supervised image dataset's label (`supervised_keys[1]`)."""
    keys = builder.info.supervised_keys
    if not keys or len(keys) != 2:
        raise UserError(f"{spec} has no (image, label) pairs: TFDS lists no supervised keys "
                        "for it")
    label = builder.info.features[keys[1]]
    names = getattr(label, "names", None)
    if not names:
        raise UserError(f"{spec}: its label {keys[1]!r} is not a class label "
                        f"({type(label).__name__})")
    return [str(n) for n in names]


def tfds_image_dataset(
    name: str,
    split: str,
    image_size,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
):
    """Loads an image classification dataset from TensorFlow Datasets as uint8 RGB batches.

    Needs `tensorflow_datasets` and, the first time, network access to download `name`.
    Grayscale datasets are expanded to RGB, an alpha channel is dropped, and images are resized
    bilinearly (antialiased) to `image_size` when their size differs.

    Args:
        name: TFDS name, e.g. `"cifar10"`.
        split: TFDS split, e.g. `"train[:45000]"`.
        image_size: `(height, width)` (or one int).
        batch_size: images per batch.
        shuffle: shuffle files and examples (seeded by `seed`).
        seed: shuffle seed.

    Returns:
        A `tf.data.Dataset` of `(images uint8 (batch, height, width, 3), labels int32)`;
        its `examples` attribute is the number of images where TFDS knows it, else None.
    """
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"name must be a TFDS dataset name such as 'cifar10'; got {name!r}")
    if not isinstance(split, str) or not split.strip():
        raise UserError(f"split must be a TFDS split such as 'train'; got {split!r}")
    height, width = image_size_pair(image_size)
    batch_size = positive_int(batch_size, "batch_size")
    tfds = _tfds()
    import tensorflow as tf

    read_config = tfds.ReadConfig(shuffle_seed=seed) if shuffle else None
    class_label_names(tfds_builder(name), TfdsSpec(name, split))  # the kind, before download
    dataset = _load(TfdsSpec(name, split), as_supervised=True, shuffle_files=shuffle,
                    read_config=read_config)

    def to_rgb(image, label):
        image = tf.convert_to_tensor(image)
        channels = image.shape[-1]
        if channels == 1:
            image = tf.image.grayscale_to_rgb(image)
        elif channels == 4:
            image = image[..., :3]
        elif channels != 3:
            raise UserError(
                f"TFDS dataset {name!r} has images with {channels} channels; expected 1, 3 or 4"
            )
        if image.dtype != tf.uint8:
            image = tf.image.convert_image_dtype(image, tf.uint8, saturate=True)

        def resize():
            resized = tf.image.resize(image, (height, width), "bilinear", antialias=True)
            return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)

        same_size = tf.reduce_all(tf.shape(image)[:2] == (height, width))
        image = tf.cond(same_size, lambda: image, resize)
        return tf.ensure_shape(image, (height, width, 3)), tf.cast(label, tf.int32)

    examples = int(dataset.cardinality())
    if shuffle:
        dataset = dataset.shuffle(10_000, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(to_rgb, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    dataset.examples = examples if examples >= 0 else None
    return dataset


def tfds_image_arrays(
    spec: str | TfdsSpec, image_size, limit_per_class: int | None = None, seed: int = 0,
    names: Mapping[str, str] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A TFDS image classification split in memory, as the recipes hold a class folder.

    The whole split is read at `image_size` (then `limit_per_class` picks from it): bounded
    by the machine's memory before the first image is read where TFDS knows the split's
    size, else as the images arrive (`zoo.training.memory_bounds.check_decoded_images`).

    Args:
        spec: `tfds:NAME[:SPLIT]` (split `train` when absent) or a parsed `TfdsSpec`.
        image_size: `(height, width)` (or one int) every image is resized to.
        limit_per_class: keep a random subset of at most this many images per class.
        seed: seed of that subset.
        names: how the caller's user gives `image_size`, for the memory bound's message
            (`{"image_size": "--image-size"}`); by default as this argument.

    Returns:
        `(images, labels, class_names)`: uint8 `(N, height, width, 3)` in the split's stored
        order, int32 `(N,)`, and the label's class names.

    Raises:
        UserError: an unknown dataset or split, a dataset without class labels, an empty
            split, or a split that would not fit in memory at `image_size`.
    """
    from zoo.training.image_data import rows_per_class  # image_data loads nothing heavy

    spec = parse_tfds_spec(spec) if isinstance(spec, str) else spec
    limit_per_class = positive_int(limit_per_class, "limit_per_class", optional=True)
    names_of_classes = class_label_names(tfds_builder(spec.name), spec)
    dataset = tfds_image_dataset(spec.name, spec.split, image_size, batch_size=512,
                                 shuffle=False)

    def bound(count: int) -> None:  # the batches read, and their joined copy
        check_decoded_images(count, image_size_pair(image_size), f"reading {spec}",
                             f"the {count:,} images of {spec}",
                             as_given("image_size", image_size, names),
                             {"their joined copy": count})

    if dataset.examples is not None:
        bound(dataset.examples)
    images, labels = [], []
    for image_batch, label_batch in dataset.as_numpy_iterator():
        images.append(image_batch)
        labels.append(label_batch)
        if dataset.examples is None:
            bound(sum(len(batch) for batch in images))
    if not images:
        raise UserError(f"{spec} holds no images")
    images_array, labels_array = np.concatenate(images), np.concatenate(labels)
    del images
    if limit_per_class is not None:
        rows = rows_per_class(labels_array, len(names_of_classes), limit_per_class, seed)
        images_array, labels_array = images_array[rows], labels_array[rows]
    return images_array, labels_array.astype("int32"), names_of_classes


def tfds_translation_pairs(
    spec: str | TfdsSpec, source_lang: str, target_lang: str
) -> list[tuple[str, str]]:
    """The sentence pairs of a TFDS translation split, in the direction asked.

    Args:
        spec: `tfds:NAME[:SPLIT]` (split `train` when absent) or a parsed `TfdsSpec`, e.g.
            `tfds:ted_hrlr_translate/pt_to_en:validation`.
        source_lang, target_lang: two of the dataset's languages (its feature names, e.g.
            `pt` and `en`); either direction.

    Returns:
        `[(source, target), ...]` as stripped strings, in the split's stored order.

    Raises:
        UserError: an unknown dataset or split, or languages the dataset does not hold.
    """
    spec = parse_tfds_spec(spec) if isinstance(spec, str) else spec
    builder = tfds_builder(spec.name)  # an unknown name in one line, before any download
    languages = sorted(getattr(builder.info.features, "languages", None) or [])
    if not languages:
        raise UserError(f"{spec} is not a translation dataset (its features: "
                        f"{type(builder.info.features).__name__})")
    _check_languages(spec, languages, source_lang, target_lang)  # before the download
    dataset = _load(spec, shuffle_files=False)
    _check_languages(spec, sorted(getattr(dataset, "element_spec", {}) or {}), source_lang,
                     target_lang)
    return [(example[source_lang].decode("utf-8").strip(),
             example[target_lang].decode("utf-8").strip())
            for example in dataset.as_numpy_iterator()]


def _check_languages(spec: TfdsSpec, languages: list[str], source_lang: str,
                     target_lang: str) -> None:
    if source_lang not in languages or target_lang not in languages or (
            source_lang == target_lang):
        raise UserError(f"{spec} holds the languages {', '.join(languages) or 'none'}; "
                        f"--source-lang {source_lang} --target-lang {target_lang} must be two "
                        "of them")
