"""Multi-head attention, eq. (2) of "Attention Is All You Need", with a key/value cache.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

The projections hold all heads in one kernel each, with the same weight shapes as
`keras.layers.MultiHeadAttention` (query kernel `(d_model, heads, key_dim)`, output kernel
`(heads, value_dim, d_out)`), so weights copy across directly.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import keras
import numpy as np
from keras import ops

from .attention import (
    causal_mask,
    check_mask_broadcasts,
    fused_attention,
    scaled_dot_product_attention,
)
from .chunked_attention import (
    chunked_attention,
    sliding_window_attention,
    sliding_window_mask,
)
from .initializers import clone_initializer
from .keras_internals import keras_mask
from .layer_normalization import LayerNormalization
from .slice_update import update_slice
from .validation import positive_int


@keras.saving.register_keras_serializable(package="zoo")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with masks, a key/value cache, fused kernels and head pruning.

    Self-attention when `value` is omitted, cross-attention when `value` (and optionally
    `key`) come from another sequence.

    Masks: padding masks carried by Keras masking on `query`, `value` and `key` (for
    instance from an `Embedding(mask_zero=True)`), an explicit `attention_mask` of shape
    `(batch, T, S)`, and `use_causal_mask` are combined with a logical AND.

    Cache (incremental decoding): a `(keys, values)` pair of projected keys and values,
    each `(batch, heads, S_max, head_dim)`. Two buffers rather than one stacked tensor, and
    heads before positions: a step writes its tokens into each buffer (one `update_slice`,
    which XLA does in place), and attention reads the buffers as they are, a batched matmul
    per head, where a stacked, position-major cache was split, transposed and stacked again
    every step (copies that grow with the cache; the translator's searches run 1.35-1.4x
    faster without them, greedy and beam 4, TensorFlow and JAX).
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

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        output_shape: int | None = None,
        use_fused_attention: bool = True,
        query_key_norm: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        attention_window: int | None = None,
        global_tokens: int = 0,
        attention_block_size: int | None = None,
        **kwargs: Any,
    ) -> None:
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
        q = _project(self.query_dense, query)
        return self.query_norm(q) if self.query_key_norm else q

    def _keys(self, key: Any) -> Any:
        """`(batch, S, heads, key_dim)` projected (and normalised) keys."""
        k = _project(self.key_dense, key)
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
                _heads_first(_project(self.value_dense, value)))

    def empty_cache(self, batch_size: int, max_length: int) -> tuple[Any, Any]:
        """A zero self-attention cache: `(keys, values)`, each
        `(batch, heads, max_length, key_dim)`."""
        shape = (batch_size, self.num_heads, max_length, self.key_dim)
        return (ops.zeros(shape, dtype=self.compute_dtype),
                ops.zeros(shape, dtype=self.compute_dtype))

    @staticmethod
    def grow_cache(cache: tuple[Any, Any], max_length: Any) -> tuple[Any, Any]:
        """A self-attention cache with room for `max_length` positions: its own, then zeros
        (`max_length` may be a scalar tensor in a TensorFlow graph)."""
        _check_cache_pair(cache)
        extra = max_length - ops.shape(cache[0])[2]
        widths = [[0, 0], [0, 0], [0, extra], [0, 0]]
        return ops.pad(cache[0], widths), ops.pad(cache[1], widths)

    # ------------------------------------------------------------------ masks
    def _combined_mask(self, query: Any, key_length: int, query_mask: Any, value_mask: Any,
                       key_mask: Any, attention_mask: Any, causal: bool,
                       causal_offset: Any) -> Any | None:
        """A boolean `(batch or 1, T, S)` mask, or None when nothing is masked."""
        query_length = ops.shape(query)[1]
        mask = None

        def _and(a: Any, b: Any) -> Any:
            return b if a is None else ops.logical_and(a, b)

        if query_mask is not None:
            mask = _and(mask, ops.expand_dims(ops.cast(query_mask, "bool"), -1))
        for padding in (value_mask, key_mask):
            if padding is not None:
                mask = _and(mask, ops.expand_dims(ops.cast(padding, "bool"), 1))
        if causal:
            mask = _and(mask, ops.expand_dims(
                causal_mask(query_length, key_length, offset=causal_offset), 0))
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
            check_mask_broadcasts(attention_mask, (query.shape[0], query.shape[1], key_length))
            mask = _and(mask, ops.cast(attention_mask, "bool"))
        return mask

    # ------------------------------------------------------------------ call
    def call(
        self,
        query: Any,
        value: Any | None = None,
        key: Any | None = None,
        query_mask: Any | None = None,
        value_mask: Any | None = None,
        key_mask: Any | None = None,
        attention_mask: Any | None = None,
        use_causal_mask: bool = False,
        return_attention_scores: bool = False,
        training: bool | None = None,
        cache: Any | None = None,
        cache_update_index: Any | None = None,
    ) -> Any:
        if cache is None and cache_update_index is not None:
            raise ValueError("cache_update_index needs a cache: pass cache=... (an "
                             "empty_cache or the previous step's), or drop the index")
        if cache is not None:
            _check_cache_pair(cache)
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
        if cache is not None and cache_update_index is None:
            # Cross-attention: keys and values were computed once.
            k, v = cache
        elif cache is not None:
            # Self-attention step: write this block's keys and values at the index.
            self._check_cache_index(cache, query, cache_update_index)
            start = [0, 0, cache_update_index, 0]
            k = update_slice(cache[0], start, _heads_first(self._keys(key)))
            v = update_slice(cache[1], start,
                                 _heads_first(_project(self.value_dense, value)))
            cache = (k, v)
            # Keys beyond a query's own position (including unwritten slots) stay hidden.
            use_causal_mask = True
            causal_offset = cache_update_index
            value_mask = key_mask = None  # padding of earlier tokens is in attention_mask
        else:
            k = self._keys(key)
            v = _project(self.value_dense, value)

        if self.attention_window is not None and cache is None and None not in (
                q.shape[1], k.shape[1]) and q.shape[1] != k.shape[1]:
            raise ValueError(
                "attention_window needs self-attention with equal query and key lengths; got "
                f"{q.shape[1]} queries and {k.shape[1]} keys")
        dropout_active = self.dropout > 0.0 and bool(training)
        if (cache is None and not return_attention_scores and not dropout_active
                and self._blocked_attention_applies(q, k)):
            context = self._blocked_attention(
                q, k, v, query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
            return _project(self.output_dense, context, input_axes=2)

        key_length = ops.shape(k)[2 if cache is not None else 1]
        mask = self._combined_mask(
            q, key_length, query_mask, value_mask, key_mask, attention_mask,
            use_causal_mask, causal_offset,
        )
        if self.attention_window is not None:
            mask = _and_mask(mask, ops.expand_dims(sliding_window_mask(
                ops.shape(q)[1], key_length, self.attention_window,
                global_tokens=self.global_tokens, offset=causal_offset), 0))
        if (self.use_fused_attention and not return_attention_scores and not dropout_active
                and cache is None and _fused_supported(q.dtype)):
            fused_mask = None if mask is None else ops.expand_dims(mask, 1)
            context = fused_attention(q, k, v, mask=fused_mask)
            scores = None
        else:
            # (batch, heads, T, d) layout for the explicit equation (a cache is in it).
            if cache is None:
                k, v = _heads_first(k), _heads_first(v)
            context, scores = scaled_dot_product_attention(
                _heads_first(q), k, v,
                mask=None if mask is None else ops.expand_dims(mask, 1),
            )  # context (batch, heads, T, value_dim); scores (batch, heads, T, S)
            if dropout_active:
                weights = self._dropout_layer(ops.cast(scores, v.dtype), training=training)
                context = ops.matmul(weights, v)
            context = _heads_first(context)  # back to (batch, T, heads, value_dim)
        output = _project(self.output_dense, context, input_axes=2)

        if cache is not None:
            if return_attention_scores:
                return output, scores, cache
            return output, cache
        if return_attention_scores:
            return output, scores
        return output

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

    # ------------------------------------------------------------------ long sequences
    def _blocked_attention_applies(self, q: Any, k: Any) -> bool:
        """Whether the window or chunked path can run: set, with static lengths."""
        if self.attention_window is None and self.attention_block_size is None:
            return False
        query_length, key_length = q.shape[1], k.shape[1]
        if query_length is None or key_length is None:
            return False  # symbolic shapes: the dense equation, same result
        return True

    def _blocked_attention(self, q: Any, k: Any, v: Any, query_mask: Any, value_mask: Any,
                           key_mask: Any, attention_mask: Any, causal: bool) -> Any:
        """Window or chunked attention; `(batch, T, heads, value_dim)` like the fused path."""
        mask = None  # (batch, 1, T or 1, S): key padding and the explicit mask
        for padding in (value_mask, key_mask):
            if padding is not None:
                mask = _and_mask(mask, ops.expand_dims(ops.cast(padding, "bool"), 1))
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
            check_mask_broadcasts(attention_mask, (q.shape[0], q.shape[1], k.shape[1]))
            mask = _and_mask(mask, ops.cast(attention_mask, "bool"))
        if mask is not None:
            mask = ops.expand_dims(mask, 1) if len(mask.shape) == 3 else mask
        q, k, v = (_heads_first(t) for t in (q, k, v))  # (batch, heads, ., d)
        if self.attention_window is not None:
            context = sliding_window_attention(
                q, k, v, self.attention_window, causal=causal,
                global_tokens=self.global_tokens, mask=mask,
                block_size=self.attention_block_size)
        else:
            context = chunked_attention(q, k, v, mask=mask, causal=causal,
                                        block_size=self.attention_block_size)
        if query_mask is not None:
            # A padded query's row is fully masked in the dense equation, hence uniform:
            # the mean of all values.
            keep = ops.reshape(ops.cast(query_mask, "bool"), (-1, 1, q.shape[2], 1))
            mean = ops.cast(ops.mean(ops.cast(v, "float32"), axis=2, keepdims=True), v.dtype)
            context = ops.where(keep, context, mean)
        return _heads_first(context)

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

    def _check_cache_index(self, cache: Any, query: Any, index: Any) -> None:
        cache_length = cache[0].shape[2]
        if isinstance(index, (int, np.integer)) and cache_length is not None:
            query_length = query.shape[1]
            if index < 0 or (query_length is not None and index + query_length > cache_length):
                raise ValueError(
                    f"cache_update_index {index} with {query_length} new tokens does not fit "
                    f"in a cache of length {cache_length}"
                )

    # ------------------------------------------------------------------ pruning
    def pruned(self, heads: Sequence[int]) -> "MultiHeadAttention":
        """A new, built layer without the given heads; the other heads compute as here.

        The output projection is a sum over heads, so dropping head h's rows of W^O (and
        its columns of W^Q, W^K, W^V) removes just that head's contribution. The new layer
        is made by `from_config` with the smaller `num_heads`, and given the kept heads'
        weights.

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
        if not self.built:
            raise ValueError("pruning heads needs a built layer; call it on data first")
        heads = sorted({int(h) for h in heads})
        bad = [h for h in heads if not 0 <= h < self.num_heads]
        if bad:
            raise ValueError(f"heads {bad} are out of range for a layer of {self.num_heads} heads")
        if len(heads) >= self.num_heads:
            raise ValueError(f"cannot remove all {self.num_heads} heads")
        keep = [h for h in range(self.num_heads) if h not in heads]
        layer = type(self).from_config({**self.get_config(), "num_heads": len(keep)})
        layer.build(*self._input_shapes())
        for old, new in ((self.query_dense, layer.query_dense), (self.key_dense, layer.key_dense),
                         (self.value_dense, layer.value_dense)):
            kernel, *bias = old.get_weights()  # (d, heads, head_dim), (heads, head_dim)
            new.set_weights([kernel[:, keep, :]] + [b[keep, :] for b in bias])
        kernel, *bias = self.output_dense.get_weights()  # (heads, value_dim, d_out), (d_out,)
        layer.output_dense.set_weights([kernel[keep, :, :]] + bias)
        if self.query_key_norm:  # one scale and offset for every head: kept as they are
            layer.query_norm.set_weights(self.query_norm.get_weights())
            layer.key_norm.set_weights(self.key_norm.get_weights())
        return layer

    def _input_shapes(self) -> tuple[tuple, tuple, tuple]:
        """The query, value and key shapes this layer was built for (batch, length unknown)."""
        return tuple((None, None, size) for size in (
            self._query_dim, self._value_input_dim, self._key_input_dim))

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


def check_long_sequence_options(attention_window: Any, global_tokens: Any,
                                attention_block_size: Any) -> tuple[int | None, int, int | None]:
    """Validates `attention_window`, `global_tokens` and `attention_block_size`.

    Returns:
        The three as ints (None where unset; `global_tokens` 0 when None).

    Raises:
        ValueError: naming the bad value.
    """
    window = positive_int(attention_window, "attention_window", minimum=0, optional=True)
    global_tokens = positive_int(global_tokens, "global_tokens", minimum=0, optional=True) or 0
    block_size = positive_int(attention_block_size, "attention_block_size", optional=True)
    if global_tokens and window is None:
        raise ValueError(
            f"global_tokens needs attention_window; got global_tokens={global_tokens} with "
            "attention_window=None")
    return window, global_tokens, block_size


def _check_cache_pair(cache: Any) -> None:
    """A cache is a `(keys, values)` pair of 4-D tensors (from `empty_cache` or
    `compute_cache`); anything else is one line naming what came."""
    if isinstance(cache, (tuple, list)) and len(cache) == 2 and all(
            len(getattr(part, "shape", ())) == 4 for part in cache):
        return
    found = (f"a {type(cache).__name__} of {len(cache)}" if isinstance(cache, (tuple, list))
             else f"an array of shape {tuple(cache.shape)}" if hasattr(cache, "shape")
             else type(cache).__name__)
    raise ValueError("cache must be a (keys, values) pair, each (batch, heads, length, "
                     f"head_dim), as empty_cache and compute_cache return; got {found}")


def _heads_first(x: Any) -> Any:
    """`(batch, length, heads, d)` to `(batch, heads, length, d)` (and back: it is its own
    inverse)."""
    return ops.transpose(x, (0, 2, 1, 3))


def _project(dense: keras.layers.EinsumDense, x: Any, input_axes: int = 1) -> Any:
    """`dense(x)` as one 2-D matrix product: x's last `input_axes` axes against the kernel's
    first ones, every leading axis of x folded into the rows.

    The same numbers as the `EinsumDense` call, to float rounding. On TensorFlow that call is
    a batched product with the kernel broadcast over the batch, and its kernel gradient a
    batched product summed over the batch; here it is one `MatMul` each way (the ViT-tiny
    train step's four projections: 599 -> 357 thread-ms a step on a 2-core CPU). A quantized
    layer (`model.quantize(...)`: an integer kernel and its scales) runs its own call.
    """
    if dense.quantization_mode is not None:
        return dense(x)
    kernel = dense.kernel
    fan_in = math.prod(kernel.shape[:input_axes])
    out_shape = tuple(kernel.shape[input_axes:])
    leading = tuple(ops.shape(x)[:-input_axes])
    y = ops.matmul(ops.reshape(x, (-1, fan_in)), ops.reshape(kernel, (fan_in, -1)))
    if dense.bias is not None:
        y = y + ops.reshape(dense.bias, (-1,))
    return ops.reshape(y, leading + out_shape)


def _and_mask(a: Any | None, b: Any) -> Any:
    return b if a is None else ops.logical_and(a, b)


def _fused_supported(dtype: Any) -> bool:
    """Whether the fused kernel runs for this dtype here.

    Not on TensorFlow, whose `dot_product_attention` has no fused kernel: it is the same
    equation written as einsums over the `(batch, T, heads, d)` layout, and their gradients
    transpose on every call; the explicit equation's heads-first matrix products run
    faster (the ViT-tiny train step's attention: 305 -> 123 thread-ms a step on a 2-core
    CPU). Nor for float16 on JAX on a CPU: XLA there has no float16 dot_general with float32
    accumulation, which JAX's fused attention asks for.
    """
    if keras.backend.backend() == "tensorflow":
        return False
    if keras.backend.standardize_dtype(dtype) != "float16" or keras.backend.backend() != "jax":
        return True
    import jax

    return jax.default_backend() != "cpu"
