"""The Transformer decoder block (section 3.1 of "Attention Is All You Need")."""

from __future__ import annotations

from typing import Any

import keras

from .keras_internals import keras_mask
from .transformer_encoder import TransformerBlock


@keras.saving.register_keras_serializable(package="zoo")
class TransformerDecoderBlock(TransformerBlock):
    """Causal self-attention, cross-attention to the encoder, and a feed-forward network.

    Each sub-layer has a residual connection and LayerNorm (post-norm as in the paper, or
    pre-norm with `normalize_first=True`). Without an `encoder_sequence` the block is a
    decoder-only (GPT-style) block: causal self-attention and feed-forward.

    Incremental decoding: pass `self_attention_cache` with
    `self_attention_cache_update_index` (the position of the first new token) and, for the
    encoder, a `cross_attention_cache` from `compute_cross_attention_cache`; the call then
    returns `(outputs, self_attention_cache, cross_attention_cache)`, and one token at a time
    gives the same outputs as the full causal pass.

    Arguments: as `TransformerEncoderBlock`. `attention_window` and `global_tokens` apply to
    the (causal) self-attention; `attention_block_size` without a window to both attentions.

    Call arguments:
        decoder_sequence: `(batch, T, d_model)` target-side inputs.
        encoder_sequence: `(batch, S, d_model)` encoder outputs, or None.
        decoder_padding_mask: `(batch, T)` boolean; from Keras masking when omitted.
        encoder_padding_mask: `(batch, S)` boolean; from Keras masking when omitted.
        self_attention_cache: `(keys, values)`, each `(batch, heads, T_max, head_dim)`.
        self_attention_cache_update_index: where the new tokens' keys and values go.
        cross_attention_cache: the encoder's `(keys, values)`, each
            `(batch, heads, S, head_dim)`.
        return_attention_scores: also return `{"self_attention": ..., "cross_attention":
            ...}` weights, each `(batch, heads, T, keys)`.
        training: whether dropout is active.

    Returns:
        `outputs`, then the two caches when caching, then the scores dict when asked.

    Example:
    >>> import numpy as np
    >>> block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    >>> x, memory = np.zeros((1, 3, 8), "float32"), np.zeros((1, 5, 8), "float32")
    >>> tuple(block(x, memory).shape)
    (1, 3, 8)
    """

    def build(self, decoder_sequence_shape: tuple,
              encoder_sequence_shape: tuple | None = None) -> None:
        d_model = decoder_sequence_shape[-1]
        self.self_attention = self._attention(d_model, "self_attention")
        self.self_attention.build(decoder_sequence_shape, decoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(decoder_sequence_shape)
        self.cross_attention = None
        if encoder_sequence_shape is not None:
            if encoder_sequence_shape[-1] != d_model:
                raise ValueError(
                    f"encoder_sequence has feature size {encoder_sequence_shape[-1]} but the "
                    f"decoder sequence has {d_model}; they must match"
                )
            self.cross_attention = self._attention(
                d_model, "cross_attention", self_attention=False)
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm = self._norm("cross_attention_norm")
            self.cross_attention_norm.build(decoder_sequence_shape)
        self._build_feed_forward(decoder_sequence_shape)

    def compute_cross_attention_cache(self, encoder_sequence: Any) -> tuple[Any, Any]:
        """Projects the encoder outputs once into `(keys, values)` for every decoding step."""
        if self.cross_attention is None:
            raise ValueError("this decoder block was built without an encoder sequence")
        return self.cross_attention.compute_cache(encoder_sequence)

    def empty_self_attention_cache(self, batch_size: int, max_length: int) -> tuple[Any, Any]:
        """A zero self-attention `(keys, values)` cache for `max_length` target positions."""
        return self.self_attention.empty_cache(batch_size, max_length)

    def call(
        self,
        decoder_sequence: Any,
        encoder_sequence: Any | None = None,
        decoder_padding_mask: Any | None = None,
        encoder_padding_mask: Any | None = None,
        self_attention_cache: Any | None = None,
        self_attention_cache_update_index: Any | None = None,
        cross_attention_cache: Any | None = None,
        return_attention_scores: bool = False,
        training: bool | None = None,
    ) -> Any:
        if decoder_padding_mask is None:
            decoder_padding_mask = keras_mask(decoder_sequence)
        if encoder_padding_mask is None and encoder_sequence is not None:
            encoder_padding_mask = keras_mask(encoder_sequence)
        caching = self_attention_cache is not None
        if caching and self_attention_cache_update_index is None:
            raise ValueError(
                "self_attention_cache needs self_attention_cache_update_index (the position of "
                "the first new token)"
            )
        if not caching and self_attention_cache_update_index is not None:
            raise ValueError(
                "self_attention_cache_update_index needs a self_attention_cache; got index "
                f"{self_attention_cache_update_index} without one")
        has_encoder = encoder_sequence is not None or cross_attention_cache is not None
        if has_encoder and self.cross_attention is None:
            raise ValueError("this decoder block was built without an encoder sequence")
        if caching:
            # While generating, earlier target tokens are never padding.
            self_attention_args = {"cache": self_attention_cache,
                                   "cache_update_index": self_attention_cache_update_index}
        else:
            self_attention_args = {"query_mask": decoder_padding_mask,
                                   "value_mask": decoder_padding_mask, "use_causal_mask": True}
        x, self_scores, self_attention_cache = self._self_attention_sublayer(
            decoder_sequence, training, return_attention_scores=return_attention_scores,
            **self_attention_args,
        )
        scores = {"self_attention": self_scores}

        if has_encoder:
            # Cross-attention to the encoder's outputs, or to their cached keys and values.
            residual = x
            if self.normalize_first:
                x = self.cross_attention_norm(x)
            memory = x if encoder_sequence is None else encoder_sequence
            x, scores["cross_attention"], _ = self.cross_attention.attend(
                x, memory, value_mask=encoder_padding_mask, cache=cross_attention_cache,
                return_attention_scores=return_attention_scores, training=training,
            )
            x = residual + self.residual_dropout(x, training=training)
            if not self.normalize_first:
                x = self.cross_attention_norm(x)

        x = self._feed_forward_sublayer(x, training)
        outputs: tuple = (x,)
        if caching:
            outputs += (self_attention_cache, cross_attention_cache)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, decoder_sequence_shape: tuple,
                             encoder_sequence_shape: tuple | None = None) -> tuple:
        return tuple(decoder_sequence_shape)
