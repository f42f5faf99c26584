"""The BERT encoder (Devlin et al., 2019): the backbone of the sentence encoder family.

    e = LN(E_word[ids] + E_pos[0..T-1] + E_type[segments])        embeddings
    h_l = LN(h' + FFN(h')),  h' = LN(h_{l-1} + MHA(h_{l-1}))        post-norm blocks, GELU (erf)

It returns every token's features; the task (`zoo.models.sentence_encoder.model`) pools them.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.position_embedding import PositionEmbedding
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_encoder import TransformerEncoderBlock
from zoo.layers.validation import positive_int
from zoo.models.task import Backbone
from zoo.training.errors import UserError


@keras.saving.register_keras_serializable(package="zoo")
class SentenceEncoderBackbone(Backbone):
    """Word, position and segment embeddings under a LayerNorm, then post-norm blocks.

    Args:
        vocabulary_size: rows of the word embedding.
        num_layers: encoder blocks.
        num_heads: attention heads per block.
        hidden_dim: token size d.
        intermediate_dim: hidden width of each block's feed-forward network.
        max_positions: rows of the learned position embedding (the longest input).
        type_vocabulary_size: rows of the token-type (segment) embedding.
        dropout: dropout on the embeddings and in each block's residual branches.
        attention_dropout: dropout on the attention weights.
        layer_norm_epsilon: epsilon of every LayerNorm (1e-12 in BERT).
        activation: feed-forward activation; "gelu" is the exact (erf) GELU of BERT.
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        inputs: a dict with int `token_ids` `(batch, length)` and `padding_mask`
            `(batch, length)` (1 for real tokens, 0 for padding), and optionally int
            `segment_ids` (token types; all 0 when absent).
        training: whether dropout is active.

    Returns:
        `(batch, length, hidden_dim)` token features in the compute dtype.

    Example:
    >>> import numpy as np
    >>> backbone = SentenceEncoderBackbone(50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                                    intermediate_dim=16, max_positions=16)
    >>> tuple(backbone({"token_ids": np.array([[2, 7, 3, 0]]),
    ...                 "padding_mask": np.array([[1, 1, 1, 0]])}).shape)
    (1, 4, 8)
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        max_positions: int = 512,
        type_vocabulary_size: int = 2,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        layer_norm_epsilon: float = 1e-12,
        activation: str = "gelu",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for what, value in (("vocabulary_size", vocabulary_size), ("num_layers", num_layers),
                            ("num_heads", num_heads), ("hidden_dim", hidden_dim),
                            ("intermediate_dim", intermediate_dim),
                            ("max_positions", max_positions),
                            ("type_vocabulary_size", type_vocabulary_size)):
            positive_int(value, what)
        if hidden_dim % num_heads:
            raise UserError(
                f"hidden_dim {hidden_dim} is not divisible by num_heads {num_heads}")
        for what, rate in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if not 0.0 <= float(rate) < 1.0:
                raise UserError(f"{what} must be in [0, 1); got {rate!r}")
        self.vocabulary_size = int(vocabulary_size)
        self.num_layers = int(num_layers)
        self.num_heads = int(num_heads)
        self.hidden_dim = int(hidden_dim)
        self.intermediate_dim = int(intermediate_dim)
        self.max_positions = int(max_positions)
        self.type_vocabulary_size = int(type_vocabulary_size)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.activation = activation
        self._create_layers()
        self.build({"token_ids": (None, None), "padding_mask": (None, None)})

    def _create_layers(self) -> None:
        """Creates the word, position and segment embeddings, their norm and dropout, and
        the encoder blocks."""
        policy = self.dtype_policy
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)  # BERT's
        self.token_embedding = TokenEmbedding(
            self.vocabulary_size, self.hidden_dim, scale=False, mask_zero=False,
            embeddings_initializer=initializer, dtype=policy, name="token_embedding")
        self.position_embedding = PositionEmbedding(
            self.max_positions, dtype=policy, name="position_embedding")
        self.segment_embedding = keras.layers.Embedding(
            self.type_vocabulary_size, self.hidden_dim, embeddings_initializer=initializer,
            dtype=policy, name="segment_embedding")
        self.embeddings_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=policy, name="embeddings_norm")
        self.embeddings_dropout = keras.layers.Dropout(
            self.dropout, dtype=policy, name="embeddings_dropout")
        self.encoder_blocks = [
            TransformerEncoderBlock(
                num_heads=self.num_heads, intermediate_dim=self.intermediate_dim,
                dropout=self.dropout, attention_dropout=self.attention_dropout,
                activation=self.activation, normalize_first=False,
                layer_norm_epsilon=self.layer_norm_epsilon,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                dtype=policy, name=f"encoder_block_{i}")
            for i in range(self.num_layers)
        ]

    def build(self, input_shape: Any = None) -> None:
        if self.built:  # by the constructor: a later `build(shape)` adds no state
            return
        sequence = (None, None, self.hidden_dim)
        self.token_embedding.build((None, None))
        self.position_embedding.build(sequence)
        self.segment_embedding.build((None, None))
        self.embeddings_norm.build(sequence)
        for block in self.encoder_blocks:
            block.build(sequence)
        self.built = True

    def check_inputs(self, inputs: Any, owner: str = "SentenceEncoder") -> tuple[Any, Any, Any]:
        """`(token_ids, padding_mask, segment_ids or None)` of `inputs`; a UserError naming
        `owner` for a missing key, a bad shape or a length past `max_positions`."""
        if not isinstance(inputs, dict):
            raise UserError(
                f"{owner} expects a dict with 'token_ids' and 'padding_mask'; got "
                f"{type(inputs).__name__}")
        missing = [k for k in ("token_ids", "padding_mask") if k not in inputs]
        if missing:
            raise UserError(f"{owner} inputs lack {missing}; got keys {sorted(inputs)}")
        token_ids = inputs["token_ids"]
        padding_mask = inputs["padding_mask"]
        if len(token_ids.shape) != 2:
            raise UserError(
                f"token_ids must have shape (batch, length); got {tuple(token_ids.shape)}")
        if tuple(padding_mask.shape) != tuple(token_ids.shape):
            raise UserError(
                f"padding_mask has shape {tuple(padding_mask.shape)} but token_ids has "
                f"{tuple(token_ids.shape)}")
        length = token_ids.shape[1]
        if length is not None and length > self.max_positions:
            raise UserError(
                f"inputs of length {length} exceed the {self.max_positions} position "
                "embeddings")
        return token_ids, padding_mask, inputs.get("segment_ids")

    def call(self, inputs: dict[str, Any], training: bool | None = None) -> Any:
        token_ids, padding_mask, segment_ids = self.check_inputs(inputs)
        if segment_ids is None:
            segment_ids = ops.zeros_like(token_ids)
        x = self.token_embedding(token_ids)
        x = x + self.position_embedding(x) + self.segment_embedding(segment_ids)
        x = self.embeddings_dropout(self.embeddings_norm(x), training=training)
        mask = ops.cast(padding_mask, "bool")
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=training)
        return x

    def compute_output_shape(self, input_shape: Any) -> tuple:
        return (*input_shape["token_ids"], self.hidden_dim)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_positions": self.max_positions,
            "type_vocabulary_size": self.type_vocabulary_size,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "activation": self.activation,
        })
        return config
