"""The Transformer encoder block (section 3.1 of "Attention Is All You Need")."""

from __future__ import annotations

from typing import Any

import keras

from .chunked_attention import check_long_sequence_options
from .feed_forward import FeedForward
from .initializers import clone_initializer
from .keras_internals import keras_mask
from .layer_normalization import LayerNormalization
from .multi_head_attention import MultiHeadAttention


def head_size(d_model: int, num_heads: int, key_dim: int | None) -> int:
    """The per-head size: `key_dim` if given, else d_model / num_heads (which must divide)."""
    if key_dim is not None:
        return int(key_dim)
    if d_model % num_heads:
        raise ValueError(
            f"model dimension {d_model} is not divisible by num_heads={num_heads}; "
            "pass key_dim explicitly"
        )
    return d_model // num_heads


class TransformerBlock(keras.layers.Layer):
    """What the encoder and decoder blocks share: arguments, norms and residual sub-layers.
    An abstract base (not serializable, not exported): use the encoder or decoder block.

    Post-norm (the paper): `x = LN(x + Dropout(Sublayer(x)))`.
    Pre-norm (`normalize_first=True`, as in ViT): `x = x + Dropout(Sublayer(LN(x)))`.
    See `TransformerEncoderBlock` for the arguments.
    """

    def __init__(
        self,
        num_heads: int,
        intermediate_dim: int,
        key_dim: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        normalize_first: bool = False,
        layer_norm_epsilon: float = 1e-5,
        attention_window: int | None = None,
        global_tokens: int = 0,
        attention_block_size: int | None = None,
        use_fused_attention: bool = True,
        query_key_norm: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.intermediate_dim = int(intermediate_dim)
        self.key_dim = None if key_dim is None else int(key_dim)
        self.dropout = float(dropout)
        self.attention_dropout = float(attention_dropout)
        self.activation = activation
        self.normalize_first = bool(normalize_first)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        # Checked here, not only by the attention layers, so that a bad value fails at
        # construction rather than at the first call.
        self.attention_window, self.global_tokens, self.attention_block_size = (
            check_long_sequence_options(attention_window, global_tokens, attention_block_size))
        self.use_fused_attention = bool(use_fused_attention)
        self.query_key_norm = bool(query_key_norm)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _norm(self, name: str) -> LayerNormalization:
        return LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)

    def _attention(self, d_model: int, name: str, self_attention: bool = True
                   ) -> MultiHeadAttention:
        # The window is about positions within one sequence: self-attention only.
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=head_size(d_model, self.num_heads, self.key_dim),
            dropout=self.attention_dropout,
            use_fused_attention=self.use_fused_attention,
            query_key_norm=self.query_key_norm,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            attention_window=self.attention_window if self_attention else None,
            global_tokens=self.global_tokens if self_attention else 0,
            attention_block_size=(
                self.attention_block_size
                if self_attention or self.attention_window is None else None),
            dtype=self.dtype_policy,
            name=name,
        )

    def _build_feed_forward(self, inputs_shape: tuple) -> None:
        self.feed_forward = FeedForward(
            self.intermediate_dim, activation=self.activation, dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy, name="feed_forward",
        )
        self.feed_forward.build(inputs_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.feed_forward_norm.build(inputs_shape)
        self.residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def _self_attention_sublayer(self, x: Any, training: bool | None, **attention_args: Any
                                 ) -> tuple[Any, Any | None, Any | None]:
        """The first sub-layer of both blocks: self-attention with its residual.

        Returns `(x, scores, cache)` as `MultiHeadAttention.attend` does.
        """
        residual = x
        if self.normalize_first:
            x = self.self_attention_norm(x)
        x, scores, cache = self.self_attention.attend(x, training=training, **attention_args)
        x = residual + self.residual_dropout(x, training=training)
        return (x if self.normalize_first else self.self_attention_norm(x)), scores, cache

    def _feed_forward_sublayer(self, x: Any, training: bool | None) -> Any:
        """The last sub-layer of both blocks: the feed-forward network with its residual."""
        residual = x
        if self.normalize_first:
            x = self.feed_forward_norm(x)
        x = residual + self.residual_dropout(self.feed_forward(x, training=training),
                                             training=training)
        return x if self.normalize_first else self.feed_forward_norm(x)

    def compute_output_shape(self, inputs_shape: tuple) -> tuple:
        return tuple(inputs_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "key_dim": self.key_dim,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": self.activation,
            "normalize_first": self.normalize_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "attention_window": self.attention_window,
            "global_tokens": self.global_tokens,
            "attention_block_size": self.attention_block_size,
            "use_fused_attention": self.use_fused_attention,
            "query_key_norm": self.query_key_norm,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        })
        return config


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoderBlock(TransformerBlock):
    """Self-attention then a feed-forward network, each with a residual and LayerNorm.

    Post-norm (the paper): `x = LN(x + Dropout(Sublayer(x)))`.
    Pre-norm (ViT, `normalize_first=True`): `x = x + Dropout(Sublayer(LN(x)))`.

    Args:
        num_heads: attention heads.
        intermediate_dim: feed-forward hidden width (d_ff).
        key_dim: per-head size; d_model / num_heads by default.
        dropout: residual dropout, applied to each sub-layer's output (P_drop of the paper),
            and after the feed-forward activation (as in ViT and tensor2tensor).
        attention_dropout: dropout on the attention weights.
        activation: feed-forward activation, "relu" or "gelu".
        normalize_first: pre-norm instead of the paper's post-norm.
        layer_norm_epsilon: LayerNorm epsilon.
        attention_window: if set, self-attention is local: each position sees this many
            positions on either side (see `MultiHeadAttention`).
        global_tokens: with `attention_window`, leading positions that attend globally (a
            class token, say).
        attention_block_size: exact attention over blocks of this many keys (without a
            window), or queries per block of the window.
        use_fused_attention: allow `keras.ops.dot_product_attention`.
        query_key_norm: normalise the queries and keys of every attention layer (see
            `MultiHeadAttention`).
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        padding_mask: `(batch, length)` boolean, `True` for real tokens; taken from Keras
            masking when omitted.
        attention_mask: boolean, broadcastable to `(batch, length, length)`.
        return_attention_scores: also return the `(batch, heads, length, length)` weights.
        training: whether dropout is active.

    Returns:
        `(batch, length, d_model)`, and the attention weights when asked.

    Example:
    >>> import numpy as np
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    >>> tuple(block(np.zeros((1, 4, 8), "float32")).shape)
    (1, 4, 8)
    """

    def build(self, inputs_shape: tuple) -> None:
        self.self_attention = self._attention(inputs_shape[-1], "self_attention")
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(inputs_shape)
        self._build_feed_forward(inputs_shape)

    def call(self, inputs: Any, padding_mask: Any | None = None,
             attention_mask: Any | None = None, return_attention_scores: bool = False,
             training: bool | None = None) -> Any:
        if padding_mask is None:
            padding_mask = keras_mask(inputs)
        x, scores, _ = self._self_attention_sublayer(
            inputs, training, query_mask=padding_mask, value_mask=padding_mask,
            attention_mask=attention_mask, return_attention_scores=return_attention_scores,
        )
        x = self._feed_forward_sublayer(x, training)
        return (x, scores) if return_attention_scores else x
