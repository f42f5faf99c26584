"""Sentences to a BERT encoder's inputs: the preprocessor of the sentence encoder family.

One object holds the WordPiece tokenizer (`zoo.text.wordpiece.SentenceTokenizer`: BERT's
uncased scheme, `[CLS] ... [SEP]`) for `SentenceEncoder.embed` and for the exported graph,
which tokenizes with its `tokenize_in_graph` (TensorFlow and TF Text ops only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import keras

from zoo.layers.validation import positive_int
from zoo.models.task import Preprocessor
from zoo.text.wordpiece import SentenceTokenizer, read_vocabulary
from zoo.training.errors import UserError


@keras.saving.register_keras_serializable(package="zoo")
class SentenceEncoderPreprocessor(Preprocessor):
    """Texts to `{"token_ids", "padding_mask"}` batches, padded to the longest text.

    Args:
        vocabulary: the WordPiece tokens (or a `vocab.txt` path); None for an encoder that
            takes ids only.
        max_length: the most tokens per text, `[CLS]` and `[SEP]` included.
        lowercase: whether to lowercase and strip accents (uncased models).
        **kwargs: base layer arguments.

    Call arguments:
        texts: a list of strings.

    Returns:
        The tokenizer's batch: int32 `token_ids` and `padding_mask` `(batch, length)`.

    Example:
    >>> preprocessor = SentenceEncoderPreprocessor(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "dog"], max_length=8)
    >>> [int(i) for i in preprocessor(["A dog"])["token_ids"][0]]
    [2, 4, 5, 3]
    """

    def __init__(self, vocabulary: str | Path | Sequence[str] | None = None,
                 max_length: int = 512, lowercase: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocabulary = None if vocabulary is None else read_vocabulary(vocabulary)
        self.max_length = positive_int(max_length, "max_length")
        self.lowercase = bool(lowercase)
        self._tokenizer: SentenceTokenizer | None = None
        self.built = True  # no state

    @property
    def tokenizer(self) -> SentenceTokenizer:
        """The WordPiece tokenizer of `vocabulary` (built on first use)."""
        if self.vocabulary is None:
            raise UserError(
                "this SentenceEncoder has no vocabulary; pass vocabulary= to tokenize text")
        if self._tokenizer is None:
            self._tokenizer = SentenceTokenizer(
                self.vocabulary, max_length=self.max_length, lowercase=self.lowercase)
        return self._tokenizer

    def __call__(self, texts: Sequence[str]) -> dict:  # type: ignore[override]
        # Python strings are no tensors to Keras' `Layer.__call__`: the tokenizer takes them.
        return self.tokenizer(texts)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"vocabulary": None if self.vocabulary is None else list(self.vocabulary),
                       "max_length": self.max_length, "lowercase": self.lowercase})
        return config
