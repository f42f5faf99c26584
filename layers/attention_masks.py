"""The masks of one `MultiHeadAttention` call, in the two forms its kernels take them.

A call masks with padding (`(batch, T)` on the queries, `(batch, S)` on the values and keys),
an explicit `(batch, T, S)` attention mask and causality, all combined with a logical AND.
The explicit and fused kernels take one dense `(batch or 1, T, S)` mask (`combined_mask`);
the window and chunked kernels take causality as a flag and the rest apart
(`long_sequence_attention`), so that no `(T, S)` mask is ever built for them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keras import ops

from .attention import causal_mask, check_mask_broadcasts


class AttentionMasks(NamedTuple):
    """What one attention call masks; any of the masks may be None.

    Attributes:
        query_mask: `(batch, T)` boolean padding of the queries.
        value_mask: `(batch, S)` boolean padding of the values.
        key_mask: `(batch, S)` boolean padding of the keys.
        attention_mask: boolean mask broadcastable to `(batch, T, S)`, `True` = attend.
        causal: whether keys after each query's position are masked.
        causal_offset: the position of the first query (an int or a scalar tensor).
    """

    query_mask: Any = None
    value_mask: Any = None
    key_mask: Any = None
    attention_mask: Any = None
    causal: bool = False
    causal_offset: Any = 0


def combined_mask(query: Any, key_length: Any, masks: AttentionMasks) -> Any | None:
    """All of `masks` in one boolean `(batch or 1, T, S)` mask, or None when nothing is
    masked.

    Args:
        query: `(batch, T, ...)` queries (for their shape).
        key_length: S, an int or a scalar tensor.
        masks: the call's masks.

    Returns:
        The AND of the masks that are set, `True` = attend.

    Example:
    >>> import numpy as np
    >>> masks = AttentionMasks(value_mask=np.array([[True, True, False]]), causal=True)
    >>> np.asarray(combined_mask(np.zeros((1, 2, 4)), 3, masks)).astype(int)
    array([[[1, 0, 0],
            [1, 1, 0]]])
    """
    query_length = ops.shape(query)[1]
    mask = None
    if masks.query_mask is not None:
        mask = and_mask(mask, ops.expand_dims(ops.cast(masks.query_mask, "bool"), -1))
    for padding in (masks.value_mask, masks.key_mask):
        if padding is not None:
            mask = and_mask(mask, ops.expand_dims(ops.cast(padding, "bool"), 1))
    if masks.causal:
        mask = and_mask(mask, ops.expand_dims(
            causal_mask(query_length, key_length, offset=masks.causal_offset), 0))
    if masks.attention_mask is not None:
        attention_mask = ops.convert_to_tensor(masks.attention_mask)
        check_mask_broadcasts(attention_mask, (query.shape[0], query.shape[1], key_length))
        mask = and_mask(mask, ops.cast(attention_mask, "bool"))
    return mask


def and_mask(a: Any | None, b: Any) -> Any:
    """`a AND b`, or `b` where `a` is None (no mask yet)."""
    return b if a is None else ops.logical_and(a, b)
