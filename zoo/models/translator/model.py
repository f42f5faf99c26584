"""The encoder-decoder Transformer of "Attention Is All You Need", as a `keras.Model`.

    source ids -> TokenEmbedding * sqrt(d) + PE -> N x EncoderBlock            -> memory
    target ids -> TokenEmbedding * sqrt(d) + PE -> N x DecoderBlock(memory)    -> E^T -> logits

One embedding matrix is shared by source, target and the output projection (section 3.4):
the tokenizer is a joint subword vocabulary. The tokenizer travels inside the `.keras` file.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import numpy as np
from keras import ops

from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from zoo.training.text_batches import END_ID, START_ID
from zoo.models.translator import architectures  # noqa: F401  (registers the architectures)
from zoo.generation.settings import NEVER
from zoo.training.errors import UserError
from zoo.models.architectures import architecture_config, load_preset
from zoo.models.lora import LoraAdaptation
from zoo.models.translator.searching import TranslatorSearch
from zoo.models.translator.surgery import TranslatorSurgery
from zoo.models.translator.text_training import TextTraining
from zoo.models.translator.text_translation import TextTranslation
from zoo.text.tokenizer import SubwordTokenizer


@keras.saving.register_keras_serializable(package="zoo")
class Translator(TranslatorSurgery, TranslatorSearch, TextTranslation, TextTraining, LoraAdaptation,
                 keras.Model):
    """Encoder-decoder Transformer translator with cached greedy and beam search.

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
        tokenizer: the `SubwordTokenizer` (needed by `translate`; stored with the model).
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
        self.vocabulary_size = int(vocabulary_size)
        self.hidden_dim = int(hidden_dim)
        self.num_encoder_layers = int(num_encoder_layers)
        self.num_decoder_layers = int(num_decoder_layers)
        self.num_heads = int(num_heads)
        self.intermediate_dim = int(intermediate_dim)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.activation = activation
        self.normalize_first = bool(normalize_first)
        self.max_source_length = int(max_source_length)
        self.max_target_length = int(max_target_length)
        self.tokenizer = tokenizer
        self.pad_id = int(pad_id)
        self.start_id = None if start_id is None else int(start_id)
        self.end_id = None if end_id is None else int(end_id)
        self.scale_embedding = bool(scale_embedding)
        self.position_layout = position_layout
        self.output_bias = bool(output_bias)
        self.suppressed_token_ids = sorted({int(i) for i in suppressed_token_ids})
        self.force_end_at_max_length = bool(force_end_at_max_length)
        self._check_vocabulary()
        self._create_layers()
        self._search_functions: dict = {}

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

    def _create_layers(self) -> None:
        """Creates the shared embedding, the encoder and decoder stacks and the logits bias."""
        policy = self.dtype_policy
        self.embedding = TokenEmbedding(self.vocabulary_size, self.hidden_dim,
                                        scale=self.scale_embedding,
                                        mask_zero=self.pad_id == 0, dtype=policy,
                                        name="token_embedding")
        self.position_encoding = SinusoidalPositionEncoding(
            layout=self.position_layout, dtype=policy, name="position_encoding")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        block_args = dict(num_heads=self.num_heads, intermediate_dim=self.intermediate_dim,
                          dropout=self.dropout, attention_dropout=self.attention_dropout,
                          activation=self.activation, normalize_first=self.normalize_first,
                          dtype=policy)
        self.encoder_blocks = [TransformerEncoderBlock(**block_args, name=f"encoder_{i}")
                               for i in range(self.num_encoder_layers)]
        self.decoder_blocks = [TransformerDecoderBlock(**block_args, name=f"decoder_{i}")
                               for i in range(self.num_decoder_layers)]
        # Pre-norm stacks end with a LayerNorm (post-norm blocks already end with one).
        self.encoder_norm = self.decoder_norm = None
        if self.normalize_first:
            self.encoder_norm = LayerNormalization(
                epsilon=1e-5, dtype=policy, name="encoder_norm")
            self.decoder_norm = LayerNormalization(
                epsilon=1e-5, dtype=policy, name="decoder_norm")
        self.logits_bias = None
        if self.output_bias:
            self.logits_bias = self.add_weight(
                name="logits_bias", shape=(self.vocabulary_size,), initializer="zeros",
                dtype="float32")

    def special_ids(self) -> tuple[int, int]:
        """`(start_id, end_id)`: the configured ones, else the tokenizer's, else the zoo's
        defaults (`zoo.training.text_batches.START_ID`, `END_ID`)."""
        tok = self.tokenizer
        start, end = (tok.start_id, tok.end_id) if tok is not None else (START_ID, END_ID)
        return (start if self.start_id is None else self.start_id,
                end if self.end_id is None else self.end_id)

    def _logits(self, hidden: Any) -> Any:
        logits = self.embedding(hidden, reverse=True)
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
    def _embed(self, token_ids: Any, start_index: Any = 0, training: bool | None = None
               ) -> Any:
        x = self.embedding(token_ids)
        x = x + self.position_encoding(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def encode(self, source_ids: Any, training: bool | None = None) -> tuple[Any, Any]:
        """Encodes `(batch, S)` source ids; returns `(memory (batch, S, d), mask (batch, S))`."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        mask = ops.not_equal(source_ids, self.pad_id)
        x = self._embed(source_ids, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, mask

    def decode(self, target_ids: Any, memory: Any, source_mask: Any,
               training: bool | None = None, return_attention_scores: bool = False) -> Any:
        """Teacher-forced decoder pass: `(batch, T, vocab)` float32 logits.

        With `return_attention_scores`, also returns the cross-attention weights of every
        decoder block, a list of `(batch, heads, T, S)` arrays.
        """
        target_ids = ops.convert_to_tensor(target_ids, "int32")
        target_mask = ops.not_equal(target_ids, self.pad_id)
        if self.special_ids()[0] == self.pad_id:
            # The start token is the padding id (Marian): the first position is never padding.
            first = ops.arange(ops.shape(target_ids)[1]) == 0
            target_mask = ops.logical_or(target_mask, ops.expand_dims(first, 0))
        x = self._embed(target_ids, training=training)
        cross = []
        for block in self.decoder_blocks:
            out = block(x, memory, decoder_padding_mask=target_mask,
                        encoder_padding_mask=source_mask, training=training,
                        return_attention_scores=return_attention_scores)
            if return_attention_scores:
                x, scores = out
                cross.append(scores["cross_attention"])
            else:
                x = out
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self._logits(x)
        return (logits, cross) if return_attention_scores else logits

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        if not isinstance(inputs, dict) or not {"source_ids", "target_ids"} <= set(inputs):
            raise UserError(
                "Translator expects a dict with 'source_ids' and 'target_ids'; got "
                f"{type(inputs).__name__} {sorted(inputs) if isinstance(inputs, dict) else ''}")
        memory, source_mask = self.encode(inputs["source_ids"], training=training)
        return self.decode(inputs["target_ids"], memory, source_mask, training=training)

    # ------------------------------------------------------------------ incremental decoding
    def initial_cache(self, memory: Any, max_length: int) -> tuple[tuple, tuple]:
        """Caches for `decode_step`: an empty self-attention cache for `max_length` target
        positions, and the cross-attention keys/values of `memory`, computed once.

        Returns:
            `(self_cache, cross_cache)`, each a tuple with one `(keys, values)` pair per
            decoder block, every buffer `(batch, heads, length, head_dim)`.
        """
        batch = ops.shape(memory)[0]
        self_cache = tuple(b.empty_self_attention_cache(batch, max_length)
                           for b in self.decoder_blocks)
        cross_cache = tuple(b.compute_cross_attention_cache(memory) for b in self.decoder_blocks)
        return self_cache, cross_cache

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
            `(logits (batch, vocab) float32, updated self_cache)`.
        """
        x = self._embed(token_ids, start_index=index)
        updated = []
        for block, layer_cache, memory_cache in zip(self.decoder_blocks, self_cache,
                                                    cross_cache):
            x, layer_cache, _ = block(
                x, encoder_padding_mask=source_mask,
                self_attention_cache=layer_cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=memory_cache)
            updated.append(tuple(layer_cache))
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self._logits(x)[:, 0, :]
        if self.suppressed_token_ids:
            never = np.zeros((self.vocabulary_size,), "float32")
            never[self.suppressed_token_ids] = NEVER
            logits = logits + ops.convert_to_tensor(never)
        return logits, tuple(updated)

    # LoRA (zoo.models.lora): the self- and cross-attention of its encoder and decoder blocks;
    # nothing else trains. A merged copy keeps the tokenizer.
    def _lora_blocks(self) -> list[keras.layers.Layer]:
        return [*self.encoder_blocks, *self.decoder_blocks]

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
