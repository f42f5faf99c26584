"""Multi-head attention, eq. (2) of "Attention Is All You Need", with a key/value cache.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

The projections hold all heads in one kernel each, with the same weight shapes as
`keras.layers.MultiHeadAttention` (query kernel `(d_model, heads, key_dim)`, output kernel
`(heads, value_dim, d_out)`), so weights copy across directly.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
from keras import ops

from . import attention_cache
from .attention import fused_attention, fused_attention_supported, scaled_dot_product_attention
from .attention_masks import AttentionMasks, and_mask, combined_mask
from .chunked_attention import (
    check_long_sequence_options,
    long_sequence_attention,
    sliding_window_mask,
)
from .einsum_projection import project
from .head_pruning import prune_attention_heads
from .initializers import clone_initializer
from .keras_internals import keras_mask
from .layer_normalization import LayerNormalization


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with masks, a key/value cache, fused kernels and head pruning.

    Self-attention when `value` is omitted, cross-attention when `value` (and optionally
    `key`) come from another sequence.

    Masks: padding masks carried by Keras masking on `query`, `value` and `key` (for
    instance from an `Embedding(mask_zero=True)`), an explicit `attention_mask` of shape
    `(batch, T, S)`, and `use_causal_mask` are combined with a logical AND.

    Cache (incremental decoding): a `(keys, values)` pair of projected keys and values,
    each `(batch, heads, S_max, head_dim)` (its layout: `attention_cache`).
    - Self-attention: pass `cache` and `cache_update_index`; the keys and values of the
      current `query` tokens are written at that index, and the queries attend to cache
      positions up to their own (causal by construction, so unwritten slots are never seen).
    - Cross-attention: build the cache once with `compute_cache(encoder_outputs)` and pass it
      with `cache_update_index=None`; the keys and values are then not recomputed.
    With a cache, the call returns `(output, cache)` (or `(output, scores, cache)`).

    Fused path: when attention weights are not requested and attention dropout is inactive
    (rate 0, or not training), attention runs through `keras.ops.dot_product_attention` on
    JAX and torch (cuDNN's flash attention on a GPU where the shapes allow it); otherwise,
    and always on TensorFlow (which has no fused kernel there), through the explicit
    equation. Both compute logits and softmax in float32. The four projections run as 2-D
    matrix products on the layer's `EinsumDense` weights (same weights, same numbers).

    Long sequences: `attention_window` makes self-attention local (query i sees keys with
    |i - j| <= window, plus `global_tokens` leading positions that see and are seen by all;
    see `sliding_window_attention`), and `attention_block_size` computes exact attention over
    key blocks (`chunked_attention`); both avoid the `(T, S)` score matrix. They need static
    lengths; where weights are requested, attention dropout is active, a cache is used or the
    length is unknown, the explicit equation runs instead with the equivalent dense mask, so
    the results are the same.
    One method, `_compute_attention`, chooses among these kernels; a subclass may override
    it to add its own.

    Args:
        num_heads: number of attention heads.
        key_dim: size of each head for queries and keys.
        value_dim: size of each head for values; `key_dim` by default.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_shape: last dimension of the output; the query's by default.
        use_fused_attention: allow the fused path (set False to always use the explicit one).
        query_key_norm: normalise each head's queries and keys (a LayerNormalization over
            `key_dim`, its scale and offset shared by the heads) before their dot product,
            as ViT-22B (Dehghani et al. 2023) does against attention logits that grow until
            the softmax is one-hot and training collapses at a high learning rate.
        kernel_initializer: initializer for the projection kernels.
        bias_initializer: initializer for the projection biases.
        attention_window: if set, local self-attention over this many positions on either
            side (earlier ones only with a causal mask).
        global_tokens: with `attention_window`, how many leading positions attend globally.
        attention_block_size: if set, and no window, exact attention over blocks of this many
            keys; with a window, the number of queries per block (by default the window
            clipped to [64, 256]).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, T, d_query)`.
        value: `(batch, S, d_value)`; `query` when omitted (self-attention).
        key: `(batch, S, d_key)`; `value` when omitted.
        query_mask, value_mask, key_mask: `(batch, T)` / `(batch, S)` boolean padding masks;
            taken from Keras masking when not given.
        attention_mask: boolean mask broadcastable to `(batch, T, S)`, `True` = attend.
        use_causal_mask: mask keys after each query's position.
        return_attention_scores: also return the `(batch, heads, T, S)` float32 weights.
        training: whether attention dropout is active.
        cache: key/value cache (see above).
        cache_update_index: where the current tokens' keys and values go in the cache.

    Returns:
        `(batch, T, output_shape)`, plus the weights and/or the updated cache as described.

    Example:
    >>> import numpy as np
    >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> tuple(mha(np.zeros((1, 3, 8), "float32")).shape)
    (1, 3, 8)
    """

    def __init__(self, num_heads: int, key_dim: int, value_dim: int | None = None,
                 dropout: float = 0.0, use_bias: bool = True, output_shape: int | None = None,
                 use_fused_attention: bool = True, query_key_norm: bool = False,
                 kernel_initializer: Any = "glorot_uniform", bias_initializer: Any = "zeros",
                 attention_window: int | None = None, global_tokens: int = 0,
                 attention_block_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if int(num_heads) < 1 or int(key_dim) < 1:
            raise ValueError(
                f"num_heads and key_dim must be positive; got num_heads={num_heads}, "
                f"key_dim={key_dim}"
            )
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}")
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.value_dim = int(value_dim) if value_dim is not None else self.key_dim
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        self.output_shape = output_shape
        self.use_fused_attention = bool(use_fused_attention)
        self.query_key_norm = bool(query_key_norm)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.attention_window, self.global_tokens, self.attention_block_size = (
            check_long_sequence_options(attention_window, global_tokens, attention_block_size))
        self.supports_masking = True
        self._dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def _projection(self, equation: str, shape: Sequence[int | None], bias_axes: str,
                    name: str) -> keras.layers.EinsumDense:
        projection = keras.layers.EinsumDense(
            equation,
            output_shape=shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        # Padding masks are handled by this layer; the projections just pass them along.
        projection.supports_masking = True
        return projection

    def build(self, query_shape: tuple, value_shape: tuple | None = None,
              key_shape: tuple | None = None) -> None:
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        self._query_dim = query_shape[-1]
        self._value_input_dim = value_shape[-1]
        self._key_input_dim = key_shape[-1]
        out_dim = self.output_shape if self.output_shape is not None else query_shape[-1]
        self.query_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.key_dim), "de", "query")
        self.key_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.key_dim), "de", "key")
        self.value_dense = self._projection(
            "abc,cde->abde", (None, self.num_heads, self.value_dim), "de", "value")
        self.output_dense = self._projection(
            "abcd,cde->abe", (None, out_dim), "e", "attention_output")
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.output_dense.build((None, None, self.num_heads, self.value_dim))
        if self.query_key_norm:
            self.query_norm, self.key_norm = (
                LayerNormalization(epsilon=1e-6, dtype=self.dtype_policy, name=name)
                for name in ("query_norm", "key_norm"))
            self.query_norm.build((None, None, self.num_heads, self.key_dim))
            self.key_norm.build((None, None, self.num_heads, self.key_dim))
        self.built = True

    def _queries(self, query: Any) -> Any:
        """`(batch, T, heads, key_dim)` projected (and normalised) queries."""
        q = project(self.query_dense, query)
        return self.query_norm(q) if self.query_key_norm else q

    def _keys(self, key: Any) -> Any:
        """`(batch, S, heads, key_dim)` projected (and normalised) keys."""
        k = project(self.key_dense, key)
        return self.key_norm(k) if self.query_key_norm else k

    # ------------------------------------------------------------------ cache helpers
    def compute_cache(self, value: Any, key: Any | None = None) -> tuple[Any, Any]:
        """Projects `key`/`value` once into a `(keys, values)` cache, each
        `(batch, heads, S, head_dim)`.

        This is the cross-attention cache: the encoder's outputs do not change while the
        decoder generates, so their keys and values are computed once.
        """
        if self.key_dim != self.value_dim:
            raise ValueError(
                "a key/value cache needs key_dim == value_dim; got "
                f"key_dim={self.key_dim}, value_dim={self.value_dim}"
            )
        key = value if key is None else key
        if not self.built:
            self.build(tuple(value.shape), tuple(value.shape), tuple(key.shape))
        return (_heads_first(self._keys(key)),
                _heads_first(project(self.value_dense, value)))

    def empty_cache(self, batch_size: int, max_length: int) -> tuple[Any, Any]:
        """A zero self-attention cache: `(keys, values)`, each
        `(batch, heads, max_length, key_dim)`."""
        return attention_cache.empty_cache(batch_size, self.num_heads, max_length,
                                           self.key_dim, self.compute_dtype)

    grow_cache = staticmethod(attention_cache.grow_cache)

    # ------------------------------------------------------------------ masks
    def _combined_mask(self, query: Any, key_length: Any, masks: AttentionMasks) -> Any | None:
        """A boolean `(batch or 1, T, S)` mask, or None when nothing is masked."""
        return combined_mask(query, key_length, masks)

    # ------------------------------------------------------------------ call
    def call(self, query: Any, value: Any | None = None, key: Any | None = None,
             query_mask: Any | None = None, value_mask: Any | None = None,
             key_mask: Any | None = None, attention_mask: Any | None = None,
             use_causal_mask: bool = False, return_attention_scores: bool = False,
             training: bool | None = None, cache: Any | None = None,
             cache_update_index: Any | None = None) -> Any:
        if cache is None and cache_update_index is not None:
            raise ValueError("cache_update_index needs a cache: pass cache=... (an "
                             "empty_cache or the previous step's), or drop the index")
        if cache is not None:
            attention_cache.check_cache_pair(cache)
        self_attention = value is None
        # With a cross-attention cache, `value` and `key` are not used, nor are their masks.
        cached_memory = cache is not None and cache_update_index is None
        if query_mask is None:
            query_mask = keras_mask(query)
        if self_attention:
            value = query
            if value_mask is None and not cached_memory:
                value_mask = query_mask
        elif value_mask is None and not cached_memory:
            value_mask = keras_mask(value)
        if key is None:
            key = value
        elif key_mask is None and not cached_memory:
            key_mask = keras_mask(key)
        self._check_feature_sizes(query, value, key)

        q = self._queries(query)  # (batch, T, heads, key_dim)
        causal_offset: Any = 0
        if cached_memory:  # cross-attention: keys and values were computed once
            k, v = cache
        elif cache is not None:
            # Self-attention step: write this block's keys and values at the index.
            attention_cache.check_cache_index(cache, query.shape[1], cache_update_index)
            cache = attention_cache.write_cache(
                cache, cache_update_index, _heads_first(self._keys(key)),
                _heads_first(project(self.value_dense, value)))
            k, v = cache
            # Keys beyond a query's own position (including unwritten slots) stay hidden.
            use_causal_mask, causal_offset = True, cache_update_index
            value_mask = key_mask = None  # padding of earlier tokens is in attention_mask
        else:
            k, v = self._keys(key), project(self.value_dense, value)
        masks = AttentionMasks(query_mask, value_mask, key_mask, attention_mask,
                               use_causal_mask, causal_offset)
        context, scores = self._compute_attention(
            q, k, v, masks, cached=cache is not None,
            return_attention_scores=return_attention_scores, training=training)
        output = project(self.output_dense, context, input_axes=2)
        if cache is not None:
            if return_attention_scores:
                return output, scores, cache
            return output, cache
        if return_attention_scores:
            return output, scores
        return output

    def _compute_attention(self, query: Any, key: Any, value: Any, masks: AttentionMasks,
                           cached: bool = False, return_attention_scores: bool = False,
                           training: bool | None = None) -> tuple[Any, Any | None]:
        """Attention of projected queries over projected keys and values: the one place
        where the kernel is chosen.

        The window or chunked kernel (`long_sequence_attention`) where a long-sequence option is
        set, the lengths are static and neither weights, dropout nor a cache are involved;
        else the fused `keras.ops.dot_product_attention` where it is allowed and runs here;
        else the explicit equation, which alone returns weights and drops them out.

        Args:
            query: `(batch, T, heads, key_dim)` projected queries.
            key: `(batch, S, heads, key_dim)`, or the cache's `(batch, heads, S, key_dim)`.
            value: `(batch, S, heads, value_dim)`, or the cache's
                `(batch, heads, S, value_dim)`.
            masks: the padding masks, explicit mask and causality to combine.
            cached: whether `key` and `value` are a cache's buffers (heads first).
            return_attention_scores: whether the weights are wanted.
            training: whether attention dropout is active.

        Returns:
            `(context, scores)`: context `(batch, T, heads, value_dim)`; scores
            `(batch, heads, T, S)` float32 from the explicit equation, None otherwise.
        """
        if self.attention_window is not None and not cached and None not in (
                query.shape[1], key.shape[1]) and query.shape[1] != key.shape[1]:
            raise ValueError(
                "attention_window needs self-attention with equal query and key lengths; got "
                f"{query.shape[1]} queries and {key.shape[1]} keys")
        dropout_active = self.dropout > 0.0 and bool(training)
        blocked = self.attention_window is not None or self.attention_block_size is not None
        if (blocked and not cached and not return_attention_scores and not dropout_active
                and None not in (query.shape[1], key.shape[1])):  # static lengths only
            context = long_sequence_attention(
                *(_heads_first(t) for t in (query, key, value)), masks, self.attention_window,
                self.global_tokens, self.attention_block_size)
            return _heads_first(context), None
        key_length = ops.shape(key)[2 if cached else 1]
        mask = self._combined_mask(query, key_length, masks)
        if self.attention_window is not None:
            mask = and_mask(mask, ops.expand_dims(sliding_window_mask(
                ops.shape(query)[1], key_length, self.attention_window,
                global_tokens=self.global_tokens, offset=masks.causal_offset), 0))
        mask = None if mask is None else ops.expand_dims(mask, 1)  # (batch, 1, T, S)
        if (self.use_fused_attention and not return_attention_scores and not dropout_active
                and not cached and fused_attention_supported(query.dtype)):
            return fused_attention(query, key, value, mask=mask), None
        if not cached:  # the explicit equation's (batch, heads, S, d) layout, as a cache's
            key, value = _heads_first(key), _heads_first(value)
        context, scores = scaled_dot_product_attention(
            _heads_first(query), key, value, mask=mask,
        )  # context (batch, heads, T, value_dim); scores (batch, heads, T, S)
        if dropout_active:
            weights = self._dropout_layer(ops.cast(scores, value.dtype), training=training)
            context = ops.matmul(weights, value)
        return _heads_first(context), scores

    def attend(self, query: Any, value: Any | None = None, **kwargs: Any
               ) -> tuple[Any, Any | None, Any | None]:
        """Calls the layer and returns `(output, scores, cache)`, whatever was asked for.

        The same call as `layer(query, value, **kwargs)`, with one fixed structure: `scores`
        is None unless `return_attention_scores=True`, `cache` is None unless a `cache` was
        passed. For callers that pass those options through, as the Transformer blocks do.

        Example:
        >>> import numpy as np
        >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
        >>> output, scores, cache = mha.attend(np.zeros((1, 3, 8), "float32"))
        >>> tuple(output.shape), scores, cache
        ((1, 3, 8), None, None)
        """
        result = self(query, value, **kwargs)
        with_scores = bool(kwargs.get("return_attention_scores", False))
        with_cache = kwargs.get("cache") is not None
        if not (with_scores or with_cache):
            return result, None, None
        output, *rest = result
        return output, (rest[0] if with_scores else None), (rest[-1] if with_cache else None)

    def compute_mask(self, query: Any, previous_mask: Any = None) -> Any:
        return keras_mask(query) if previous_mask is None else previous_mask

    def compute_output_shape(self, query_shape: tuple, value_shape: tuple | None = None,
                             key_shape: tuple | None = None) -> tuple:
        out_dim = self.output_shape if self.output_shape is not None else query_shape[-1]
        return tuple(query_shape[:-1]) + (out_dim,)

    # ------------------------------------------------------------------ validation
    def _check_feature_sizes(self, query: Any, value: Any, key: Any) -> None:
        expected = (
            ("query", query, self._query_dim),
            ("value", value, self._value_input_dim),
            ("key", key, self._key_input_dim),
        )
        for name, tensor, size in expected:
            if len(tensor.shape) != 3:
                raise ValueError(
                    f"{name} must have shape (batch, length, features); got {tuple(tensor.shape)}"
                )
            if size is not None and tensor.shape[-1] is not None and tensor.shape[-1] != size:
                raise ValueError(
                    f"{name} has feature size {tensor.shape[-1]} but this layer was built for "
                    f"{size}"
                )

    # ------------------------------------------------------------------ pruning
    def pruned(self, heads: Sequence[int]) -> "MultiHeadAttention":
        """A new, built layer without the given heads; the other heads compute as here
        (`head_pruning.prune_attention_heads` says why).

        Args:
            heads: indices of the heads to remove, in `[0, num_heads)`.

        Returns:
            A `MultiHeadAttention` with `num_heads - len(set(heads))` heads.

        Raises:
            ValueError: if this layer is not built, a head is out of range, or every head
                would go.

        Example:
        >>> import numpy as np
        >>> mha = MultiHeadAttention(num_heads=4, key_dim=2)
        >>> _ = mha(np.zeros((1, 3, 8), "float32"))
        >>> smaller = mha.pruned([0, 2])
        >>> smaller.num_heads, tuple(smaller.query_dense.kernel.shape)
        (2, (8, 2, 2))
        """
        return prune_attention_heads(self, heads)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_shape": self.output_shape,
                "use_fused_attention": self.use_fused_attention,
                "query_key_norm": self.query_key_norm,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "attention_window": self.attention_window,
                "global_tokens": self.global_tokens,
                "attention_block_size": self.attention_block_size,
            }
        )
        return config


def _heads_first(x: Any) -> Any:
    """`(batch, length, heads, d)` to `(batch, heads, length, d)` (and back: it is its own
    inverse)."""
    return ops.transpose(x, (0, 2, 1, 3))
