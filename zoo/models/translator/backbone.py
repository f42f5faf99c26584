"""The encoder-decoder network of "Attention Is All You Need" (Vaswani et al., 2017): the
backbone of the translator family.

    source ids -> TokenEmbedding * sqrt(d) + PE -> N x EncoderBlock            -> memory
    target ids -> TokenEmbedding * sqrt(d) + PE -> N x DecoderBlock(memory)    -> features

One embedding matrix is shared by source and target (section 3.4: the tokenizer is a joint
subword vocabulary); the task (`zoo.models.translator.model.Translator`) reads its logits
through the same matrix. Besides the teacher-forced pass (`call`, `encode`, `decode`), the
backbone decodes one token at a time over a key/value cache (`initial_cache`, `decode_step`)
for the searches of `zoo.generation`.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from zoo.models.task import Backbone


@keras.saving.register_keras_serializable(package="zoo")
class TranslatorBackbone(Backbone):
    """A Transformer encoder and decoder over one shared token embedding.

    Args:
        vocabulary_size: size of the joint source/target vocabulary.
        hidden_dim: d_model.
        num_encoder_layers: encoder blocks.
        num_decoder_layers: decoder blocks.
        num_heads: attention heads.
        intermediate_dim: feed-forward width d_ff.
        dropout: residual and embedding dropout (P_drop).
        attention_dropout: dropout on attention weights.
        activation: feed-forward activation.
        normalize_first: pre-norm blocks (each stack then ends with a LayerNorm) instead of
            post-norm.
        pad_id: the padding id; positions holding it are masked out (the embedding masks
            id 0 itself when it is 0).
        scale_embedding: multiply embeddings by sqrt(hidden_dim) (section 3.4).
        position_layout: "interleaved" sinusoids (the paper) or "concatenated" (Marian); see
            `SinusoidalPositionEncoding`.
        **kwargs: `keras.Model` arguments (`name`, `dtype`).

    Call arguments:
        inputs: `{"source_ids": (batch, S), "target_ids": (batch, T)}` int32, and optionally
            `"target_mask"` (see `decode`).
        training: whether dropout is active.

    Returns:
        `(batch, T, hidden_dim)` decoder features.

    Example:
    >>> import numpy as np
    >>> backbone = TranslatorBackbone(32, hidden_dim=8, num_encoder_layers=1,
    ...                               num_decoder_layers=1, num_heads=2, intermediate_dim=16)
    >>> ids = np.ones((2, 5), "int32")
    >>> tuple(backbone({"source_ids": ids, "target_ids": ids[:, :3]}).shape)
    (2, 3, 8)
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
        pad_id: int = 0,
        scale_embedding: bool = True,
        position_layout: str = "interleaved",
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
        self.pad_id = int(pad_id)
        self.scale_embedding = bool(scale_embedding)
        self.position_layout = position_layout
        self._create_layers()

    def _create_layers(self) -> None:
        """Creates the shared embedding, the position encoding and the two stacks."""
        policy = self.dtype_policy
        self.token_embedding = TokenEmbedding(
            self.vocabulary_size, self.hidden_dim, scale=self.scale_embedding,
            mask_zero=self.pad_id == 0, dtype=policy, name="token_embedding")
        self.position_encoding = SinusoidalPositionEncoding(
            layout=self.position_layout, dtype=policy, name="position_encoding")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, dtype=policy,
                                                      name="embedding_dropout")
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

    def embed(self, token_ids: Any, start_index: Any = 0, training: bool | None = None
              ) -> Any:
        """Token embeddings (scaled) plus the sinusoids of positions `start_index`, ...."""
        x = self.token_embedding(token_ids)
        x = x + self.position_encoding(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def encode(self, source_ids: Any, training: bool | None = None) -> tuple[Any, Any]:
        """Encodes `(batch, S)` source ids; returns `(memory (batch, S, d), mask (batch, S))`."""
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        mask = ops.not_equal(source_ids, self.pad_id)
        x = self.embed(source_ids, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, mask

    def decode(self, target_ids: Any, memory: Any, source_mask: Any,
               target_mask: Any | None = None, training: bool | None = None,
               return_attention_scores: bool = False) -> Any:
        """Teacher-forced decoder pass: `(batch, T, hidden_dim)` features.

        Args:
            target_ids: `(batch, T)` int32, starting with the start token.
            memory, source_mask: from `encode`.
            target_mask: `(batch, T)` bool, the target positions that are not padding;
                None: those not holding `pad_id`.
            training: whether dropout is active.
            return_attention_scores: also return the cross-attention weights of every
                decoder block, a list of `(batch, heads, T, S)` arrays.
        """
        target_ids = ops.convert_to_tensor(target_ids, "int32")
        if target_mask is None:
            target_mask = ops.not_equal(target_ids, self.pad_id)
        x = self.embed(target_ids, training=training)
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
        return (x, cross) if return_attention_scores else x

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        memory, source_mask = self.encode(inputs["source_ids"], training=training)
        return self.decode(inputs["target_ids"], memory, source_mask,
                           target_mask=inputs.get("target_mask"), training=training)

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

    def grow_cache(self, cache: tuple, length: Any) -> tuple:
        """A self-attention cache grown to `length` positions (`zoo.generation.loop`)."""
        return tuple(block.self_attention.grow_cache(pair, length)
                     for block, pair in zip(self.decoder_blocks, cache))

    def decode_step(self, token_ids: Any, index: Any, self_cache: tuple, cross_cache: tuple,
                    source_mask: Any) -> tuple[Any, tuple]:
        """The features of the token at position `index`, given that token.

        Args:
            token_ids: `(batch, 1)` int32, the target token at position `index`.
            index: its position (int or scalar tensor).
            self_cache: from `initial_cache` or the previous step.
            cross_cache: from `initial_cache`.
            source_mask: `(batch, S)` source padding mask.

        Returns:
            `(features (batch, 1, hidden_dim), updated self_cache)`.
        """
        x = self.embed(token_ids, start_index=index)
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
        return x, tuple(updated)

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
            "pad_id": self.pad_id,
            "scale_embedding": self.scale_embedding,
            "position_layout": self.position_layout,
        })
        return config
