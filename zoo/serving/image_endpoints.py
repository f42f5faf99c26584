"""The ViT's serving signatures, as `zoo.serving.export.export_model` exports them, and the
bounds they hold to: `serving_default` takes encoded images (`tf.string [batch]`) and refuses,
before decoding, an image whose header declares more than `MAX_PIXELS` pixels or bytes in no
known format; `classify_pixels` takes float pixels `[batch, H, W, 3]` in 0..255 and refuses a
batch with a NaN or infinite pixel (`check_finite_pixels`), as `VisionTransformer.classify`
does, where the model would answer with a label of probability nan. Each refusal fails the
request with InvalidArgument and a message that names the image's index in the batch.

The checks are `tf.debugging.Assert` ops, which the model server runs without XLA.
"""

from __future__ import annotations

from typing import Any

# The most pixels (height x width) an exported ViT decodes from one image: 40 megapixels,
# e.g. 8000 x 5000 (a large phone photo), about 120 MB as uint8 RGB. Larger images are
# refused from their header, before decoding.
MAX_PIXELS = 40_000_000


def image_header_size(data: Any) -> tuple[Any, Any, Any]:
    """`(known, height, width)` of one encoded image, read from its header with TF ops only.

    JPEG sizes come from `tf.io.extract_jpeg_shape` (the frame header); PNG, GIF and BMP
    sizes from their fixed header fields. `known` is False for bytes in none of these
    formats (height and width are then 0).
    """
    import tensorflow as tf

    head = tf.strings.substr(data, 0, 32)
    padded = tf.strings.substr(tf.strings.join([head, tf.constant(b"\0" * 32)]), 0, 32)
    b = tf.cast(tf.io.decode_raw(padded, tf.uint8), tf.int64)  # 32 header bytes

    def big_endian(start: int) -> Any:
        return b[start] * 16777216 + b[start + 1] * 65536 + b[start + 2] * 256 + b[start + 3]

    def little_endian_32(start: int) -> Any:
        value = b[start] + b[start + 1] * 256 + b[start + 2] * 65536 + b[start + 3] * 16777216
        return tf.where(value >= 2 ** 31, 2 ** 32 - value, value)  # BMP heights may be < 0

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
    is_png = tf.equal(tf.strings.substr(data, 0, 8), b"\x89PNG\r\n\x1a\n")
    is_gif = tf.equal(tf.strings.substr(data, 0, 3), b"GIF")
    is_bmp = tf.equal(tf.strings.substr(data, 0, 2), b"BM")
    jpeg = tf.cond(is_jpeg,
                   lambda: tf.cast(tf.io.extract_jpeg_shape(data)[:2], tf.int64),
                   lambda: tf.zeros([2], tf.int64))
    zero = tf.constant(0, tf.int64)
    height = tf.where(is_jpeg, jpeg[0], tf.where(is_png, big_endian(20), tf.where(
        is_gif, b[8] + b[9] * 256, tf.where(is_bmp, little_endian_32(22), zero))))
    width = tf.where(is_jpeg, jpeg[1], tf.where(is_png, big_endian(16), tf.where(
        is_gif, b[6] + b[7] * 256, tf.where(is_bmp, little_endian_32(18), zero))))
    known = is_jpeg | is_png | is_gif | is_bmp
    return known, height, width


def vit_endpoints(model: Any, top_k: int = 5) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported ViT: image bytes and float pixels."""
    import tensorflow as tf

    size = list(model.image_shape[:2])
    names = list(model.class_names or [f"class_{i}" for i in range(model.num_classes)])
    k = min(top_k, len(names))

    def top(pixels: tf.Tensor) -> dict:
        probabilities = tf.nn.softmax(tf.cast(model(pixels, training=False), tf.float32))
        best, indices = tf.math.top_k(probabilities, k=k)
        return {"labels": tf.gather(tf.constant(names), indices), "probabilities": best,
                "class_ids": indices}

    def decode(data: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        # The size comes from the header first: an image above MAX_PIXELS fails this request
        # with InvalidArgument before it is decoded (a 1.5 MB JPEG can hold 10000 x 10000
        # pixels, 300 MB decoded and 1.2 GB as floats). Bytes in no known format fail the
        # same way; both messages name the image's index in the batch.
        known, height, width = image_header_size(data)
        checks = [
            tf.debugging.Assert(known, ["image", index, "is not a JPEG, PNG, GIF or BMP"]),
            tf.debugging.Assert(height * width <= MAX_PIXELS, [
                "image", index, "has", height, "x", width, "pixels, more than the limit of",
                MAX_PIXELS]),
        ]
        with tf.control_dependencies(checks):
            # JPEGs with the accurate integer DCT: the pixels PIL gives training and
            # `classify` (tests/training/test_jpeg_decoding.py); decode_image's default fast
            # DCT differs by up to 4 levels. decode_image reads PNG, GIF and BMP; corrupt
            # bytes fail this request with InvalidArgument. Grayscale and RGBA become RGB,
            # 16-bit PNGs 8-bit.
            image = tf.cond(
                tf.io.is_jpeg(data),
                lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
                lambda: tf.io.decode_image(data, channels=3, dtype=tf.uint8,
                                           expand_animations=False))
        return tf.image.resize(tf.cast(image, tf.float32), size, antialias=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def classify_bytes(images: tf.Tensor) -> dict:
        indices = tf.range(tf.shape(images, out_type=tf.int64)[0])
        pixels = tf.map_fn(lambda args: decode(*args), (images, indices),
                           fn_output_signature=tf.TensorSpec(size + [3], tf.float32))
        return top(pixels)

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32,
                                                name="pixels")])
    def classify_pixels(pixels: tf.Tensor) -> dict:
        with tf.control_dependencies([check_finite_pixels(pixels)]):
            pixels = tf.identity(pixels)
        return top(tf.image.resize(pixels, size, antialias=True))

    return classify_bytes, classify_pixels



def check_finite_pixels(pixels: Any) -> Any:
    """A `tf.debugging.Assert` op that fails when an image of the batch `pixels`
    (`[batch, H, W, C]` floats) holds a NaN or infinite value; its message names the first
    such image's index and how many there are, as `zoo.models.vit.image_batch` words it.

    Example (inside a `tf.function`):
        with tf.control_dependencies([check_finite_pixels(pixels)]):
            pixels = tf.identity(pixels)
    """
    import tensorflow as tf

    batch = tf.shape(pixels, out_type=tf.int64)[0]
    finite = tf.reduce_all(tf.reshape(tf.math.is_finite(pixels), [batch, -1]), axis=1)
    bad = tf.where(tf.logical_not(finite))[:, 0]
    first = tf.reduce_min(tf.concat([bad, tf.reshape(batch, [1])], axis=0))
    return tf.debugging.Assert(tf.reduce_all(finite), [
        "image", first, "of the batch holds NaN or infinite pixel values (", tf.size(bad),
        "such images)"])

