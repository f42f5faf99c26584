"""Image datasets: class folders in memory as NumPy arrays (any backend) and as tf.data.

The JAX path (`load_image_folder_numpy`, decoded with PIL) and the TensorFlow path
(`image_folder_tf_dataset`, decoded in-graph) read the same file listing
(`scan_image_folder`) and hold out the same images (`train_validation_split`), so both see
the same classes and the same validation set. TensorFlow is imported only inside the functions
that build tf.data. File reading (`load_image`, `scan_image_folder`) lives in
`zoo.training.image_files`, archive extraction (`extract_archive`) in
`zoo.training.files.archives`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from zoo.training.errors import UserError
from zoo.layers.validation import image_size_pair, positive_int
from zoo.training.image_files import load_images, scan_image_folder, stored_size
from zoo.training.memory_bounds import as_given, check_decoded_images
from zoo.training.progress import Step


def rows_per_class(labels: np.ndarray, num_classes: int, limit_per_class: int,
                   seed: int = 0) -> np.ndarray:
    """Indices of a random subset of at most `limit_per_class` examples of each class,
    class by class and in their original order within a class."""
    rng = np.random.default_rng(seed)
    keep = []
    for index in range(num_classes):
        members = np.flatnonzero(labels == index)
        if len(members) > limit_per_class:
            members = np.sort(rng.choice(members, size=limit_per_class, replace=False))
        keep.extend(members.tolist())
    return np.asarray(keep, dtype="int64")


def load_image_folder_numpy(
    directory: str | os.PathLike,
    image_size=(32, 32),
    limit_per_class: int | None = None,
    seed: int = 0,
    num_threads: int | None = None,
    progress: bool = False,
    names: Mapping[str, str] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Decodes a class-folder dataset into memory with PIL: the input path for JAX.

    Images come back in `scan_image_folder` order (class by class, sorted by path); shuffle
    with `train_validation_split` / a permutation in the training loop. Before the first is
    decoded, the set is bounded by the machine's memory
    (`zoo.training.memory_bounds.check_decoded_images`).

    Args:
        directory: the dataset folder.
        image_size: `(height, width)` every image is resized to (bilinear); `None` keeps the
            stored size, which must then be the same for all images.
        limit_per_class: keep a random subset of at most this many images per class.
        seed: seed of the subset choice when `limit_per_class` is set.
        num_threads: decoding threads (PIL releases the GIL while decoding); `None` uses up to
            8, limited by the CPU count.
        progress: say the decoding on stderr as it goes (`zoo.training.progress.Step`).
        names: how the caller's user gives `image_size` and `limit_per_class`, for the
            memory bound's message (`{"image_size": "--image-size"}`); by default as
            these arguments.

    Returns:
        `(images, labels, class_names)`: uint8 `(N, height, width, 3)`, int32 `(N,)` and the
        class names.

    Raises:
        The errors of `scan_image_folder` and `load_image`; UserError when the images would
        not fit in memory, or `image_size` is `None` and image sizes differ.
    """
    size = None if image_size is None else image_size_pair(image_size)
    limit_per_class = positive_int(limit_per_class, "limit_per_class", optional=True)
    paths, labels, class_names = scan_image_folder(directory)
    if limit_per_class is not None:
        keep = rows_per_class(labels, len(class_names), limit_per_class, seed)
        paths = [paths[i] for i in keep]
        labels = labels[keep]
    limited = (f" ({as_given('limit_per_class', limit_per_class, names)})"
               if limit_per_class else "")
    check_decoded_images(
        len(paths), size or stored_size(paths[0]), f"decoding {directory}",
        f"the {len(paths):,} images of {directory}{limited}",
        as_given("image_size", image_size, names) if size else "their stored size")
    step = Step(f"decoding {len(paths):,} images from {directory}", total=len(paths),
                enabled=progress)
    with step:
        images = load_images(paths, size, num_threads, step)
    return images, labels, class_names


def train_validation_split(
    n: int, validation_size: int | float, seed: int = 0, labels=None
) -> tuple[np.ndarray, np.ndarray]:
    """Splits `range(n)` into training and validation indices, the same for the same seed.

    Args:
        n: number of examples.
        validation_size: how many to hold out: an int count in `[1, n - 1]`, or a fraction in
            `(0, 1)` (rounded to a count in that range).
        seed: seed of the random choice.
        labels: optional `(n,)` class labels: hold out the same share of every class (the
            count is shared out by largest remainder), e.g. exactly 500 of each CIFAR-10 class
            for `validation_size=5000`.

    Returns:
        `(train_indices, validation_indices)`, sorted int64 arrays that together cover
        `range(n)` once.

    Example:
        >>> train, val = train_validation_split(50_000, 5_000, seed=0)
        >>> len(train), len(val)
        (45000, 5000)
    """
    n = positive_int(n, "n")
    if isinstance(validation_size, (float, np.floating)):
        if not 0.0 < validation_size < 1.0:
            raise UserError(
                f"a fractional validation_size must lie in (0, 1); got {validation_size}"
            )
        count = int(round(n * float(validation_size)))
        count = min(max(count, 1), n - 1)
    elif isinstance(validation_size, (int, np.integer)) and not isinstance(validation_size, bool):
        count = int(validation_size)
    else:
        raise UserError(
            f"validation_size must be an int count or a float fraction; got "
            f"{validation_size!r}"
        )
    if not 1 <= count <= n - 1:
        raise UserError(
            f"validation_size must leave at least one example on each side of the split: "
            f"expected 1..{n - 1} for n={n}; got {validation_size!r}"
        )
    rng = np.random.default_rng(seed)
    if labels is None:
        permutation = rng.permutation(n)
        return np.sort(permutation[count:]), np.sort(permutation[:count])
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match n; got {labels.shape}")
    classes, sizes = np.unique(labels, return_counts=True)
    quotas = sizes * (count / n)
    shares = np.floor(quotas).astype(int)
    leftover = count - shares.sum()
    shares[np.argsort(-(quotas - shares), kind="stable")[:leftover]] += 1
    held_out = np.concatenate(
        [rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in zip(classes, shares)]
    )
    keep = np.ones(n, dtype=bool)
    keep[held_out] = False
    return np.flatnonzero(keep), np.sort(held_out)


# ---------------------------------------------------------------------------------------------
# tf.data (TensorFlow imported lazily)


def image_folder_tf_dataset(
    directory: str | os.PathLike,
    image_size,
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    validation_split: int | float | None = None,
    subset: str | None = None,
):
    """Builds a tf.data pipeline of `(uint8 images, int32 labels)` batches from class folders.

    Files are listed by `scan_image_folder` and decoded with `tf.io.decode_image(channels=3)`;
    images whose size differs from `image_size` are resized bilinearly (antialiased, like PIL)
    and rounded back to uint8. The validation split is `train_validation_split(n,
    validation_split, seed, labels=labels)` (stratified by class) over the files in
    `scan_image_folder` order, the images the NumPy path holds out with the same call.

    Args:
        directory: the dataset folder.
        image_size: `(height, width)` (or one int).
        batch_size: images per batch; the last batch may be smaller.
        shuffle: shuffle the files again every epoch (seeded by `seed`).
        seed: seed of the shuffle and of the split.
        validation_split: int count or fraction held out; needs `subset`.
        subset: `"training"`, `"validation"` or `"both"` (a tuple of the two datasets); only
            with `validation_split`.

    Returns:
        A `tf.data.Dataset` of `(images uint8 (batch, height, width, 3), labels int32
        (batch,))`, with `class_names` set as an attribute; a pair of them for `"both"`.
        The validation dataset is never shuffled.
    """
    size = image_size_pair(image_size)
    batch_size = positive_int(batch_size, "batch_size")
    if (validation_split is None) != (subset is None):
        raise UserError(
            "validation_split and subset go together: pass both (subset='training', "
            f"'validation' or 'both') or neither; got validation_split={validation_split!r}"
            f", subset={subset!r}"
        )
    if subset not in (None, "training", "validation", "both"):
        raise UserError(
            f"subset must be 'training', 'validation' or 'both'; got {subset!r}"
        )
    paths, labels, class_names = scan_image_folder(directory)
    if validation_split is None:
        return _files_dataset(paths, labels, class_names, size, batch_size, shuffle, seed)
    train_index, validation_index = train_validation_split(
        len(paths), validation_split, seed, labels=labels
    )
    datasets = {
        name: _files_dataset(
            [paths[i] for i in index], labels[index], class_names, size, batch_size,
            shuffle and name == "training", seed,
        )
        for name, index in (("training", train_index), ("validation", validation_index))
        if subset in (name, "both")
    }
    if subset == "both":
        return datasets["training"], datasets["validation"]
    return datasets[subset]


def _files_dataset(paths, labels, class_names, size, batch_size, shuffle, seed):
    import tensorflow as tf

    height, width = size

    def decode(path, label):
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        image.set_shape([None, None, 3])
        same_size = tf.logical_and(tf.shape(image)[0] == height, tf.shape(image)[1] == width)
        image = tf.cond(
            same_size,
            lambda: tf.cast(image, tf.float32),
            lambda: tf.image.resize(image, (height, width), "bilinear", antialias=True),
        )
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        return tf.ensure_shape(image, (height, width, 3)), label

    dataset = tf.data.Dataset.from_tensor_slices(
        ([str(p) for p in paths], np.asarray(labels, dtype="int32"))
    )
    if shuffle:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
    dataset.class_names = list(class_names)
    return dataset
