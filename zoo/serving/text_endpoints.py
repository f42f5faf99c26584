"""The text models' serving signatures, as `zoo.serving.export.export_model` exports them:
the translator's `serving_default` (sentences) and `translate_ids`, and a sentence encoder's
`serving_default` (sentences) and `embed_ids`.

Every accepted request is bounded in memory (the figures: docs/benchmarks.md, "Served
requests: memory"). Each refusal is InvalidArgument before any work, with a message that
names the cap (`tf.debugging.Assert` ops, which the model server runs without XLA):

- the translator's signatures take at most `MAX_TRANSLATOR_SENTENCES` (64) sentences a
  request, the batch `Translator.translate` searches at once (1,000 sentences at once took
  past 4 GB); `serving_default` cuts each sentence to
  `zoo.text.length_cap.character_cap(max_source_length)` characters before tokenizing, as
  `translate` does, and `translate_ids` refuses rows wider than `max_source_length` ids;
- a sentence encoder's signatures take at most `MAX_SENTENCES` (1,024) sentences and encode
  them `CHUNK_ROWS` (32) at a time, the batch `SentenceEncoder.embed` uses
  (`zoo.serving.chunks`); `serving_default` cuts each sentence to `sentence_byte_cap(
  max_length)` bytes, never inside a UTF-8 character, before tokenizing it (a 100 MB
  sentence tokenized whole took past 4 GB), and `embed_ids` refuses rows wider than the
  model's position embeddings.

An empty request is answered with outputs of no rows.

An input's answer does not depend on what else shares its request or the server's batch:
an int8 translator's search takes one numeric route for every request size, the int8 weights
widened to float32 (`zoo.layers.int8_route`), as the Python model's searches do. Int8
products for small requests were faster on an AVX2 machine but made a sentence's translation
depend on its neighbours; served on 2 AVX-512 VNNI cores they were slower than the widened
weights at one sentence and at 32 (`benchmarks/serving_latency.py`; docs/benchmarks.md, "int8
exports served").
"""

from __future__ import annotations

from typing import Any

from zoo.serving.chunks import CHUNK_ROWS, check_batch_size, check_width, in_chunks
from zoo.text.length_cap import character_cap

# The most sentences one request to an exported sentence encoder may hold: 1,024, encoded 32
# at a time (`zoo.serving.chunks`); a client with more sends several requests.
MAX_SENTENCES = 1024
# The most sentences one request to an exported translator may hold: 64, the batch that
# `Translator.translate` searches at once. A search holds every sentence's beams and
# key/value cache together (1,000 sentences of 4,096 characters took past 4 GB).
MAX_TRANSLATOR_SENTENCES = 64
# keras-hub's WordPiece reads a word of more than this many UTF-8 bytes as one [UNK] (the
# `max_bytes_per_word` of `zoo.text.wordpiece`).
WORD_BYTES = 100
# UTF-8 bytes of a sentence kept per token a sentence encoder reads (`sentence_byte_cap`).
BYTES_PER_TOKEN = 4 * (WORD_BYTES + 1)


def translator_endpoints(model: Any, beam_size: int = 4, alpha: float = 0.6
                         ) -> tuple[Any, Any, Any]:
    """The two `tf.function`s of an exported translator and the tokenizer layer they use.
    Both refuse more than `MAX_TRANSLATOR_SENTENCES` sentences a request; `serving_default`
    cuts each sentence to `character_cap(model.max_source_length)` characters, as
    `translate` does, and `translate_ids` refuses rows wider than `max_source_length`."""
    import tensorflow as tf

    cap = character_cap(model.max_source_length)
    tokenizer = model.preprocessor.graph_tokenizer()  # the one the task and `fit` use
    tokenizer(tf.constant(["build"]))  # builds the layer (an export must track built layers)
    end_id, pad_id = model.tokenizer.end_id, model.tokenizer.pad_id

    # One function for both signatures, so that the SavedModel stores the search's graph
    # (the larger part of the export: about 5 MB) once, not once a signature. Each sentence
    # has its own budget (`max_lengths`, within `max_length`): what it would have alone.
    # Every endpoint of the zoo is traced without AutoGraph: the models' code is written for
    # JAX's tracing too (no Python branch on a tensor), and rewriting Keras' call stack with
    # AutoGraph took two thirds of an export's time (docs/performance-log.md, 2026-11-28).
    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
        tf.TensorSpec([None], tf.int32)])
    def search(source_ids: tf.Tensor, max_length: tf.Tensor, max_lengths: tf.Tensor
               ) -> tuple[tf.Tensor, tf.Tensor]:
        # One numeric route for every request size, so that a sentence's answer does not
        # depend on what shares its request or the server's batch (`zoo.layers.int8_route`).
        tokens, scores = model.generate(source_ids, beam_size=beam_size, max_length=max_length,
                                        alpha=alpha, max_lengths=max_lengths)
        if beam_size > 1:
            tokens, scores = tokens[:, 0], scores[:, 0]
        # Everything after the first end token becomes padding.
        ended = tf.cumsum(tf.cast(tf.equal(tokens, end_id), tf.int32), axis=1, exclusive=True)
        return tf.where(ended > 0, pad_id, tokens), scores

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="sentences")])
    def translate(sentences: tf.Tensor) -> dict:
        with tf.control_dependencies([check_batch_size(sentences, MAX_TRANSLATOR_SENTENCES)]):
            # Characters (code points), as Python's `text[:cap]`: never inside one.
            cut = tf.strings.substr(sentences, 0, cap, unit="UTF8_CHAR")
        pieces = tokenizer(cut)  # ragged (batch, None)
        if isinstance(pieces, tf.Tensor):
            pieces = tf.RaggedTensor.from_tensor(pieces, padding=pad_id)
        pieces = pieces[:, : model.max_source_length - 1]  # long inputs are truncated
        ends = tf.fill([tf.shape(sentences)[0], 1], end_id)
        source_ids = tf.concat([tf.cast(pieces, tf.int32), ends], axis=1).to_tensor(pad_id)
        # Every sentence's own budget, as `Translator.translate` gives it; the search runs to
        # the longest of them, not to the budget of the longest source the model takes: the
        # key/value cache, and every step's attention over it and beam reorder of it, are
        # that long.
        budgets = model.source_budgets(source_ids)
        longest = tf.maximum(tf.reduce_max(budgets), 1)  # an empty request: 1
        tokens, scores = search(source_ids, longest, budgets)
        texts = tokenizer.detokenize(tokens)
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)
        return {
            "translations": tf.where(blank, tf.constant(""), tf.reshape(texts, [-1])),
            "scores": tf.where(blank, 0.0, scores),
        }

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def translate_ids(source_ids: tf.Tensor) -> dict:
        # Ids may come padded to any width the model reads: the budget of the longest source
        # the model takes.
        with tf.control_dependencies([
                check_batch_size(source_ids, MAX_TRANSLATOR_SENTENCES),
                check_width(source_ids, model.max_source_length, "source_ids")]):
            source_ids = tf.identity(source_ids)
        width = model.default_max_length(model.max_source_length)
        tokens, scores = search(source_ids, tf.constant(width),
                                tf.fill([tf.shape(source_ids)[0]], width))
        tokens = tf.ensure_shape(tokens, [None, width])  # the signature names its width
        return {"target_ids": tokens, "scores": scores}

    return translate, translate_ids, tokenizer


def sentence_byte_cap(max_length: int) -> int:
    """The UTF-8 bytes of a sentence that an exported sentence encoder reading `max_length`
    tokens keeps: `max_length x BYTES_PER_TOKEN` (103,424 for 256 tokens).

    A WordPiece token stands for at most one word of `WORD_BYTES` bytes (a longer word is one
    [UNK]) and the byte that ends it, so the tokens the encoder reads lie within the first
    `max_length x (WORD_BYTES + 1)` bytes of a sentence; the cap is four times that, for
    separators of several bytes and accent marks that the tokenizer strips. A sentence whose
    runs of spaces or marks are longer still may lose words past the cap that `embed`, which
    does not cut, would read.

    Example:
        >>> sentence_byte_cap(256)
        103424
    """
    return int(max_length) * BYTES_PER_TOKEN


def cut_utf8(sentences: Any, cap: int) -> Any:
    """Each string of `sentences` (`tf.string [batch]`) cut to at most `cap` bytes, at the
    start of the UTF-8 character that the cap falls in (never inside one); shorter strings
    are kept whole. TensorFlow ops only (for a served graph)."""
    import tensorflow as tf

    if cap < 4:
        raise ValueError(f"cap must be at least 4 bytes (one character); got {cap}")
    lengths = tf.strings.length(sentences)
    # The bytes at positions cap - 3 .. cap of a string longer than the cap (another string's
    # are not used): a continuation byte (10xxxxxx) at `cap` means a character starts before.
    tail = tf.strings.substr(sentences, tf.where(lengths > cap, cap - 3, 0), tf.fill(
        tf.shape(lengths), 4))
    padded = tf.strings.substr(tf.strings.join([tail, tf.constant(b"\0" * 4)]), 0, 4)
    raw = tf.io.decode_raw(padded, tf.uint8)  # (batch, 4)
    follows = tf.equal(tf.bitwise.bitwise_and(raw, 0xC0), 0x80)
    cut = tf.where(~follows[:, 3], cap, tf.where(~follows[:, 2], cap - 1,
                                                 tf.where(~follows[:, 1], cap - 2, cap - 3)))
    keep = tf.where(lengths > cap, tf.maximum(cut, 0), lengths)
    return tf.strings.substr(sentences, tf.zeros_like(keep), keep)


def sentence_encoder_endpoints(model: Any) -> tuple[Any, Any]:
    """The two `tf.function`s of an exported `SentenceEncoder`: sentences and token ids.
    Each refuses a request of more than `MAX_SENTENCES` (1,024) sentences and encodes
    `CHUNK_ROWS` at a time; `serving_default` cuts each sentence to
    `sentence_byte_cap(tokenizer.max_length)` bytes before tokenizing it, `embed_ids`
    refuses rows wider than the position embeddings.

    Raises:
        ValueError: the encoder has no vocabulary (it cannot tokenize text).
    """
    import tensorflow as tf

    tokenizer = model.tokenizer
    byte_cap = sentence_byte_cap(tokenizer.max_length)
    output = {"embeddings": tf.TensorSpec([None, model.hidden_dim], tf.float32)}

    def embeddings(batch: dict) -> dict:
        return {"embeddings": tf.cast(model(batch, training=False), tf.float32)}

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None], tf.string, name="sentences")])
    def embed(sentences: tf.Tensor) -> dict:
        with tf.control_dependencies([check_batch_size(sentences, MAX_SENTENCES)]):
            sentences = tf.identity(sentences)
        return in_chunks(lambda _, rows: embeddings(tokenizer.tokenize_in_graph(
            cut_utf8(rows, byte_cap))), [sentences], output)

    @tf.function(autograph=False, input_signature=[
        tf.TensorSpec([None, None], tf.int32, name="token_ids"),
        tf.TensorSpec([None, None], tf.int32, name="padding_mask")])
    def embed_ids(token_ids: tf.Tensor, padding_mask: tf.Tensor) -> dict:
        with tf.control_dependencies([
                check_batch_size(token_ids, MAX_SENTENCES),
                check_width(token_ids, model.max_positions, "token_ids")]):
            token_ids = tf.identity(token_ids)
        return in_chunks(lambda _, ids, mask: embeddings(
            {"token_ids": ids, "padding_mask": mask}), [token_ids, padding_mask], output)

    return embed, embed_ids
