"""RandAugment (Cubuk et al., 2020) with one random operation per image, on every backend.

Each of `num_ops` rounds draws, for every image of the batch separately, one of the 14
operations of the paper (Identity, AutoContrast, Equalize, Rotate, Solarize, Color, Posterize,
Contrast, Brightness, Sharpness, ShearX, ShearY, TranslateX, TranslateY) and applies it at the
shared magnitude `m` in [0, 1] (the paper's and timm's `M / 10`: "rand-m9" is `m = 0.9`):

    rotate ±30°·m, shear ±0.3·m, translate ±0.45·m of the image size,
    color / contrast / brightness / sharpness blend factor 1 ± 0.9·m (PIL ImageEnhance),
    posterize to 8 - round(4·m) bits, solarize above 256·(1 - m)
    (the "increasing" variants: every operation is stronger at a larger m).

Why not `keras.layers.RandAugment` (Keras 3.15): it draws the operations once per batch (every
image of a batch gets the same two operations), its `factor` means different things per
operation (rotation up to `factor`·360° in one direction; posterize and solarize grow *weaker*
as `factor` grows), its Equalization builds one histogram over the whole batch, and on JAX it
is slow, eager or jitted, after a long XLA compile (`benchmarks/augmentation_throughput.py`;
docs/benchmarks.md, "Augmentation throughput"). Here the geometric operations of a round
share one bilinear resampling (`affine_bilinear`, four gathers; `ops.image.affine_transform`
also interpolates across the channel axis on JAX and was far slower there), the colour
operations are cheap element-wise expressions, and everything is jittable.

Values are floats in 0..255 (uint8 input is cast); every operation clips to that range.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import keras
from keras import ops

from zoo.layers.validation import non_negative_int

OPERATIONS = (
    "identity", "auto_contrast", "equalize", "rotate", "solarize", "color", "posterize",
    "contrast", "brightness", "sharpness", "shear_x", "shear_y", "translate_x", "translate_y",
)
_GEOMETRIC = ("rotate", "shear_x", "shear_y", "translate_x", "translate_y")


@keras.saving.register_keras_serializable(package="zoo")
class RandAugmentPolicy(keras.layers.Layer):
    """Applies `num_ops` random RandAugment operations to each image of a batch.

    Use it in the input pipeline on batches, not inside the model.

    Args:
        num_ops: operations applied one after the other to each image (the paper's N).
        magnitude: strength in [0, 1] shared by all operations (the paper's M / 10).
        operations: names from `OPERATIONS` to draw from; `None` uses all 14.
        fill_value: value of the pixels that rotation, shear and translation bring in.
        seed: seed of the layer's random generator.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        images: `(batch, height, width, 3)` (or one `(height, width, 3)` image), values 0..255.
        training: when False the images pass through unchanged (cast to float).

    Returns:
        Float images of the same shape, values in 0..255.

    Example:
    >>> import numpy as np
    >>> images = np.random.randint(0, 256, (4, 32, 32, 3)).astype("uint8")
    >>> tuple(RandAugmentPolicy(num_ops=2, magnitude=0.9, seed=0)(images).shape)
    (4, 32, 32, 3)
    """

    def __init__(
        self,
        num_ops: int = 2,
        magnitude: float = 0.9,
        operations: Sequence[str] | None = None,
        fill_value: float = 128.0,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        num_ops = non_negative_int(num_ops, "num_ops")
        if not isinstance(magnitude, (int, float)) or not 0.0 <= float(magnitude) <= 1.0:
            raise ValueError(
                f"magnitude must be a number in [0, 1] (the paper's M / 10); got "
                f"{magnitude!r}"
            )
        if operations is not None:
            operations = list(operations)
            unknown = [name for name in operations if name not in OPERATIONS]
            if unknown or not operations:
                raise ValueError(
                    f"operations must be a non-empty list of names from {OPERATIONS}; "
                    f"got {operations!r}"
                )
        self.num_ops = num_ops
        self.magnitude = float(magnitude)
        self.operations = operations
        self.fill_value = float(fill_value)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, training: bool = True) -> Any:
        images = ops.cast(images, self.compute_dtype)
        if not training or self.num_ops == 0:
            return images
        unbatched = len(images.shape) == 3
        if unbatched:
            images = images[None]
        if len(images.shape) != 4 or images.shape[-1] != 3:
            raise ValueError(
                "RandAugmentPolicy expects RGB images (batch, height, width, 3); got "
                f"shape {tuple(images.shape)}"
            )
        names = self.operations or list(OPERATIONS)
        batch_size = ops.shape(images)[0]
        # All draws happen up front, so that the rounds are pure functions of the images.
        choices = keras.random.randint(
            (self.num_ops, batch_size), 0, len(names), seed=self.seed_generator
        )
        coins = keras.random.uniform((self.num_ops, batch_size), seed=self.seed_generator)
        signs = ops.where(coins < 0.5, -1.0, 1.0)
        if _is_jax_tracer(images):
            # Under jax.jit a loop keeps XLA from fusing one round into the gathers of the
            # next: unrolled, two rounds were many times slower than one (docs/benchmarks.md).
            def one_round(index, images):
                choice, sign = ops.take(choices, index, axis=0), ops.take(signs, index, axis=0)
                return self._one_round(images, names, choice, sign)

            images = ops.fori_loop(0, self.num_ops, one_round, images)
        else:  # eager (a loop would be traced and compiled again at every call) or TensorFlow
            for index in range(self.num_ops):
                images = self._one_round(images, names, choices[index], signs[index])
        return images[0] if unbatched else images

    def _one_round(self, images, names, choice, signs):
        """Applies to each image the operation `names[choice]`, signed by `signs` (+-1)."""
        m = self.magnitude
        chosen = {name: ops.equal(choice, i) for i, name in enumerate(names)}
        images = self._geometric(images, names, chosen, signs * m)
        enhance = 1.0 + 0.9 * m * signs  # PIL ImageEnhance factor, one per image
        candidates = {
            "auto_contrast": auto_contrast,
            "equalize": equalize,
            "solarize": lambda x: solarize(x, 256.0 * (1.0 - m)),
            "posterize": lambda x: posterize(x, 8 - round(4 * m)),
            "color": lambda x: _blend(_grayscale(x), x, enhance),
            "contrast": lambda x: _blend(_mean_gray(x), x, enhance),
            "brightness": lambda x: _blend(ops.zeros_like(x), x, enhance),
            "sharpness": lambda x: _blend(_smooth(x), x, enhance),
        }
        result = images
        for name, apply in candidates.items():
            if name in chosen:
                result = ops.where(chosen[name][:, None, None, None], apply(images), result)
        return result

    def _geometric(self, images, names, chosen, signed_m):
        """One affine resampling for all images whose operation this round is geometric."""
        present = [name for name in _GEOMETRIC if name in names]
        if not present:
            return images
        height, width = float(images.shape[1]), float(images.shape[2])
        cy, cx = (height - 1.0) / 2.0, (width - 1.0) / 2.0
        zero = ops.zeros_like(signed_m)
        one = ops.ones_like(signed_m)
        # Output pixel (x, y) samples the input at (a0 x + a1 y + a2, b0 x + b1 y + b2):
        # start from the identity, then set each image's chosen operation.
        a0, a1, a2, b0, b1, b2 = one, zero, zero, zero, one, zero
        is_geometric = ops.zeros_like(signed_m, dtype="bool")
        for name in present:
            sel = chosen[name]
            is_geometric = ops.logical_or(is_geometric, sel)
            if name == "rotate":
                angle = signed_m * (30.0 * math.pi / 180.0)
                cos, sin = ops.cos(angle), ops.sin(angle)
                a0, a1 = ops.where(sel, cos, a0), ops.where(sel, -sin, a1)
                a2 = ops.where(sel, cx - cos * cx + sin * cy, a2)
                b0, b1 = ops.where(sel, sin, b0), ops.where(sel, cos, b1)
                b2 = ops.where(sel, cy - sin * cx - cos * cy, b2)
            elif name == "shear_x":  # about the centre row, so content stays centred
                a1 = ops.where(sel, 0.3 * signed_m, a1)
                a2 = ops.where(sel, -0.3 * signed_m * cy, a2)
            elif name == "shear_y":
                b0 = ops.where(sel, 0.3 * signed_m, b0)
                b2 = ops.where(sel, -0.3 * signed_m * cx, b2)
            elif name == "translate_x":
                a2 = ops.where(sel, 0.45 * signed_m * width, a2)
            elif name == "translate_y":
                b2 = ops.where(sel, 0.45 * signed_m * height, b2)
        moved = affine_bilinear(images, (a0, a1, a2, b0, b1, b2), self.fill_value)
        moved = ops.clip(moved, 0.0, 255.0)  # float rounding of the weights can pass 255
        return ops.where(is_geometric[:, None, None, None], moved, images)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_ops": self.num_ops,
                "magnitude": self.magnitude,
                "operations": self.operations,
                "fill_value": self.fill_value,
                "seed": self.seed,
            }
        )
        return config


# Operations on float batches (batch, height, width, 3) in 0..255, as PIL's ImageOps and
# ImageEnhance define them (PIL rounds to uint8 after each step; these stay float).


def _blend(degenerate, images, factor):
    """PIL ImageEnhance: degenerate + factor * (image - degenerate), clipped."""
    factor = ops.cast(ops.reshape(factor, (-1, 1, 1, 1)), images.dtype)
    return ops.clip(degenerate + factor * (images - degenerate), 0.0, 255.0)


def _grayscale(images):
    """ITU-R 601-2 luma, PIL's "L" conversion, repeated to 3 channels."""
    weights = ops.convert_to_tensor([0.299, 0.587, 0.114], dtype=images.dtype)
    gray = ops.sum(images * weights, axis=-1, keepdims=True)
    return ops.repeat(gray, 3, axis=-1)


def _mean_gray(images):
    """The degenerate image of PIL's Contrast: the mean luma everywhere."""
    mean = ops.mean(_grayscale(images)[..., :1], axis=(1, 2, 3), keepdims=True)
    return ops.broadcast_to(mean, ops.shape(images))


def _smooth(images):
    """PIL's SMOOTH filter (3x3 kernel 1/13 [[1,1,1],[1,5,1],[1,1,1]]); border pixels unchanged."""
    height, width = images.shape[1], images.shape[2]
    inner = 4.0 * images[:, 1:-1, 1:-1, :]
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            inner = inner + images[:, dy : dy + height - 2, dx : dx + width - 2, :]
    inner = ops.pad(inner / 13.0, [[0, 0], [1, 1], [1, 1], [0, 0]])
    rows = ops.arange(height)[:, None]
    cols = ops.arange(width)[None, :]
    border = (rows == 0) | (rows == height - 1) | (cols == 0) | (cols == width - 1)
    return ops.where(border[None, :, :, None], images, inner)


def auto_contrast(images):
    """Stretches each channel of each image to span 0..255 (PIL `ImageOps.autocontrast`)."""
    low = ops.min(images, axis=(1, 2), keepdims=True)
    high = ops.max(images, axis=(1, 2), keepdims=True)
    span = high - low
    stretched = (images - low) * (255.0 / ops.maximum(span, 1e-6))
    return ops.clip(ops.where(span > 0, stretched, images), 0.0, 255.0)


def solarize(images, threshold):
    """Inverts the pixels at or above `threshold` (PIL `ImageOps.solarize`)."""
    return ops.where(images >= threshold, 255.0 - images, images)


def posterize(images, bits: int):
    """Keeps the `bits` most significant bits of each 8-bit value (PIL `ImageOps.posterize`)."""
    step = float(2 ** (8 - int(bits)))
    return ops.floor(ops.clip(images, 0.0, 255.0) / step) * step


def equalize(images):
    """Histogram equalization per image and channel, PIL's `ImageOps.equalize` lookup table."""
    batch_size = ops.shape(images)[0]
    height, width, channels = images.shape[1], images.shape[2], images.shape[3]
    pixels = height * width
    # (batch * channels, pixels) integer levels; one 256-bin histogram per row.
    levels = ops.cast(ops.clip(ops.floor(images), 0.0, 255.0), "int32")
    levels = ops.reshape(ops.transpose(levels, (0, 3, 1, 2)), (-1, pixels))
    rows = ops.shape(levels)[0]
    bins = levels + 256 * ops.arange(rows, dtype="int32")[:, None]
    histogram = ops.segment_sum(
        ops.reshape(ops.ones_like(bins, dtype="float32"), (-1,)),
        ops.reshape(bins, (-1,)),
        num_segments=batch_size * channels * 256,
    )
    histogram = ops.reshape(histogram, (-1, 256))
    # PIL: step = (count - count of the brightest level) // 255,
    #      lut[i] = (step // 2 + cdf[i - 1]) // step.
    top = ops.max(levels, axis=1, keepdims=True)
    top_count = ops.take_along_axis(histogram, top, axis=1)
    # Integer divisions as floor(a / b): exact for these small integer-valued floats, and much
    # cheaper than floor_divide once XLA fuses the table into the gather below.
    step = ops.floor((float(pixels) - top_count) / 255.0)
    exclusive_cdf = ops.cumsum(histogram, axis=1) - histogram
    lut = ops.floor((ops.floor(step / 2.0) + exclusive_cdf) / ops.maximum(step, 1.0))
    lut = ops.clip(lut, 0.0, 255.0)
    mapped = ops.take_along_axis(lut, levels, axis=1)
    # A flat channel (a single level) or step 0 keeps its values.
    mapped = ops.where(step > 0, mapped, ops.cast(levels, "float32"))
    mapped = ops.reshape(mapped, (batch_size, channels, height, width))
    return ops.cast(ops.transpose(mapped, (0, 2, 3, 1)), images.dtype)


def affine_bilinear(images, coefficients, fill_value: float = 0.0):
    """Resamples each image at an affine map of its pixel grid, bilinearly.

    Output pixel (x, y) (column, row) takes the value of the input at
    `(a0 x + a1 y + a2, b0 x + b1 y + b2)`, the convention of `ops.image.affine_transform`;
    corners outside the image count as `fill_value`. Written with one flat gather per corner
    so that it is equally cheap on every backend and identical across them.

    Args:
        images: float `(batch, height, width, channels)`.
        coefficients: six `(batch,)` tensors `(a0, a1, a2, b0, b1, b2)`.
        fill_value: value outside the image.

    Returns:
        Float images of the same shape.
    """
    a0, a1, a2, b0, b1, b2 = (ops.cast(c, "float32")[:, None, None] for c in coefficients)
    batch_size = ops.shape(images)[0]
    height, width, channels = images.shape[1], images.shape[2], images.shape[3]
    rows = ops.arange(height, dtype="float32")[None, :, None]
    cols = ops.arange(width, dtype="float32")[None, None, :]
    source_x = a0 * cols + a1 * rows + a2  # (batch, height, width)
    source_y = b0 * cols + b1 * rows + b2
    x0, y0 = ops.floor(source_x), ops.floor(source_y)
    weight_x, weight_y = source_x - x0, source_y - y0
    x0, y0 = ops.cast(x0, "int32"), ops.cast(y0, "int32")
    pixels = ops.reshape(ops.cast(images, "float32"), (-1, channels))
    image_start = ops.arange(batch_size, dtype="int32")[:, None, None] * (height * width)
    result = 0.0
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        x, y = x0 + dx, y0 + dy
        inside = (x >= 0) & (x < width) & (y >= 0) & (y < height)
        index = image_start + ops.clip(y, 0, height - 1) * width + ops.clip(x, 0, width - 1)
        corner = ops.take(pixels, ops.reshape(index, (-1,)), axis=0)
        corner = ops.reshape(corner, (-1, height, width, channels))
        corner = ops.where(inside[..., None], corner, fill_value)
        weight = (weight_x if dx else 1.0 - weight_x) * (weight_y if dy else 1.0 - weight_y)
        result = result + weight[..., None] * corner
    return ops.cast(result, images.dtype)


def _is_jax_tracer(x) -> bool:
    if keras.backend.backend() != "jax":
        return False
    import jax

    return isinstance(x, jax.core.Tracer)
