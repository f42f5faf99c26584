"""The image captioner's serving signature, as `zoo.serving.export.export_model` exports it.

`serving_default` takes encoded images (`tf.string [batch]`, JPEG, PNG, GIF or BMP) and
returns `captions` (`tf.string [batch]`) and their `scores` (the best hypothesis' score):
decoding and resizing (the image converter's `decode_image`), the encoder, the search (greedy
or beam, a `while_loop` over the decoder's key/value cache) and the detokenization (a table of
each id's bytes, joined, invalid UTF-8 replaced by U+FFFD as `BytePairTokenizer.decode` does)
run in the graph, with TensorFlow ops only.

A request holds at most `MAX_CAPTION_IMAGES` (32) images: the search holds every image's
hypotheses and their caches together, as a translator's does its sentences. Each image is
bounded in bytes and pixels as the ViT's are (`zoo.serving.image_endpoints`): at most
`MAX_IMAGE_BYTES` an image and `MAX_REQUEST_BYTES` a request, and an image whose header
declares more than `MAX_PIXELS` is refused before it is decoded; an image that does not decode
fails its request, named ("image 3 of 8: ..."). Every image has the same budget of
`max_length` tokens, so that its caption does not depend on what else shares its request or
the server's batch. An empty request is answered with outputs of no rows.
"""

from __future__ import annotations

from typing import Any

from zoo.serving.chunks import check_batch_size
from zoo.serving.image_endpoints import check_image_bytes, decode_rows

# The most images one request to an exported captioner may hold (a client with more sends
# several requests): the beams and caches of a request's images are searched together.
MAX_CAPTION_IMAGES = 32


def detokenize(tokenizer: Any, ids: Any) -> Any:
    """`tf.string [batch]`: the text of each row of `ids` (`[batch, length]` int32) up to its
    first end id, as `tokenizer.decode` gives it (byte-level BPE: each id's bytes joined,
    invalid UTF-8 replaced by U+FFFD), with TensorFlow ops only."""
    import tensorflow as tf

    pieces = [b"" if i == tokenizer.end_id else tokenizer.piece_bytes(i)
              for i in range(tokenizer.vocabulary_size)]
    ended = tf.cumsum(tf.cast(tf.equal(ids, tokenizer.end_id), tf.int32), axis=1)
    ids = tf.where(ended > 0, tokenizer.end_id, ids)
    raw = tf.strings.reduce_join(tf.gather(tf.constant(pieces), ids), axis=1)
    return tf.strings.unicode_transcode(raw, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def captioner_endpoints(model: Any, beam_size: int = 4, alpha: float = 0.6,
                        max_length: int = 20) -> Any:
    """The `serving_default` `tf.function` of an exported `ImageCaptioner`, bounded as this
    module's docstring says.

    Raises:
        UserError: the captioner has no tokenizer (it cannot write text).
    """
    import tensorflow as tf

    from zoo.training.errors import UserError

    tokenizer = model.preprocessor.tokenizer
    if tokenizer is None:
        raise UserError("this captioner has no tokenizer: an export writes captions as text")
    converter = model.preprocessor.image_converter

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="images")])
    def caption(images: tf.Tensor) -> dict:
        count = tf.shape(images, out_type=tf.int64)[0]
        checks = [check_batch_size(images, MAX_CAPTION_IMAGES, "images"),
                  *check_image_bytes(images)]
        with tf.control_dependencies(checks):
            images = tf.identity(images)

        def search() -> tuple[tf.Tensor, tf.Tensor]:
            pixels = decode_rows(images, tf.constant(0, tf.int64), count, converter)
            tokens, scores = model.generate(pixels, beam_size=beam_size,
                                            max_length=max_length, alpha=alpha)
            if beam_size > 1:
                tokens, scores = tokens[:, 0], scores[:, 0]
            return tf.strings.strip(detokenize(tokenizer, tokens)), scores

        def nothing() -> tuple[tf.Tensor, tf.Tensor]:
            return tf.zeros([0], tf.string), tf.zeros([0], tf.float32)

        captions, scores = tf.cond(count > 0, search, nothing)
        return {"captions": captions, "scores": scores}

    return caption
