"""Image augmentation for the input pipeline, as Keras layers that run on every backend.

These layers transform batches *before* the model (in tf.data on the TensorFlow backend, or on
NumPy/JAX batches on JAX); they do not belong inside a model. Inside a model, Keras 3.15 layers
such as `RandomTranslation`, `RandomRotation`, `RandomCrop`, `RandomZoom` and `RandomShear`
declare `supports_jit = False`, which makes `model.fit` on JAX run the whole train step
un-jitted, op by op: the cause of the very slow GPU run with augmentation inside the ViT.
Everything here is written with `keras.ops` / `keras.random` only and is jittable.

- `RandomCropWithPadding`: pad, then crop a random window of the input size, per image
  (`keras.layers.RandomCrop` uses one window for the whole batch and cannot be jitted).
- `RandomErasing`: a random box of some images replaced by noise (Zhong et al., 2020).
- `cifar_augmentation`: crop with padding, horizontal flip (`keras.layers.RandomFlip`),
  RandAugment (`zoo.training.rand_augment.RandAugmentPolicy`) and random erasing.
- `compiled_augmentation`: wraps any of these (or a Pipeline of them) in `jax.jit` or
  `tf.function` (`zoo.training.compilation.compile_for_backend`), the fast way to run them on
  batches outside tf.data.
- `MixBatch`: MixUp or CutMix with soft labels. (`keras.layers.MixUp` is equivalent for MixUp;
  `keras.layers.CutMix` weights the labels by the continuous box area while it pastes whole
  pixels, so its labels disagree with the pasted fraction; here both kinds share one layer.)

On the JAX backend with TensorFlow installed, do not map these layers inside tf.data (their ops
would be JAX ops); apply them to the batches tf.data yields.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import keras
from keras import ops

from zoo.training.errors import UserError
from zoo.layers.validation import non_negative_int, positive_int
from zoo.training.compilation import compile_for_backend
from zoo.training.rand_augment import RandAugmentPolicy


@keras.saving.register_keras_serializable(package="zoo")
class RandomCropWithPadding(keras.layers.Layer):
    """Pads each image, then crops a random window of the original size (per image).

    The standard CIFAR augmentation (He et al., 2016: 4 pixels of padding on 32x32 images):
    the output is the input shifted by up to `padding` pixels in each direction.

    Args:
        padding: pixels added on each side.
        fill_mode: `"reflect"` (mirror the border, no pixel repeated) or `"constant"` (zeros).
        seed: seed of the layer's random generator.
        **kwargs: standard layer arguments.

    Call arguments:
        images: `(batch, height, width, channels)` or `(height, width, channels)`.
        training: when False the images pass through unchanged (cast to float).

    Returns:
        Float images of the input's shape.

    Example:
    >>> import numpy as np
    >>> images = np.zeros((2, 32, 32, 3), "uint8")
    >>> tuple(RandomCropWithPadding(padding=4, seed=0)(images).shape)
    (2, 32, 32, 3)
    """

    def __init__(
        self, padding: int = 4, fill_mode: str = "reflect", seed: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        padding = non_negative_int(padding, "padding")
        if fill_mode not in ("reflect", "constant"):
            raise ValueError(f"fill_mode must be 'reflect' or 'constant'; got {fill_mode!r}")
        self.padding = padding
        self.fill_mode = fill_mode
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, training: bool = True) -> Any:
        images = ops.cast(images, self.compute_dtype)
        if not training or self.padding == 0:
            return images
        unbatched = len(images.shape) == 3
        if unbatched:
            images = images[None]
        if len(images.shape) != 4:
            raise ValueError(
                "RandomCropWithPadding expects (batch, height, width, channels); got "
                f"shape {tuple(images.shape)}"
            )
        height, width, channels = images.shape[1], images.shape[2], images.shape[3]
        if self.fill_mode == "reflect" and min(height, width) <= self.padding:
            raise ValueError(
                f"reflect padding of {self.padding} needs images larger than that; got "
                f"{height}x{width}"
            )
        p = self.padding
        padded = ops.pad(images, [[0, 0], [p, p], [p, p], [0, 0]], mode=self.fill_mode)
        batch_size = ops.shape(images)[0]
        top = keras.random.randint((batch_size, 1), 0, 2 * p + 1, seed=self.seed_generator)
        left = keras.random.randint((batch_size, 1), 0, 2 * p + 1, seed=self.seed_generator)
        padded_h, padded_w = height + 2 * p, width + 2 * p
        rows = ops.cast(top, "int32") + ops.arange(height, dtype="int32")[None, :]  # (b, h)
        cols = ops.cast(left, "int32") + ops.arange(width, dtype="int32")[None, :]  # (b, w)
        # One gather of each image's own window from the flattened padded batch.
        image_start = ops.arange(batch_size, dtype="int32")[:, None, None] * (padded_h * padded_w)
        index = image_start + rows[:, :, None] * padded_w + cols[:, None, :]  # (b, h, w)
        pixels = ops.reshape(padded, (-1, channels))
        window = ops.take(pixels, ops.reshape(index, (-1,)), axis=0)
        window = ops.reshape(window, (batch_size, height, width, channels))
        return window[0] if unbatched else window

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"padding": self.padding, "fill_mode": self.fill_mode, "seed": self.seed})
        return config


def box_mask(height: int, width: int, top: Any, bottom: Any, left: Any, right: Any) -> Any:
    """`(batch, height, width)` booleans: True inside each image's box, rows
    `top <= r < bottom` and columns `left <= c < right` (`(batch,)` tensors of one dtype)."""
    rows = ops.cast(ops.arange(height), top.dtype)[None, :, None]
    cols = ops.cast(ops.arange(width), left.dtype)[None, None, :]
    return ((rows >= top[:, None, None]) & (rows < bottom[:, None, None])
            & (cols >= left[:, None, None]) & (cols < right[:, None, None]))


@keras.saving.register_keras_serializable(package="zoo")
class RandomErasing(keras.layers.Layer):
    """Random erasing (Zhong et al., 2020): a random box of some images is replaced by noise.

    Each image is erased with probability `rate`: a box whose area is a uniform fraction of
    the image in `area` and whose aspect ratio (height / width) is log-uniform in `aspect`
    (its sides clipped to the image's), placed uniformly inside the image, gets uniform
    noise in 0..255 in every pixel and channel (timm's "pixel" mode, here in pixel values).

    Args:
        rate: probability that an image is erased, in [0, 1].
        area: the box's share of the image, `(low, high)` within (0, 1].
        aspect: the box's height / width, `(low, high)`, both positive.
        seed: seed of the layer's random generator.
        **kwargs: standard layer arguments.

    Call arguments:
        images: `(batch, height, width, channels)`, values 0..255.
        training: when False the images pass through unchanged (cast to float).

    Returns:
        Float images of the input's shape.

    Example:
    >>> import numpy as np
    >>> images = np.zeros((4, 32, 32, 3), "uint8")
    >>> erased = RandomErasing(rate=1.0, seed=0)(images)
    >>> bool((np.asarray(erased) != 0).any(axis=(1, 2, 3)).all())  # every image got a box
    True
    """

    def __init__(self, rate: float = 0.25, area: tuple[float, float] = (0.02, 1 / 3),
                 aspect: tuple[float, float] = (0.3, 3.3), seed: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
            raise ValueError(f"rate must be in [0, 1]; got {rate!r}")
        if len(area) != 2 or not 0 < area[0] <= area[1] <= 1:
            raise ValueError(f"area must be (low, high) with 0 < low <= high <= 1; got {area!r}")
        if len(aspect) != 2 or not 0 < aspect[0] <= aspect[1]:
            raise ValueError(f"aspect must be (low, high) with 0 < low <= high; got {aspect!r}")
        self.rate, self.area, self.aspect = float(rate), tuple(area), tuple(aspect)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, training: bool = True) -> Any:
        images = ops.cast(images, self.compute_dtype)
        if not training or self.rate == 0:
            return images
        if len(images.shape) != 4:
            raise ValueError("RandomErasing expects (batch, height, width, channels); got "
                             f"shape {tuple(images.shape)}")
        height, width = images.shape[1], images.shape[2]
        batch_size = ops.shape(images)[0]

        def uniform(shape: tuple, low: float = 0.0, high: float = 1.0) -> Any:
            return keras.random.uniform(shape, low, high, dtype=self.compute_dtype,
                                        seed=self.seed_generator)

        area = uniform((batch_size,), *self.area) * float(height * width)
        ratio = ops.exp(uniform((batch_size,), math.log(self.aspect[0]),
                                math.log(self.aspect[1])))
        box_h = ops.clip(ops.round(ops.sqrt(area * ratio)), 1, height)
        box_w = ops.clip(ops.round(ops.sqrt(area / ratio)), 1, width)
        top = ops.floor(uniform((batch_size,)) * (height - box_h + 1))
        left = ops.floor(uniform((batch_size,)) * (width - box_w + 1))
        erased = uniform((batch_size,)) < self.rate
        inside = box_mask(height, width, top, top + box_h, left, left + box_w)
        inside = inside & erased[:, None, None]
        noise = ops.floor(uniform(ops.shape(images), 0.0, 256.0))
        return ops.where(inside[:, :, :, None], noise, images)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"rate": self.rate, "area": list(self.area), "aspect": list(self.aspect),
                       "seed": self.seed})
        return config


def cifar_augmentation(
    image_size: int = 32,
    rand_augment: bool = True,
    magnitude: float = 0.9,
    num_ops: int = 2,
    seed: int | None = None,
    random_erasing: float = 0.0,
) -> keras.layers.Pipeline:
    """The training augmentation of the ViT CIFAR recipe, for batches before the model.

    Random crop after `image_size // 8` pixels of reflection padding (4 at 32x32), random
    horizontal flip, then (optionally) RandAugment with `num_ops` operations at `magnitude`,
    then random erasing of each image with probability `random_erasing` (`RandomErasing`).
    The result is a `keras.layers.Pipeline`: a plain layer that, unlike `keras.Sequential`,
    does not convert its inputs to backend tensors, so on the TensorFlow backend it maps over a
    tf.data dataset. All layers compute in float32 whatever the global dtype policy is.

    Args:
        image_size: side of the (square) images the pipeline receives; sets the padding.
        rand_augment: add RandAugment after crop and flip.
        magnitude: RandAugment strength in [0, 1] (the paper's M / 10; DeiT uses 0.9). Short
            schedules on small data usually do better with less, e.g. 0.5.
        num_ops: RandAugment operations per image (the paper's N).
        seed: seed of the random generators (each layer derives its own).
        random_erasing: probability that an image gets a box of noise (0: no erasing).

    Returns:
        A `keras.layers.Pipeline`; call it on `(batch, size, size, 3)` images with values in
        0..255 (uint8 or float); it returns float32 images of the same shape in 0..255. With
        `training=False` it returns the images unchanged.

    Example:
    >>> import numpy as np
    >>> augment = cifar_augmentation(seed=0)
    >>> batch = np.random.randint(0, 256, (8, 32, 32, 3)).astype("uint8")
    >>> tuple(augment(batch).shape)
    (8, 32, 32, 3)
    """
    image_size = positive_int(image_size, "image_size", error=UserError, minimum=8)

    def derived(offset: int) -> int | None:
        return None if seed is None else seed + offset

    layers = [
        RandomCropWithPadding(
            padding=image_size // 8, fill_mode="reflect", seed=derived(0), dtype="float32"
        ),
        keras.layers.RandomFlip("horizontal", seed=derived(1), dtype="float32"),
    ]
    if rand_augment:
        layers.append(
            RandAugmentPolicy(
                num_ops=num_ops, magnitude=magnitude, seed=derived(2), dtype="float32"
            )
        )
    if random_erasing:
        layers.append(RandomErasing(rate=random_erasing, seed=derived(3), dtype="float32"))
    return keras.layers.Pipeline(layers, name="cifar_augmentation")


@keras.saving.register_keras_serializable(package="zoo")
class MixBatch(keras.layers.Layer):
    """MixUp (Zhang et al., 2018) or CutMix (Yun et al., 2019) on a batch, with soft labels.

    Each image is paired with another image of the same batch (a random permutation) and a
    weight `lam ~ Beta(alpha, alpha)` drawn per image.

    - MixUp: `image = lam * image + (1 - lam) * partner`, labels likewise.
    - CutMix: a box of area about `(1 - lam)` of the image, centred uniformly at random and
      clipped to the image, is pasted from the partner; the label weight is recomputed from the
      pasted box, so it equals the fraction of pixels that kept their own image exactly.

    Args:
        kind: `"mixup"` or `"cutmix"`.
        alpha: Beta concentration; `None` takes DeiT's values (0.8 for MixUp, 1.0 for CutMix).
        seed: seed of the layer's random generator.
        **kwargs: standard layer arguments.

    Call arguments:
        images: `(batch, height, width, channels)`.
        labels: one-hot (or already soft) labels `(batch, num_classes)`.
        training: when False both pass through unchanged (cast to float).

    Returns:
        `(images, labels)` as floats, shapes unchanged; each label row still sums to 1.

    Example:
    >>> import numpy as np
    >>> images = np.random.rand(4, 32, 32, 3).astype("float32")
    >>> labels = np.eye(10, dtype="float32")[[0, 1, 2, 3]]
    >>> mixed_images, mixed_labels = MixBatch("cutmix", seed=0)(images, labels)
    >>> tuple(mixed_labels.shape)
    (4, 10)
    """

    def __init__(
        self, kind: str = "mixup", alpha: float | None = None, seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if kind not in ("mixup", "cutmix"):
            raise ValueError(f"kind must be 'mixup' or 'cutmix'; got {kind!r}")
        if alpha is not None and (not isinstance(alpha, (int, float)) or alpha <= 0):
            raise ValueError(f"alpha must be a positive number or None; got {alpha!r}")
        self.kind = kind
        self.alpha = alpha
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, labels: Any, training: bool = True) -> tuple[Any, Any]:
        images = ops.cast(images, self.compute_dtype)
        labels = ops.cast(labels, self.compute_dtype)
        if len(images.shape) != 4 or len(labels.shape) != 2:
            raise ValueError(
                "MixBatch expects images (batch, height, width, channels) and one-hot labels "
                f"(batch, num_classes); got {tuple(images.shape)} and "
                f"{tuple(labels.shape)}"
            )
        if not training:
            return images, labels
        alpha = self.alpha if self.alpha is not None else (0.8 if self.kind == "mixup" else 1.0)
        batch_size = ops.shape(images)[0]
        partner = keras.random.shuffle(
            ops.arange(batch_size, dtype="int32"), seed=self.seed_generator
        )
        lam = keras.random.beta((batch_size,), alpha, alpha, seed=self.seed_generator)
        lam = ops.cast(lam, self.compute_dtype)
        partner_images = ops.take(images, partner, axis=0)
        partner_labels = ops.take(labels, partner, axis=0)
        if self.kind == "mixup":
            mixed = lam[:, None, None, None] * images
            mixed = mixed + (1.0 - lam[:, None, None, None]) * partner_images
        else:
            mask, lam = self._cut_box(images, lam)
            mixed = ops.where(mask, partner_images, images)
        mixed_labels = lam[:, None] * labels + (1.0 - lam[:, None]) * partner_labels
        return mixed, mixed_labels

    def _cut_box(self, images, lam):
        """Per-image boxes of area ~(1 - lam); returns the paste mask and the exact kept share."""
        height, width = images.shape[1], images.shape[2]
        batch_size = ops.shape(images)[0]
        ratio = ops.sqrt(1.0 - lam)
        box_h = ops.cast(ops.floor(ratio * height), "int32")
        box_w = ops.cast(ops.floor(ratio * width), "int32")
        center_y = keras.random.randint((batch_size,), 0, height, seed=self.seed_generator)
        center_x = keras.random.randint((batch_size,), 0, width, seed=self.seed_generator)
        center_y, center_x = ops.cast(center_y, "int32"), ops.cast(center_x, "int32")
        top = ops.clip(center_y - box_h // 2, 0, height)
        bottom = ops.clip(center_y - box_h // 2 + box_h, 0, height)
        left = ops.clip(center_x - box_w // 2, 0, width)
        right = ops.clip(center_x - box_w // 2 + box_w, 0, width)
        inside = box_mask(height, width, top, bottom, left, right)
        area = ops.cast((bottom - top) * (right - left), self.compute_dtype)
        kept = 1.0 - area / float(height * width)
        return inside[:, :, :, None], kept

    def compute_output_shape(self, images_shape: tuple, labels_shape: tuple) -> tuple:
        return tuple(images_shape), tuple(labels_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"kind": self.kind, "alpha": self.alpha, "seed": self.seed})
        return config


def compiled_augmentation(layer: keras.layers.Layer) -> Callable[..., Any]:
    """Wraps an augmentation layer in the backend's compiler: `fn(*inputs) -> outputs`.

    Compiled by `zoo.training.compilation.compile_for_backend` (`jax.jit` or `tf.function`;
    elsewhere the layer is called as is); the layer's random-generator state advances on every
    call, so each batch draws fresh randomness. Always `training=True`. A new batch shape
    (e.g. a smaller last batch) compiles once more.

    Args:
        layer: e.g. `cifar_augmentation()` or `MixBatch("cutmix")`; it must not hold trainable
            weights that change during training.

    Returns:
        A function taking the layer's positional inputs (images, or images and labels).

    Example:
    >>> import numpy as np
    >>> augment = compiled_augmentation(cifar_augmentation(seed=0))
    >>> tuple(augment(np.zeros((8, 32, 32, 3), "uint8")).shape)
    (8, 32, 32, 3)
    """
    # Not XLA on TensorFlow: some image ops (RandAugment's) have no XLA kernel.
    compiled = compile_for_backend(lambda *inputs: layer(*inputs, training=True), layer,
                                   jit_compile=False)

    def call(*inputs: Any) -> Any:
        if not layer.built:
            layer(*inputs, training=False)  # builds sub-layers; draws nothing
        return compiled(*inputs)

    return call
