"""Sentences to a translator's token ids: the preprocessor of the translator family.

One object holds the subword tokenizer (`zoo.text.tokenizer.SubwordTokenizer`, or Marian's
`zoo.text.marian.MarianTokenizer`) for every use of it: `translate` (source texts to padded
id batches, ids back to text), `fit` on sentence pairs (teacher-forcing batches) and the
exported SavedModel, whose graph tokenizes with `graph_tokenizer()`. The tokenizer travels
inside the `.keras` file as the preprocessor's asset `tokenizer.model`.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Sequence

import keras
import numpy as np

from zoo.models.task import Preprocessor
from zoo.models.translator.text_training import DEFAULT_BATCH_SIZE, sentence_pairs
from zoo.text.length_cap import character_cap, cut_text, cut_warning
from zoo.text.loading import load_tokenizer
from zoo.training.errors import UserError
from zoo.training.text_batches import TeacherForcingBatches, filter_by_length

TOKENIZER_ASSET = "tokenizer.model"


@keras.saving.register_keras_serializable(package="zoo")
class TranslatorPreprocessor(Preprocessor):
    """Source sentences to `(batch, S)` ids, and sentence pairs to teacher-forcing batches.

    Args:
        tokenizer: the subword tokenizer; None for a translator that takes ids only (it is
            not part of the config: it is saved as an asset).
        max_source_length: longest source, in tokens; longer ones are cut with a warning.
        max_target_length: longest target, in tokens (start token included).
        pad_id: the id that pads a batch of sources.
        **kwargs: base layer arguments.

    Call arguments:
        texts: a list of source sentences.

    Returns:
        `(batch, S)` int32 ids (as `encode_texts`).

    Example:
    >>> from zoo.text.tokenizer import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A dog runs.", "Ein Hund rennt."],
    ...                                    vocabulary_size=24)
    >>> ids = TranslatorPreprocessor(tokenizer, max_source_length=16)(["A dog runs."])
    >>> str(ids.dtype), ids.shape[1] % 8  # padded to a multiple of 8
    ('int32', 0)
    """

    def __init__(self, tokenizer: Any = None, max_source_length: int = 128,
                 max_target_length: int = 128, pad_id: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.max_source_length = int(max_source_length)
        self.max_target_length = int(max_target_length)
        self.pad_id = int(pad_id)
        self.built = True  # no state


    def require_tokenizer(self) -> Any:
        """The tokenizer; a one-line UserError when there is none (a model built from ids
        alone cannot take text)."""
        if self.tokenizer is None:
            raise UserError("this translator has no tokenizer; pass tokenizer=... when "
                            "creating it")
        return self.tokenizer

    def graph_tokenizer(self) -> Any:
        """The tokenizer as a Keras layer of TensorFlow (Text) ops, for exported graphs."""
        return self.require_tokenizer().graph_tokenizer()

    @property
    def source_character_cap(self) -> int:
        """The characters of a source text read (`zoo.text.length_cap.character_cap` of
        `max_source_length`); the rest could not change the translation of a text the model
        reads whole, and tokenizing it would cost memory that grows with the text."""
        return character_cap(self.max_source_length)

    def cut_sources(self, texts: Sequence[str], cap: int | None = None) -> list[str]:
        """`texts` cut to `cap` (default `source_character_cap`) characters each, with one
        warning that names the cut texts by their index."""
        cap = self.source_character_cap if cap is None else cap
        cut = [cut_text(text, cap) for text in texts]
        indices = [index for index, (_, was_cut) in enumerate(cut) if was_cut]
        if indices:
            where = (f"text {indices[0]}" if len(indices) == 1 else
                     f"texts {', '.join(map(str, indices[:10]))}"
                     f"{' ...' if len(indices) > 10 else ''} (of {len(cut)})")
            warnings.warn(cut_warning(where, cap, self.max_source_length,
                                      many=len(indices) > 1), stacklevel=4)
        return [text for text, _ in cut]

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Each source text's ids (end token included), at most `max_source_length`."""
        return self.require_tokenizer().encode(list(texts), max_length=self.max_source_length)

    def pad(self, encoded: Sequence[Sequence[int]]) -> np.ndarray:
        """Token ids to `(batch, S)` int32, S the longest rounded up to a multiple of 8 (fewer
        shapes to compile), padded with `pad_id`."""
        longest = max(len(ids) for ids in encoded)
        width = min(self.max_source_length, -(-longest // 8) * 8)
        batch = np.full((len(encoded), width), self.pad_id, "int32")
        for row, ids in enumerate(encoded):
            batch[row, :len(ids)] = ids
        return batch

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Source texts to `(batch, S)` ids (`pad`), each text cut to `source_character_cap`
        characters and its ids to `max_source_length` (with a warning)."""
        self.require_tokenizer()
        return self.pad(self.tokenize(self.cut_sources(list(texts))))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[override]
        # Python strings are no tensors to Keras' `Layer.__call__`: `encode_texts` takes them.
        return self.encode_texts(texts)

    def text_batches(self, sources: Any, targets: Any = None,
                     batch_size: int = DEFAULT_BATCH_SIZE, shuffle: bool = True,
                     seed: int = 0, one_shape_per_bucket: bool = False) -> TeacherForcingBatches:
        """Teacher-forcing batches of sentence pairs (what `fit` on text trains on).

        Args:
            sources, targets: two lists of sentences, two text files, or a tf.data.Dataset
                of string pairs as `sources` (`zoo.models.translator.text_training`).
            batch_size: pairs per batch.
            shuffle: a new order every epoch.
            seed: seed of that order.
            one_shape_per_bucket: every batch of a length bucket padded to one shape (rows
                of pad fill it; `TeacherForcingBatches`): what `fit` asks for on JAX.

        Returns:
            Batches for `fit`; pairs longer than `max_source_length` / `max_target_length`
            are left out, with a warning that counts them.
        """
        sources, targets = sentence_pairs(sources, targets)
        tokenizer = self.require_tokenizer()
        source_ids = tokenizer.encode(sources, add_end=True)
        target_ids = tokenizer.encode(targets, add_end=False, target=True)
        kept = filter_by_length(zip(source_ids, target_ids), self.max_source_length,
                                self.max_target_length - 1)
        if not kept:
            raise UserError(f"none of the {len(sources)} sentence pairs fits the model's "
                            f"lengths ({self.max_source_length} source, "
                            f"{self.max_target_length} target tokens)")
        if len(kept) < len(sources):
            warnings.warn(f"{len(sources) - len(kept)} of {len(sources)} sentence pairs are "
                          f"longer than the model's lengths and are left out", stacklevel=4)
        return TeacherForcingBatches(
            [s for s, _ in kept], [t for _, t in kept], batch_size, shuffle=shuffle,
            seed=seed, start_id=tokenizer.start_id, end_id=tokenizer.end_id,
            pad_id=tokenizer.pad_id, one_shape_per_bucket=one_shape_per_bucket)

    def save_assets(self, dir_path: str) -> None:
        """Writes the tokenizer (if any) into `dir_path` (the `.keras` file's assets)."""
        if self.tokenizer is not None:
            self.tokenizer.save(os.path.join(dir_path, TOKENIZER_ASSET), overwrite=True)

    def load_assets(self, dir_path: str) -> None:
        """Reads the tokenizer back from `dir_path`, where `save_assets` wrote it."""
        path = os.path.join(dir_path, TOKENIZER_ASSET)
        if os.path.exists(path):
            self.tokenizer = load_tokenizer(path)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"max_source_length": self.max_source_length,
                       "max_target_length": self.max_target_length, "pad_id": self.pad_id})
        return config
