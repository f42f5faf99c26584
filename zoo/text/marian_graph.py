"""`zoo.text.marian.MarianTokenizer` inside a TensorFlow graph, for SavedModel export.

Only TensorFlow and TF Text ops: a TF Text `SentencepieceTokenizer` over the source model
cuts text into piece strings, a `tf.lookup.StaticHashTable` numbers them with `vocab.json`
(the unknown id for a piece it lacks), and detokenization gathers piece strings, drops the
special ones, joins them and turns the SentencePiece meta symbol into spaces, which is what
SentencePiece's decoder and Hugging Face's `MarianTokenizer` do with such pieces. Stock TF
Serving runs it, and so does a process that imports only `tensorflow` and `tensorflow_text`.

`MarianTokenizer.graph_tokenizer()` returns this layer, as `SubwordTokenizer.graph_tokenizer()`
returns keras-hub's SentencePiece tokenizer; `zoo.export` calls it on either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras

if TYPE_CHECKING:
    from zoo.text.marian import MarianTokenizer

_META_SYMBOL = "\u2581"
# Hugging Face's clean_up_tokenization, as (pattern, replacement) for tf.strings.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
             (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class MarianGraphTokenizer(keras.layers.Layer):
    """OPUS-MT tokenization in a TensorFlow graph (TensorFlow backend only).

    Args:
        tokenizer: the `MarianTokenizer` whose models and id map it holds.
        **kwargs: `keras.layers.Layer` arguments (`name`).

    Call arguments:
        texts: `tf.string` `[batch]` sentences.

    Returns:
        The ids of `tokenizer.encode(texts, add_end=False)` as an int32 `tf.RaggedTensor`.
    """

    def __init__(self, tokenizer: MarianTokenizer, **kwargs: Any) -> None:
        super().__init__(trainable=False, **kwargs)
        import sentencepiece
        import tensorflow as tf
        import tensorflow_text as tf_text

        self.end_id, self.pad_id = tokenizer.end_id, tokenizer.pad_id
        self.unknown_id = tokenizer.unknown_id
        self.vocabulary_size = tokenizer.vocabulary_size
        self.clean_up_spaces = tokenizer.clean_up_spaces
        self._sentencepiece = tf_text.SentencepieceTokenizer(
            model=tokenizer.source_proto, out_type=tf.string)
        vocabulary = tokenizer.vocabulary
        self._ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(vocabulary), tf.string),
                tf.constant(list(vocabulary.values()), tf.int64)),
            default_value=self.unknown_id)
        # The text of each id: SentencePiece's decoder writes nothing for the source model's
        # control pieces; the special ids are dropped before joining anyway.
        source = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.source_proto)
        texts = []
        for index in range(self.vocabulary_size):
            piece = tokenizer.id_to_piece(index)
            control = source.piece_to_id(piece)
            texts.append("" if source.is_control(control)
                         and source.id_to_piece(control) == piece else piece)
        self._pieces = tf.constant(texts, tf.string)

    def call(self, texts: Any) -> Any:
        return self.tokenize(texts)

    def tokenize(self, texts: Any) -> Any:
        """`[batch]` strings -> int32 ragged ids (no end id), as `MarianTokenizer.encode`."""
        import tensorflow as tf

        texts = tf.convert_to_tensor(texts, tf.string)
        # A leading >>xx<< language code is one piece of its own.
        has_code = tf.strings.regex_full_match(texts, r"(?s)>>.*?<<.*")
        code = tf.strings.regex_replace(texts, r"(?s)^(>>.*?<<).*$", r"\1")
        rest = tf.where(has_code, tf.strings.regex_replace(texts, r"(?s)^>>.*?<<", ""), texts)
        pieces = self._sentencepiece.tokenize(rest)
        ids = tf.ragged.map_flat_values(self._ids.lookup, pieces)
        code_ids = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(self._ids.lookup(code), has_code),
            tf.cast(has_code, tf.int64))
        return tf.cast(tf.concat([code_ids, ids], axis=1), tf.int32)

    def detokenize(self, ids: Any) -> Any:
        """`[batch, length]` ids (dense or ragged) -> `[batch]` strings, as
        `MarianTokenizer.decode`: each row up to its first end id, special ids dropped."""
        import tensorflow as tf

        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(self.pad_id)
        ids = tf.cast(ids, tf.int32)
        ended = tf.cumsum(tf.cast(tf.equal(ids, self.end_id), tf.int32), axis=1) > 0
        keep = (tf.logical_not(ended) & tf.not_equal(ids, self.pad_id)
                & tf.not_equal(ids, self.unknown_id) & (ids >= 0)
                & (ids < self.vocabulary_size))
        pieces = tf.gather(self._pieces, tf.clip_by_value(ids, 0, self.vocabulary_size - 1))
        text = tf.strings.reduce_join(tf.ragged.boolean_mask(pieces, keep), axis=1)
        text = tf.strings.strip(tf.strings.regex_replace(text, _META_SYMBOL, " "))
        if self.clean_up_spaces:
            for spaced, joined in _CLEAN_UP:
                text = tf.strings.regex_replace(text, _re2_literal(spaced), joined)
        return text

    def compute_output_spec(self, texts: Any) -> Any:  # symbolic calls are not supported
        raise NotImplementedError("MarianGraphTokenizer runs on tf.string tensors only")


def _re2_literal(text: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in text)
