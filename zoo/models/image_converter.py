"""Images to a vision backbone's pixels: resized to its size and normalised, in the graph.

One object for every use of an image model (keras-hub's `ImageConverter`): the task's
`call` (so `predict`, `classify` and `fit` on 0..255 images), `tf.data` pipelines and the
exported serving graph, which also decodes JPEG/PNG/GIF/BMP bytes with `decode_image`.
Normalisation is `x * scale + offset`, with a number or one per channel: the zoo's ViT maps
0..255 to [-1, 1] (`scale=1/127.5, offset=-1`); CLIP's mean/std per channel is
`scale = 1 / (255 std)`, `offset = -mean / std`.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from zoo.layers.validation import image_size_pair, positive_int
from zoo.training.errors import UserError
from zoo.models.task import Preprocessor

Affine = float | Sequence[float] | None


@keras.saving.register_keras_serializable(package="zoo")
class ImageConverter(Preprocessor):
    """Resizes images to `image_size` (bilinear, antialiased; skipped when they have it) and
    maps their values `x` to `x * scale + offset`, in float32 whatever the model's policy.

    Args:
        image_size: side (or `(height, width)`) of the backbone's images.
        scale: a number or one per channel; None (with `offset` None) for no rescaling.
        offset: a number or one per channel; None for 0.
        num_channels: channels of the images.
        owner: the model named in shape errors ("VisionTransformer expects images ...").
        **kwargs: base layer arguments (its dtype is always float32).

    Call arguments:
        images: `(batch, height, width, num_channels)`, any size, uint8 or float.

    Returns:
        `(batch, *image_size, num_channels)` float32.

    Example:
    >>> import numpy as np
    >>> converter = ImageConverter(8, scale=1 / 127.5, offset=-1.0)
    >>> round(float(converter(np.full((1, 16, 16, 3), 255, "uint8"))[0, 0, 0, 0]), 5)
    1.0
    """

    def __init__(self, image_size: int | tuple[int, int], scale: Affine = None,
                 offset: Affine = None, num_channels: int = 3,
                 owner: str = "ImageConverter", **kwargs: Any) -> None:
        kwargs["dtype"] = "float32"  # pixel values need the precision
        super().__init__(**kwargs)
        height, width = image_size_pair(image_size)
        self.image_size = image_size if isinstance(image_size, int) else (height, width)
        self.num_channels = positive_int(num_channels, "num_channels")
        self.scale = scale if scale is None or isinstance(scale, (int, float)) else list(scale)
        self.offset = (offset if offset is None or isinstance(offset, (int, float))
                       else list(offset))
        self.owner = owner
        self.resizing = keras.layers.Resizing(
            height, width, interpolation="bilinear", antialias=True, dtype="float32",
            name="resizing")
        self.rescaling = None if scale is None and offset is None else keras.layers.Rescaling(
            scale=1.0 if scale is None else self.scale,
            offset=0.0 if offset is None else self.offset, dtype="float32", name="rescaling")
        self.build((None, None, None, num_channels))

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """`(height, width, channels)` of the images it makes."""
        return (*image_size_pair(self.image_size), self.num_channels)

    def build(self, input_shape: tuple) -> None:
        self.resizing.build((None, None, None, self.num_channels))
        if self.rescaling is not None:
            self.rescaling.build((None, *self.image_shape))
        self.built = True

    def check_shape(self, shape: tuple) -> None:
        """Raises a UserError unless `shape` is `(batch, height, width, num_channels)`."""
        if len(shape) != 4 or shape[-1] != self.num_channels:
            raise UserError(f"{self.owner} expects images of shape (batch, height, width, "
                            f"{self.num_channels}); got shape {shape}")

    def call(self, images: Any) -> Any:
        shape = tuple(images.shape)
        self.check_shape(shape)
        x = ops.cast(images, "float32")
        if tuple(shape[1:3]) != self.image_shape[:2]:
            x = self.resizing(x)
        return x if self.rescaling is None else self.rescaling(x)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], *self.image_shape)

    def decode_image(self, data: Any) -> Any:
        """One encoded image (a `tf.string` scalar) to float pixels `(*image_size, 3)` in
        0..255, resized with antialiasing, with TensorFlow ops only (for exported graphs).

        JPEGs are decoded with the accurate integer DCT (the pixels PIL gives training and
        `classify`: tests/training/test_jpeg_decoding.py; `decode_image`'s default fast DCT
        differs by up to 4 levels); PNG, GIF and BMP by `tf.io.decode_image`. Grayscale and
        RGBA become RGB, 16-bit PNGs 8-bit. Corrupt bytes raise InvalidArgument.
        """
        import tensorflow as tf

        image = tf.cond(
            tf.io.is_jpeg(data),
            lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
            lambda: tf.io.decode_image(data, channels=3, dtype=tf.uint8,
                                       expand_animations=False))
        return tf.image.resize(tf.cast(image, tf.float32), list(self.image_shape[:2]),
                               antialias=True)

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("dtype", None)  # always float32
        config.update({"image_size": self.image_size, "scale": self.scale,
                       "offset": self.offset, "num_channels": self.num_channels,
                       "owner": self.owner})
        return config
