"""The ViT's serving signatures, as `zoo.serving.export.export_model` exports them, and the
bounds they hold to (the memory of the largest accepted request: docs/benchmarks.md).

`serving_default` takes encoded images (`tf.string [batch]`): at most `MAX_IMAGES` a request,
`MAX_IMAGE_BYTES` an image and `MAX_REQUEST_BYTES` in all. It decodes and classifies them
`CHUNK_ROWS` (32) at a time (`zoo.serving.chunks`), one image decoded at a time, and refuses,
before decoding, an image whose header declares more than `MAX_PIXELS` pixels or bytes in no
known format. An image that fails to decode (a truncated JPEG, an empty PNG) fails the
request, as every refusal does, with InvalidArgument and a message that names the image:
"image 3 of 8: ..." (its index in the request, counting from 0, and the request's size).

`classify_pixels` takes float pixels `[batch, H, W, 3]` in 0..255: at most `MAX_IMAGES`
images, `MAX_REQUEST_BYTES` of float32 in all (so fewer pixels than `MAX_PIXELS`), and refuses a
batch with a NaN or infinite pixel (`check_finite_pixels`), as `VisionTransformer.classify`
does, where the model would answer with a label of probability nan.

An empty request is answered with outputs of no rows (the model never runs: a hybrid ViT's
batch norm fails on an empty batch). The checks are `tf.debugging.Assert` ops, which the
model server runs without XLA.
"""

from __future__ import annotations

from typing import Any

from zoo.serving.chunks import CHUNK_ROWS, check_batch_size, in_chunks

# The most pixels (height x width) an exported ViT decodes from one image: 40 megapixels,
# e.g. 8000 x 5000 (a large phone photo), about 120 MB as uint8 RGB. Larger images are
# refused from their header, before decoding.
MAX_PIXELS = 40_000_000
# The most images one request may hold (the same as a sentence encoder's sentences); they are
# decoded and classified 32 at a time, so that memory does not grow with them.
MAX_IMAGES = 1024
# The most bytes of one encoded image: 32 MiB, a 40-megapixel JPEG of fine quality.
MAX_IMAGE_BYTES = 32 * 2 ** 20
# The most bytes of one request's images (encoded, or float32 pixels): 64 MiB, which the
# server holds beside the request's work.
MAX_REQUEST_BYTES = 64 * 2 ** 20
# Why an image of a request is refused (`decode_rows`): its code, and its message.
_DECODED, _UNKNOWN, _TOO_LARGE, _CORRUPT = 0, 1, 2, 3


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


def decode_rows(rows: Any, start: Any, count: Any, converter: Any) -> Any:
    """The images `rows` (`tf.string [n]`, the request's images `start` to `start + n` of
    `count`) decoded by the model's image converter (`ImageConverter.decode_image`) to
    `[n, height, width, 3]` float pixels in 0..255, one after another; fails with
    InvalidArgument naming the first image ("image 3 of 8: ...") that is in no known
    format, declares more than `MAX_PIXELS` pixels in its header (never decoded) or does not
    decode (truncated or corrupt bytes)."""
    import tensorflow as tf

    size = list(converter.image_shape[:2])

    def one(data: Any, index: Any) -> tuple:
        # A decoding error drops the image from the dataset (`ignore_errors`); the images
        # missing from what comes out are the ones that failed.
        known, height, width = image_header_size(data)
        code = tf.where(~known, _UNKNOWN, tf.where(height * width > MAX_PIXELS, _TOO_LARGE,
                                                   _DECODED))
        pixels = tf.cond(tf.equal(code, _DECODED), lambda: converter.decode_image(data),
                         lambda: tf.zeros(size + [3]))
        return index, pixels, code, tf.stack([height, width])

    n = tf.shape(rows, out_type=tf.int64)[0]
    indices = tf.range(n)
    decoded = tf.data.Dataset.from_tensor_slices((rows, indices)).map(one).ignore_errors()
    nothing = tf.data.Dataset.from_tensors((tf.zeros([0], tf.int64), tf.zeros([0] + size + [3]),
                                            tf.zeros([0], tf.int32), tf.zeros([0, 2], tf.int64)))
    found, pixels, codes, shapes = decoded.batch(CHUNK_ROWS * 64).concatenate(nothing).take(
        1).get_single_element()
    where = found[:, None]
    codes = tf.tensor_scatter_nd_update(tf.fill([n], _CORRUPT), where, codes)
    shapes = tf.tensor_scatter_nd_update(tf.zeros([n, 2], tf.int64), where, shapes)
    first = tf.argmax(tf.cast(tf.not_equal(codes, _DECODED), tf.int32), output_type=tf.int64)
    name = tf.strings.format("image {} of {}: ", (start + first, count))
    messages = [name, name + "bytes in no known image format (JPEG, PNG, GIF or BMP)",
                name + tf.strings.format("{} x {} pixels, more than the limit of {}", (
                    shapes[first, 0], shapes[first, 1], MAX_PIXELS)),
                name + "the image data is truncated or corrupt"]
    message = tf.gather(tf.stack(messages), codes[first])
    check = tf.debugging.Assert(tf.reduce_all(tf.equal(codes, _DECODED)), [message])
    with tf.control_dependencies([check]):  # then every image came out, in order
        return tf.identity(pixels)


def vit_endpoints(model: Any, top_k: int = 5) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported ViT: image bytes and float pixels, each
    bounded as this module's docstring says."""
    import tensorflow as tf

    size = list(model.image_shape[:2])
    converter = model.preprocessor  # the ImageConverter that classify and fit use
    names = list(model.class_names or [f"class_{i}" for i in range(model.num_classes)])
    k = min(top_k, len(names))
    outputs = {"labels": tf.TensorSpec([None, k], tf.string),
               "probabilities": tf.TensorSpec([None, k], tf.float32),
               "class_ids": tf.TensorSpec([None, k], tf.int32)}

    def top(pixels: tf.Tensor) -> dict:
        probabilities = tf.nn.softmax(tf.cast(model(pixels, training=False), tf.float32))
        best, indices = tf.math.top_k(probabilities, k=k)
        return {"labels": tf.gather(tf.constant(names), indices), "probabilities": best,
                "class_ids": indices}

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="images")])
    def classify_bytes(images: tf.Tensor) -> dict:
        count = tf.shape(images, out_type=tf.int64)[0]
        with tf.control_dependencies(check_image_bytes(images)):
            images = tf.identity(images)
        return in_chunks(lambda start, rows: top(decode_rows(
            rows, tf.cast(start, tf.int64), count, converter)), [images], outputs)

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None, None, None, 3], tf.float32, name="pixels")])
    def classify_pixels(pixels: tf.Tensor) -> dict:
        shape = tf.shape(pixels, out_type=tf.int64)
        checks = [  # (MAX_REQUEST_BYTES bounds the pixels of an image below MAX_PIXELS)
            check_batch_size(pixels, MAX_IMAGES, "images"),
            tf.debugging.Assert(tf.reduce_prod(shape) * 4 <= MAX_REQUEST_BYTES, [
                "a request of", tf.reduce_prod(shape) * 4, "bytes of float32 pixels is more "
                "than the limit of", MAX_REQUEST_BYTES, "bytes a request; send them in "
                "smaller requests"])]
        with tf.control_dependencies(checks):  # before the values are read
            finite = check_finite_pixels(pixels)
        with tf.control_dependencies([finite]):
            pixels = tf.identity(pixels)
        return in_chunks(lambda _, rows: top(tf.image.resize(rows, size, antialias=True)),
                         [pixels], outputs)

    return classify_bytes, classify_pixels


def check_image_bytes(images: Any) -> list[Any]:
    """`tf.debugging.Assert` ops that fail when a request of encoded images (`tf.string
    [batch]`) holds more than `MAX_IMAGES` images, an image of more than `MAX_IMAGE_BYTES`
    bytes (naming the first: "image 3 of 8: ...") or more than `MAX_REQUEST_BYTES` in all."""
    import tensorflow as tf

    count = tf.shape(images, out_type=tf.int64)[0]
    # One more entry, so that an empty request has a first (none) and a largest (0).
    sizes = tf.concat([tf.cast(tf.strings.length(images), tf.int64), [0]], axis=0)
    first = tf.argmax(tf.cast(sizes > MAX_IMAGE_BYTES, tf.int32), output_type=tf.int64)
    largest = tf.reduce_max(sizes)
    return [
        check_batch_size(images, MAX_IMAGES, "images"),
        tf.debugging.Assert(largest <= MAX_IMAGE_BYTES, [tf.strings.format(
            "image {} of {}: {} bytes, more than the limit of {} bytes an image", (
                first, count, sizes[first], MAX_IMAGE_BYTES))]),
        tf.debugging.Assert(tf.reduce_sum(sizes) <= MAX_REQUEST_BYTES, [
            "a request of", tf.reduce_sum(sizes), "bytes of images is more than the limit of",
            MAX_REQUEST_BYTES, "bytes a request; send them in smaller requests"]),
    ]


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
    finite = tf.reduce_all(tf.math.is_finite(pixels), axis=[1, 2, 3])  # (batch,)
    bad = tf.where(tf.logical_not(finite))[:, 0]
    first = tf.reduce_min(tf.concat([bad, tf.reshape(batch, [1])], axis=0))
    return tf.debugging.Assert(tf.reduce_all(finite), [
        "image", first, "of the batch holds NaN or infinite pixel values (", tf.size(bad),
        "such images)"])

