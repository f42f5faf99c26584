"""Picking a row's best entries fast under XLA: its `k` largest (`blocked_top_k`, beam
search's selections) and the first index of its maximum (`first_index_of`, greedy search's).
"""

from __future__ import annotations

from typing import Any

from keras import ops


def blocked_top_k(values: Any, k: int, block_size: int = 64) -> tuple[Any, Any]:
    """`keras.ops.top_k` over the last axis, found through blocks: the same values and
    indices (equal values: the lower index first), in a fraction of the time where rows are
    long and `k` small (a beam search's vocabulary under XLA on a CPU, whose top_k sorts; the
    figures: docs/benchmarks.md, "Beam search step, part by part").

    Each row is cut into blocks of `block_size`; only the `k` blocks with the largest
    maxima can hold the row's `k` largest entries (were one of them elsewhere, `k` other
    blocks would each hold a larger entry), so the exact top_k runs on those `k` blocks.
    Equal values are ordered by index throughout, so ties resolve as in one top_k.

    Args:
        values: `(rows, n)` scores, `n` static.
        k: entries per row (static), at most `n`.
        block_size: entries per block.

    Returns:
        `(top_values (rows, k), top_indices (rows, k) int32)`, largest first.
    """
    n = values.shape[-1]
    if n < 4 * k * block_size:  # too short to gain: the plain top_k
        top, indices = ops.top_k(values, k=k)
        return top, ops.cast(indices, "int32")
    blocks = -(-n // block_size)
    if blocks * block_size != n:
        values = ops.pad(values, [[0, 0], [0, blocks * block_size - n]],
                         constant_values=float("-inf"))
    rows = ops.shape(values)[0]
    blocked = ops.reshape(values, (rows, blocks, block_size))
    _, best_blocks = ops.top_k(ops.max(blocked, axis=-1), k=k)
    # In index order, so that equal candidates keep their order of the whole row.
    best_blocks = ops.sort(ops.cast(best_blocks, "int32"), axis=-1)
    candidates = ops.take_along_axis(blocked, best_blocks[:, :, None], axis=1)
    top, within = ops.top_k(ops.reshape(candidates, (rows, k * block_size)), k=k)
    within = ops.cast(within, "int32")
    block = ops.take_along_axis(best_blocks, within // block_size, axis=1)
    return top, block * block_size + within % block_size


def first_index_of(values: Any, top: Any) -> Any:
    """`argmax(values, axis=-1)` as int32, given `top = max(values, axis=-1)`: the first index
    where the last axis reaches its maximum.

    Written as a min-reduction over the indices where `values == top`. XLA compiles `argmax`
    to a reduction over (value, index) pairs that its CPU backend does not vectorize: in the
    greedy search at `zoo bench`'s shapes (32 rows of 8,000 logits) it took an eighth of each
    step (docs/performance-log.md, 2026-11-26). A row without its maximum (NaN) gives the last
    index.
    """
    width = ops.shape(values)[-1]
    indices = ops.arange(width, dtype="int32")
    first = ops.min(ops.where(values == ops.expand_dims(top, -1), indices, width), axis=-1)
    return ops.minimum(first, width - 1)
