"""Training a translator on text: `fit` takes sentence pairs, as keras-hub's tasks take
strings through their preprocessor.

`translator.fit(sources, targets)` accepts two lists of sentences, two text files (one
sentence per line), or a `tf.data.Dataset` of `(source, target)` string pairs; the pairs are
tokenized with the translator's own tokenizer into teacher-forcing batches
(`zoo.training.text_batches.TeacherForcingBatches`). A translator that was never compiled
(as `zoo.load` returns it) is compiled first with the training recipe's loss and metric and a
fine-tuning optimizer (`translator_compile_arguments`).
"""

from __future__ import annotations

import os
from typing import Any

import keras

from zoo.training.errors import UserError
from zoo.training.losses import MaskedSparseCrossEntropy, masked_accuracy
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


def _for_fit(batches: Any) -> Any:
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


def translator_compile_arguments(learning_rate: float = 1e-4) -> dict:
    """What `fit` compiles an uncompiled translator with: the recipe's label-smoothed masked
    loss (0.1) and masked token accuracy, and Adam with the paper's betas (0.9, 0.98),
    epsilon 1e-9 and clipping at global norm 1, at a fine-tuning rate."""
    optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98,
                                      epsilon=1e-9, global_clipnorm=1.0)
    return {"optimizer": optimizer, "loss": MaskedSparseCrossEntropy(label_smoothing=0.1),
            "metrics": [masked_accuracy]}


def one_shape_per_bucket_for(model: keras.Model) -> bool:
    """Whether `fit` on text gives every batch of a length bucket one shape
    (`TeacherForcingBatches(one_shape_per_bucket=True)`): on JAX, which compiles the step once
    per input shape, when the loss masks the pad labels of the rows that fill a batch (the
    default loss, or a `MaskedSparseCrossEntropy` the model was compiled with)."""
    if keras.backend.backend() != "jax":
        return False
    return not model.compiled or isinstance(getattr(model, "loss", None),
                                            MaskedSparseCrossEntropy)


def text_fit_arguments(preprocessor: Any, x: Any, y: Any, batch_size: int | None,
                       validation_data: Any, shuffle: bool,
                       one_shape_per_bucket: bool = False) -> tuple:
    """`fit`'s `(x, y, batch_size, validation_data, shuffle)` with sentence pairs (`x`, `y`
    or `validation_data`) turned into teacher-forcing batches by `preprocessor`
    (`TranslatorPreprocessor.text_batches`, with `one_shape_per_bucket`); token-id batches
    are passed on unchanged."""
    if _is_text(x):
        x = _for_fit(preprocessor.text_batches(x, y, batch_size or DEFAULT_BATCH_SIZE,
                                               shuffle=shuffle,
                                               one_shape_per_bucket=one_shape_per_bucket))
        y = batch_size = None
        shuffle = False  # the batches shuffle themselves, anew every epoch
    if (isinstance(validation_data, (list, tuple)) and len(validation_data) == 2
            and _is_text(validation_data[0])):
        validation_data = _for_fit(preprocessor.text_batches(
            *validation_data, batch_size=DEFAULT_BATCH_SIZE, shuffle=False,
            one_shape_per_bucket=one_shape_per_bucket))
    return x, y, batch_size, validation_data, shuffle
