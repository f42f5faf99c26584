"""Training a translator on text: `fit` takes sentence pairs, as keras-hub's tasks take
strings through their preprocessor.

`translator.fit(sources, targets)` accepts two lists of sentences, two text files (one
sentence per line), or a `tf.data.Dataset` of `(source, target)` string pairs; the pairs are
tokenized with the translator's own tokenizer into teacher-forcing batches
(`zoo.training.text_batches.TeacherForcingBatches`). A translator that was never compiled
(as `zoo.load` returns it) is compiled first with the training recipe's loss and metric and a
fine-tuning optimizer (`TextTraining.default_compile_arguments`).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import keras

from zoo.training.errors import UserError
from zoo.training.losses import MaskedSparseCrossEntropy, masked_accuracy
from zoo.training.step_retracing import keras_steps_unflagged
from zoo.training.text_batches import TeacherForcingBatches, filter_by_length
from zoo.training.text_data import read_lines

DEFAULT_BATCH_SIZE = 32


def _is_dataset(value: Any) -> bool:
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec")


def _is_string_pairs(dataset: Any) -> bool:
    """Whether a tf.data.Dataset yields `(source, target)` scalar strings."""
    spec = dataset.element_spec
    return (isinstance(spec, tuple) and len(spec) == 2
            and all(getattr(s, "dtype", None) is not None and s.dtype.name == "string"
                    and s.shape.rank == 0 for s in spec))


def _is_text(value: Any) -> bool:
    """Sentences: a list or tuple of str, a text file's path, or a tf.data of string pairs
    (a tf.data of token batches is Keras's to take)."""
    if _is_dataset(value):
        return _is_string_pairs(value)
    if isinstance(value, (str, os.PathLike)):
        return True
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(s, str) for s in value))


def _dataset_pairs(dataset: Any) -> tuple[list[str], list[str]]:
    """The `(source, target)` string pairs of a tf.data.Dataset, decoded from UTF-8."""
    if not _is_string_pairs(dataset):
        raise UserError(f"a dataset of sentences must yield (source, target) string pairs; "
                        f"its elements are {dataset.element_spec}")
    pairs = [(s.decode("utf-8"), t.decode("utf-8")) for s, t in dataset.as_numpy_iterator()]
    return [s for s, _ in pairs], [t for _, t in pairs]


def _for_fit(batches: TeacherForcingBatches) -> Any:
    """The batches as `fit` takes them: on TensorFlow a tf.data pipeline whose signature
    allows every batch's own length (Keras would fix it from the first batch)."""
    return batches.to_tf_dataset() if keras.backend.backend() == "tensorflow" else batches


def sentence_pairs(sources: Any, targets: Any = None) -> tuple[list[str], list[str]]:
    """Aligned source and target sentences from two lists, two text files (one sentence a
    line) or a tf.data.Dataset of string pairs (`targets` None).

    Raises:
        zoo.UserError: targets missing, or not as many as the sources.
    """
    if _is_dataset(sources):
        if targets is not None:
            raise UserError("a dataset of (source, target) pairs takes no separate targets")
        return _dataset_pairs(sources)
    if targets is None:
        raise UserError("fitting a translator on text needs the target sentences too: "
                        "fit(sources, targets)")
    if isinstance(sources, (str, os.PathLike)):
        sources = read_lines(sources)
    if isinstance(targets, (str, os.PathLike)):
        targets = read_lines(targets)
    if not _is_text(list(targets)):
        raise UserError("targets must be sentences (str) like the sources")
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} source sentences but {len(targets)} targets; they "
                        f"must align")
    return list(sources), list(targets)


class TextTraining:
    """`fit` on sentence pairs for `Translator` (a mixin; see the module docstring)."""

    def text_batches(self, sources: Any, targets: Any = None,
                     batch_size: int = DEFAULT_BATCH_SIZE, shuffle: bool = True,
                     seed: int = 0) -> TeacherForcingBatches:
        """Teacher-forcing batches of sentence pairs, tokenized by this translator.

        Args:
            sources, targets: see `sentence_pairs`.
            batch_size: pairs per batch.
            shuffle: a new order every epoch.
            seed: seed of that order.

        Returns:
            Batches for `fit`; pairs longer than the model's `max_source_length` /
            `max_target_length` are left out, with a warning that counts them.
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
                          f"longer than the model's lengths and are left out", stacklevel=3)
        return TeacherForcingBatches(
            [s for s, _ in kept], [t for _, t in kept], batch_size, shuffle=shuffle,
            seed=seed, start_id=tokenizer.start_id, end_id=tokenizer.end_id,
            pad_id=tokenizer.pad_id)

    def default_compile_arguments(self, learning_rate: float = 1e-4) -> dict:
        """What `fit` compiles an uncompiled translator with: the recipe's label-smoothed
        masked loss (0.1) and masked token accuracy, and Adam with the paper's betas (0.9,
        0.98), epsilon 1e-9 and clipping at global norm 1, at a fine-tuning rate."""
        optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98,
                                          epsilon=1e-9, global_clipnorm=1.0)
        return {"optimizer": optimizer, "loss": MaskedSparseCrossEntropy(label_smoothing=0.1),
                "metrics": [masked_accuracy]}

    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None,
            epochs: int = 1, validation_data: Any = None, shuffle: bool = True,
            **kwargs: Any) -> keras.callbacks.History:
        """`keras.Model.fit`, which also takes text.

        Args:
            x, y: sentence pairs (`sentence_pairs`: two lists of str, two text files, or a
                tf.data.Dataset of string pairs as `x`), or what `keras.Model.fit` takes
                (token-id batches).
            batch_size: pairs per batch for text (default 32).
            validation_data: a `(sources, targets)` pair of the same kinds, or Keras's.
            **kwargs: the other `keras.Model.fit` arguments.

        Returns:
            The `History`.

        Example:
            translator = zoo.load("translator-multi30k-en-de")
            translator.fit(["A dog runs."], ["Ein Hund rennt."], epochs=2)
        """
        if _is_text(x):
            x = _for_fit(self.text_batches(x, y, batch_size or DEFAULT_BATCH_SIZE,
                                           shuffle=shuffle))
            y = batch_size = None
            shuffle = False  # the batches shuffle themselves, anew every epoch
        if (isinstance(validation_data, (list, tuple)) and len(validation_data) == 2
                and _is_text(validation_data[0])):
            validation_data = _for_fit(self.text_batches(
                *validation_data, batch_size=DEFAULT_BATCH_SIZE, shuffle=False))
        if not self.compiled:
            self.compile(**self.default_compile_arguments())
        with keras_steps_unflagged():  # a second model's step is no retracing
            return super().fit(x, y, batch_size=batch_size,  # type: ignore[misc]
                               epochs=epochs, validation_data=validation_data,
                               shuffle=shuffle, **kwargs)


