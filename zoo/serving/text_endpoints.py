"""The text models' serving signatures, as `zoo.serving.export.export_model` exports them:
the translator's `serving_default` (sentences) and `translate_ids`, and a sentence encoder's
`serving_default` (sentences) and `embed_ids`.

Every signature refuses a request of more than `MAX_SENTENCES` sentences (InvalidArgument,
naming the cap) before tokenizing, encoding or translating anything: memory grows with the
batch (10,000 sentences took a sentence encoder 8.9 GB), and one request must not take the
server's. The check is a `tf.debugging.Assert` op, which the model server runs without XLA.
The translator's `serving_default` also cuts each sentence to
`zoo.text.length_cap.character_cap(max_source_length)` characters before tokenizing, as
`Translator.translate` does, so that a huge sentence costs no more than the model reads.

An input's answer does not depend on what else shares its request or the server's batch:
an int8 translator's search takes one numeric route for every request size, the int8 weights
widened to float32 (`zoo.layers.int8_route`), as the Python model's searches do. Int8
products for small requests were faster on an AVX2 machine but made a sentence's translation
depend on its neighbours; served on 2 AVX-512 VNNI cores they were 2.1x slower than the
widened weights at one sentence and 3.4x at 32 (`benchmarks/int8_served.py`).
"""

from __future__ import annotations

from typing import Any

from zoo.text.length_cap import character_cap

# The most sentences one request to an exported text model may hold: 1,024. The memory of a
# request grows with its sentences (10,000 took a sentence encoder 8.9 GB, so 1,024 about a
# tenth of that); a client with more sends several requests.
MAX_SENTENCES = 1024


def translator_endpoints(model: Any, beam_size: int = 4, alpha: float = 0.6
                         ) -> tuple[Any, Any, Any]:
    """The two `tf.function`s of an exported translator and the tokenizer layer they use.
    Both refuse more than `MAX_SENTENCES` sentences a request; `serving_default` cuts each
    sentence to `character_cap(model.max_source_length)` characters, as `translate` does."""
    import tensorflow as tf

    cap = character_cap(model.max_source_length)
    tokenizer = model.tokenizer.to_keras_hub()
    tokenizer(tf.constant(["build"]))  # builds the layer (an export must track built layers)
    end_id, pad_id = model.tokenizer.end_id, model.tokenizer.pad_id

    def budget(source_ids: tf.Tensor) -> tf.Tensor:
        # The output budget of this batch's source length, as `Translator.translate` gives
        # it (`default_max_length` of the length rounded up to a multiple of 8, as
        # `encode_texts` pads it), not of the longest source the model takes: the key/value
        # cache, and every step's attention over it and beam reorder of it, are that long.
        padded = tf.minimum(model.max_source_length, (tf.shape(source_ids)[1] + 7) // 8 * 8)
        return tf.minimum(model.max_target_length,
                          tf.cast(tf.floor(1.5 * tf.cast(padded, tf.float32) + 10.0), tf.int32))

    # One function for both signatures, so that the SavedModel stores the search's graph
    # (the larger part of the export: about 5 MB) once, not once a signature.
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32),
                                  tf.TensorSpec([], tf.int32)])
    def search(source_ids: tf.Tensor, max_length: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # One numeric route for every request size, so that a sentence's answer does not
        # depend on what shares its request or the server's batch (`zoo.layers.int8_route`).
        return one_search(source_ids, max_length)

    def one_search(source_ids: tf.Tensor, max_length: Any) -> tuple[tf.Tensor, tf.Tensor]:
        tokens, scores = model.generate(source_ids, beam_size=beam_size,
                                        max_length=max_length, alpha=alpha)
        if beam_size > 1:
            tokens, scores = tokens[:, 0], scores[:, 0]
        # Everything after the first end token becomes padding.
        ended = tf.cumsum(tf.cast(tf.equal(tokens, end_id), tf.int32), axis=1, exclusive=True)
        return tf.where(ended > 0, pad_id, tokens), scores

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def translate(sentences: tf.Tensor) -> dict:
        with tf.control_dependencies([check_batch_size(sentences)]):
            # Characters (code points), as Python's `text[:cap]`: never inside one.
            cut = tf.strings.substr(sentences, 0, cap, unit="UTF8_CHAR")
        pieces = tokenizer(cut)  # ragged (batch, None)
        if isinstance(pieces, tf.Tensor):
            pieces = tf.RaggedTensor.from_tensor(pieces, padding=pad_id)
        pieces = pieces[:, : model.max_source_length - 1]  # long inputs are truncated
        ends = tf.fill([tf.shape(sentences)[0], 1], end_id)
        source_ids = tf.concat([tf.cast(pieces, tf.int32), ends], axis=1).to_tensor(pad_id)
        tokens, scores = search(source_ids, budget(source_ids))
        texts = tokenizer.detokenize(tokens)
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)
        return {
            "translations": tf.where(blank, tf.constant(""), tf.reshape(texts, [-1])),
            "scores": tf.where(blank, 0.0, scores),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def translate_ids(source_ids: tf.Tensor) -> dict:
        # Ids may come padded to any width: the budget of the longest source the model takes.
        with tf.control_dependencies([check_batch_size(source_ids)]):
            source_ids = tf.identity(source_ids)
        width = model.default_max_length(model.max_source_length)
        tokens, scores = search(source_ids, tf.constant(width))
        tokens = tf.ensure_shape(tokens, [None, width])  # the signature names its width
        return {"target_ids": tokens, "scores": scores}

    return translate, translate_ids, tokenizer


def sentence_encoder_endpoints(model: Any) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported `SentenceEncoder`: sentences and token ids.
    Each refuses a request of more than `MAX_SENTENCES` (1,024) sentences
    (`check_batch_size`).

    Raises:
        ValueError: the encoder has no vocabulary (it cannot tokenize text).
    """
    import tensorflow as tf

    tokenizer = model.tokenizer

    def embeddings(batch: dict) -> dict:
        return {"embeddings": tf.cast(model(batch, training=False), tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def embed(sentences: tf.Tensor) -> dict:
        with tf.control_dependencies([check_batch_size(sentences)]):
            sentences = tf.identity(sentences)
        return embeddings(tokenizer.tokenize_in_graph(sentences))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids"),
                                  tf.TensorSpec([None, None], tf.int32, name="padding_mask")])
    def embed_ids(token_ids: tf.Tensor, padding_mask: tf.Tensor) -> dict:
        with tf.control_dependencies([check_batch_size(token_ids)]):
            token_ids = tf.identity(token_ids)
        return embeddings({"token_ids": token_ids, "padding_mask": padding_mask})

    return embed, embed_ids



def check_batch_size(batch: Any, cap: int = MAX_SENTENCES) -> Any:
    """A `tf.debugging.Assert` op that fails when `batch` (its first axis: one row a
    sentence) holds more than `cap` rows; the message gives the count and names the cap.

    Example (inside a `tf.function`):
        with tf.control_dependencies([check_batch_size(sentences)]):
            sentences = tf.identity(sentences)
    """
    import tensorflow as tf

    count = tf.shape(batch, out_type=tf.int64)[0]
    return tf.debugging.Assert(count <= cap, [
        "a request of", count, "sentences is more than the limit of", cap,
        "sentences a request; send them in smaller requests"])

