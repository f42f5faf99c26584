"""GPT-2's decoder (Radford et al. 2019): the network of the causal language model, and the
text half of the captioner.

    h_0 = E_token[ids] + E_position[0..T-1]                     learned positions
    h_l = h' + FFN(LN(h')),  h' = h_{l-1} + MHA_causal(LN(h_{l-1}))   pre-norm blocks
    out = LN(h_L)                                               final LayerNorm

With `cross_attention=True` each block also attends to an encoder's outputs between its
self-attention and its feed-forward network, `h'' = h' + MHA(LN(h'), encoder)`, as Hugging
Face's GPT-2 with `add_cross_attention=True` (the decoder of a `VisionEncoderDecoderModel`).
The blocks are `zoo.layers.TransformerDecoderBlock`s, pre-norm; their key/value cache makes
one-token-at-a-time decoding give the full pass's outputs.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from zoo.layers.layer_normalization import LayerNormalization
from zoo.layers.position_embedding import PositionEmbedding
from zoo.layers.token_embedding import TokenEmbedding
from zoo.layers.transformer_decoder import TransformerDecoderBlock
from zoo.layers.validation import positive_int
from zoo.models.task import Backbone
from zoo.training.errors import UserError


@keras.saving.register_keras_serializable(package="zoo")
def gelu_tanh(x: Any) -> Any:
    """GELU with the tanh approximation (Hendrycks & Gimpel 2016), GPT-2's "gelu_new"."""
    return keras.activations.gelu(x, approximate=True)


ACTIVATIONS = {"gelu_tanh": gelu_tanh, "gelu": "gelu", "relu": "relu"}


@keras.saving.register_keras_serializable(package="zoo")
class GPT2Backbone(Backbone):
    """GPT-2's decoder: token and position embeddings, pre-norm causal blocks, a LayerNorm.

    Args:
        vocabulary_size: rows of the token embedding (tied to the language model's head).
        num_layers: decoder blocks.
        num_heads: attention heads per block.
        hidden_dim: token size d.
        intermediate_dim: feed-forward width (4 d in GPT-2).
        max_positions: rows of the position table: the longest sequence.
        dropout: dropout of the embeddings and of each block's residual branches (and after
            the feed-forward activation, where GPT-2 has none).
        attention_dropout: dropout of the attention weights.
        layer_norm_epsilon: epsilon of every LayerNorm.
        activation: the feed-forward activation: "gelu_tanh" (GPT-2's), "gelu", "relu".
        cross_attention: blocks with cross-attention over an encoder's outputs (width
            `hidden_dim`): the captioner's decoder.
        **kwargs: base model arguments (`name`, `dtype`).

    Call arguments:
        inputs: a dict of `token_ids` `(batch, T)` int, `padding_mask` `(batch, T)` (1 for
            real tokens), and, with `cross_attention`, `encoder_sequence`
            `(batch, S, hidden_dim)` and optionally `encoder_padding_mask` `(batch, S)`.
        training: whether dropout is active.

    Returns:
        `(batch, T, hidden_dim)` hidden states.

    Example:
    >>> import numpy as np
    >>> backbone = GPT2Backbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_positions=16)
    >>> hidden = backbone({"token_ids": np.array([[5, 7, 9]]),
    ...                    "padding_mask": np.array([[1, 1, 1]])})
    >>> tuple(hidden.shape)
    (1, 3, 8)
    """

    def __init__(self, vocabulary_size: int, num_layers: int, num_heads: int, hidden_dim: int,
                 intermediate_dim: int, max_positions: int = 1024, dropout: float = 0.0,
                 attention_dropout: float = 0.0, layer_norm_epsilon: float = 1e-5,
                 activation: str = "gelu_tanh", cross_attention: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocabulary_size = positive_int(vocabulary_size, "vocabulary_size", error=UserError)
        self.num_layers = positive_int(num_layers, "num_layers", error=UserError)
        self.num_heads = positive_int(num_heads, "num_heads", error=UserError)
        self.hidden_dim = positive_int(hidden_dim, "hidden_dim", error=UserError)
        self.intermediate_dim = positive_int(intermediate_dim, "intermediate_dim",
                                             error=UserError)
        self.max_positions = positive_int(max_positions, "max_positions", error=UserError)
        if self.hidden_dim % self.num_heads:
            raise UserError(f"num_heads {self.num_heads} must divide hidden_dim "
                            f"{self.hidden_dim}; got num_heads={num_heads}")
        if activation not in ACTIVATIONS:
            raise UserError(f"activation must be one of {', '.join(ACTIVATIONS)}; got "
                            f"{activation!r}")
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.activation = activation
        self.cross_attention = bool(cross_attention)
        init = keras.initializers.RandomNormal(stddev=0.02)
        self.token_embedding = TokenEmbedding(
            self.vocabulary_size, self.hidden_dim, scale=False, mask_zero=False,
            embeddings_initializer=init, dtype=self.dtype_policy, name="token_embedding")
        self.position_embedding = PositionEmbedding(
            self.max_positions, initializer=keras.initializers.RandomNormal(stddev=0.01),
            dtype=self.dtype_policy, name="position_embedding")
        self.embedding_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.decoder_blocks = [
            TransformerDecoderBlock(
                num_heads=self.num_heads, intermediate_dim=self.intermediate_dim,
                dropout=self.dropout, attention_dropout=self.attention_dropout,
                activation=ACTIVATIONS[activation], normalize_first=True,
                layer_norm_epsilon=self.layer_norm_epsilon, kernel_initializer=init,
                dtype=self.dtype_policy, name=f"decoder_block_{i}")
            for i in range(self.num_layers)]
        self.final_norm = LayerNormalization(epsilon=self.layer_norm_epsilon,
                                             dtype=self.dtype_policy, name="final_norm")

    def build(self, input_shape: Any = None) -> None:
        shape = (None, None, self.hidden_dim)
        self.token_embedding.build((None, None))
        self.position_embedding.build(shape)
        for block in self.decoder_blocks:
            block.build(shape, shape if self.cross_attention else None)
        self.final_norm.build(shape)
        self.built = True

    # ------------------------------------------------------------------ full pass
    def embed(self, token_ids: Any, start_index: Any = 0, training: bool | None = None) -> Any:
        """`(batch, T, hidden_dim)` token plus position embeddings of positions
        `start_index ..`, after dropout."""
        x = self.token_embedding(token_ids)
        x = x + self.position_embedding(x, start_index=start_index)
        return self.embedding_dropout(x, training=training)

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        token_ids = inputs["token_ids"]
        padding_mask = ops.cast(inputs.get("padding_mask", ops.ones_like(token_ids)), "bool")
        encoder_sequence = inputs.get("encoder_sequence")
        self._check_encoder(encoder_sequence is not None)
        encoder_mask = inputs.get("encoder_padding_mask")
        if encoder_mask is not None:
            encoder_mask = ops.cast(encoder_mask, "bool")
        x = self.embed(token_ids, training=training)
        for block in self.decoder_blocks:
            x = block(x, encoder_sequence, decoder_padding_mask=padding_mask,
                      encoder_padding_mask=encoder_mask, training=training)
        return self.final_norm(x)

    def _check_encoder(self, given: bool) -> None:
        if given and not self.cross_attention:
            raise UserError("encoder_sequence is given, but this GPT2Backbone has no "
                            "cross-attention (build it with cross_attention=True)")
        if self.cross_attention and not given:
            raise UserError("this GPT2Backbone attends to an encoder: pass encoder_sequence "
                            "(or its cross-attention cache)")

    # ------------------------------------------------------------------ cached decoding
    def empty_cache(self, batch_size: Any, max_length: int) -> tuple:
        """A zero self-attention cache of every block: one `(keys, values)` pair each,
        `(batch, heads, max_length, head_dim)`."""
        return tuple(block.empty_self_attention_cache(batch_size, max_length)
                     for block in self.decoder_blocks)

    def compute_cross_attention_cache(self, encoder_sequence: Any) -> tuple:
        """Every block's cross-attention `(keys, values)` of `(batch, S, hidden_dim)` encoder
        outputs, computed once for all decoding steps."""
        self._check_encoder(True)
        return tuple(block.compute_cross_attention_cache(encoder_sequence)
                     for block in self.decoder_blocks)

    def call_with_cache(self, token_ids: Any, cache: tuple, index: Any,
                        cross_attention_cache: tuple | None = None,
                        encoder_padding_mask: Any | None = None) -> tuple[Any, tuple]:
        """The hidden states of `(batch, T)` tokens at positions `index .. index + T - 1`,
        attending to the cached positions before them.

        Args:
            token_ids: `(batch, T)` int, the tokens at positions `index ..`.
            cache: every block's self-attention `(keys, values)` (`empty_cache`).
            index: the position of the first token (an int or an int32 scalar tensor).
            cross_attention_cache: with `cross_attention`, `compute_cross_attention_cache`'s.
            encoder_padding_mask: `(batch, S)`, 1 for real encoder positions.

        Returns:
            `(hidden (batch, T, hidden_dim), cache)`, the tokens' keys and values written.
        """
        self._check_encoder(cross_attention_cache is not None)
        if encoder_padding_mask is not None:
            encoder_padding_mask = ops.cast(encoder_padding_mask, "bool")
        x = self.embed(token_ids, start_index=index, training=False)
        new_cache = []
        for number, block in enumerate(self.decoder_blocks):
            x, self_cache, _ = block(
                x, self_attention_cache=cache[number], self_attention_cache_update_index=index,
                cross_attention_cache=(None if cross_attention_cache is None
                                       else cross_attention_cache[number]),
                encoder_padding_mask=encoder_padding_mask, training=False)
            new_cache.append(self_cache)
        return self.final_norm(x), tuple(new_cache)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size, "num_layers": self.num_layers,
            "num_heads": self.num_heads, "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim, "max_positions": self.max_positions,
            "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon, "activation": self.activation,
            "cross_attention": self.cross_attention,
        })
        return config
