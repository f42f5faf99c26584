"""The translator of "Attention Is All You Need": the task of the translator family, as
keras-hub's `models/<family>/`:

    sentences --TranslatorPreprocessor--> ids --TranslatorBackbone--> features --E^T--> logits

The backbone (`zoo.models.translator.backbone`) is the encoder-decoder network over one
shared embedding; the task reads its logits through that embedding (section 3.4, with
Marian's optional bias) and carries the searches (`zoo.models.translator.searching`), the text
methods (`zoo.models.translator.text_translation`) and `fit` on sentence pairs. The tokenizer
is the preprocessor's (`zoo.models.translator.preprocessor`); it travels inside the `.keras`
file.

The translator keeps the names its backbone's layers had before the split as read-only views
(`model.encoder_blocks` is `model.backbone.encoder_blocks`; `model.embedding` is its
`token_embedding`); a file saved before the split loads with `zoo.load`
(`zoo.models.pre_split_files`, through `pre_split_layers`).
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import numpy as np
from keras import ops

from zoo.training.text_batches import END_ID, START_ID
from zoo.models.translator import architectures  # noqa: F401  (registers the architectures)
from zoo.generation.settings import NEVER
from zoo.training.errors import UserError
from zoo.models.architectures import architecture_config, load_preset
from zoo.models.part_views import add_part_views
from zoo.models.task import Task
from zoo.models.translator.backbone import TranslatorBackbone
from zoo.models.translator.preprocessor import TranslatorPreprocessor
from zoo.models.translator.searching import TranslatorSearch
from zoo.models.translator.surgery import with_training_options
from zoo.models.translator.text_training import (
    one_shape_per_bucket_for, text_fit_arguments, translator_compile_arguments)
from zoo.models.translator.text_translation import TextTranslation
from zoo.text.tokenizer import SubwordTokenizer

# The translator's attribute names of its backbone's layers before the split (the paths of
# the weights in older files) -> the backbone's names; read-only views on the translator.
_BACKBONE_LAYERS = {"embedding": "token_embedding", "position_encoding": "position_encoding",
                    "embedding_dropout": "embedding_dropout",
                    "encoder_blocks": "encoder_blocks", "decoder_blocks": "decoder_blocks",
                    "encoder_norm": "encoder_norm", "decoder_norm": "decoder_norm"}
# The backbone's settings that the translator shows as its own (read-only).
_BACKBONE_SETTINGS = ("vocabulary_size", "hidden_dim", "num_encoder_layers",
                      "num_decoder_layers", "num_heads", "intermediate_dim", "dropout",
                      "attention_dropout", "activation", "normalize_first", "pad_id",
                      "scale_embedding", "position_layout")


@keras.saving.register_keras_serializable(package="zoo")
class Translator(TranslatorSearch, TextTranslation, Task):
    """Encoder-decoder Transformer translator with cached greedy and beam search: a
    `TranslatorBackbone` under the tied output projection, with its `TranslatorPreprocessor`.

    Args:
        vocabulary_size: size of the joint source/target subword vocabulary.
        hidden_dim: d_model.
        num_encoder_layers: encoder blocks.
        num_decoder_layers: decoder blocks.
        num_heads: attention heads.
        intermediate_dim: feed-forward width d_ff.
        dropout: residual and embedding dropout (P_drop).
        attention_dropout: dropout on attention weights.
        activation: feed-forward activation.
        normalize_first: pre-norm blocks (with a final LayerNorm) instead of post-norm.
        max_source_length: longest source, in tokens; longer inputs are truncated.
        max_target_length: longest output, in tokens.
        tokenizer: the `SubwordTokenizer` (needed by `translate`), held by the preprocessor
            and stored with the model.
        pad_id: the padding id; source and target positions holding it are masked out. 0
            (the tokenizer's) by default; Marian / OPUS-MT models pad with the last id.
        start_id: the id that starts every target (the decoder's first input); the
            tokenizer's (or 2 without one) when None. It may equal `pad_id` (as in Marian),
            and is then never masked as padding in the first target position.
        end_id: the id that ends a target; the tokenizer's (or 3 without one) when None.
        scale_embedding: multiply embeddings by sqrt(hidden_dim) (section 3.4).
        position_layout: "interleaved" sinusoids (the paper) or "concatenated" (all sines,
            then all cosines, as in Marian); see `SinusoidalPositionEncoding`.
        output_bias: add a learned bias to the logits (Marian's `final_logits_bias`).
        suppressed_token_ids: ids that greedy and beam search never choose (Marian forbids
            its padding id); teacher-forced logits are not changed.
        force_end_at_max_length: searches that reach `max_length` end with `end_id` as
            their last token (Hugging Face's `forced_eos_token_id`).
        **kwargs: `keras.Model` arguments (`name`, `dtype`).

    Call arguments:
        inputs: `{"source_ids": (batch, S), "target_ids": (batch, T)}` int32, padded with 0;
            `target_ids` starts with the start token (teacher forcing).
        training: whether dropout is active.

    Returns:
        `(batch, T, vocabulary_size)` float32 logits for the next target token.

    Example (untrained, so the translation is any text; `zoo train translator` trains one):
    >>> from zoo.text.tokenizer import SubwordTokenizer
    >>> tokenizer = SubwordTokenizer.train(["A dog runs.", "Ein Hund rennt."],
    ...                                    vocabulary_size=24)
    >>> model = Translator.from_architecture("transformer-tiny", tokenizer=tokenizer)
    >>> [translation] = model.translate(["A dog runs."], beam_size=4, max_length=8)
    >>> type(translation)
    <class 'str'>
    """

    def __init__(
        self,
        vocabulary_size: int,
        hidden_dim: int = 512,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        num_heads: int = 8,
        intermediate_dim: int = 2048,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        normalize_first: bool = False,
        max_source_length: int = 128,
        max_target_length: int = 128,
        tokenizer: SubwordTokenizer | None = None,
        pad_id: int = 0,
        start_id: int | None = None,
        end_id: int | None = None,
        scale_embedding: bool = True,
        position_layout: str = "interleaved",
        output_bias: bool = False,
        suppressed_token_ids: Sequence[int] = (),
        force_end_at_max_length: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_source_length = int(max_source_length)
        self.max_target_length = int(max_target_length)
        self.start_id = None if start_id is None else int(start_id)
        self.end_id = None if end_id is None else int(end_id)
        self.output_bias = bool(output_bias)
        self.suppressed_token_ids = sorted({int(i) for i in suppressed_token_ids})
        self.force_end_at_max_length = bool(force_end_at_max_length)
        self.preprocessor = TranslatorPreprocessor(
            tokenizer, max_source_length=max_source_length, max_target_length=max_target_length,
            pad_id=pad_id, name="preprocessor")
        with keras.name_scope(self.name, caller=self):  # its weights' paths start with ours
            self.backbone = TranslatorBackbone(
                vocabulary_size, hidden_dim=hidden_dim, num_encoder_layers=num_encoder_layers,
                num_decoder_layers=num_decoder_layers, num_heads=num_heads,
                intermediate_dim=intermediate_dim, dropout=dropout,
                attention_dropout=attention_dropout, activation=activation,
                normalize_first=normalize_first, pad_id=pad_id,
                scale_embedding=scale_embedding, position_layout=position_layout,
                dtype=self.dtype_policy, name="backbone")
        self._check_vocabulary()
        self.logits_bias = None
        if self.output_bias:
            self.logits_bias = self.add_weight(
                name="logits_bias", shape=(self.vocabulary_size,), initializer="zeros",
                dtype="float32")
        self._search_functions: dict = {}

    @property
    def tokenizer(self) -> SubwordTokenizer | None:
        """The preprocessor's tokenizer (settable: a converter gives a model its own)."""
        return self.preprocessor.tokenizer

    @tokenizer.setter
    def tokenizer(self, tokenizer: SubwordTokenizer | None) -> None:
        self.preprocessor.tokenizer = tokenizer

    def _check_vocabulary(self) -> None:
        """Raises a UserError for special or suppressed ids outside the vocabulary, or a
        tokenizer of another vocabulary size."""
        for what in ("pad_id", "start_id", "end_id"):
            value = getattr(self, what)
            if value is not None and not 0 <= value < self.vocabulary_size:
                raise UserError(f"{what} {value} is outside the vocabulary "
                                f"[0, {self.vocabulary_size})")
        bad = [i for i in self.suppressed_token_ids if not 0 <= i < self.vocabulary_size]
        if bad:
            raise UserError(f"suppressed_token_ids {bad} are outside the vocabulary "
                            f"[0, {self.vocabulary_size})")
        tokenizer = self.tokenizer
        if tokenizer is not None and tokenizer.vocabulary_size != self.vocabulary_size:
            raise UserError(
                f"the tokenizer has {tokenizer.vocabulary_size} pieces but vocabulary_size is "
                f"{self.vocabulary_size}"
            )

    def special_ids(self) -> tuple[int, int]:
        """`(start_id, end_id)`: the configured ones, else the tokenizer's, else the zoo's
        defaults (`zoo.training.text_batches.START_ID`, `END_ID`)."""
        tok = self.tokenizer
        start, end = (tok.start_id, tok.end_id) if tok is not None else (START_ID, END_ID)
        return (start if self.start_id is None else self.start_id,
                end if self.end_id is None else self.end_id)

    def _logits(self, hidden: Any) -> Any:
        logits = self.backbone.token_embedding(hidden, reverse=True)  # E^T, tied
        if self.logits_bias is not None:
            logits = logits + ops.cast(self.logits_bias, "float32")
        return logits

    # ------------------------------------------------------------------ presets
    @classmethod
    def from_architecture(cls, name: str, tokenizer: SubwordTokenizer,
                          **overrides: Any) -> "Translator":
        """A new, untrained translator of a named shape for `tokenizer`'s vocabulary.

        Args:
            name: an architecture of `zoo.models.translator.architectures`, e.g. "transformer-small".
            tokenizer: the subword tokenizer (its size is the vocabulary size).
            **overrides: constructor arguments that replace the architecture's.

        Raises:
            ValueError: an unknown name (the message lists the known ones) or override.
        """
        config = architecture_config(cls, name, overrides)
        return cls(vocabulary_size=tokenizer.vocabulary_size, tokenizer=tokenizer, **config)

    @classmethod
    def from_preset(cls, name: str) -> "Translator":
        """A trained translator: a shipped name ("translator-multi30k-en-de"), a model file or
        folder, a URL or a hub handle ("hf://Helsinki-NLP/opus-mt-en-de"). As in keras-hub,
        a preset means trained weights; untrained shapes come from `from_architecture`."""
        return load_preset(cls, name)

    # ------------------------------------------------------------------ forward passes
    def encode(self, source_ids: Any, training: bool | None = None) -> tuple[Any, Any]:
        """Encodes `(batch, S)` source ids; returns `(memory (batch, S, d), mask (batch, S))`."""
        return self.backbone.encode(source_ids, training=training)

    def decode(self, target_ids: Any, memory: Any, source_mask: Any,
               training: bool | None = None, return_attention_scores: bool = False) -> Any:
        """Teacher-forced decoder pass: `(batch, T, vocab)` float32 logits.

        With `return_attention_scores`, also returns the cross-attention weights of every
        decoder block, a list of `(batch, heads, T, S)` arrays.
        """
        target_ids = ops.convert_to_tensor(target_ids, "int32")
        out = self.backbone.decode(target_ids, memory, source_mask,
                                   target_mask=self._target_mask(target_ids),
                                   training=training,
                                   return_attention_scores=return_attention_scores)
        if return_attention_scores:
            return self._logits(out[0]), out[1]
        return self._logits(out)

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        if not isinstance(inputs, dict) or not {"source_ids", "target_ids"} <= set(inputs):
            raise UserError(
                "Translator expects a dict with 'source_ids' and 'target_ids'; got "
                f"{type(inputs).__name__} {sorted(inputs) if isinstance(inputs, dict) else ''}")
        target_ids = ops.convert_to_tensor(inputs["target_ids"], "int32")
        # Through the backbone's `__call__`, which builds it as Keras builds a layer.
        features = self.backbone({"source_ids": inputs["source_ids"], "target_ids": target_ids,
                                  "target_mask": self._target_mask(target_ids)},
                                 training=training)
        return self._logits(features)

    def _target_mask(self, target_ids: Any) -> Any:
        """The target positions that are not padding, `(batch, T)` bool."""
        target_mask = ops.not_equal(target_ids, self.pad_id)
        if self.special_ids()[0] == self.pad_id:
            # The start token is the padding id (Marian): the first position is never padding.
            first = ops.arange(ops.shape(target_ids)[1]) == 0
            target_mask = ops.logical_or(target_mask, ops.expand_dims(first, 0))
        return target_mask

    # ------------------------------------------------------------------ incremental decoding
    def initial_cache(self, memory: Any, max_length: int) -> tuple[tuple, tuple]:
        """The backbone's caches for `decode_step` (`TranslatorBackbone.initial_cache`)."""
        return self.backbone.initial_cache(memory, max_length)

    def decode_step(self, token_ids: Any, index: Any, self_cache: tuple, cross_cache: tuple,
                    source_mask: Any) -> tuple[Any, tuple]:
        """Logits for the token after position `index`, given the token at `index`.

        Args:
            token_ids: `(batch, 1)` int32, the target token at position `index`.
            index: its position (int or scalar tensor).
            self_cache: from `initial_cache` or the previous step.
            cross_cache: from `initial_cache`.
            source_mask: `(batch, S)` source padding mask.

        Returns:
            `(logits (batch, vocab) float32, updated self_cache)`; the
            `suppressed_token_ids` are never chosen.
        """
        x, updated = self.backbone.decode_step(token_ids, index, self_cache, cross_cache,
                                               source_mask)
        logits = self._logits(x)[:, 0, :]
        if self.suppressed_token_ids:
            never = np.zeros((self.vocabulary_size,), "float32")
            never[self.suppressed_token_ids] = NEVER
            logits = logits + ops.convert_to_tensor(never)
        return logits, updated

    # LoRA (zoo.models.lora): the self- and cross-attention of its encoder and decoder blocks;
    # nothing else trains. A merged copy keeps the tokenizer.
    def _lora_blocks(self) -> list[keras.layers.Layer]:
        return [*self.backbone.encoder_blocks, *self.backbone.decoder_blocks]

    def _lora_prepare(self) -> None:
        self.ensure_built()
        self._search_functions = {}  # a compiled search read the kernels without factors

    def _lora_blank_copy(self) -> keras.Model:
        model = type(self).from_config(self.get_config())
        model.tokenizer = self.tokenizer
        model.ensure_built()
        return model

    def ensure_built(self) -> None:
        """Creates every variable with one tiny eager call, if that has not happened yet
        (a compiled search or an export must not create state)."""
        if not self.built:
            self({"source_ids": np.ones((1, 1), "int32"),
                  "target_ids": np.full((1, 1), self.special_ids()[0], "int32")})

    # ------------------------------------------------------------------ training, surgery
    def default_compile_arguments(self, learning_rate: float = 1e-4) -> dict:
        """What `fit` compiles an uncompiled translator with
        (`zoo.models.translator.text_training.translator_compile_arguments`)."""
        return translator_compile_arguments(learning_rate)

    def text_batches(self, sources: Any, targets: Any = None, batch_size: int = 32,
                     shuffle: bool = True, seed: int = 0) -> Any:
        """Teacher-forcing batches of sentence pairs: the preprocessor's `text_batches`."""
        return self.preprocessor.text_batches(sources, targets, batch_size, shuffle, seed)

    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None,
            epochs: int = 1, validation_data: Any = None, shuffle: bool = True,
            **kwargs: Any) -> keras.callbacks.History:
        """`keras.Model.fit`, which also takes text.

        Args:
            x, y: sentence pairs (two lists of str, two text files, or a tf.data.Dataset of
                string pairs as `x`), tokenized by the preprocessor into teacher-forcing
                batches, or what `keras.Model.fit` takes (token-id batches).
            batch_size: pairs per batch for text (default 32).
            validation_data: a `(sources, targets)` pair of the same kinds, or Keras's.
            **kwargs: the other `keras.Model.fit` arguments.

        Returns:
            The `History`.

        Example:
            translator = zoo.load("translator-multi30k-en-de")
            translator.fit(["A dog runs."], ["Ein Hund rennt."], epochs=2)
        """
        x, y, batch_size, validation_data, shuffle = text_fit_arguments(
            self.preprocessor, x, y, batch_size, validation_data, shuffle,
            one_shape_per_bucket=one_shape_per_bucket_for(self))
        return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                           validation_data=validation_data, shuffle=shuffle, **kwargs)

    def with_training_options(self, *, dropout: float | None = None,
                              attention_dropout: float | None = None,
                              dtype: str | keras.DTypePolicy | None = None) -> "Translator":
        """A new translator with this one's weights and tokenizer, and other dropout rates or
        compute dtype (`zoo.models.translator.surgery.with_training_options`)."""
        return with_training_options(self, dropout=dropout,
                                     attention_dropout=attention_dropout, dtype=dtype)

    def pre_split_layers(self) -> list[tuple[str, Any]]:
        """The layers (and the logits bias) under their attribute names before the split, in
        the order the old constructor set them (`zoo.models.pre_split_files`)."""
        self.ensure_built()
        names = ["embedding", "position_encoding", "embedding_dropout", "encoder_blocks",
                 "decoder_blocks", "encoder_norm", "decoder_norm", "logits_bias"]
        return [(name, getattr(self, name)) for name in names
                if getattr(self, name) is not None]

    def load_assets(self, dir_path: str) -> None:
        """Reads the tokenizer of a file saved before the split, which holds it among the
        translator's own assets (a newer file holds it among its preprocessor's)."""
        self.preprocessor.load_assets(dir_path)

    # ------------------------------------------------------------------ export, config
    def export(self, filepath: str, format: str = "tf_saved_model", **kwargs: Any) -> None:
        """Refuses Keras' generic export, whose signature would take the teacher-forced
        call's float inputs of one fixed length: `zoo.export(translator, DIR)` writes the
        servable SavedModel (sentences in, translations out, the search in the graph)."""
        raise UserError("a Translator exports with zoo.export(translator, DIR) (sentences "
                        "in, translations out), not with Keras' model.export")

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "hidden_dim": self.hidden_dim,
            "num_encoder_layers": self.num_encoder_layers,
            "num_decoder_layers": self.num_decoder_layers,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": self.activation,
            "normalize_first": self.normalize_first,
            "max_source_length": self.max_source_length,
            "max_target_length": self.max_target_length,
            "pad_id": self.pad_id,
            "start_id": self.start_id,
            "end_id": self.end_id,
            "scale_embedding": self.scale_embedding,
            "position_layout": self.position_layout,
            "output_bias": self.output_bias,
            "suppressed_token_ids": list(self.suppressed_token_ids),
            "force_end_at_max_length": self.force_end_at_max_length,
        })
        return config



add_part_views(Translator, "backbone", _BACKBONE_LAYERS)
add_part_views(Translator, "backbone", _BACKBONE_SETTINGS)
