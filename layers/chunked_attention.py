"""Memory-lean exact attention: key-chunked (online softmax) and sliding-window (Longformer).

Both compute exactly what `scaled_dot_product_attention` computes with the equivalent dense
mask, without ever holding the `(T, S)` score matrix:

- `chunked_attention` walks over blocks of keys, keeping a running maximum `m`, a running
  sum `l` and an unnormalised context `acc` per query (the online softmax of Milakov &
  Gimelshein, 2018, used by FlashAttention, Dao et al., 2022, algorithm 1):

      m' = max(m, rowmax(s_b)),  l' = l e^(m - m') + rowsum(e^(s_b - m')),
      acc' = acc e^(m - m') + e^(s_b - m') V_b,   context = acc / l

  so at most `T x block_size` scores per head exist at a time.
- `sliding_window_attention` lets query i see key j when |i - j| <= window (and j <= i when
  causal), plus the first `global_tokens` positions, which see and are seen by every position
  (Beltagy et al., 2020, "Longformer", section 3.1). It runs over blocks of queries, each
  gathering only the keys its band can reach, so memory grows as T x (window + globals).

Sequence lengths must be static (they are in Keras): the blocks are a Python loop.
Logits, softmax and the accumulation run in float32 whatever the input dtype. A row whose
keys are all masked gets the mean of all values, as the dense function's uniform row does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from keras import ops

from .attention import MASKED_LOGIT, check_attention_shapes, check_mask_broadcasts
from .attention_masks import AttentionMasks
from .validation import non_negative_int, positive_int


def _static_length(name: str, tensor: Any) -> int:
    length = tensor.shape[-2]
    if length is None:
        raise ValueError(
            f"{name} needs a static sequence length; got {name} shape {tuple(tensor.shape)}")
    return int(length)


def _prepare(query: Any, key: Any, value: Any, mask: Any, scale: float | None
             ) -> tuple[Any, Any, Any, Any, float]:
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    check_attention_shapes(query, key, value)
    if scale is None:
        scale = 1.0 / float(query.shape[-1]) ** 0.5
    if mask is not None:
        mask = ops.cast(ops.convert_to_tensor(mask), "bool")
        target = tuple(query.shape[:-1]) + (key.shape[-2],)
        check_mask_broadcasts(mask, target)
        if len(mask.shape) < 2:
            mask = ops.reshape(mask, (1,) * (2 - len(mask.shape)) + tuple(mask.shape))
    return query, key, value, mask, scale


def _mask_rows(mask: Any, start: int, stop: int) -> Any:
    return mask if mask.shape[-2] == 1 else mask[..., start:stop, :]


def _mask_cols(mask: Any, start: int, stop: int) -> Any:
    return mask if mask.shape[-1] == 1 else mask[..., start:stop]


def _and(a: Any | None, b: Any | None) -> Any | None:
    if a is None:
        return b
    return a if b is None else ops.logical_and(a, b)


def _online_softmax_step(q: Any, key: Any, value: Any, allowed: Any | None,
                         state: tuple | None) -> tuple:
    """Folds one key block into (max, sum, context). A function of its own so that, run
    eagerly, the block's `(T, block)` temporaries are freed when it returns."""
    block_q = q
    if state is not None:
        # Adds exactly zero (the running sum and context are finite), but makes this block
        # wait until the previous block's scores have had their last use: graph executors
        # (and XLA's buffer assignment) would otherwise keep every block's (T, block)
        # scores alive at once.
        block_q = q + 0.0 * (state[1] + state[2][..., :1])
    logits = ops.matmul(block_q, ops.swapaxes(ops.cast(key, "float32"), -1, -2))
    if allowed is not None:
        logits = ops.where(allowed, logits, MASKED_LOGIT)
    block_max = ops.max(logits, axis=-1, keepdims=True)
    new_max = block_max if state is None else ops.maximum(state[0], block_max)
    logits = logits - new_max
    weights = ops.exp(logits)  # unnormalised, (..., T, block)
    del logits
    block_sum = ops.sum(weights, axis=-1, keepdims=True)
    block_context = ops.matmul(weights, ops.cast(value, "float32"))
    if state is None:
        return new_max, block_sum, block_context
    running_max, running_sum, acc = state
    correction = ops.exp(running_max - new_max)
    return new_max, running_sum * correction + block_sum, acc * correction + block_context


def chunked_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any | None = None,
    causal: bool = False,
    block_size: int = 512,
    scale: float | None = None,
) -> Any:
    """Exact softmax attention computed over blocks of keys with an online softmax.

    Equal (to float32 rounding) to `scaled_dot_product_attention(query, key, value, mask &
    causal_mask)[0]`, holding at most `T x block_size` scores per head at a time.

    Args:
        query: `(..., T, d_k)` queries.
        key: `(..., S, d_k)` keys; S must be static.
        value: `(..., S, d_v)` values.
        mask: optional boolean array broadcastable to `(..., T, S)`, `True` = attend.
        causal: also mask keys after each query's index (key j <= query i, as `causal_mask`).
        block_size: keys per block; the last block holds the remainder.
        scale: logit scale, `1 / sqrt(d_k)` by default.

    Returns:
        `(..., T, d_v)` context vectors in the dtype of `value`.

    Example:
    >>> import numpy as np
    >>> from zoo.layers.attention import causal_mask, scaled_dot_product_attention
    >>> x = np.random.default_rng(0).normal(size=(2, 10, 4)).astype("float32")
    >>> blocked = chunked_attention(x, x, x, causal=True, block_size=4)
    >>> dense, _ = scaled_dot_product_attention(x, x, x, mask=causal_mask(10))
    >>> bool(np.allclose(blocked, dense, atol=1e-5))
    True
    """
    block_size = positive_int(block_size, "block_size")
    query, key, value, mask, scale = _prepare(query, key, value, mask, scale)
    query_length = query.shape[-2]
    key_length = _static_length("key", key)
    q = ops.cast(query, "float32") * scale  # scaled once: (T, d), not (T, block) per block
    rows = None
    if causal:
        rows = ops.expand_dims(ops.arange(query_length if query_length is not None
                                          else ops.shape(query)[-2], dtype="int32"), -1)
    state = None  # (running max, running sum, unnormalised context), each (..., T, .)
    for start in range(0, key_length, block_size):
        stop = min(start + block_size, key_length)
        allowed = None if mask is None else _mask_cols(mask, start, stop)
        if causal:
            cols = ops.expand_dims(ops.arange(start, stop, dtype="int32"), 0)
            allowed = _and(allowed, ops.greater_equal(rows, cols))
        state = _online_softmax_step(q, key[..., start:stop, :], value[..., start:stop, :],
                                     allowed, state)
    running_max, running_sum, acc = state
    return ops.cast(acc / running_sum, value.dtype)


def sliding_window_mask(
    query_length: int,
    key_length: int | None = None,
    window: int = 0,
    causal: bool = False,
    global_tokens: int = 0,
    offset: Any = 0,
) -> Any:
    """The dense boolean `(query_length, key_length)` mask of `sliding_window_attention`.

    For decoding with a cache (a few queries at a time), where the dense equation with this
    mask is cheap: `True` where |i - j| <= window, or i or j < global_tokens, and j <= i when
    causal, with i = query index + offset.

    Args:
        query_length: number of queries.
        key_length: number of keys; `query_length` by default.
        window: how far (in positions) each query sees on either side.
        causal: hide keys after each query's position.
        global_tokens: number of leading positions that see and are seen by all.
        offset: the absolute position of the first query (an int or a scalar tensor).

    Returns:
        A boolean tensor.

    Example:
    >>> import numpy as np
    >>> np.asarray(sliding_window_mask(5, window=1, global_tokens=1)).astype(int)
    array([[1, 1, 1, 1, 1],
           [1, 1, 1, 0, 0],
           [1, 1, 1, 1, 0],
           [1, 0, 1, 1, 1],
           [1, 0, 0, 1, 1]])
    """
    key_length = query_length if key_length is None else key_length
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32") + offset, -1)
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    allowed = ops.logical_or(
        ops.less_equal(ops.abs(rows - cols), window),
        ops.logical_or(ops.less(rows, global_tokens), ops.less(cols, global_tokens)),
    )
    if causal:
        allowed = ops.logical_and(allowed, ops.greater_equal(rows, cols))
    return allowed


def _masked_context(logits: Any, allowed: Any | None, values: Any, fully_masked_value: Any,
                    check_empty_rows: bool) -> Any:
    """softmax(logits | allowed) values, in float32; rows with no allowed key get the mean."""
    if allowed is not None:
        logits = ops.where(allowed, logits, MASKED_LOGIT)
    context = ops.matmul(ops.softmax(logits, axis=-1), values)
    if check_empty_rows:
        # Dense attention makes such a row uniform over all S keys: the mean of all values.
        has_key = ops.any(allowed, axis=-1, keepdims=True)
        context = ops.where(has_key, context, fully_masked_value)
    return context


def _band_pattern(start: int, stop: int, low: int, high: int, window: int, causal: bool,
                  num_global: int) -> Any | None:
    """The static band of query rows [start, stop) over keys [0, G) + [low, high), or None
    where every key is visible."""
    rows = np.arange(start, stop)[:, None]
    cols = np.arange(low, high)[None, :]
    local = np.abs(rows - cols) <= window
    if causal:
        local &= rows >= cols
    # Global keys come before all of these rows, so every row sees them.
    allowed = np.concatenate([np.ones((stop - start, num_global), bool), local], axis=1)
    return None if allowed.all() else ops.convert_to_tensor(allowed)


def sliding_window_attention(
    query: Any,
    key: Any,
    value: Any,
    window: int,
    causal: bool = False,
    global_tokens: int = 0,
    mask: Any | None = None,
    block_size: int | None = None,
    scale: float | None = None,
) -> Any:
    """Local (banded) self-attention with optional global tokens, computed by query blocks.

    Query i attends to key j when |i - j| <= window, or when i < global_tokens or
    j < global_tokens; with `causal`, only when also j <= i. This equals
    `scaled_dot_product_attention` with `sliding_window_mask(...) & mask` as its mask. Each
    block of `block_size` queries gathers the global keys and the keys in
    `[block_start - window, block_end + window)`, so memory grows as
    `T x (block_size + 2 window + global_tokens)` instead of `T x T`; the global query rows
    (few) are computed densely.

    Args:
        query: `(..., T, d_k)` queries; T must be static.
        key: `(..., T, d_k)` keys at the same positions (self-attention).
        value: `(..., T, d_v)` values.
        window: how far each query sees on either side (only before it when causal).
        causal: hide keys after each query's position.
        global_tokens: number of leading positions that attend to and are attended by all.
        mask: optional boolean array broadcastable to `(..., T, T)`, `True` = attend.
        block_size: queries per block; by default the window clipped to [64, 256], so a
            query block gathers at most about three windows of keys.
        scale: logit scale, `1 / sqrt(d_k)` by default.

    Returns:
        `(..., T, d_v)` context vectors in the dtype of `value`.

    Example:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(2, 10, 4)).astype("float32")
    >>> local = sliding_window_attention(x, x, x, window=2, global_tokens=1)
    >>> tuple(local.shape)   # query 5 saw keys 0 and 3..7
    (2, 10, 4)
    """
    window = non_negative_int(window, "window")
    global_tokens = non_negative_int(global_tokens, "global_tokens")
    if block_size is None:
        block_size = min(max(window, 64), 256)
    block_size = positive_int(block_size, "block_size")
    query, key, value, mask, scale = _prepare(query, key, value, mask, scale)
    length = _static_length("query", query)
    if _static_length("key", key) != length:
        raise ValueError(
            "sliding_window_attention is self-attention: query and key lengths must match; "
            f"got {length} and {key.shape[-2]}")
    num_global = min(global_tokens, length)
    q, k, v = (ops.cast(t, "float32") for t in (query, key, value))
    mean_value = ops.mean(v, axis=-2, keepdims=True) if mask is not None else None
    check_empty = mask is not None
    contexts = []
    if num_global:
        # Global queries see every key (every earlier one when causal): dense, G x T.
        logits = ops.matmul(q[..., :num_global, :], ops.swapaxes(k, -1, -2)) * scale
        allowed = None if mask is None else _mask_rows(mask, 0, num_global)
        if causal:
            allowed = _and(allowed, sliding_window_mask(
                num_global, length, window=length, causal=True))
        contexts.append(_masked_context(logits, allowed, v, mean_value, check_empty))
    q = q * scale  # scaled once: (T, d), not (T, keys) per block
    patterns: dict = {}  # the band is the same for every interior block: one constant each
    for start in range(num_global, length, block_size):
        stop = min(start + block_size, length)
        # Local keys this block can reach; those below num_global are the global keys.
        low = max(start - window, num_global)
        high = stop if causal else min(stop + window, length)
        key_positions = np.concatenate([np.arange(num_global), np.arange(low, high)])
        query_positions = np.arange(start, stop)
        if contexts:
            # Shifts by exactly zero, but makes this block's gathers wait for the previous
            # block: graph executors would otherwise copy every block's keys at once.
            zero = ops.cast(0.0 * ops.reshape(contexts[-1][..., :1, :1], (-1,))[0], "int32")
            key_positions = key_positions + zero
            query_positions = query_positions + zero
        block_k = ops.take(k, key_positions, axis=-2)  # (..., G + keys, d)
        block_v = ops.take(v, key_positions, axis=-2)
        block_q = ops.take(q, query_positions, axis=-2)
        logits = ops.matmul(block_q, ops.swapaxes(block_k, -1, -2))  # (..., B, G + keys)
        key = (start - low, stop - start, high - low)
        if key not in patterns:
            patterns[key] = _band_pattern(start, stop, low, high, window, causal, num_global)
        allowed = patterns[key]
        if mask is not None:
            block_mask = _mask_rows(mask, start, stop)
            if block_mask.shape[-1] != 1:
                block_mask = ops.concatenate(
                    [block_mask[..., :num_global], block_mask[..., low:high]], axis=-1)
            allowed = block_mask if allowed is None else ops.logical_and(allowed, block_mask)
        contexts.append(_masked_context(logits, allowed, block_v, mean_value, check_empty))
    context = contexts[0] if len(contexts) == 1 else ops.concatenate(contexts, axis=-2)
    return ops.cast(context, value.dtype)


def long_sequence_attention(query: Any, key: Any, value: Any, masks: AttentionMasks,
                            window: int | None, global_tokens: int = 0,
                            block_size: int | None = None) -> Any:
    """`sliding_window_attention` where `window` is set, else `chunked_attention`, under
    the masks of a `MultiHeadAttention` call.

    The same result as the explicit equation with the equivalent dense mask (`combined_mask`,
    and `sliding_window_mask` with a window): the key padding and the explicit mask go to
    the kernel, causality as its flag, and a padded query gets the mean of all values.

    Args:
        query: `(batch, heads, T, key_dim)` queries.
        key: `(batch, heads, S, key_dim)` keys.
        value: `(batch, heads, S, value_dim)` values.
        masks: the call's masks (`causal_offset` is not used: the first query is at 0).
        window: the window of `sliding_window_attention`, or None for key blocks.
        global_tokens: with a window, how many leading positions attend globally.
        block_size: the kernel's block size; its default when None.

    Returns:
        `(batch, heads, T, value_dim)` context vectors.
    """
    mask = None  # (batch, 1, T or 1, S): key padding and the explicit mask
    for padding in (masks.value_mask, masks.key_mask):
        if padding is not None:
            mask = _and(mask, ops.expand_dims(ops.cast(padding, "bool"), 1))
    if masks.attention_mask is not None:
        attention_mask = ops.convert_to_tensor(masks.attention_mask)
        check_mask_broadcasts(attention_mask, (query.shape[0], query.shape[2], key.shape[2]))
        mask = _and(mask, ops.cast(attention_mask, "bool"))
    if mask is not None:
        mask = ops.expand_dims(mask, 1) if len(mask.shape) == 3 else mask
    if window is not None:
        context = sliding_window_attention(
            query, key, value, window, causal=masks.causal, global_tokens=global_tokens,
            mask=mask, block_size=block_size)
    else:
        context = chunked_attention(query, key, value, mask=mask, causal=masks.causal,
                                    block_size=block_size)
    if masks.query_mask is not None:
        # A padded query's row is fully masked in the dense equation, hence uniform:
        # the mean of all values.
        keep = ops.reshape(ops.cast(masks.query_mask, "bool"), (-1, 1, query.shape[2], 1))
        mean = ops.cast(ops.mean(ops.cast(value, "float32"), axis=2, keepdims=True), value.dtype)
        context = ops.where(keep, context, mean)
    return context


def check_long_sequence_options(attention_window: Any, global_tokens: Any,
                                attention_block_size: Any) -> tuple[int | None, int, int | None]:
    """Validates `attention_window`, `global_tokens` and `attention_block_size`.

    Returns:
        The three as ints (None where unset; `global_tokens` 0 when None).

    Raises:
        ValueError: naming the bad value.
    """
    window = non_negative_int(attention_window, "attention_window", optional=True)
    global_tokens = non_negative_int(global_tokens, "global_tokens", optional=True) or 0
    block_size = positive_int(attention_block_size, "attention_block_size", optional=True)
    if global_tokens and window is None:
        raise ValueError(
            f"global_tokens needs attention_window; got global_tokens={global_tokens} with "
            "attention_window=None")
    return window, global_tokens, block_size
