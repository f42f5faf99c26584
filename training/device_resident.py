"""Training on a data set that sits on the accelerator: batches drawn inside the train step.

With `AugmentedBatches` (zoo.recipes.vit) the host gathers every batch, the augmentation runs
as a separate compiled call, and the result goes to the device: per step, one round trip
and a Python call that the chip waits on. On a GPU that caps a small ViT at a few percent of
the chip. `DeviceResidentTraining` instead holds the whole training set once, as uint8
images and int32 labels in (non-trainable) variables on the device, and does everything a
step needs inside the one compiled train step:

    rows   = order[step * batch_size : (step + 1) * batch_size]   (this epoch's permutation)
    images = images[rows]; labels = one_hot(labels[rows])
    images = augment(images)             crop, flip, RandAugment, random erasing (per image)
    images, labels = mix(images, labels) MixUp or CutMix
    logits = classifier(images)

`fit` feeds it nothing but the step number (one int32 per step); a new permutation is drawn
once per epoch (on the host, from the seed and the epoch, so a resumed run draws the same
orders) and written to the device. Every epoch has `len(images) // batch_size` full steps:
the images a permutation leaves over change from epoch to epoch.

The wrapper is a `keras.Model` so that `fit`, its callbacks and the run's checkpoints work
as for any model; its own variables (the data and the order) are left out of its saved
weights (`save_own_variables`), so a checkpoint holds the classifier, the augmentation's
random state and the optimizer, not 150 MB of images. Validation and prediction go through
it to the classifier unchanged: a rank-4 input is images.

One device: under a data-parallel distribution (`zoo.training.distribution`) the one step
number a step cannot be split across devices; use the host placement there.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from zoo.training.errors import UserError
from zoo.training.memory_bounds import check_decoded_images


class DeviceResidentTraining(keras.Model):
    """Trains `classifier` on `images` and `labels` held on the device.

    Args:
        classifier: the model to train: uint8-compatible images `(batch, H, W, C)` in,
            logits `(batch, num_classes)` out.
        images: uint8 array `(N, H, W, C)`, the training set.
        labels: int array `(N,)` of class indices in `[0, num_classes)`.
        num_classes: classes of the one-hot labels.
        batch_size: images per step, at most N.
        augment: a layer applied to each batch of images (e.g.
            `zoo.training.augmentation.cifar_augmentation`), or None.
        mix: a layer taking and returning `(images, one_hot_labels)` (e.g. `MixBatch`), or
            None.
        seed: seed of the per-epoch permutations.
        **kwargs: standard model arguments.

    Call arguments:
        inputs: the step numbers `(k,)` of `fit` (the first one is used: the batch of that
            step, augmented, and its labels, as `(logits, soft_labels)`), or images
            `(batch, H, W, C)` (the classifier's logits: validation and prediction).
        training: passed to the classifier (dropout); the augmentation always runs on the
            step path.

    Example:
    >>> images = np.random.randint(0, 256, (64, 8, 8, 3)).astype("uint8")
    >>> labels = np.arange(64) % 4
    >>> classifier = keras.Sequential([keras.layers.Rescaling(1 / 255), keras.layers.Flatten(),
    ...                                keras.layers.Dense(4)])
    >>> trainer = DeviceResidentTraining(classifier, images, labels, num_classes=4,
    ...                                  batch_size=16)
    >>> trainer.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(True))
    >>> _ = trainer.fit(trainer.step_numbers(), batch_size=1, epochs=1, verbose=0,
    ...                 callbacks=[trainer.new_order_every_epoch()])
    >>> trainer.steps_per_epoch, tuple(trainer.classifier.predict(images, verbose=0).shape)
    (4, (64, 4))
    """

    def __init__(self, classifier: keras.Model, images: Any, labels: Any, num_classes: int,
                 batch_size: int, augment: keras.layers.Layer | None = None,
                 mix: keras.layers.Layer | None = None, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        images = np.asarray(images)
        labels = np.asarray(labels)
        if images.dtype != np.uint8 or images.ndim != 4:
            raise UserError(f"images must be uint8 (N, height, width, channels); got "
                            f"{images.dtype} {images.shape}")
        if labels.shape != (len(images),):
            raise UserError(f"labels must be ({len(images)},) for {len(images)} images; got "
                            f"shape {labels.shape}")
        if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
            raise UserError(f"labels must lie in [0, {num_classes}); got "
                            f"{labels.min()}..{labels.max()}")
        if not 1 <= batch_size <= len(images):
            raise UserError(f"batch_size must be between 1 and the {len(images)} training "
                            f"images; got {batch_size}")
        _check_device_memory(images, int(batch_size))
        self.classifier = classifier
        self.augment, self.mix = augment, mix
        self.num_classes, self.batch_size, self.seed = int(num_classes), int(batch_size), seed
        self.images_count = len(images)
        self.steps_per_epoch = len(images) // self.batch_size
        self.images = self.add_weight(shape=images.shape, dtype="uint8", trainable=False,
                                      initializer=lambda shape, dtype: images, name="images")
        self.labels = self.add_weight(shape=labels.shape, dtype="int32", trainable=False,
                                      initializer=lambda shape, dtype: labels.astype("int32"),
                                      name="labels")
        self.order_variable = self.add_weight(
            shape=(self.steps_per_epoch * self.batch_size,), dtype="int32", trainable=False,
            initializer=lambda shape, dtype: self.order(0), name="order")
        self.build((1,))

    def build(self, input_shape: Any = None) -> None:
        """Builds the augmentation and mixing layers with a symbolic step (nothing is
        computed or drawn), so that a checkpoint can be restored before training."""
        self.compute_output_spec(keras.KerasTensor((1,), "int32"), training=True)

    def order(self, epoch: int) -> np.ndarray:
        """The rows epoch `epoch` (from 0) trains on, in order: a permutation drawn from the
        seed and the epoch, cut to whole steps."""
        rng = np.random.default_rng((int(self.seed), int(epoch)))
        count = self.steps_per_epoch * self.batch_size
        return rng.permutation(self.images_count)[:count].astype("int32")

    def step_numbers(self) -> np.ndarray:
        """What `fit` takes as `x` (with `batch_size=1`): the step numbers of one epoch."""
        return np.arange(self.steps_per_epoch, dtype="int32")

    def new_order_every_epoch(self) -> keras.callbacks.Callback:
        """The callback that writes each epoch's permutation to the device before it starts
        (a list of callbacks for `fit` must hold it)."""
        return _NewOrder(self)

    def call(self, inputs: Any, training: bool = False) -> Any:
        if len(inputs.shape) == 4:  # images: validation and prediction
            return self.classifier(inputs, training=training)
        step = ops.cast(ops.reshape(inputs, (-1,))[0], "int32")
        rows = ops.slice(self.order_variable.value, (step * self.batch_size,), (self.batch_size,))
        images = ops.take(self.images.value, rows, axis=0)
        labels = ops.one_hot(ops.take(self.labels.value, rows, axis=0), self.num_classes,
                             dtype="float32")
        if self.augment is not None:
            images = self.augment(images, training=True)
        if self.mix is not None:
            images, labels = self.mix(images, labels, training=True)
        return self.classifier(images, training=training), labels

    def compute_loss(self, x: Any = None, y: Any = None, y_pred: Any = None,
                     sample_weight: Any = None, training: bool = True) -> Any:
        if isinstance(y_pred, (tuple, list)):  # the step path: its own (soft) labels
            y_pred, y = y_pred
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def compute_metrics(self, x: Any, y: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        if isinstance(y_pred, (tuple, list)):
            y_pred, y = y_pred
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def save_own_variables(self, store: dict) -> None:
        """Nothing of its own: the data and the order are not part of a checkpoint."""

    def load_own_variables(self, store: dict) -> None:
        """Nothing of its own to restore (see `save_own_variables`)."""


class _NewOrder(keras.callbacks.Callback):
    """Writes the epoch's permutation to the trainer before the epoch's first step."""

    def __init__(self, trainer: DeviceResidentTraining) -> None:
        super().__init__()
        self.trainer = trainer

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.trainer.order_variable.assign(self.trainer.order(epoch))


def _check_device_memory(images: np.ndarray, batch_size: int) -> None:
    """Refuses, in one line, a training set whose copy on the device (beside the host's)
    and one float32 batch of it would not fit in this machine's memory, before any of it
    is copied: at 1024 pixels a side an image is 3 MB, and the backend's own error is a
    `ResourceExhaustedError` traceback after the copy started."""
    count, height, width, channels = images.shape
    check_decoded_images(
        count, (height, width), "--data-placement device",
        f"the {count:,} training images on the device", f"--image-size {height}",
        {"the same images on the host": count,
         f"a float32 batch of --batch-size {batch_size}": 4 * batch_size}, channels)
