"""CLIP's serving signatures, as `zoo.serving.export.export_model` exports them, and the
bounds they hold to.

- `serving_default`: `images` (`tf.string [n_images]`, encoded JPEG/PNG/GIF/BMP bytes, as
  the ViT's export takes them) and `labels` (`tf.string [n_labels]`, the candidate labels)
  -> `probabilities` (float32 `[n_images, n_labels]`): each label put in the template fixed
  at export (by default "a photo of a {}"), and the softmax over labels of the scaled cosine
  similarities, as `CLIP.zero_shot(images, labels, template)`;
- `encode_images`: `images` (bytes) -> `embeddings` (float32 `[n, embedding_dim]`, unit
  length: `CLIP.encode_images(images, normalize=True)`);
- `encode_texts`: `texts` (`tf.string [n]`, no template) -> `embeddings` (unit length:
  `CLIP.encode_texts(texts, normalize=True)`).

Bounds: a request holds at most `MAX_IMAGES` (1,024) images, `MAX_IMAGE_BYTES` an image and
`MAX_REQUEST_BYTES` in all, decoded and encoded `CHUNK_ROWS` (32) at a time, refused or named
as the ViT's images are (zoo/serving/image_endpoints.py); and at most `MAX_LABELS` (1,024)
labels (or texts), encoded 32 at a time, each cut to `sentence_byte_cap(context_length)`
bytes (31,108 for 77 tokens), never inside a UTF-8 character, before it is tokenized (the
text tower reads no more than `context_length` tokens). `serving_default` holds every
label's embedding and every image's (1,024 x 512 float32 = 2 MB each for ViT-B) and the
`[n_images, n_labels]` probabilities (4 MB at the caps). `serving_default` refuses a request without labels, and a
blank label (as `zero_shot` does). Refusals are InvalidArgument naming the cap
(`tf.debugging.Assert` ops, which the model server runs without XLA). An empty batch of
images is answered with no rows.
"""

from __future__ import annotations

from typing import Any

from zoo.serving.chunks import CHUNK_ROWS, check_batch_size, in_chunks
from zoo.serving.image_endpoints import check_image_bytes, decode_rows
from zoo.serving.text_endpoints import cut_utf8, sentence_byte_cap
from zoo.training.errors import UserError

# The most labels (or texts to `encode_texts`) one request may hold: a sentence encoder's
# `MAX_SENTENCES`; a client with more sends several requests.
MAX_LABELS = 1024


def _template_parts(template: str) -> list[str]:
    """The pieces of `template` around its "{}"s, so that joining them with a label gives
    `template.format(label)`."""
    if not isinstance(template, str) or "{}" not in template:
        raise UserError(f"template must be a string holding {{}}; got {template!r}")
    parts = template.split("{}")
    if "\0".join(parts) != template.format("\0"):
        raise UserError(f"template must hold no braces but its {{}}; got {template!r}")
    return parts


def clip_endpoints(model: Any, template: str = "a photo of a {}"
                   ) -> tuple[Any, Any, Any, Any]:
    """`(serving_default, encode_images, encode_texts, tokenizer layer)`: the three
    `tf.function`s of an exported CLIP, bounded as this module's docstring says, and the
    keras-hub layer whose lookup tables the export must track.

    Raises:
        UserError: the model has no tokenizer, or `template` holds no "{}".
    """
    import tensorflow as tf

    parts = _template_parts(template)
    if model.preprocessor is None:
        raise UserError("export needs a CLIP with its tokenizer: load one with zoo.load")
    tokenizer = model.preprocessor.require_tokenizer()
    tokenizer.encode(["build"])  # builds the layer (an export must track built layers)
    converter = model.preprocessor.image_converter
    byte_cap = sentence_byte_cap(model.preprocessor.sequence_length)
    dim = model.backbone.embedding_dim
    output = {"embeddings": tf.TensorSpec([None, dim], tf.float32)}

    def unit(x: Any) -> Any:
        return tf.math.l2_normalize(tf.cast(x, tf.float32), axis=-1, epsilon=1e-24)

    def image_embeddings(images: Any) -> Any:
        count = tf.shape(images, out_type=tf.int64)[0]
        with tf.control_dependencies(check_image_bytes(images)):
            images = tf.identity(images)
        return in_chunks(lambda start, rows: {"embeddings": unit(model.backbone.encode_images(
            model.preprocessor_images(decode_rows(rows, tf.cast(start, tf.int64), count,
                                                  converter)), training=False))},
            [images], output)

    def text_embeddings(texts: Any, what: str) -> Any:
        with tf.control_dependencies([check_batch_size(texts, MAX_LABELS, what)]):
            texts = tf.identity(texts)
        return in_chunks(lambda _, rows: {"embeddings": unit(model.backbone.encode_texts(
            model.preprocessor.token_ids(cut_utf8(rows, byte_cap)), training=False))},
            [texts], output)

    images_spec = tf.TensorSpec([None], tf.string, name="images")

    @tf.function(autograph=False, input_signature=[
        images_spec, tf.TensorSpec([None], tf.string, name="labels")])
    def zero_shot(images: tf.Tensor, labels: tf.Tensor) -> dict:
        count = tf.shape(labels, out_type=tf.int64)[0]
        blank = tf.equal(tf.strings.length(tf.strings.strip(labels)), 0)
        first = tf.argmax(tf.concat([tf.cast(blank, tf.int32), [1]], 0), output_type=tf.int64)
        checks = [
            check_batch_size(labels, MAX_LABELS, "labels"),
            tf.debugging.Assert(count > 0, ["a request needs at least one label"]),
            tf.debugging.Assert(~tf.reduce_any(blank), [tf.strings.format(
                "label {} of {} is blank", (first, count))])]
        with tf.control_dependencies(checks):
            labels = tf.identity(labels)
        cut = cut_utf8(labels, byte_cap)
        pieces = [tf.fill(tf.shape(labels), parts[0])]
        for part in parts[1:]:
            pieces += [cut, tf.fill(tf.shape(labels), part)]
        classifier = text_embeddings(tf.strings.join(pieces), "labels")["embeddings"]
        scale = tf.cast(model.backbone.similarity_scale(), tf.float32)
        found = image_embeddings(images)["embeddings"]  # (n_images, dim), unit
        logits = scale * tf.matmul(found, classifier, transpose_b=True)
        return {"probabilities": tf.nn.softmax(logits, axis=-1)}

    @tf.function(autograph=False, input_signature=[images_spec])
    def encode_images(images: tf.Tensor) -> dict:
        return image_embeddings(images)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
    def encode_texts(texts: tf.Tensor) -> dict:
        return text_embeddings(texts, "texts")

    return zero_shot, encode_images, encode_texts, tokenizer.layer
