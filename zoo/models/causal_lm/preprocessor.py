"""Raw text into a causal language model's inputs and labels, with TensorFlow ops.

For `fit` (as keras-hub's `GPT2CausalLMPreprocessor`): each text is tokenized with the
model's byte-level BPE, preceded by the end-of-text token (GPT-2's separator between
documents, which starts a text too) and followed by it (so that the model learns to stop), cut
to `sequence_length + 1` ids and padded; the inputs are the ids but the last, the labels the
ids but the first (the next token at every position), and the sample weights mark the real
tokens, so that padding adds nothing to the loss.

For generation (keras-hub's `generate_preprocess`), `prompt_ids` puts the same start token
before each prompt, so that a prompt continues as the training texts began. With
`add_start_token=False` neither side adds it: texts are packed as they are (the end token
still follows each), and prompts go to the model as they are (Hugging Face's `generate`).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import keras

from zoo.layers.validation import positive_int
from zoo.models.task import Preprocessor
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError


@keras.saving.register_keras_serializable(package="zoo")
class CausalLMPreprocessor(Preprocessor):
    """Packs strings into `token_ids` / `padding_mask` inputs, next-token labels and weights.

    The tokenizer travels with the model as files of the `.keras` archive (`save_assets`),
    not in the config, as keras-hub's tokenizers do: a vocabulary of 50,257 pieces and 50,000
    merges would otherwise fill the config.

    Args:
        tokenizer: the model's `BytePairTokenizer` (None until `load_assets` reads it).
        sequence_length: the inputs' length for `fit` (longer texts are cut).
        add_start_token: put the end-of-text token before each text in `fit` and before each
            prompt of `generate` (keras-hub's convention; a model saved before this argument
            existed loads with True).
        **kwargs: base layer arguments.

    Example:
    >>> from zoo.text.byte_pair import END_OF_TEXT, byte_to_unicode
    >>> vocabulary = {c: i for i, c in enumerate(sorted(set(byte_to_unicode().values())))}
    >>> vocabulary.update({"hi": 256, END_OF_TEXT: 257})
    >>> preprocessor = CausalLMPreprocessor(BytePairTokenizer(vocabulary, ["h i"]), 4)
    >>> x, y, weights = preprocessor.pack(["hi!"])
    >>> x["token_ids"].numpy().tolist(), y.numpy().tolist(), weights.numpy().tolist()
    ([[257, 256, 0, 257]], [[256, 0, 257, 257]], [[1.0, 1.0, 1.0, 0.0]])
    >>> preprocessor.prompt_ids(["hi"])
    [[257, 256]]
    >>> plain = CausalLMPreprocessor(preprocessor.tokenizer, 4, add_start_token=False)
    >>> plain.pack(["hi!"])[0]["token_ids"].numpy().tolist(), plain.prompt_ids(["hi"])
    ([[256, 0, 257, 257]], [[256]])
    """

    def __init__(self, tokenizer: BytePairTokenizer | None = None, sequence_length: int = 1024,
                 add_start_token: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.sequence_length = positive_int(sequence_length, "sequence_length",
                                            error=UserError)
        if not isinstance(add_start_token, bool):
            raise UserError(f"add_start_token must be True or False; got {add_start_token!r}")
        self.add_start_token = add_start_token

    def require_tokenizer(self) -> BytePairTokenizer:
        if self.tokenizer is None:
            raise UserError("this language model has no tokenizer: give it token ids, or "
                            "load a model with one (zoo.load)")
        return self.tokenizer

    def pack(self, texts: Any) -> tuple[dict, Any, Any]:
        """`({"token_ids", "padding_mask"}, labels, sample_weight)` of a batch of texts (a
        1-D string tensor or a list), each `(batch, sequence_length)`, in TensorFlow ops (for
        `tf.data.Dataset.map`)."""
        import tensorflow as tf

        ids = self.require_tokenizer().layer(tf.convert_to_tensor(texts, tf.string))
        if not isinstance(ids, tf.RaggedTensor):  # eager: lists of ids
            ids = tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)
        return self.pack_ids(ids)

    def pack_ids(self, ids: Any) -> tuple[dict, Any, Any]:
        """`pack` of texts already tokenized: a `(batch, None)` ragged tensor of ids."""
        import tensorflow as tf

        tokenizer = self.require_tokenizer()
        ids = tf.cast(ids, tf.int32)
        end = tf.fill([ids.nrows(), 1], tf.constant(tokenizer.end_id, tf.int32))
        ids = tf.concat([end, ids, end] if self.add_start_token else [ids, end], axis=1)
        ids = ids[:, :self.sequence_length + 1]
        width = [None, self.sequence_length + 1]
        dense = ids.to_tensor(default_value=tokenizer.pad_id, shape=width)
        real = tf.ones_like(ids, tf.bool).to_tensor(default_value=False, shape=width)
        x = {"token_ids": dense[:, :-1], "padding_mask": real[:, :-1]}
        return x, dense[:, 1:], tf.cast(real[:, 1:], tf.float32)

    def prompt_ids(self, prompts: Sequence[str]) -> list[list[int]]:
        """The ids `generate` continues for each prompt: its tokens, after the start token
        (the end-of-text id) when `add_start_token`.

        Raises:
            UserError: no tokenizer.
        """
        tokenizer = self.require_tokenizer()
        start = [tokenizer.end_id] if self.add_start_token else []
        return [start + ids for ids in tokenizer.encode(prompts)]

    def call(self, texts: Any) -> tuple[dict, Any, Any]:
        return self.pack(texts)

    def text_dataset(self, texts: Any, batch_size: int | None, shuffle: bool = False) -> Any:
        """A `tf.data.Dataset` of packed batches from a list of strings or a dataset of
        strings (batched or not): what `CausalLM.fit` trains on. With `shuffle`, a list's
        texts come in a new order every pass (as `fit` shuffles arrays; seeded by
        `keras.utils.set_random_seed`); a dataset is taken in its own order.

        Raises:
            UserError: an empty list, or a dataset of something other than strings.
        """
        import tensorflow as tf

        batch_size = positive_int(32 if batch_size is None else batch_size, "batch_size",
                                  error=UserError)
        # The tokenizer's lookup tables are made here, eagerly: made while `map` traces, they
        # would belong to that one graph, and a second dataset could not use them.
        _ = self.require_tokenizer().layer
        if isinstance(texts, tf.data.Dataset):
            spec = texts.element_spec
            if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
                raise UserError(f"fit on text takes a dataset of strings; got elements "
                                f"{spec}")
            dataset = texts.batch(batch_size) if spec.shape.rank == 0 else texts
            packed = dataset.map(self.pack, num_parallel_calls=tf.data.AUTOTUNE)
        else:
            # A list is tokenized once, in Python (keras-hub's eager path), not every epoch.
            ids = self.tokenizer.encode(_as_string_list(texts))
            dataset = tf.data.Dataset.from_tensor_slices(
                tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1))
            if shuffle:
                dataset = dataset.shuffle(len(ids), reshuffle_each_iteration=True)
            packed = dataset.batch(batch_size).map(self.pack_ids)
        return packed.prefetch(2)

    def save_assets(self, dir_path: str) -> None:
        """Writes the tokenizer's `vocab.json` and `merges.txt` into the `.keras` assets."""
        if self.tokenizer is not None:
            self.tokenizer.save(dir_path)

    def load_assets(self, dir_path: str) -> None:
        """Reads the tokenizer back from the `.keras` assets."""
        if os.path.exists(os.path.join(dir_path, "vocab.json")):
            self.tokenizer = BytePairTokenizer.from_folder(dir_path)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(sequence_length=self.sequence_length,
                      add_start_token=self.add_start_token)
        return config


def is_text(x: Any) -> bool:
    """Whether `fit`'s `x` is raw text: a list of strings, or a dataset of strings."""
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, (str, bytes)) for t in x):
        return True
    if type(x).__name__.endswith("Dataset") and hasattr(x, "element_spec"):
        spec = x.element_spec
        return getattr(getattr(spec, "dtype", None), "name", None) == "string"
    return False


def _as_string_list(texts: Sequence[Any]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise UserError("fit on text takes a list of strings (or a dataset), not one string")
    strings = [t.decode("utf-8") if isinstance(t, bytes) else t for t in texts]
    if not strings or not all(isinstance(t, str) for t in strings):
        raise UserError("fit on text takes a non-empty list of strings")
    return strings
