"""The key/value cache of `MultiHeadAttention`, for incremental decoding.

A cache is a `(keys, values)` pair of projected keys and values, each
`(batch, heads, S_max, head_dim)`. Two buffers rather than one stacked tensor, and heads
before positions: a step writes its tokens into each buffer (one `update_slice`, which XLA
does in place), and attention reads the buffers as they are, a batched matmul per head, where
a stacked, position-major cache was split, transposed and stacked again every step (copies
that grow with the cache; the translator's searches, greedy and beam 4, TensorFlow and JAX,
run faster without them: docs/performance-log.md, 2026-11-24, "Key/value cache as a
`(keys, values)` pair").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from keras import ops

from .slice_update import update_slice


def empty_cache(batch_size: int, num_heads: int, max_length: int, head_dim: int,
                dtype: Any) -> tuple[Any, Any]:
    """A zero self-attention cache: `(keys, values)`, each
    `(batch_size, num_heads, max_length, head_dim)` of `dtype`.

    Example:
    >>> keys, values = empty_cache(2, 4, 10, 8, "float32")
    >>> tuple(keys.shape), tuple(values.shape)
    ((2, 4, 10, 8), (2, 4, 10, 8))
    """
    shape = (batch_size, num_heads, max_length, head_dim)
    return ops.zeros(shape, dtype=dtype), ops.zeros(shape, dtype=dtype)


def grow_cache(cache: tuple[Any, Any], max_length: Any) -> tuple[Any, Any]:
    """A self-attention cache with room for `max_length` positions: its own, then zeros
    (`max_length` may be a scalar tensor in a TensorFlow graph)."""
    check_cache_pair(cache)
    extra = max_length - ops.shape(cache[0])[2]
    widths = [[0, 0], [0, 0], [0, extra], [0, 0]]
    return ops.pad(cache[0], widths), ops.pad(cache[1], widths)


def write_cache(cache: tuple[Any, Any], index: Any, keys: Any, values: Any
                ) -> tuple[Any, Any]:
    """The cache with `keys` and `values`, each `(batch, heads, T, head_dim)`, written at
    positions `index` to `index + T` (an int or a scalar tensor)."""
    start = [0, 0, index, 0]
    return update_slice(cache[0], start, keys), update_slice(cache[1], start, values)


def check_cache_pair(cache: Any) -> None:
    """Raises ValueError unless `cache` is a `(keys, values)` pair of 4-D tensors (from
    `empty_cache` or `compute_cache`); the message names what came."""
    if isinstance(cache, (tuple, list)) and len(cache) == 2 and all(
            len(getattr(part, "shape", ())) == 4 for part in cache):
        return
    found = (f"a {type(cache).__name__} of {len(cache)}" if isinstance(cache, (tuple, list))
             else f"an array of shape {tuple(cache.shape)}" if hasattr(cache, "shape")
             else type(cache).__name__)
    raise ValueError("cache must be a (keys, values) pair, each (batch, heads, length, "
                     f"head_dim), as empty_cache and compute_cache return; got {found}")


def check_cache_index(cache: tuple[Any, Any], query_length: int | None, index: Any) -> None:
    """Raises ValueError where a static `index` and `query_length` new tokens do not fit in
    the cache's static length (tensors are not checked)."""
    cache_length = cache[0].shape[2]
    if isinstance(index, (int, np.integer)) and cache_length is not None:
        if index < 0 or (query_length is not None and index + query_length > cache_length):
            raise ValueError(
                f"cache_update_index {index} with {query_length} new tokens does not fit "
                f"in a cache of length {cache_length}"
            )
